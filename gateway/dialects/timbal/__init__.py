"""Timbal/1.0 views: the run log itself, as NDJSON and over a WebSocket (`/v1/timbal/...`)."""
