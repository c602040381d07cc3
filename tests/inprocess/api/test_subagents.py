"""Sub-agents, on the whole app in-process with the scripted model behind the real streaming
path: an agent that lists a sub-agent offers it to its model as a tool; calling it runs the
sub-agent's own loop (its instructions, its task) inside the run, and its answer is the call's
result. AG-UI 1.0 shows the sub-agent's work between `SUBAGENT_STARTED` and `SUBAGENT_FINISHED`
(or `SUBAGENT_ERROR`), attributed with `subagentRunId`; the Timbal view carries `sender` on every
message; the Tambo dialect shows only the call and its result; a reconnect inside the sub-agent's
work resumes exactly."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ag_ui.core import Event
from pydantic import TypeAdapter
from starlette.testclient import TestClient

from gateway.app import create_app
from gateway.protocol.frames_schema import frame_adapter
from tests.support.agents import (
    ANSWER,
    DELEGATE,
    DELEGATING_AGENTS,
    RESEARCH,
    RESEARCHER_INSTRUCTIONS,
    agents_settings,
)
from tests.support.run_stream import open_stream, read_until, slow_turn
from tests.support.scripted_model import ScriptedModel
from tests.support.sse import iter_events, run_events

KEY = {"x-api-key": "k1"}
EVENT: TypeAdapter[Any] = TypeAdapter(Event)


@pytest.fixture
def client(scripted_model: ScriptedModel, tmp_path: Path) -> Iterator[TestClient]:
    with TestClient(create_app(agents_settings(scripted_model, tmp_path,
                                               DELEGATING_AGENTS))) as http:
        yield http


def agui_run(client: TestClient, text: str) -> list[dict[str, Any]]:
    return agui_run_with_ids(client, text)[0]


def agui_run_with_ids(client: TestClient, text: str
                      ) -> tuple[list[dict[str, Any]], tuple[str, str]]:
    """The run's AG-UI events, and the gateway's own (thread id, run id) of it (its
    `X-Thread-Id` / `X-Run-Id`), which the Tambo and Timbal endpoints use."""
    body = {"threadId": f"t-{uuid.uuid4()}", "runId": f"r-{uuid.uuid4()}",
            "protocolVersion": "1.0", "tools": [], "context": [], "state": {},
            "messages": [{"id": f"m-{uuid.uuid4()}", "role": "user", "content": text}],
            "forwardedProps": {"userKey": "u1"}}
    with client.stream("POST", "/v1/agui/agents/shop/run", headers=KEY, json=body) as response:
        assert response.status_code == 200, response.read()
        events = [e.data for e in iter_events(response)]
        ids = response.headers["x-thread-id"], response.headers["x-run-id"]
    for event in events:
        EVENT.validate_python(event)  # strict AG-UI 1.0
    return events, ids


def streamed(scripted_model: ScriptedModel) -> list[dict[str, Any]]:
    return [r for r in scripted_model.requests if r.get("stream")]


def test_a_delegating_run_streams_the_subagent_between_its_events(
        client: TestClient, scripted_model: ScriptedModel) -> None:
    scripted_model.enqueue(DELEGATE, RESEARCH, ANSWER)
    events = agui_run(client, "mugs?")
    types = [e["type"] for e in events]
    assert types[-1] == "RUN_FINISHED"

    # The shop's model is offered the researcher as a tool taking a task.
    first, second, third = streamed(scripted_model)
    (tool,) = [t for t in first["tools"] if t["function"]["name"] == "researcher"]
    assert tool["function"]["description"] == "Looks things up in the catalogue"
    assert tool["function"]["parameters"]["required"] == ["task"]
    # The researcher runs its own loop: its instructions, then the task, nothing of the thread.
    assert second["messages"] == [
        {"role": "system", "content": RESEARCHER_INSTRUCTIONS},
        {"role": "user", "content": "Which mugs are in stock?"}]
    assert "researcher" not in {t["function"]["name"] for t in second.get("tools") or []}
    # Its answer is the call's result for the shop's next call.
    assert third["messages"][-1] == {"role": "tool", "tool_call_id": "call_r1",
                                     "content": "Blue and red mugs."}

    started = types.index("SUBAGENT_STARTED")
    finished = types.index("SUBAGENT_FINISHED")
    begin = events[started]
    invocation = begin["subagentRunId"]
    assert begin["name"] == "researcher"
    assert begin["description"] == "Looks things up in the catalogue"
    assert begin["parentToolCallId"] == "call_r1"
    assert types.index("TOOL_CALL_END") < started
    inside = events[started + 1:finished]
    assert {e["type"] for e in inside} >= {"TEXT_MESSAGE_CONTENT", "REASONING_MESSAGE_CONTENT"}
    assert all(e.get("subagentRunId") == invocation for e in inside)
    assert "".join(e["delta"] for e in inside if e["type"] == "TEXT_MESSAGE_CONTENT") == \
        "Blue and red mugs."
    assert events[finished] == {"type": "SUBAGENT_FINISHED", "subagentRunId": invocation,
                                "result": "Blue and red mugs.",
                                "timestamp": events[finished]["timestamp"]}
    result = events[finished + 1]
    assert result["type"] == "TOOL_CALL_RESULT" and result["toolCallId"] == "call_r1"
    assert "subagentRunId" not in result  # the shop's call, answered
    outside = events[:started] + events[finished + 1:]
    assert not any("subagentRunId" in e for e in outside)


def run_ids(events: list[dict[str, Any]]) -> tuple[str, str]:
    return events[0]["threadId"], events[0]["runId"]


def test_the_timbal_view_names_every_sender(client: TestClient,
                                            scripted_model: ScriptedModel) -> None:
    scripted_model.enqueue(DELEGATE, RESEARCH, ANSWER)
    thread_id, run_id = agui_run_with_ids(client, "mugs?")[1]
    body = client.get(f"/v1/timbal/threads/{thread_id}/runs/{run_id}", headers=KEY,
                      params={"userKey": "u1"})
    assert body.status_code == 200, body.text
    frames = [json.loads(line) for line in body.text.splitlines()]
    for frame in frames:
        frame_adapter.validate_python(frame)  # the published Timbal schema
    values = [f["v"] for f in frames if "v" in f]
    metas = [f["m"] for f in frames if "m" in f]
    senders = {(v["type"], v.get("sender")) for v in values}
    assert ("user", "u1") in senders  # the user scope on the user's message
    assert {("agent", "shop"), ("agent", "researcher"), ("thinking", "researcher"),
            ("tool_call", "shop")} <= senders
    assert all(m.get("sender") in ("shop", "researcher") for m in metas)
    (started,) = [f for f in frames if f.get("c") == "subagent.started"]
    (complete,) = [v for v in values if v["type"] == "agent_complete"]
    assert complete == {"type": "agent_complete", "agentId": started["subagentRunId"],
                        "result": "Blue and red mugs.", "sender": "researcher"}
    (result,) = [v for v in values if v["type"] == "tool_result"]
    assert result["sender"] == "researcher" and result["output"] == "Blue and red mugs."
    assert all(v.get("subagentRunId") == started["subagentRunId"]
               for v in values if v.get("sender") == "researcher"
               and v["type"] in ("agent", "thinking"))
    # The thread keeps the shop's call and its result, not the researcher's own messages.
    history = client.get(f"/v1/timbal/threads/{thread_id}", headers=KEY,
                         params={"userKey": "u1"}).text
    assert "Blue and red mugs." in history
    assert '"sender":"researcher","subagentRunId"' not in history
    assert "Checking." not in history


def test_the_tambo_dialect_shows_the_call_and_its_result(
        client: TestClient, scripted_model: ScriptedModel) -> None:
    scripted_model.enqueue(DELEGATE, RESEARCH, ANSWER)
    events = [e.data for e in run_events(client, "POST", "/v1/threads/runs", headers=KEY, json={
        "message": {"role": "user", "content": [{"type": "text", "text": "mugs?"}]},
        "userKey": "u1"})]
    types = [e["type"] for e in events]
    assert types[-1] == "RUN_FINISHED"
    assert "THINKING_TEXT_MESSAGE_START" not in types  # the researcher's own reasoning
    (result,) = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert result["toolCallId"] == "call_r1" and result["content"] == "Blue and red mugs."
    texts = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert texts == "Let me ask. We have blue and red mugs."


def test_a_failing_subagent_is_a_tool_error_and_the_run_goes_on(
        client: TestClient, scripted_model: ScriptedModel) -> None:
    scripted_model.enqueue(DELEGATE, [{"error": 400, "message": "bad request"}],
                           [{"content": "The researcher is unavailable."}])
    events = agui_run(client, "mugs?")
    types = [e["type"] for e in events]
    assert types[-1] == "RUN_FINISHED"
    error = events[types.index("SUBAGENT_ERROR")]
    assert error["subagentRunId"] == events[types.index("SUBAGENT_STARTED")]["subagentRunId"]
    assert error["code"] == "LLM_CLIENT_ERROR"
    (result,) = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert result["content"].startswith("researcher failed: ")
    assert streamed(scripted_model)[-1]["messages"][-1]["content"] == result["content"]


def test_a_reconnect_inside_the_subagent_resumes_exactly(
        client: TestClient, scripted_model: ScriptedModel) -> None:
    scripted_model.enqueue(DELEGATE, RESEARCH, ANSWER)
    events = agui_run(client, "mugs?")
    thread_id, run_id = run_ids(events)
    middle = [e["type"] for e in events].index("SUBAGENT_STARTED") + 2
    replay = [e.data for e in run_events(client, "GET",
                                          f"/v1/agui/threads/{thread_id}/runs/{run_id}",
                                          headers={**KEY, "Last-Event-ID": str(middle)})]
    assert replay == events[middle:]


def test_cancelling_the_run_stops_the_subagent_and_ends_it(
        client: TestClient, scripted_model: ScriptedModel) -> None:
    scripted_model.enqueue(DELEGATE, slow_turn(400, 0.05))
    body = {"threadId": f"t-{uuid.uuid4()}", "runId": f"r-{uuid.uuid4()}",
            "protocolVersion": "1.0", "tools": [], "context": [], "state": {},
            "messages": [{"id": f"m-{uuid.uuid4()}", "role": "user", "content": "mugs?"}],
            "forwardedProps": {"userKey": "u1"}}
    path = f"/v1/agui/threads/{body['threadId']}/runs/{body['runId']}"
    with open_stream(client, "POST", "/v1/agui/agents/shop/run", headers=KEY,
                     json=body) as (_, stream):
        seen = read_until(stream, lambda s: any(e.type == "TEXT_MESSAGE_CONTENT"
                                                and "subagentRunId" in e.data for e in s))
        assert client.delete(path, headers=KEY).json()["status"] == "cancelled"
        seen += list(stream)
    events = [e.data for e in seen]
    for event in events:
        EVENT.validate_python(event)
    types = [e["type"] for e in events]
    assert types[-2:] == ["SUBAGENT_ERROR", "RUN_FINISHED"]
    assert events[-2]["code"] == "RUN_ENDED"
    assert events[-1]["outcome"] == {"type": "cancelled"}
    # The sub-agent's model stream was closed with the run (the scripted model saw it go).
    assert scripted_model.disconnects
    assert len(streamed(scripted_model)) == 2  # the shop did not go on
