"""Shared fixtures: a scripted OpenAI-compatible model, and real gateway processes in front of it.

Starting a gateway costs a few seconds (importing litellm), so each kind is started once per
session, forked from a process that has imported the gateway already (tests/support/
fork_server.py); tests isolate themselves by creating their own threads. tests/integration replaces
`gateway`, `litellm_gateway`, `demo_gateway` and `client` with the app in the test process
(tests/integration/conftest.py); `gateway_process` and `process_client` stay real processes.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support import engines
from tests.support.fork_server import fork_server, stop_fork_server
from tests.support.gateway_server import USER, GatewayCluster, GatewayServer
from tests.support.scripted_model import ScriptedModel
from tests.support.shared_modules import leave_out_taken, skip_unless_mine


def pytest_configure(config: pytest.Config) -> None:
    """`GATEWAY_TEST_BACKEND=postgres`: every gateway of the session runs on a throwaway
    PostgreSQL and Redis (tests/support/engines.py); the default is SQLite in one process."""
    config.addinivalue_line("markers", SQLITE_ONLY_MARKER)
    if engines.backend() == "postgres" and engines.ENGINES is None:
        engines.ENGINES = engines.Engines().start()


# Which configuration runs what. Every test runs on SQLite (the default). On PostgreSQL + Redis
# runs everything whose outcome can depend on the backend: what is stored and read back
# (threads, runs, keys, quotas, caps, usage), fan-out and signals between processes (resume,
# cancel, approvals, connect), locks, leases and fencing, draining, crashes and restarts, the
# Node clients through the proxy. A test whose outcome cannot depend on it (a start-up or CLI
# error that comes before the database, a request refused before any store access, the MCP
# client and the model adapters on their own, the demo model's answers, the shape of a log
# line, a span, a header or a metric, the schema the fuzzer checks, a socket's limits in one
# process) is marked `@pytest.mark.sqlite_only` and skipped there, so CI does not pay for it
# twice.
SQLITE_ONLY_MARKER = ("sqlite_only: its outcome cannot depend on the backend; skipped with "
                      "GATEWAY_TEST_BACKEND=postgres (tests/conftest.py says which tests)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    leave_out_taken(config, items)  # GATEWAY_TEST_CLAIMS: tests/support/shared_modules.py
    if engines.backend() != "postgres":
        return
    skip = pytest.mark.skip(reason="sqlite_only: the backend does not change what it checks")
    for item in items:
        if item.get_closest_marker("sqlite_only") is not None:
            item.add_marker(skip)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    skip_unless_mine(item)  # before the module's fixtures: another session may run it


# Where tests start gateway processes: the fork server (tests/support/fork_server.py) starts
# importing as soon as such tests are collected, while the first tests run.
PROCESS_SUITES = ("integration", "conformance", "e2e")


def pytest_collection_finish(session: pytest.Session) -> None:
    tests = Path(__file__).resolve().parent
    if any(item.path.is_relative_to(tests / suite) for item in session.items
           for suite in PROCESS_SUITES):
        fork_server()


def pytest_unconfigure(config: pytest.Config) -> None:
    stop_fork_server()
    if engines.ENGINES is not None:
        engines.ENGINES.stop()
        engines.ENGINES = None


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
def gateway_process(scripted_model: ScriptedModel, tmp_path_factory: pytest.TempPathFactory
                    ) -> Iterator[GatewayServer]:
    """A gateway driven by the scripted model: streamed through the direct adapter (`auto`),
    non-streamed calls through litellm's real OpenAI path. One process on SQLite, or two on
    PostgreSQL + Redis behind a round-robin proxy. tests/integration's `gateway` is the same
    app in the test process (tests/integration/conftest.py); this one is for what needs a
    port: Node clients, browsers, curl, sockets."""
    workdir, env = tmp_path_factory.mktemp("gateway"), scripted_env(scripted_model)
    server = (GatewayCluster(workdir, env) if engines.ENGINES is not None
              else GatewayServer(workdir, env))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def gateway(gateway_process: GatewayServer) -> GatewayServer:
    """The gateway process, under the name the conformance and browser tests use."""
    return gateway_process


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
def process_client(gateway_process: GatewayServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=gateway_process.url, event_hooks=USER, timeout=30,
                      headers={"x-api-key": "test-key"}) as http:
        yield http


@pytest.fixture
def client(process_client: httpx.Client) -> httpx.Client:
    return process_client


def artifacts_dir() -> Path:
    path = Path(__file__).resolve().parents[1] / "test-artifacts"
    path.mkdir(exist_ok=True)
    return path
