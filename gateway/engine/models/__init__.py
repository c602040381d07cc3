"""The model adapters: which one a model string gets (`adapters`), the direct OpenAI-compatible
stream (`direct`, its connections `upstream_pool`), litellm (`litellm_model`), fallbacks
(`routed`), the offline demo model (`demo`) and transcription. Each yields the loop's plain
deltas (`engine/deltas.py`); nothing outside `engine/` knows which one ran."""
