"""Shared agent state on the AG-UI endpoint (issue 44): the client's `state` is kept with the
thread and returned by `connect`; a server tool changes it (`ctx.state`), the change streams
as `STATE_DELTA` and is kept; it is bounded as component state is."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import jsonpatch
import pytest

from tests.conftest import scripted_env
from tests.integration.test_agui import RUN, agui_input, connect_events, valid
from tests.support.gateway_server import USER
from tests.support.inprocess_app import InProcessGateway
from tests.support.scripted_model import ScriptedModel
from tests.support.sse import run_events

TOOLS = Path(__file__).resolve().parents[1] / "support" / "server_tools.py"
MAX_STATE = 2000


@pytest.fixture(scope="module")
def state_gateway(scripted_model: ScriptedModel, tmp_path_factory: pytest.TempPathFactory
                  ) -> Iterator[InProcessGateway]:
    server = InProcessGateway(tmp_path_factory.mktemp("state"), scripted_env(
        scripted_model, GATEWAY_TOOLS=str(TOOLS),
        GATEWAY_MAX_COMPONENT_STATE_BYTES=str(MAX_STATE)))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def http(state_gateway: InProcessGateway) -> Iterator[httpx.Client]:
    with state_gateway.client(timeout=30, event_hooks=USER,
                              headers={"x-api-key": "k"}) as client:
        yield client


def snapshot_state(http: httpx.Client, thread_id: str) -> dict:
    return connect_events(http, agui_input(thread_id))[2].data["snapshot"]


def test_the_clients_state_is_kept_and_connect_returns_it(http, scripted_model):
    scripted_model.enqueue([{"content": "Noted."}])
    body = agui_input(state={"city": "Oslo", "units": "metric"})
    run_events(http, "POST", RUN, json=body)
    state = snapshot_state(http, body["threadId"])
    assert state["city"] == "Oslo" and state["units"] == "metric"
    assert state["components"] == {}
    # The model still sees it as context.
    assert "Oslo" in scripted_model.requests[-1]["messages"][-1]["content"]


def test_a_server_tool_changes_the_state_live_and_for_good(http, scripted_model):
    scripted_model.enqueue([{"tool_call": {"index": 0, "id": "call_l", "name": "set_language",
                                           "arguments": '{"language": "nb"}'}}],
                           [{"content": "Byttet."}])
    body = agui_input(state={"city": "Oslo"})
    events = valid(run_events(http, "POST", RUN, json=body))
    deltas = [e.data["delta"] for e in events if e.type == "STATE_DELTA"]
    assert deltas == [[{"op": "add", "path": "/language", "value": "nb"}]]
    # Applied to what the client sent, the deltas give the state the thread keeps.
    assert jsonpatch.apply_patch({"city": "Oslo"}, deltas[0]) == {"city": "Oslo",
                                                                  "language": "nb"}
    state = snapshot_state(http, body["threadId"])
    assert (state["city"], state["language"]) == ("Oslo", "nb")
    # A later run without state keeps the thread's.
    scripted_model.enqueue([{"content": "Ok."}])
    run_events(http, "POST", RUN, json=agui_input(body["threadId"], text="more"))
    assert snapshot_state(http, body["threadId"])["language"] == "nb"


def test_a_state_over_the_cap_is_refused_before_the_run(http, scripted_model):
    body = agui_input(state={"blob": "x" * MAX_STATE})
    response = http.post(RUN, json=body)
    assert response.status_code == 413 and response.json()["code"] == "STATE_TOO_LARGE"
    assert snapshot_state(http, body["threadId"]) == {}  # no thread was made


def test_the_gateways_own_members_are_not_taken_from_the_client(http, scripted_model):
    scripted_model.enqueue([{"content": "Ok."}])
    body = agui_input(thread_id=f"t-{uuid.uuid4()}",
                      state={"theme": "dark", "components": {"forged": {}},
                             "pendingToolCalls": [{"toolCallId": "x"}]})
    run_events(http, "POST", RUN, json=body)
    assert snapshot_state(http, body["threadId"]) == {"theme": "dark", "components": {}}
