"""Runs outlive requests: reconnect with a cursor, replay, cancel, concurrency, idempotency.

Against the shared gateway process, over raw HTTP; the upstream model is the scripted one, so
the text a reader must end up with is known exactly.
"""

from __future__ import annotations

import socket
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.support.gateway_server import USER, GatewayServer
from tests.support.run_stream import (
    disconnects_after,
    ids,
    message,
    open_stream,
    read_and_leave,
    read_until,
    resume,
    run_status,
    slow_text,
    slow_turn,
    started_ids,
    texts,
    wait_for,
    wait_for_status,
)
from tests.support.scripted_model import ScriptedModel
from tests.support.sse import run_events, text_of


def new_thread(client: httpx.Client) -> str:
    response = client.post("/v1/threads", json={"userKey": "u1"})
    assert response.status_code == 201, response.text
    return response.json()["id"]


def start_body(text: str = "go", **extra) -> dict:
    return {"message": message(text), "thread": {"userKey": "u1"}, **extra}


# -- reconnect -----------------------------------------------------------------------------------


def test_reconnect_with_last_event_id_delivers_the_rest_exactly(
        client: httpx.Client, scripted_model: ScriptedModel):
    scripted_model.enqueue(slow_turn(60, 0.02))
    first = read_and_leave(client, "/v1/threads/runs", start_body(), 10)
    run = started_ids(first)

    rest = resume(client, run, first[-1].id)

    both = first + rest
    positions = [e.id for e in both]
    assert positions == list(range(1, len(both) + 1))  # increasing, no gap, none repeated
    assert rest[0].id == first[-1].id + 1
    assert text_of(both) == slow_text(60)
    assert rest[-1].type == "RUN_FINISHED"
    assert run_status(client, *run)["status"] == "completed"

    # A finished run replays from the start exactly as it streamed, and the query cursor is the
    # same cursor as the header.
    replay = resume(client, run)
    assert [(e.id, e.data) for e in replay] == [(e.id, e.data) for e in both]
    with open_stream(client, "GET", f"{ids(run)}?after={first[-1].id}") as (_, events):
        assert [(e.id, e.data) for e in events] == [(e.id, e.data) for e in rest]
    with open_stream(client, "GET", f"{ids(run)}?after={replay[-1].id}") as (_, events):
        assert list(events) == []  # nothing after the last event: the stream just closes


def test_reconnect_to_a_running_run_then_follows_it_live(
        client: httpx.Client, scripted_model: ScriptedModel):
    scripted_model.enqueue(slow_turn(40, 0.05))
    first = read_and_leave(client, "/v1/threads/runs", start_body(), 3)
    run = started_ids(first)
    assert run_status(client, *run)["status"] == "running"

    with open_stream(client, "GET", ids(run), headers={"last-event-id": str(first[-1].id)}
                     ) as (response, events):
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["cache-control"] == "no-cache"
        assert response.headers["x-accel-buffering"] == "no"
        rest = list(events)
    assert [e.id for e in first + rest] == list(range(1, len(first) + len(rest) + 1))
    assert text_of(first + rest) == slow_text(40)
    assert rest[-1].type == "RUN_FINISHED"


