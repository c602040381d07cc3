"""Every conformance scenario runs against both model adapters, on each provider's wire format
the gateway streams directly (OpenAI's chat completions, Anthropic's Messages, Gemini's
streamGenerateContent: the scripted model speaks all three), and once more with an agents file
in place: the stream a client sees must not depend on whether the gateway read the model through
litellm or directly, nor on the provider's format, nor on the operator's agent (its
instructions, the usage on the terminal events)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import scripted_env
from tests.support.agents import DELEGATING_AGENTS, SHOP_INSTRUCTIONS
from tests.support.gateway_server import GatewayServer
from tests.support.scripted_model import ScriptedModel

AGENT_INSTRUCTIONS = SHOP_INSTRUCTIONS
AGENT_MAX_INPUT_TOKENS = 3000  # the shop's calls are fitted to this (docs/context.md)
AGENTS = DELEGATING_AGENTS.replace(
    "[agents.shop]\n", f"[agents.shop]\nmax_input_tokens = {AGENT_MAX_INPUT_TOKENS}\n", 1)


@pytest.fixture(scope="session")
def agents_gateway(scripted_model: ScriptedModel, tmp_path_factory: pytest.TempPathFactory
                   ) -> Iterator[GatewayServer]:
    """A gateway whose agents come from an agents file: `shop` (the default, the first), which
    may delegate to `researcher`."""
    workdir = tmp_path_factory.mktemp("agents-gateway")
    (workdir / "agents.toml").write_text(AGENTS)
    server = GatewayServer(workdir, scripted_env(
        scripted_model, GATEWAY_AGENTS_FILE=str(workdir / "agents.toml")))
    server.start()
    yield server
    server.stop()


# The other formats' model strings: names litellm sends to Anthropic and Gemini as they are
# (`scripted` is a Gemini 3 name to litellm: calls carry their ids, as Gemini 3's do).
WIRE_MODELS = {"anthropic": "anthropic/scripted", "gemini": "gemini/scripted"}


def wire_env(scripted_model: ScriptedModel, wire: str, **extra: str) -> dict[str, str]:
    """`scripted_env` with the model in `wire`'s format ("openai": as it is)."""
    if wire == "openai":
        return scripted_env(scripted_model, **extra)
    return scripted_env(scripted_model, GATEWAY_MODEL=WIRE_MODELS[wire],
                        GATEWAY_MODEL_API_BASE=scripted_model.base_for(wire), **extra)


def _wire_gateway(scripted_model: ScriptedModel, tmp_path_factory: pytest.TempPathFactory,
                  wire: str) -> Iterator[GatewayServer]:
    server = GatewayServer(tmp_path_factory.mktemp(f"{wire}-gateway"),
                           wire_env(scripted_model, wire))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def anthropic_gateway(scripted_model: ScriptedModel, tmp_path_factory: pytest.TempPathFactory
                      ) -> Iterator[GatewayServer]:
    """A gateway whose model speaks Anthropic's Messages format (streamed directly)."""
    yield from _wire_gateway(scripted_model, tmp_path_factory, "anthropic")


@pytest.fixture(scope="session")
def gemini_gateway(scripted_model: ScriptedModel, tmp_path_factory: pytest.TempPathFactory
                   ) -> Iterator[GatewayServer]:
    """A gateway whose model speaks Gemini's format (streamed directly)."""
    yield from _wire_gateway(scripted_model, tmp_path_factory, "gemini")


@pytest.fixture(params=["direct", "litellm", "agents", "anthropic", "gemini"])
def gateway(request: pytest.FixtureRequest, gateway: GatewayServer) -> GatewayServer:
    if request.param in ("litellm", "agents", "anthropic", "gemini"):
        return request.getfixturevalue(f"{request.param}_gateway")
    return gateway
