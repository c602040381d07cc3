"""Progress while a tool works (issue 44): a server tool's `ctx.status` is an AG-UI activity
message (`ACTIVITY_SNAPSHOT`, then `ACTIVITY_DELTA`s); on the Tambo endpoints every tool's
schema carries Tambo's status-message parameters, which the model fills in and the client
shows, and a server tool never receives."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import jsonpatch
import pytest

from tests.conftest import scripted_env
from tests.integration.test_agui import RUN, agui_input, valid
from tests.support.gateway_server import USER
from tests.support.inprocess_app import InProcessGateway
from tests.support.scripted_model import ScriptedModel
from tests.support.sse import run_events, text_of

TOOLS = Path(__file__).resolve().parents[1] / "support" / "server_tools.py"
WEATHER = {"name": "get_weather", "description": "Weather of a city",
           "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}},
                           "required": ["city"]}}
LABELS = {"_tambo_statusMessage", "_tambo_completionStatusMessage"}


@pytest.fixture(scope="module")
def progress_gateway(scripted_model: ScriptedModel, tmp_path_factory: pytest.TempPathFactory
                     ) -> Iterator[InProcessGateway]:
    server = InProcessGateway(tmp_path_factory.mktemp("progress"), scripted_env(
        scripted_model, GATEWAY_TOOLS=str(TOOLS)))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def http(progress_gateway: InProcessGateway) -> Iterator[httpx.Client]:
    with progress_gateway.client(timeout=30, event_hooks=USER,
                                 headers={"x-api-key": "k"}) as client:
        yield client


def survey_call(arguments: str) -> list[dict]:
    return [{"tool_call": {"index": 0, "id": "call_s", "name": "survey",
                           "arguments": arguments}}]


def parameters(request: dict, name: str) -> dict:
    return next(t["function"]["parameters"] for t in request["tools"]
                if t["function"]["name"] == name)


def test_a_tools_status_is_an_activity_message_on_ag_ui(http, scripted_model):
    scripted_model.enqueue(survey_call('{"sources": 2}'), [{"content": "Searched."}])
    events = valid(run_events(http, "POST", RUN, json=agui_input(text="survey")))
    activity = [e.data for e in events if e.type.startswith("ACTIVITY_")]
    assert [e["type"] for e in activity] == ["ACTIVITY_SNAPSHOT", "ACTIVITY_DELTA",
                                             "ACTIVITY_DELTA"]
    assert {e["activityType"] for e in activity} == {"tool_status"}
    content = activity[0]["content"]
    assert content == {"toolCallId": "call_s", "state": "searching",
                       "detail": "Searching source 1 of 2"}
    for delta in activity[1:]:
        content = jsonpatch.apply_patch(content, delta["patch"])
    assert content["detail"] == "Searching source 2 of 2" and content["done"] is True
    # Each before the tool's result; AG-UI tools get no Tambo parameters.
    kinds = [e.type for e in events]
    assert kinds.index("ACTIVITY_SNAPSHOT") < kinds.index("TOOL_CALL_RESULT")
    assert not LABELS & set(parameters(scripted_model.requests[0], "survey")["properties"])


def test_tambo_tools_carry_status_messages_that_the_server_tool_never_receives(
        http, scripted_model):
    scripted_model.enqueue(survey_call(
        '{"sources": 1, "_tambo_statusMessage": "Surveying", '
        '"_tambo_completionStatusMessage": "Surveyed"}'), [{"content": "Done."}])
    events = run_events(http, "POST", "/v1/threads/runs", json={
        "message": {"role": "user", "content": [{"type": "text", "text": "survey"}]},
        "tools": [WEATHER]})
    assert text_of(events) == "Done."
    (result,) = [e.data for e in events if e.type == "TOOL_CALL_RESULT"]
    assert result["content"] == "searched 1 sources"  # the tool took only `sources`
    args = "".join(e.data["delta"] for e in events if e.type == "TOOL_CALL_ARGS")
    assert '"_tambo_statusMessage": "Surveying"' in args  # what React shows
    first = scripted_model.requests[0]
    for name in ("survey", "get_weather"):
        schema = parameters(first, name)
        assert LABELS <= set(schema["properties"]) and LABELS <= set(schema["required"])
    assert parameters(first, "get_weather")["properties"]["city"] == {"type": "string"}
