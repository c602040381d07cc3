"""Which model adapter a model string gets: `DirectModel`, `NativeModel` or `LiteLLMModel`.

litellm decides what a model string means (`get_llm_provider`: provider, upstream name, base
URL, key from the provider's environment variable), so the gateway never keeps its own list of
providers: `auto` streams directly from every provider litellm itself treats as an
OpenAI-compatible chat-completions server (`DirectModel`), and from Anthropic and Gemini in
their own formats (`NativeModel`), and leaves the rest to litellm.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from . import anthropic_wire, gemini_wire
from .direct import OPENAI_BASE, DirectModel
from .litellm_model import LiteLLMModel
from .native import NativeModel
from .routed import Deployment, RoutedModel

if TYPE_CHECKING:
    from ...config import Settings

Adapter = Literal["auto", "litellm", "direct"]
Streaming = LiteLLMModel | DirectModel | NativeModel
# OpenAI-compatible in their chat format but not in their authentication (OAuth device flows).
_NOT_BEARER_KEY = {"github_copilot", "chatgpt"}

log = logging.getLogger(__name__)
# Providers streamed in their own format, with how each finds its key when none is given.
NATIVE_KEYS = {anthropic_wire.PROVIDER: anthropic_wire.api_key,
               gemini_wire.PROVIDER: gemini_wire.api_key}


class AdapterError(ValueError):
    """`GATEWAY_MODEL_ADAPTER=direct` for a model the direct adapter cannot reach."""


def load_litellm() -> None:
    """Import litellm once, offline: no cost-map download, no `.env` loading."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_MODE", "PRODUCTION")
    import litellm  # noqa: F401  (slow: done at start-up, never per request)

    from . import demo as demo_model

    demo_model.register()
    litellm.suppress_debug_info = True
    for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy"):  # one INFO line per request
        logging.getLogger(name).setLevel(logging.WARNING)


def model_adapter(model: str, api_base: str | None, api_key: str | None,
                  adapter: Adapter = "auto", fallbacks: Sequence[Deployment] = (),
                  retries: int = 0) -> Streaming:
    """The adapter for `model`; litellm must already be imported (`load_litellm`).

    With fallbacks or retries, litellm's Router makes the streamed calls (`RoutedModel`):
    resilience is bought with litellm's cost per token, so `direct` cannot be combined with it.
    """
    if fallbacks or retries:
        if adapter == "direct":
            raise AdapterError("GATEWAY_MODEL_ADAPTER=direct cannot be combined with "
                               "GATEWAY_MODEL_FALLBACKS or GATEWAY_MODEL_RETRIES (they go "
                               "through litellm's Router)")
        log.info("model %s streams through litellm's Router (fallbacks: %s; retries: %d)",
                 model, ", ".join(f.model for f in fallbacks) or "none", retries)
        return RoutedModel([Deployment(model, api_base, api_key), *fallbacks], retries)
    fallback = LiteLLMModel(model, api_base, api_key)
    if adapter == "litellm":
        return fallback
    reason, direct = _direct(model, api_base, api_key, fallback)
    if direct is not None:
        return direct
    if adapter == "direct":
        raise AdapterError(f"GATEWAY_MODEL_ADAPTER=direct cannot serve {model!r}: {reason}")
    log.info("model %s streams through litellm (%s)", model, reason)
    return fallback


def adapter_for(settings: Settings) -> Streaming:
    """The adapter the settings ask for, or `AdapterError` (one line). Holds nothing open
    until its first call, so `gateway serve` can check it before starting anything."""
    return model_adapter(
        settings.model, settings.model_api_base,
        settings.model_api_key.get_secret_value() if settings.model_api_key else None,
        settings.model_adapter,
        [Deployment(f.model, f.api_base, f.api_key.get_secret_value() if f.api_key else None)
         for f in settings.model_fallbacks], settings.model_retries)


def _direct(model: str, api_base: str | None, api_key: str | None, fallback: LiteLLMModel
            ) -> tuple[str, DirectModel | NativeModel | None]:
    import litellm
    from litellm.constants import openai_compatible_providers

    try:
        name, provider, env_key, base = litellm.get_llm_provider(
            model, api_base=api_base, api_key=api_key)
    except Exception:
        return "litellm does not know its provider", None
    if provider in NATIVE_KEYS:
        return "", NativeModel(model=name, provider=provider, api_base=api_base,
                               api_key=NATIVE_KEYS[provider](api_key), litellm_model=model,
                               fallback=fallback)
    compatible = provider == "openai" or provider in openai_compatible_providers
    if not compatible or provider in _NOT_BEARER_KEY:
        return (f"provider {provider!r} is neither an OpenAI-compatible chat-completions API "
                "nor Anthropic's or Gemini's"), None
    if provider == "openai":
        # What the openai SDK under litellm would use.
        base = (base or litellm.api_base or os.environ.get("OPENAI_BASE_URL")
                or os.environ.get("OPENAI_API_BASE") or OPENAI_BASE)
        env_key = env_key or litellm.api_key or os.environ.get("OPENAI_API_KEY")
    if not base:
        return f"litellm knows no base URL for provider {provider!r}", None
    return "", DirectModel(model=name, api_base=base, api_key=api_key or env_key,
                           provider=provider, litellm_model=model, fallback=fallback)
