"""Shared fixtures: a scripted OpenAI-compatible model, and real gateway processes in front of it.

Starting a gateway costs a few seconds (importing litellm), so each kind is started once per
session; tests isolate themselves by creating their own threads.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.gateway_server import USER, GatewayServer
from tests.support.scripted_model import ScriptedModel


@pytest.fixture(scope="session")
def scripted_model() -> Iterator[ScriptedModel]:
    model = ScriptedModel()
    model.start()
    yield model
    model.stop()


@pytest.fixture(autouse=True)
def _fresh_script(request: pytest.FixtureRequest) -> None:
    """Every test starts with an empty script queue and no recorded requests."""
    if "scripted_model" in request.fixturenames:
        request.getfixturevalue("scripted_model").reset()


def scripted_env(model: ScriptedModel, **extra: str) -> dict[str, str]:
    return {
        "GATEWAY_MODEL": "openai/scripted",
        "GATEWAY_MODEL_API_BASE": model.base_url,
        "GATEWAY_MODEL_API_KEY": "sk-test-secret-key-1234",
        "GATEWAY_HEARTBEAT_SECONDS": "2",
        **extra,
    }


@pytest.fixture(scope="session")
def gateway(scripted_model: ScriptedModel, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[GatewayServer]:
    """A gateway driven by the scripted model: streamed through the direct adapter (`auto`),
    non-streamed calls through litellm's real OpenAI path."""
    server = GatewayServer(tmp_path_factory.mktemp("gateway"), scripted_env(scripted_model))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def litellm_gateway(scripted_model: ScriptedModel, tmp_path_factory: pytest.TempPathFactory
                    ) -> Iterator[GatewayServer]:
    """The same, with streamed calls forced through litellm (`gateway` streams the scripted
    model through the direct adapter, which `auto` picks for an OpenAI-compatible upstream)."""
    server = GatewayServer(tmp_path_factory.mktemp("litellm-gateway"),
                           scripted_env(scripted_model, GATEWAY_MODEL_ADAPTER="litellm"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def demo_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayServer]:
    """A gateway on its embedded defaults: SQLite and the built-in demo model."""
    server = GatewayServer(tmp_path_factory.mktemp("demo-gateway"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def client(gateway: GatewayServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=gateway.url, event_hooks=USER, timeout=30,
                      headers={"x-api-key": "test-key"}) as http:
        yield http


def artifacts_dir() -> Path:
    path = Path(__file__).resolve().parents[1] / "test-artifacts"
    path.mkdir(exist_ok=True)
    return path