def test_paused_run_replays_its_pending_tool_calls(
        client: httpx.Client, scripted_model: ScriptedModel):
    scripted_model.enqueue([
        {"content": "Checking."},
        {"tool_call": {"index": 0, "id": "call_w1", "name": "get_weather",
                       "arguments": '{"city": "Paris"}'}},
    ])
    tool = {"name": "get_weather", "description": "Weather for a city",
            "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}}}
    live = run_events(client, "POST", "/v1/threads/runs", json=start_body(tools=[tool]))
    run = started_ids(live)

    replay = resume(client, run)
    assert [(e.id, e.data) for e in replay] == [(e.id, e.data) for e in live]
    awaiting = [e for e in replay if e.data.get("name") == "tambo.run.awaiting_input"]
    assert [p["toolCallId"] for p in awaiting[0].data["value"]["pendingToolCalls"]] == ["call_w1"]
    assert replay[-1].type == "RUN_FINISHED"

    status = run_status(client, *run)
    assert status["status"] == "awaiting_input"
    assert status["pendingToolCalls"][0]["toolCallId"] == "call_w1"
    assert status["pendingToolCalls"][0]["toolName"] == "get_weather"


def test_two_subscribers_get_identical_events(client: httpx.Client,
                                               scripted_model: ScriptedModel, gateway):
    scripted_model.enqueue(slow_turn(30, 0.05))
    with open_stream(client, "POST", "/v1/threads/runs", json=start_body()) as (_, events):
        head = read_until(events, lambda seen: seen[-1].type == "RUN_STARTED")
        run = started_ids(head)

        def second_reader() -> list:
            with httpx.Client(base_url=gateway.url, event_hooks=USER, timeout=30) as other, \
                    open_stream(other, "GET", ids(run)) as (_, theirs):
                return list(theirs)

        with ThreadPoolExecutor(1) as pool:
            theirs = pool.submit(second_reader)
            mine = head + list(events)
            theirs = theirs.result(timeout=30)
    assert [(e.id, e.data) for e in theirs] == [(e.id, e.data) for e in mine]
    assert text_of(mine) == slow_text(30)


def test_run_status_and_run_list(client: httpx.Client, scripted_model: ScriptedModel):
    thread_id = new_thread(client)
    scripted_model.enqueue([{"content": "one"}], [{"content": "two"}])
    first = run_events(client, "POST", f"/v1/threads/{thread_id}/runs",
                       json={"message": message("a")})
    second = run_events(client, "POST", f"/v1/threads/{thread_id}/runs",
                        json={"message": message("b"), "previousRunId": started_ids(first)[1]})

    status = run_status(client, thread_id, started_ids(second)[1])
    assert status["id"] == started_ids(second)[1]
    assert status["threadId"] == thread_id
    assert status["status"] == "completed"
    assert status["previousRunId"] == started_ids(first)[1]
    assert {"createdAt", "startedAt", "finishedAt"} <= set(status)
    assert "error" not in status

    listed = client.get(f"/v1/threads/{thread_id}/runs").json()
    assert [r["id"] for r in listed["runs"]] == [started_ids(second)[1], started_ids(first)[1]]
    assert listed["hasMore"] is False


@pytest.mark.parametrize("cursor", ["?after=abc", "?after=-1", "?after=1.5"])
def test_bad_cursor_is_a_400_before_streaming(client: httpx.Client, cursor: str):
    events = run_events(client, "POST", "/v1/threads/runs", json=start_body())
    thread_id, run_id = started_ids(events)
    response = client.get(f"/v1/threads/{thread_id}/runs/{run_id}{cursor}")
    assert response.status_code == 400
    assert response.headers["content-type"].startswith("application/problem+json")
    assert response.json()["code"] == "INVALID_CURSOR"
    header = client.get(f"/v1/threads/{thread_id}/runs/{run_id}",
                        headers={"last-event-id": "abc"})
    assert header.status_code == 400 and header.json()["code"] == "INVALID_CURSOR"


def test_unknown_run_is_404_for_read_status_and_cancel(client: httpx.Client):
    thread_id = new_thread(client)
    url = f"/v1/threads/{thread_id}/runs/run_does_not_exist"
    for response in (client.get(url), client.get(url, headers={"accept": "application/json"}),
                     client.delete(url)):
        assert response.status_code == 404
        assert response.json()["code"] == "RUN_NOT_FOUND"
    # A real run, but asked for under another thread, is unknown there too.
    events = run_events(client, "POST", "/v1/threads/runs", json=start_body())
    other = client.get(f"/v1/threads/{thread_id}/runs/{started_ids(events)[1]}")
    assert other.status_code == 404 and other.json()["code"] == "RUN_NOT_FOUND"


# -- cancel --------------------------------------------------------------------------------------


def test_delete_cancels_promptly_keeps_partial_text_and_frees_the_thread(
        client: httpx.Client, scripted_model: ScriptedModel, gateway: GatewayServer):
    scripted_model.enqueue(slow_turn(400, 0.05), [{"content": "Fresh answer."}])
    with open_stream(client, "POST", "/v1/threads/runs", json=start_body()) as (_, events):
        seen = read_until(events, lambda seen: texts(seen) >= 5)
        run = started_ids(seen)
        with httpx.Client(base_url=gateway.url, event_hooks=USER, timeout=30) as other:
            sent = time.monotonic()
            cancelled = other.delete(ids(run))
        rest = list(events)  # the subscriber's stream ends by itself

    assert cancelled.status_code == 200
    assert cancelled.json() == {"runId": run[1], "status": "cancelled"}
    closed = wait_for(lambda: disconnects_after(scripted_model, sent), 10,
                      what="the upstream stream to be closed")
    assert closed[0] - sent < 1.0, "the model's stream must be closed within a second"

    assert rest[-1].type == "RUN_ERROR"
    assert rest[-1].data["code"] == "CANCELLED"
    assert [e.type for e in rest].count("RUN_ERROR") == 1
    streamed = text_of(seen + rest)
    assert streamed and slow_text(400).startswith(streamed) and streamed != slow_text(400)

    thread_id, run_id = run
    thread = client.get(f"/v1/threads/{thread_id}").json()
    assert thread["runStatus"] == "idle"
    assert thread["lastRunCancelled"] is True
    assert thread["lastCompletedRunId"] == run_id
    assistant = client.get(f"/v1/threads/{thread_id}/messages").json()["messages"][-1]
    assert assistant["role"] == "assistant"
    assert assistant["isCancelled"] is True
    assert assistant["content"] == [{"type": "text", "text": streamed}]
    status = run_status(client, thread_id, run_id)
    assert status["status"] == "cancelled" and status["error"]["code"] == "CANCELLED"

    # The replay ends the same way, and the thread takes a new run.
    replay = resume(client, run)
    assert [(e.id, e.data) for e in replay] == [(e.id, e.data) for e in seen + rest]
    follow_up = run_events(client, "POST", f"/v1/threads/{thread_id}/runs",
                           json={"message": message("again"), "previousRunId": run_id})
    assert text_of(follow_up) == "Fresh answer."
    assert follow_up[-1].type == "RUN_FINISHED"


def test_cancel_is_idempotent_and_reports_how_the_run_ended(
        client: httpx.Client, scripted_model: ScriptedModel):
    finished = run_events(client, "POST", "/v1/threads/runs", json=start_body())
    run = started_ids(finished)
    for _ in range(2):
        response = client.delete(ids(run))
        assert response.status_code == 200
        assert response.json() == {"runId": run[1], "status": "completed"}
    assert client.get(f"/v1/threads/{run[0]}").json()["lastRunCancelled"] is False

    scripted_model.enqueue(slow_turn(400, 0.05))
    with open_stream(client, "POST", "/v1/threads/runs", json=start_body()) as (_, events):
        run = started_ids(read_until(events, lambda seen: texts(seen) >= 1))
        assert client.delete(ids(run)).json()["status"] == "cancelled"
    again = client.delete(ids(run))
    assert again.status_code == 200
    assert again.json() == {"runId": run[1], "status": "cancelled"}


# -- concurrency and idempotency -----------------------------------------------------------------


def test_second_run_on_a_busy_thread_is_refused_with_the_current_run(
        client: httpx.Client, scripted_model: ScriptedModel):
    thread_id = new_thread(client)
    scripted_model.enqueue(slow_turn(40, 0.05))
    with open_stream(client, "POST", f"/v1/threads/{thread_id}/runs",
                     json={"message": message("first")}) as (_, events):
        run = started_ids(read_until(events, lambda seen: texts(seen) >= 1))
        refused = client.post(f"/v1/threads/{thread_id}/runs", json={"message": message("2nd")})
        assert refused.status_code == 409
        assert refused.headers["content-type"].startswith("application/problem+json")
        assert refused.json()["code"] == "CONCURRENT_RUN"
        assert refused.json()["currentRunId"] == run[1]
        rest = list(events)
    assert rest[-1].type == "RUN_FINISHED"  # the refused request did not disturb the run
    assert len(client.get(f"/v1/threads/{thread_id}/runs").json()["runs"]) == 1


def test_racing_runs_on_one_thread_start_exactly_one(
        client: httpx.Client, scripted_model: ScriptedModel, gateway: GatewayServer):
    thread_id = new_thread(client)
    scripted_model.enqueue(slow_turn(20, 0.05))

    def attempt(_: int) -> int:
        with httpx.Client(base_url=gateway.url, event_hooks=USER, timeout=30) as http, http.stream(
                "POST", f"/v1/threads/{thread_id}/runs",
                json={"message": message("race")}) as response:
            response.read()
            return response.status_code

    with ThreadPoolExecutor(6) as pool:
        codes = sorted(pool.map(attempt, range(6)))
    assert codes == [200] + [409] * 5
    assert len(client.get(f"/v1/threads/{thread_id}/runs").json()["runs"]) == 1


def test_idempotency_key_attaches_a_retry_to_the_run_it_started(
        client: httpx.Client, scripted_model: ScriptedModel):
    thread_id = new_thread(client)
    key = {"idempotency-key": str(uuid.uuid4())}
    scripted_model.enqueue(slow_turn(30, 0.05))
    url = f"/v1/threads/{thread_id}/runs"
    with open_stream(client, "POST", url, json={"message": message("once")},
                     headers=key) as (_, events):
        first = read_until(events, lambda seen: texts(seen) >= 2)
    with open_stream(client, "POST", url, json={"message": message("once")},
                     headers=key) as (response, events):
        assert response.headers["idempotent-replayed"] == "true"
        retry = list(events)

    run = started_ids(first)
    assert started_ids(retry) == run
    assert response.headers["x-run-id"] == run[1]
    assert [(e.id, e.data) for e in retry[:len(first)]] == [(e.id, e.data) for e in first]
    assert text_of(retry) == slow_text(30)
    assert [r["id"] for r in client.get(url).json()["runs"]] == [run[1]]
    assert len(scripted_model.requests) == 1
    assert len(client.get(f"/v1/threads/{thread_id}/messages").json()["messages"]) == 2


def test_idempotency_key_on_a_new_thread_run_creates_one_thread(
        client: httpx.Client, scripted_model: ScriptedModel, gateway: GatewayServer):
    user = f"user-{uuid.uuid4()}"
    key = {"idempotency-key": str(uuid.uuid4())}
    body = {"message": message("once"), "thread": {"userKey": user}}
    scripted_model.enqueue(slow_turn(20, 0.05))

    def attempt(_: int) -> list:
        with httpx.Client(base_url=gateway.url, event_hooks=USER, timeout=30) as http:
            return run_events(http, "POST", "/v1/threads/runs", json=body, headers=key)

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(attempt, range(4)))
    runs = {started_ids(events) for events in results}
    assert len(runs) == 1
    assert all(text_of(events) == slow_text(20) for events in results)
    threads = client.get("/v1/threads", params={"userKey": user}).json()["threads"]
    assert [t["id"] for t in threads] == [next(iter(runs))[0]]
    assert len(scripted_model.requests) == 1

    # Long after the run ended, a retry still gets it (a full replay), not a new thread.
    late = run_events(client, "POST", "/v1/threads/runs", json=body, headers=key)
    assert started_ids(late) == next(iter(runs))
    assert len(client.get("/v1/threads", params={"userKey": user}).json()["threads"]) == 1


