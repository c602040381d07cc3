"""Every conformance scenario runs against both model adapters, and once more with an agents
file in place: the stream a client sees must not depend on whether the gateway read the model
through litellm or directly, nor on the operator's agent (its instructions, the usage on the
terminal events)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import scripted_env
from tests.support.agents import DELEGATING_AGENTS, SHOP_INSTRUCTIONS
from tests.support.gateway_server import GatewayServer
from tests.support.scripted_model import ScriptedModel

AGENT_INSTRUCTIONS = SHOP_INSTRUCTIONS
AGENTS = DELEGATING_AGENTS


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


@pytest.fixture(params=["direct", "litellm", "agents"])
def gateway(request: pytest.FixtureRequest, gateway: GatewayServer) -> GatewayServer:
    if request.param == "litellm":
        return request.getfixturevalue("litellm_gateway")
    if request.param == "agents":
        return request.getfixturevalue("agents_gateway")
    return gateway
