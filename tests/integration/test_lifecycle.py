"""Runs outlive requests: reconnect with a cursor, replay, cancel, concurrency, idempotency.

Against the shared gateway app (in the test process; a stalled socket needs a process), over
raw HTTP; the upstream model is the scripted one, so
the text a reader must end up with is known exactly. One test per user-visible shape: the
logic behind them (racing starts and retries, cancel idempotency, the disconnect policies,
several subscribers) is proven in-process, in tests/inprocess/runs/.
"""

from __future__ import annotations

import socket
import time
import uuid
from datetime import datetime

import httpx
import pytest

from gateway.client import Client
from tests.support.gateway_server import DEFAULT_USER, USER, GatewayServer
from tests.support.inprocess_app import InProcess
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
)
from tests.support.scripted_model import ScriptedModel
from tests.support.sse import run_events, text_of


def new_thread(client: httpx.Client) -> str:
    response = client.post("/v1/threads", json={"userKey": DEFAULT_USER})
    assert response.status_code == 201, response.text
    return response.json()["id"]


def start_body(text: str = "go", **extra) -> dict:
    return {"message": message(text), "thread": {"userKey": DEFAULT_USER}, **extra}


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
        client: httpx.Client, python_client: Client, scripted_model: ScriptedModel):
    scripted_model.enqueue([
        {"content": "Checking."},
        {"tool_call": {"index": 0, "id": "call_w1", "name": "get_weather",
                       "arguments": '{"city": "Paris"}'}},
    ])
    tool = {"name": "get_weather", "description": "Weather for a city",
            "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}}}
    stream = python_client.run("go", tools=[tool])
    live = stream.collect()
    run = (stream.thread_id, stream.run_id)

    replay = python_client.join(*run)
    assert replay.collect() == live
    assert [p["toolCallId"] for p in replay.pending_tool_calls] == ["call_w1"]
    assert live[-1].type == "RUN_FINISHED"

    status = run_status(client, *run)
    assert status["status"] == "awaiting_input"
    assert status["pendingToolCalls"][0]["toolCallId"] == "call_w1"
    assert status["pendingToolCalls"][0]["toolName"] == "get_weather"


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


def test_the_run_list_shows_each_runs_timings_model_and_usage(
        gateway: InProcess, client: httpx.Client, scripted_model: ScriptedModel):
    """What the playground's run list shows: newest first, a page at a time, each run with its
    status, model, time to first token and usage, for the caller's threads only."""
    thread_id = new_thread(client)
    scripted_model.enqueue(
        [{"content": "one"}, {"usage": {"prompt_tokens": 12, "completion_tokens": 3}}],
        [{"delay": 0.3}, {"content": "two"},
         {"usage": {"prompt_tokens": 20, "completion_tokens": 5}}])
    first = started_ids(run_events(client, "POST", f"/v1/threads/{thread_id}/runs",
                                   json={"message": message("a")}))[1]
    second = started_ids(run_events(client, "POST", f"/v1/threads/{thread_id}/runs",
                                    json={"message": message("b"), "previousRunId": first}))[1]

    page = client.get(f"/v1/threads/{thread_id}/runs", params={"limit": 1}).json()
    [newest] = page["runs"]
    assert newest["id"] == second and page["hasMore"] is True
    assert newest["status"] == "completed" and newest["model"] == "openai/scripted"
    assert (newest["usage"]["inputTokens"], newest["usage"]["outputTokens"]) == (20, 5)
    started, first_token, finished = (datetime.fromisoformat(newest[k]) for k in
                                      ("startedAt", "firstTokenAt", "finishedAt"))
    assert started < first_token <= finished
    assert (first_token - started).total_seconds() >= 0.3  # the model's wait before "two"
    rest = client.get(f"/v1/threads/{thread_id}/runs",
                      params={"limit": 1, "cursor": page["nextCursor"]}).json()
    assert [r["id"] for r in rest["runs"]] == [first] and rest["hasMore"] is False
    assert rest["runs"][0]["usage"]["inputTokens"] == 12

    # Another user's thread does not exist for this caller; no user scope is refused.
    other = client.get(f"/v1/threads/{thread_id}/runs", params={"userKey": "someone-else"})
    assert other.status_code == 404 and other.json()["code"] == "THREAD_NOT_FOUND"
    with gateway.client(timeout=30, headers={"x-api-key": "test-key"}) as bare:
        unscoped = bare.get(f"/v1/threads/{thread_id}/runs")  # no default user added
    assert unscoped.json()["code"] == "USER_SCOPE_REQUIRED"
    too_many = client.get(f"/v1/threads/{thread_id}/runs", params={"limit": 101})
    assert too_many.status_code == 400 and too_many.json()["code"] == "VALIDATION_ERROR"


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
        client: httpx.Client, scripted_model: ScriptedModel, gateway: InProcess):
    scripted_model.enqueue(slow_turn(400, 0.05), [{"content": "Fresh answer."}])
    with open_stream(client, "POST", "/v1/threads/runs", json=start_body()) as (_, events):
        seen = read_until(events, lambda seen: texts(seen) >= 5)
        run = started_ids(seen)
        with gateway.client(event_hooks=USER, timeout=30) as other:
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


# -- disconnects and slow readers ----------------------------------------------------------------


def test_a_stalled_reader_holds_back_neither_the_run_nor_other_readers(
        process_client: httpx.Client, scripted_model: ScriptedModel,
        gateway_process: GatewayServer):
    client, gateway = process_client, gateway_process  # a stalled socket needs a real port
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
