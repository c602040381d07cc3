"""The real-model tier: the gateway against llama.cpp's server serving Gemma 3 270M, a server
this project did not write (tests/real_model/llama_server.py).

On demand only: `./scripts/test --real-model` (it builds or reuses the server, then sets
`GATEWAY_REAL_MODEL=1`); without that variable every test here is skipped, so the suite and CI
never wait for the 20-minute build (docs/development.md, "The real-model tier").

One llama server per module (lenient `--chat_format gemma`, 2,048 tokens), and one gateway
process per adapter in front of it, both with the dummy API key `x`. Answers are kept short
(`maxTokens`): the base model rarely stops by itself.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import httpx
import pytest

from tests.real_model.llama_server import ALIAS, LlamaServer, installed
from tests.support.gateway_server import USER, GatewayServer

ADAPTERS = ("direct", "litellm")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("GATEWAY_REAL_MODEL") == "1" and installed():
        return
    skip = pytest.mark.skip(reason="the real-model tier runs with ./scripts/test --real-model")
    for item in items:
        if "real_model" in item.path.parts:
            item.add_marker(skip)


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    with LlamaServer(tmp_path_factory.mktemp("llama") / "server.log") as server:
        yield server


def gateway_env(server: LlamaServer, adapter: str, **extra: str) -> dict[str, str]:
    return {"GATEWAY_MODEL": f"openai/{ALIAS}", "GATEWAY_MODEL_API_BASE": server.base_url,
            "GATEWAY_MODEL_API_KEY": "x", "GATEWAY_MODEL_ADAPTER": adapter,
            "GATEWAY_HEARTBEAT_SECONDS": "2", **extra}


@pytest.fixture(scope="module", params=ADAPTERS)
def gateway(request: pytest.FixtureRequest, llama: LlamaServer,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayServer]:
    server = GatewayServer(tmp_path_factory.mktemp(f"gateway-{request.param}"),
                           gateway_env(llama, request.param))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def client(gateway: GatewayServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=gateway.url, event_hooks=USER, timeout=120,
                      headers={"x-api-key": "test-key"}) as http:
        yield http
