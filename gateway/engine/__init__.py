"""The agent loop: model deltas in, Timbal frames out. Nothing here knows about HTTP."""