# -- disconnects and slow readers ----------------------------------------------------------------


def test_by_default_a_disconnected_run_keeps_going(
        client: httpx.Client, scripted_model: ScriptedModel):
    scripted_model.enqueue(slow_turn(30, 0.03))
    since = time.monotonic()
    with open_stream(client, "POST", "/v1/threads/runs", json=start_body()) as (_, events):
        run = started_ids(read_until(events, lambda seen: texts(seen) >= 2))
    wait_for_status(client, *run, "completed")
    assert disconnects_after(scripted_model, since) == []
    with open_stream(client, "GET", ids(run)) as (_, events):
        assert text_of(list(events)) == slow_text(30)


def test_on_disconnect_cancel_cancels_when_the_only_subscriber_leaves(
        client: httpx.Client, scripted_model: ScriptedModel):
    scripted_model.enqueue(slow_turn(400, 0.05))
    body = start_body(onDisconnect="cancel")
    since = time.monotonic()
    with open_stream(client, "POST", "/v1/threads/runs", json=body) as (_, events):
        run = started_ids(read_until(events, lambda seen: texts(seen) >= 2))
    status = wait_for_status(client, *run, "cancelled", "completed")
    assert status["status"] == "cancelled"
    wait_for(lambda: disconnects_after(scripted_model, since), 10, what="upstream closed")
    thread = client.get(f"/v1/threads/{run[0]}").json()
    assert thread["runStatus"] == "idle" and thread["lastRunCancelled"] is True
    replay = resume(client, run)
    assert replay[-1].type == "RUN_ERROR" and replay[-1].data["code"] == "CANCELLED"


