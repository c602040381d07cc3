"""The AG-UI 1.0 endpoint over HTTP (the app in the test process): reconnect from a cursor, cancel, retries with the
same runId, refused input, and scopes. (The real `HttpAgent` is in tests/conformance.)"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from ag_ui.core import Event
from pydantic import TypeAdapter

from tests.conftest import scripted_env
from tests.support.inprocess_app import InProcessGateway
from tests.support.run_stream import (
    agui_path,
    gateway_ids,
    open_stream,
    read_until,
    slow_turn,
    wait_for_status,
)
from tests.support.scripted_model import ScriptedModel
from tests.support.sse import SseEvent, run_events, text_of

RUN = "/v1/agui/agents/default/run"
EVENT = TypeAdapter(Event)


def agui_input(thread_id: str | None = None, run_id: str | None = None, text: str = "hi",
               **extra: Any) -> dict[str, Any]:
    """What `HttpAgent` 1.0 posts (it declares `protocolVersion`; older clients do not)."""
    return {"threadId": thread_id or f"t-{uuid.uuid4()}", "runId": run_id or f"r-{uuid.uuid4()}",
            "protocolVersion": "1.0",
            "messages": [{"id": f"m-{uuid.uuid4()}", "role": "user", "content": text}],
            "tools": [], "context": [], "state": {}, "forwardedProps": {}, **extra}


def valid(events: list[SseEvent]) -> list[SseEvent]:
    for event in events:
        EVENT.validate_python(event.data)
    return events


def test_reconnect_from_a_cursor_gives_exactly_the_missed_events(
        client: httpx.Client, scripted_model: ScriptedModel):
    scripted_model.enqueue(slow_turn(30, 0.02))
    body = agui_input()
    with open_stream(client, "POST", RUN, json=body) as (_, events):
        first = read_until(events, lambda seen: len(seen) >= 6)
    assert [e.id for e in first] == list(range(1, 7))
    rest = valid(run_events(client, "GET", agui_path(body), headers={"last-event-id": "6"}))
    whole = valid(run_events(client, "GET", agui_path(body)))

    assert [e.id for e in rest] == list(range(7, len(whole) + 1))
    assert [e.data for e in first + rest] == [e.data for e in whole]
    by_query = run_events(client, "GET", agui_path(body) + "?after=20")
    assert [e.data for e in by_query] == [e.data for e in whole[20:]]
    assert text_of(whole) == "".join(f"t{i} " for i in range(1, 31))
    assert whole[-1].type == "RUN_FINISHED" and whole[-1].data["outcome"] == {"type": "success"}


def test_cancel_ends_the_stream_with_a_cancelled_outcome(client: httpx.Client,
                                                         scripted_model: ScriptedModel):
    scripted_model.enqueue(slow_turn(200, 0.05))
    body = agui_input()
    with open_stream(client, "POST", RUN, json=body) as (_, events):
        seen = read_until(events, lambda s: any(e.type == "TEXT_MESSAGE_CONTENT" for e in s))
        response = client.delete(agui_path(body))
        assert response.status_code == 200 and response.json()["status"] == "cancelled"
        seen += list(events)
    valid(seen)
    types = [e.type for e in seen]
    assert types[-2:] == ["TEXT_MESSAGE_END", "RUN_FINISHED"]
    assert seen[-1].data["outcome"] == {"type": "cancelled"}
    assert "RUN_ERROR" not in types


LOOKUP = {"name": "lookup", "description": "Look it up in the browser",
          "parameters": {"type": "object", "properties": {}}}


def test_a_client_from_before_1_0_gets_the_outcomes_its_schema_knows(
        client: httpx.Client, scripted_model: ScriptedModel):
    """CopilotKit 1.7x bundles `@ag-ui/client` 0.0.x: it sends no `protocolVersion`, and its strict
    `RUN_FINISHED` schema fails the whole run over `pendingToolCallIds` or a `cancelled` outcome.
    So it gets the spec's downgrade: a plain success (it finds its tool calls in the stream),
    and no outcome for a cancel; a reconnect reads the same."""
    scripted_model.enqueue([{"tool_call": {"index": 0, "id": "call_l1", "name": "lookup",
                                           "arguments": "{}"}}],
                           slow_turn(200, 0.05))
    paused = agui_input(tools=[LOOKUP])
    del paused["protocolVersion"]
    events = valid(run_events(client, "POST", RUN, json=paused))
    assert [e.data["toolCallName"] for e in events if e.type == "TOOL_CALL_START"] == ["lookup"]
    assert events[-1].type == "RUN_FINISHED" and events[-1].data["outcome"] == {"type": "success"}
    thread_id, _ = gateway_ids(client, paused)
    assert client.get(f"/v1/threads/{thread_id}").json()["pendingToolCallIds"] == ["call_l1"]
    replayed = run_events(client, "GET", agui_path(paused))
    assert [e.data for e in replayed] == [e.data for e in events]

    cancelled = agui_input(paused["threadId"], tools=[LOOKUP])
    del cancelled["protocolVersion"]
    cancelled["messages"].insert(0, {"id": "tool-1", "role": "tool", "toolCallId": "call_l1",
                                     "content": "found"})
    with open_stream(client, "POST", RUN, json=cancelled) as (_, stream):
        seen = read_until(stream, lambda s: any(e.type == "TEXT_MESSAGE_CONTENT" for e in s))
        assert client.delete(agui_path(cancelled)).json()["status"] == "cancelled"
        seen += list(stream)
    assert seen[-1].type == "RUN_FINISHED" and "outcome" not in valid(seen)[-1].data
    (answer,) = [m for m in scripted_model.requests[1]["messages"] if m["role"] == "tool"]
    assert answer["tool_call_id"] == "call_l1" and answer["content"] == "found"


def test_a_retried_run_id_replays_that_run(client: httpx.Client, scripted_model: ScriptedModel):
    scripted_model.enqueue([{"content": "Once."}])
    body = agui_input()
    first = run_events(client, "POST", RUN, json=body)
    again = client.post(RUN, json=body, headers={"accept": "text/event-stream"})

    assert again.headers["idempotent-replayed"] == "true"
    assert len(scripted_model.requests) == 1
    assert text_of(first) == "Once." and again.text.count("Once.") == 1
    other_thread = client.post(RUN, json={**body, "threadId": f"t-{uuid.uuid4()}"})
    assert other_thread.status_code == 409 and other_thread.json()["code"] == "RUN_ID_IN_USE"


def test_history_and_context_reach_the_model(client: httpx.Client, scripted_model: ScriptedModel):
    scripted_model.enqueue([{"content": "Sure."}], [{"content": "Again."}])
    body = agui_input(text="and now?", context=[{"description": "page", "value": "checkout"}])
    # A client's system message is refused (docs/agents.md, "Prompt authority").
    refused = client.post(RUN, json={**body, "messages": [
        {"id": "s", "role": "system", "content": "Be brief."}, *body["messages"]]})
    assert refused.status_code == 400 and refused.json()["code"] == "SYSTEM_PROMPT_NOT_ALLOWED"
    body["messages"][:0] = [{"id": "u0", "role": "user", "content": "earlier"},
                            {"id": "a0", "role": "assistant", "content": "earlier answer"}]
    run_events(client, "POST", RUN, json=body)
    follow_up = agui_input(body["threadId"], text="more")
    run_events(client, "POST", RUN, json=follow_up)

    first, second = (r["messages"] for r in scripted_model.requests)
    assert [(m["role"], m["content"][:14]) for m in first] == [
        ("user", "earlier"), ("assistant", "earlier answer"), ("user", "and now?\n\nAddi")]
    assert "checkout" in first[-1]["content"]
    assert [m["role"] for m in second] == ["user", "assistant", "user", "assistant", "user"]
    thread_id, run_id = gateway_ids(client, follow_up)
    assert client.get(f"/v1/threads/{thread_id}").json()["lastCompletedRunId"] == run_id


@pytest.mark.parametrize(("change", "field"), [
    ({"runId": 7}, "runId"),
    ({"threadId": "x" * 65}, "threadId"),
    ({"runId": "run-\u00e9t\u00e9"}, "runId"),  # ids go into headers and URLs: ASCII
    ({"messages": [{"id": "m", "role": "tool", "content": "no call id"}]},
     "messages.0.tool.toolCallId"),
    ({"tools": [{"name": "t"}]}, "tools.0.description"),
    ({"forwardedProps": {"components": [{"name": ""}]}}, "forwardedProps"),
])
def test_malformed_input_is_a_400_naming_the_field(client: httpx.Client, change: dict,
                                                   field: str):
    response = client.post(RUN, json={**agui_input(), **change})
    assert response.status_code == 400, response.text
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert problem["code"] == "VALIDATION_ERROR" and field in problem["errors"], problem


def test_input_with_nothing_new_is_refused(client: httpx.Client):
    response = client.post(RUN, json={**agui_input(), "messages": []})
    assert response.status_code == 400 and response.json()["code"] == "NO_NEW_INPUT"
    assert "messages" in response.json()["errors"]


def test_unknown_agent_is_404(client: httpx.Client):
    response = client.post("/v1/agui/agents/other/run", json=agui_input())
    assert response.status_code == 404 and response.json()["code"] == "AGENT_NOT_FOUND"


def test_a_thread_of_another_user_is_404(client: httpx.Client, scripted_model: ScriptedModel):
    scripted_model.enqueue([{"content": "For alice."}])
    body = agui_input(forwardedProps={"userKey": "alice"})
    run_events(client, "POST", RUN, json=body)

    as_bob = client.post(RUN + "?userKey=bob", json=agui_input(body["threadId"], text="mine?"))
    assert as_bob.status_code == 404 and as_bob.json()["code"] == "THREAD_NOT_FOUND"
    assert "For alice" not in as_bob.text
    assert len(scripted_model.requests) == 1


@pytest.fixture(scope="module")
def keyed_gateway(scripted_model: ScriptedModel, tmp_path_factory: pytest.TempPathFactory
                  ) -> Iterator[InProcessGateway]:
    server = InProcessGateway(tmp_path_factory.mktemp("agui-keyed"), scripted_env(
        scripted_model, GATEWAY_API_KEYS="key-a:project-a,key-b:project-b"))
    server.start()
    yield server
    server.stop()


def test_two_projects_choosing_the_same_ids_get_their_own_threads(
        keyed_gateway: InProcessGateway, scripted_model: ScriptedModel):
    """AG-UI ids are names within the project: project B's `threadId` and `runId` equal to
    project A's neither collide with A's (no squatting, no existence oracle) nor reach them,
    and each project's events, reconnects and cancels name the ids its client chose."""
    scripted_model.enqueue([{"content": "For A."}], [{"content": "For B."}],
                           [{"content": "A again."}])
    body = agui_input()
    a, b = {"x-api-key": "key-a"}, {"x-api-key": "key-b"}
    with keyed_gateway.client(timeout=30) as http:
        for_a = run_events(http, "POST", RUN, json=body, headers=a)
        for_b = run_events(http, "POST", RUN, json=body, headers=b)
        again = agui_input(body["threadId"], text="and?")
        run_events(http, "POST", RUN, json=again, headers=a)
        replay_b = run_events(http, "GET", agui_path(body), headers=b)
        threads = [gateway_ids(http, body, **key)[0] for key in (a, b)]
        messages_b = http.get(f"/v1/threads/{threads[1]}/messages", headers=b).json()
        cancel_b = http.delete(agui_path(body), headers=b).json()

    assert (text_of(for_a), text_of(for_b), text_of(replay_b)) == ("For A.", "For B.", "For B.")
    for events in (for_a, for_b, replay_b):
        ids = [(e.data["threadId"], e.data["runId"]) for e in events
               if e.type in ("RUN_STARTED", "RUN_FINISHED")]
        assert ids == [(body["threadId"], body["runId"])] * 2
    assert threads[0] != threads[1] and body["threadId"] not in threads
    assert [m["content"][0]["text"] for m in messages_b["messages"]] == ["hi", "For B."]
    assert cancel_b == {"runId": body["runId"], "status": "completed"}
    # A's second run saw A's history only.
    assert [m["content"] for m in scripted_model.requests[-1]["messages"]][:2] == ["hi", "For A."]


