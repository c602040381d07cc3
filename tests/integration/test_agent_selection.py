"""Choosing the agent from outside, on a real gateway with two agents (on SQLite, or PostgreSQL
+ Redis with GATEWAY_TEST_BACKEND=postgres, where the agent columns of migration 0006 live): a
managed key made with `gateway keys create --agent` runs its agent, a thread keeps it, and a key
without one gets the default agent."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import scripted_env
from tests.integration.test_limits import PROJECT, keys_command
from tests.support import engines
from tests.support.gateway_server import GatewayCluster, GatewayServer
from tests.support.scripted_model import ScriptedModel
from tests.support.sse import run_events

AGENTS = """
[agents.support]
description = "Answers questions about orders"
instructions = "You are the support agent."

[agents.billing]
description = "Explains invoices"
instructions = "You are the billing agent."
"""


@pytest.fixture(scope="module")
def gateway(scripted_model: ScriptedModel, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[GatewayServer | GatewayCluster]:
    workdir = tmp_path_factory.mktemp("agents")
    (workdir / "agents.toml").write_text(AGENTS)
    env = scripted_env(scripted_model, GATEWAY_AGENTS_FILE=str(workdir / "agents.toml"),
                       GATEWAY_DEFAULT_AGENT="support")
    server = (GatewayCluster(workdir, env) if engines.ENGINES is not None
              else GatewayServer(workdir, env))
    server.start()
    yield server
    server.stop()


def env_of(gateway: GatewayServer | GatewayCluster) -> dict[str, str]:
    return gateway.servers[0].env if isinstance(gateway, GatewayCluster) else gateway.env


def create_key(gateway: GatewayServer | GatewayCluster, *args: str) -> str:
    out = keys_command(env_of(gateway), gateway.workdir, "create", "--project", PROJECT, *args)
    wait_for_authentication(gateway)
    return out.strip().splitlines()[-1]


def wait_for_authentication(gateway: GatewayServer | GatewayCluster) -> None:
    """The first key ends development mode once the gateway's key cache expires (until then
    any key is the development project's, with the default agent)."""
    deadline = time.monotonic() + 60
    refused = 0  # in a row: behind the balancer, every process must have seen the key
    with httpx.Client(base_url=gateway.url, timeout=10) as http:
        while refused < 6:
            status = http.get("/v1/threads", params={"userKey": "buyer"},
                              headers={"x-api-key": "made-up"}).status_code
            refused = refused + 1 if status == 401 else 0
            assert time.monotonic() < deadline, "development mode did not end"
            time.sleep(0.1)


def first_message(scripted_model: ScriptedModel, since: int) -> str:
    """The system message of the first streamed request since `since` requests: the scripted
    model is shared with the whole session, where a run of an earlier test may still call it."""
    requests = [r for r in scripted_model.requests[since:]
                if r.get("stream") and r["messages"][0]["role"] == "system"]
    assert requests, "the model was not called with a system message"
    return str(requests[0]["messages"][0]["content"])


def run(gateway: GatewayServer | GatewayCluster, key: str, url: str = "/v1/threads/runs",
        **body: object) -> dict:
    with httpx.Client(base_url=gateway.url, timeout=30) as http:
        events = run_events(http, "POST", url, headers={"x-api-key": key}, json={
            "message": {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            "userKey": "buyer", **body})
    return events[-1].data


def test_a_key_made_for_an_agent_runs_it_and_its_thread_keeps_it(
        gateway: GatewayServer | GatewayCluster, scripted_model: ScriptedModel) -> None:
    billing = create_key(gateway, "--agent", "billing")
    since = len(scripted_model.requests)
    finished = run(gateway, billing)
    assert finished["type"] == "RUN_FINISHED"
    assert first_message(scripted_model, since) == "You are the billing agent."
    # The same thread through a key of the default agent: still the billing agent.
    plain = create_key(gateway)
    since = len(scripted_model.requests)
    run(gateway, plain, f"/v1/threads/{finished['threadId']}/runs",
        previousRunId=finished["runId"])
    assert first_message(scripted_model, since) == "You are the billing agent."
    # A new thread with that key: the default agent.
    since = len(scripted_model.requests)
    run(gateway, plain)
    assert first_message(scripted_model, since) == "You are the support agent."


def test_a_key_made_for_an_agent_reaches_no_other_agent(
        gateway: GatewayServer | GatewayCluster, scripted_model: ScriptedModel) -> None:
    """The operator bound the key: neither a path nor a parameter chosen by the browser that
    holds it can pick another agent, and nothing reaches the model."""
    billing = create_key(gateway, "--agent", "billing")
    calls = len(scripted_model.requests)
    with httpx.Client(base_url=gateway.url, timeout=30, headers={"x-api-key": billing}) as http:
        refused = [
            http.post("/v1/threads/runs", params={"agent": "support"}, json={
                "message": {"role": "user", "content": [{"type": "text", "text": "hi"}]},
                "userKey": "buyer"}),
            http.post("/v1/agui/agents/support/run", json={
                "threadId": "t-bound", "runId": "r-bound", "messages": [
                    {"id": "m1", "role": "user", "content": "hi"}],
                "tools": [], "context": [], "state": {}, "forwardedProps": {"userKey": "buyer"}}),
        ]
        listing = http.get("/v1/agents").json()
    assert [(r.status_code, r.json()["code"]) for r in refused] == [
        (403, "AGENT_NOT_ALLOWED")] * 2
    assert list(listing["agents"]) == ["billing"]
    assert len(scripted_model.requests) == calls


def test_keys_list_still_works_with_agent_keys(gateway: GatewayServer | GatewayCluster) -> None:
    create_key(gateway, "--agent", "support")
    listing = keys_command(env_of(gateway), gateway.workdir, "list", "--project", PROJECT)
    assert "gwk_" in listing
