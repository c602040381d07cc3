"""Every conformance scenario runs against both model adapters: the stream a client sees must
not depend on whether the gateway read the model through litellm or directly."""

from __future__ import annotations

import pytest

from tests.support.gateway_server import GatewayServer


@pytest.fixture(params=["direct", "litellm"])
def gateway(request: pytest.FixtureRequest, gateway: GatewayServer) -> GatewayServer:
    if request.param == "litellm":
        return request.getfixturevalue("litellm_gateway")
    return gateway