def connect_events(client: httpx.Client, body: dict[str, Any], **headers: str
                   ) -> list[SseEvent]:
    return valid(run_events(client, "POST", CONNECT, json=body, headers=headers))


CONNECT = "/v1/agui/agents/default/connect"


def test_connect_hydrates_a_thread_then_follows_its_active_run(
        client: httpx.Client, scripted_model: ScriptedModel):
    """A reloaded page (`connectAgent`, CopilotKit's `connect`) gets the thread's messages,
    tool calls and results included, and what it waits for; then, while a run is active, that
    run's own events live, resumable by their ids."""
    scripted_model.enqueue([{"reasoning": "Look it up."}, {"content": "Let me check."},
                            {"tool_call": {"index": 0, "id": "call_l1", "name": "lookup",
                                           "arguments": '{"q": "x"}'}}],
                           slow_turn(40, 0.03))
    paused = agui_input(text="find x", tools=[LOOKUP])
    run_events(client, "POST", RUN, json=paused)
    hydrate = agui_input(paused["threadId"])
    first = connect_events(client, hydrate)

    assert [e.type for e in first] == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "STATE_SNAPSHOT",
                                       "RUN_FINISHED"]
    assert all(e.id is None for e in first)
    messages = first[1].data["messages"]
    assert [(m["role"], m.get("content")) for m in messages] == [
        ("user", "find x"), ("reasoning", "Look it up."), ("assistant", "Let me check.")]
    assert messages[2]["toolCalls"] == [{"id": "call_l1", "type": "function", "function": {
        "name": "lookup", "arguments": '{"q": "x"}'}}]
    assert first[2].data["snapshot"]["pendingToolCalls"][0]["toolCallId"] == "call_l1"
    assert first[3].data["outcome"] == {"type": "success", "pendingToolCallIds": ["call_l1"]}
    assert first[0].data["threadId"] == paused["threadId"]

    answer = agui_input(paused["threadId"], tools=[LOOKUP])
    answer["messages"] = [{"id": "t1", "role": "tool", "toolCallId": "call_l1",
                           "content": "found it"}]
    with open_stream(client, "POST", RUN, json=answer) as (_, live):
        read_until(live, lambda seen: len(seen) >= 5)
        status = client.get(f"/v1/agui/threads/{paused['threadId']}").json()
        during = connect_events(client, hydrate)
    assert status == {"threadId": paused["threadId"], "running": True, "runId": answer["runId"]}
    snapshot, rest = during[:4], during[4:]
    assert [(m["role"], m.get("content")) for m in snapshot[1].data["messages"]][-1] == (
        "tool", "found it")
    assert "pendingToolCalls" not in snapshot[2].data["snapshot"]
    whole = run_events(client, "GET", agui_path(answer))
    assert [e.data for e in rest] == [e.data for e in whole]
    assert [e.id for e in rest] == list(range(1, len(whole) + 1))
    assert rest[0].data["runId"] == answer["runId"] and text_of(rest) == text_of(whole)
    # With a cursor the client holds the snapshot: the latest run after that event only.
    resumed = run_events(client, "POST", CONNECT, json=hydrate, headers={"last-event-id": "7"})
    assert [e.data for e in resumed] == [e.data for e in whole[7:]]
    assert client.get(f"/v1/agui/threads/{paused['threadId']}").json()["running"] is False


