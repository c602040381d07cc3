"""A way out of every pause, over HTTP: `DELETE` of a paused run, and a new message that
abandons the pending calls (Tambo body field, AG-UI `forwardedProps`); what the thread, the
Timbal view and the model show afterwards. (The logic and its races: tests/inprocess/runs/
test_pauses.py; the real `TamboClient` reloading during a tool: tests/conformance.)"""

from __future__ import annotations

import json
import uuid

import httpx

from tests.integration.test_agui import RUN, agui_input
from tests.support.gateway_server import DEFAULT_USER
from tests.support.run_stream import message, open_stream, run_status, started_ids
from tests.support.scripted_model import ScriptedModel
from tests.support.sse import run_events

WEATHER = {"name": "get_weather", "description": "Weather for a city",
           "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}}}
CALL = {"tool_call": {"index": 0, "id": "call_p1", "name": "get_weather",
                      "arguments": '{"city": "Paris"}'}}


def paused_run(client: httpx.Client, scripted_model: ScriptedModel) -> tuple[str, str]:
    scripted_model.enqueue([{"content": "Checking."}, CALL])
    events = run_events(client, "POST", "/v1/threads/runs", json={
        "message": message("weather?"), "tools": [WEATHER], "thread": {"userKey": DEFAULT_USER}})
    assert events[-2].data["name"] == "tambo.run.awaiting_input"
    return started_ids(events)


def last_model_input(scripted_model: ScriptedModel) -> str:
    return json.dumps(scripted_model.requests[-1]["messages"])


def test_deleting_a_paused_run_ends_it_and_the_thread_takes_a_new_message(
        client: httpx.Client, scripted_model: ScriptedModel):
    thread_id, run_id = paused_run(client, scripted_model)

    deleted = client.delete(f"/v1/threads/{thread_id}/runs/{run_id}")
    assert deleted.status_code == 200
    assert deleted.json() == {"runId": run_id, "status": "cancelled"}
    assert run_status(client, thread_id, run_id)["status"] == "cancelled"
    thread = client.get(f"/v1/threads/{thread_id}").json()
    assert (thread["runStatus"], thread["pendingToolCallIds"], thread["lastRunCancelled"]) == (
        "idle", [], True)
    (answer,) = [b for m in thread["messages"] for b in m["content"]
                 if b["type"] == "tool_result"]
    assert answer == {"type": "tool_result", "toolUseId": "call_p1", "isError": True,
                      "content": [{"type": "text", "text": "cancelled by the user"}]}
    timbal = [json.loads(line) for line in
              client.get(f"/v1/timbal/threads/{thread_id}").text.splitlines()]
    assert any(f["v"].get("type") == "tool_result" and f["v"]["status"] == "error"
               and f["v"]["error"] == "cancelled by the user" for f in timbal)

    scripted_model.enqueue([{"content": "Never mind the weather."}])
    events = run_events(client, "POST", f"/v1/threads/{thread_id}/runs", json={
        "message": message("forget it"), "previousRunId": run_id})
    assert events[-1].type == "RUN_FINISHED"
    assert "cancelled by the user" in last_model_input(scripted_model)


def test_a_new_message_abandons_the_pending_calls_only_when_it_asks(
        client: httpx.Client, scripted_model: ScriptedModel):
    thread_id, run_id = paused_run(client, scripted_model)
    body = {"message": message("hello?"), "previousRunId": run_id}
    refused = client.post(f"/v1/threads/{thread_id}/runs", json=body)
    assert refused.status_code == 400
    assert refused.json()["reason"] == "MISSING_RESULTS"

    scripted_model.enqueue([{"content": "Hello."}])
    events = run_events(client, "POST", f"/v1/threads/{thread_id}/runs",
                        json={**body, "abandonPendingTools": True})
    assert events[-1].type == "RUN_FINISHED"
    assert run_status(client, thread_id, run_id)["status"] == "cancelled"
    assert "cancelled by the user" in last_model_input(scripted_model)


def test_agui_abandons_a_pause_through_forwarded_props(
        client: httpx.Client, scripted_model: ScriptedModel):
    tool = {"name": "get_weather", "description": "Weather",
            "parameters": {"type": "object", "properties": {}}}
    scripted_model.enqueue([CALL])
    first = agui_input(text="weather?", tools=[tool])
    with open_stream(client, "POST", RUN, json=first) as (started, events):
        assert list(events)[-1].type == "RUN_FINISHED"
        ids = started.headers["x-thread-id"], started.headers["x-run-id"]  # the gateway's
    later = {**first, "runId": f"r-{uuid.uuid4()}", "messages": [
        *first["messages"], {"id": "m-2", "role": "user", "content": "hello?"}]}
    refused = client.post(RUN, json=later)
    assert (refused.status_code, refused.json()["reason"]) == (400, "MISSING_RESULTS")

    scripted_model.enqueue([{"content": "Hello."}])
    events = run_events(client, "POST", RUN, json={
        **later, "forwardedProps": {"abandonPendingTools": True}})
    assert events[-1].data["outcome"] == {"type": "success"}
    assert "cancelled by the user" in last_model_input(scripted_model)
    status = run_status(client, *ids)
    assert status["status"] == "cancelled"
