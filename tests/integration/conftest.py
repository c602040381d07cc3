"""The integration tests' gateways: the real app, in the test process, unless a test needs a
process.

`gateway`, `litellm_gateway`, `demo_gateway` and `client` here are `create_app(settings)` run in
this process (tests/support/inprocess_app.py): the same settings, the same lifespan, the same
HTTP semantics as `gateway serve`, reached through an httpx transport instead of a socket, with
the scripted model still behind litellm's real streaming path over loopback. On
`GATEWAY_TEST_BACKEND=postgres` they use the session's PostgreSQL and Redis, and `gateway` is
two apps behind a round-robin transport, so every test's requests alternate between them as
they alternate between processes behind a balancer.

What needs a process asks for it by name: `gateway_process` and `process_client` (tests/
conftest.py), or a `GatewayServer` of its own: a port for the Node clients, curl, a WebSocket
or a stalled socket; signals, crashes and restarts; `--workers`; scale-out and fencing across
processes; start-up and the command line; a process's own log and metrics (operations); the
fuzzer (schemathesis speaks to a URL); model fallbacks (litellm's Router writes to litellm's
process-wide model map).
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from gateway.client import Client
from tests.conftest import scripted_env
from tests.support import engines
from tests.support.gateway_server import DEFAULT_USER, USER
from tests.support.inprocess_app import InProcess, InProcessCluster, InProcessGateway
from tests.support.scripted_model import ScriptedModel


@pytest.fixture(scope="session")
def gateway(scripted_model: ScriptedModel, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[InProcess]:
    """The app driven by the scripted model (streamed through the direct adapter, `auto`);
    two of them on one PostgreSQL + Redis in that configuration."""
    workdir, env = tmp_path_factory.mktemp("inprocess"), scripted_env(scripted_model)
    server = (InProcessCluster(workdir, env) if engines.ENGINES is not None
              else InProcessGateway(workdir, env)).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def litellm_gateway(scripted_model: ScriptedModel, tmp_path_factory: pytest.TempPathFactory
                    ) -> Iterator[InProcessGateway]:
    """The same, with streamed calls forced through litellm."""
    server = InProcessGateway(tmp_path_factory.mktemp("inprocess-litellm"),
                              scripted_env(scripted_model, GATEWAY_MODEL_ADAPTER="litellm"))
    yield server.start()
    server.stop()


@pytest.fixture(scope="session")
def demo_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessGateway]:
    """The app on its embedded defaults: SQLite and the built-in demo model."""
    server = InProcessGateway(tmp_path_factory.mktemp("inprocess-demo"))
    yield server.start()
    server.stop()


@pytest.fixture
def client(gateway: InProcess) -> Iterator[httpx.Client]:
    with gateway.client(event_hooks=USER, timeout=30, headers={"x-api-key": "test-key"}) as http:
        yield http


@pytest.fixture
def python_client(gateway: InProcess) -> Iterator[Client]:
    """`gateway.client.Client` on the same app, as the default test user."""
    with Client(gateway.url, api_key="test-key", user_key=DEFAULT_USER,
                transport=gateway.sync_transport()) as python:
        yield python
