"""The queries of each aggregate (threads, runs, frames, components, idempotency keys, API keys,
usage, Chorus deliveries, the operator's listings, retention), each written once; `Store`
(`store/repository.py`) puts them together."""
