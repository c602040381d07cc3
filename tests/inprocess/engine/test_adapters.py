"""Which adapter a model string gets: direct for OpenAI-compatible providers, Anthropic and
Gemini in their own formats, litellm for the rest, litellm's Router whenever fallbacks or
retries are set."""

from __future__ import annotations

import pytest

from gateway.engine.models.adapters import OPENAI_BASE, Adapter, AdapterError, model_adapter
from gateway.engine.models.direct import DirectModel
from gateway.engine.models.litellm_model import LiteLLMModel
from gateway.engine.models.native import NativeModel
from gateway.engine.models.routed import Deployment, RoutedModel
from gateway.services import load_litellm

load_litellm()
LOCAL = "http://127.0.0.1:9/v1"


@pytest.fixture(autouse=True)
def _no_openai_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_BASE_URL", "OPENAI_API_BASE", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def test_auto_streams_an_openai_compatible_server_directly() -> None:
    model = model_adapter("openai/my-model", LOCAL, "sk-1")
    assert isinstance(model, DirectModel)
    assert (model.model, model.api_base, model.api_key) == ("my-model", LOCAL, "sk-1")
    assert (model.provider, model.litellm_model) == ("openai", "openai/my-model")
    assert isinstance(model.fallback, LiteLLMModel)


def test_openai_without_a_base_url_goes_to_openai_itself() -> None:
    model = model_adapter("openai/gpt-4o-mini", None, "sk-1")
    assert isinstance(model, DirectModel) and model.api_base == OPENAI_BASE


def test_a_provider_litellm_knows_as_openai_compatible_is_direct_with_its_base_url() -> None:
    model = model_adapter("groq/llama-3.1-8b-instant", None, "gsk-1")
    assert isinstance(model, DirectModel)
    assert model.model == "llama-3.1-8b-instant" and model.provider == "groq"
    assert model.api_base.startswith("https://")


@pytest.mark.parametrize(("name", "provider", "upstream"), [
    ("anthropic/claude-sonnet-4-5", "anthropic", "claude-sonnet-4-5"),
    ("claude-sonnet-4-5-20250929", "anthropic", "claude-sonnet-4-5-20250929"),
    ("gemini/gemini-2.5-flash", "gemini", "gemini-2.5-flash")])
def test_anthropic_and_gemini_stream_directly_in_their_own_formats(
        name: str, provider: str, upstream: str) -> None:
    model = model_adapter(name, None, "key")
    assert isinstance(model, NativeModel)
    assert (model.provider, model.model, model.litellm_model) == (provider, upstream, name)
    assert type(model.fallback) is LiteLLMModel and model.fallback.model == name
    assert isinstance(model_adapter(name, None, "key", adapter="direct"), NativeModel)
    assert type(model_adapter(name, None, "key", adapter="litellm")) is LiteLLMModel


def test_anthropic_default_url_and_gemini_url_are_litellm_s() -> None:
    claude = model_adapter("anthropic/claude-sonnet-4-5", None, "key")
    gemini = model_adapter("gemini/gemini-2.5-flash", None, "key")
    custom = model_adapter("anthropic/claude-sonnet-4-5", "http://127.0.0.1:9/proxy", "key")
    assert isinstance(claude, NativeModel) and isinstance(gemini, NativeModel)
    assert isinstance(custom, NativeModel)
    assert claude.endpoint("claude-sonnet-4-5")[0] == "https://api.anthropic.com/v1/messages"
    assert custom.endpoint("claude-sonnet-4-5")[0] == "http://127.0.0.1:9/proxy/v1/messages"
    url, auth = gemini.endpoint("gemini-2.5-flash")
    assert url == ("https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:"
                   "streamGenerateContent?alt=sse")
    assert auth == {"x-goog-api-key": "key"}


@pytest.mark.parametrize("name", ["cohere/command-r", "gateway/demo", "no-such-provider/model"])
def test_other_providers_stream_through_litellm(name: str) -> None:
    model = model_adapter(name, None, "key")
    assert type(model) is LiteLLMModel and model.model == name
    with pytest.raises(AdapterError, match="GATEWAY_MODEL_ADAPTER=direct cannot serve"):
        model_adapter(name, None, "key", adapter="direct")


def test_the_litellm_adapter_is_used_when_asked_even_for_openai() -> None:
    model = model_adapter("openai/my-model", LOCAL, "sk-1", adapter="litellm")
    assert type(model) is LiteLLMModel
    assert (model.model, model.api_base, model.api_key) == ("openai/my-model", LOCAL, "sk-1")


@pytest.mark.parametrize("adapter", ["auto", "litellm"])
def test_fallbacks_or_retries_go_through_the_router(adapter: Adapter) -> None:
    backup = Deployment("openai/backup", LOCAL, "sk-2")
    routed = model_adapter("openai/main", LOCAL, "sk-1", adapter, fallbacks=[backup])
    assert isinstance(routed, RoutedModel)
    assert [d.model for d in routed.deployments] == ["openai/main", "openai/backup"]
    retried = model_adapter("openai/main", LOCAL, "sk-1", adapter, retries=2)
    assert isinstance(retried, RoutedModel) and len(retried.deployments) == 1


def test_direct_cannot_be_combined_with_fallbacks_or_retries() -> None:
    with pytest.raises(AdapterError, match="GATEWAY_MODEL_FALLBACKS"):
        model_adapter("openai/main", LOCAL, "sk-1", "direct",
                      fallbacks=[Deployment("openai/backup")])
    with pytest.raises(AdapterError, match="GATEWAY_MODEL_RETRIES"):
        model_adapter("openai/main", LOCAL, "sk-1", "direct", retries=1)