def test_leaving_after_awaiting_input_never_cancels(
        client: httpx.Client, scripted_model: ScriptedModel):
    scripted_model.enqueue([{"tool_call": {"index": 0, "id": "call_x", "name": "lookup",
                                           "arguments": "{}"}}])
    tool = {"name": "lookup", "description": "Look something up",
            "inputSchema": {"type": "object", "properties": {}}}
    body = start_body(tools=[tool], onDisconnect="cancel")
    with open_stream(client, "POST", "/v1/threads/runs", json=body) as (_, events):
        seen = read_until(events, lambda s: s[-1].data.get("name") == "tambo.run.awaiting_input")
    run = started_ids(seen)
    time.sleep(0.5)  # give a wrongly armed cancel the chance to land
    assert run_status(client, *run)["status"] == "awaiting_input"
    thread = client.get(f"/v1/threads/{run[0]}").json()
    assert thread["lastRunCancelled"] is False
    assert thread["pendingToolCallIds"] == ["call_x"]


def test_a_stalled_reader_holds_back_neither_the_run_nor_other_readers(
        client: httpx.Client, scripted_model: ScriptedModel, gateway: GatewayServer):
    scripted_model.enqueue(slow_turn(1500, 0.0))
    thread_id = new_thread(client)
    with open_stream(client, "POST", f"/v1/threads/{thread_id}/runs",
                     json={"message": message("lots")}) as (_, events):
        run = started_ids(read_until(events, lambda seen: True))
        # A reader that sends its request and then never reads a byte.
        stalled = socket.create_connection(("127.0.0.1", gateway.port))
        stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stalled.sendall(f"GET {ids(run)} HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n"
                        "x-api-key: k\r\n\r\n".encode())
        try:
            rest = list(events)
            assert rest[-1].type == "RUN_FINISHED"
            assert text_of(rest) == slow_text(1500)
            assert run_status(client, *run)["status"] == "completed"
        finally:
            stalled.close()
    with open_stream(client, "GET", ids(run)) as (_, events):
        assert text_of(list(events)) == slow_text(1500)