def test_connect_to_an_unknown_or_foreign_thread_is_an_empty_thread(
        client: httpx.Client, scripted_model: ScriptedModel):
    scripted_model.enqueue([{"content": "For alice."}])
    body = agui_input(forwardedProps={"userKey": "alice"})
    run_events(client, "POST", RUN, json=body)
    for thread_id, user in ((body["threadId"], "bob"), (f"t-{uuid.uuid4()}", "alice")):
        events = connect_events(client, agui_input(thread_id, forwardedProps={"userKey": user}))
        assert events[1].data["messages"] == [] and "For alice" not in str(events)
    mine = connect_events(client, agui_input(body["threadId"], forwardedProps={"userKey": "alice"}))
    assert [m.get("content") for m in mine[1].data["messages"]] == ["hi", "For alice."]


def test_a_client_from_before_1_0_that_hangs_up_cancels_its_run(
        client: httpx.Client, scripted_model: ScriptedModel):
    """CopilotKit's `@ag-ui/client` 0.0.x stops a run only by dropping the connection: with no
    `onDisconnect` of its own, its run is cancelled then (1.0 clients keep the grace window,
    and every client may choose with `forwardedProps.onDisconnect`)."""
    scripted_model.enqueue(slow_turn(400, 0.05))
    body = agui_input()
    del body["protocolVersion"]
    with open_stream(client, "POST", RUN, json=body) as (_, events):
        read_until(events, lambda seen: any(e.type == "TEXT_MESSAGE_CONTENT" for e in seen))
    thread_id, run_id = gateway_ids(client, body)  # the replay reads until the run ends
    final = wait_for_status(client, thread_id, run_id, "cancelled", "completed")
    assert final["status"] == "cancelled"


def test_connect_keeps_a_users_image(client: httpx.Client, scripted_model: ScriptedModel):
    """Issue 44: a user's image message reloads as that message, not as its text."""
    png = "iVBORw0KGgo="
    scripted_model.enqueue([{"content": "A dot."}])
    body = agui_input(text="x")
    body["messages"][0]["content"] = [
        {"type": "text", "text": "what is this?"},
        {"type": "image", "source": {"type": "data", "value": png, "mimeType": "image/png"}}]
    run_events(client, "POST", RUN, json=body)
    snapshot = connect_events(client, agui_input(body["threadId"]))[1].data["messages"]
    assert snapshot[0]["id"] == body["messages"][0]["id"]
    assert snapshot[0]["content"] == [
        {"type": "text", "text": "what is this?"},
        {"type": "image", "source": {"type": "data", "value": png, "mimeType": "image/png"}}]