def test_threads_of_a_cancelled_run_accept_a_run_at_once(
        client: httpx.Client, scripted_model: ScriptedModel):
    """Cancel, then immediately start again: the DELETE answers only once the thread is free."""
    thread_id = new_thread(client)
    scripted_model.enqueue(slow_turn(400, 0.05), [{"content": "ok"}])
    with open_stream(client, "POST", f"/v1/threads/{thread_id}/runs",
                     json={"message": message("long")}) as (_, events):
        run = started_ids(read_until(events, lambda seen: texts(seen) >= 1))
        assert client.delete(ids(run)).status_code == 200
    again = run_events(client, "POST", f"/v1/threads/{thread_id}/runs",
                       json={"message": message("next"), "previousRunId": run[1]})
    assert text_of(again) == "ok"


def test_an_idle_stream_carries_heartbeat_comments(
        client: httpx.Client, scripted_model: ScriptedModel):
    """While the model is silent, proxies still see bytes (the shared gateway pings every 2 s)."""
    scripted_model.enqueue({"steps": [{"delay": 4.5}, {"content": "late"}], "stream": True})
    with client.stream("POST", "/v1/threads/runs", json=start_body(),
                       headers={"accept": "text/event-stream"}) as response:
        lines = list(response.iter_lines())
    pings = [i for i, line in enumerate(lines) if line.startswith(":")]
    first_text = next(i for i, line in enumerate(lines) if "TEXT_MESSAGE_CONTENT" in line)
    assert pings and pings[0] < first_text
    assert '"type":"RUN_FINISHED"' in [line for line in lines if line.startswith("data:")][-1]
