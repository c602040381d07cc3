"""Timbal views over loopback: a raw WebSocket client and the NDJSON views of the same runs.

A WebSocket needs a port: these tests use the gateway process (`gateway` and `client` below
override the in-process ones of tests/integration/conftest.py).

The run log is the whole transcript (the user's input is a set frame too), the WebSocket
delivers exactly the log, and a client that comes back with `sync since` gets the completed
messages it missed.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from tests.support.gateway_server import GatewayServer
from tests.support.run_stream import message, wait_for_status
from tests.support.scripted_model import ScriptedModel
from tests.support.sse import run_events

WEATHER = {"name": "get_weather", "description": "The weather in a city",
           "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}}}


@pytest.fixture
def gateway(gateway_process: GatewayServer) -> GatewayServer:
    return gateway_process


@pytest.fixture
def client(process_client: httpx.Client) -> httpx.Client:
    return process_client


def socket(gateway: GatewayServer, thread_id: str) -> ClientConnection:
    url = gateway.url.replace("http://", "ws://") + f"/v1/timbal/threads/{thread_id}/stream"
    return connect(url, additional_headers={"x-api-key": "test-key"}, open_timeout=10)


def receive(ws: ClientConnection, until: Any) -> list[dict[str, Any]]:
    frames: list[dict[str, Any]] = []
    while True:
        frames.append(json.loads(ws.recv(timeout=30)))
        if until(frames[-1]):
            return frames


def ndjson(client: httpx.Client, path: str) -> list[dict[str, Any]]:
    response = client.get(path)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/x-ndjson")
    return [json.loads(line) for line in response.text.splitlines()]


def sets(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [f for f in frames if "i" in f and isinstance(f.get("v"), dict)]


def test_socket_delivers_the_log_and_sync_gives_what_was_missed(
        client: httpx.Client, gateway: GatewayServer, scripted_model: ScriptedModel):
    thread_id = client.post("/v1/threads", json={}).json()["id"]
    scripted_model.enqueue(
        [{"reasoning": "Easy."}, {"content": "Hello "}, {"content": "there."}],
        [{"reasoning": "Need the weather."}, {"content": "Checking"}, {"delay": 1.0},
         {"content": " now."},
         {"tool_call": {"index": 0, "id": "call_w", "name": "get_weather",
                        "arguments": '{"city": "Oslo"}'}}])

    with socket(gateway, thread_id) as ws:
        run_events(client, "POST", f"/v1/threads/{thread_id}/runs",
                   json={"message": message("hello")})
        first = receive(ws, lambda f: f.get("c") == "run.finished")
    run1 = first[0]["runId"]
    assert first[0] == {"c": "run.started", "threadId": thread_id, "runId": run1}
    assert first[1]["v"] == {"type": "user", "content": "hello",
                             "blocks": [{"type": "text", "text": "hello"}]}
    assert first == ndjson(client, f"/v1/timbal/threads/{thread_id}/runs/{run1}")

    with socket(gateway, thread_id) as ws:
        with client.stream("POST", f"/v1/threads/{thread_id}/runs", json={
                "message": message("weather?"), "previousRunId": run1, "tools": [WEATHER]},
                headers={"accept": "text/event-stream", "x-api-key": "test-key"}):
            before = receive(ws, lambda f: f.get("v", {}).get("type") == "thinking")
    run2 = before[0]["runId"]
    since = before[-1]["t"]
    wait_for_status(client, thread_id, run2, "awaiting_input")

    log2 = ndjson(client, f"/v1/timbal/threads/{thread_id}/runs/{run2}")
    assert log2[:len(before)] == before
    all_sets = sets(ndjson(client, f"/v1/timbal/threads/{thread_id}/runs/{run1}")) + sets(log2)
    missed = [f for f in sets(log2) if f not in before]
    assert [f["v"]["type"] for f in missed] == ["agent", "tool_call"]

    with socket(gateway, thread_id) as ws:
        ws.send(json.dumps({"c": "sync", "since": since}))
        answer = receive(ws, lambda f: f.get("c") == "synced")
    assert answer[:-1] == [f for f in all_sets if f["t"] >= since]
    assert answer[-1] == {"c": "synced", "count": len(answer) - 1, "since": since}
    assert all(f in answer for f in missed)

    history = ndjson(client, f"/v1/timbal/threads/{thread_id}")
    assert history == all_sets
    assert ndjson(client, f"/v1/timbal/threads/{thread_id}?since={since}") == answer[:-1]


def test_socket_control_frames_and_errors(client: httpx.Client, gateway: GatewayServer):
    thread_id = client.post("/v1/threads", json={}).json()["id"]
    with socket(gateway, thread_id) as ws:
        ws.send(json.dumps({"c": "sync", "since": "yesterday"}))
        (error,) = receive(ws, lambda f: True)
        assert error["c"] == "error" and error["code"] == "invalid_request"
        ws.send(json.dumps({"c": "unsub"}))
        assert json.loads(ws.recv(timeout=10))["code"] == "invalid_request"
        ws.send(json.dumps({"c": "some.extension"}))  # unknown controls are ignored
        ws.send(json.dumps({"request": "sync"}))  # the legacy form
        assert json.loads(ws.recv(timeout=10)) == {"c": "synced", "count": 0}
        ws.send("not json")
        try:
            ws.recv(timeout=10)
            raise AssertionError("the socket should have closed")
        except ConnectionClosed as closed:
            assert closed.rcvd is not None and closed.rcvd.code == 1003

    with socket(gateway, thread_id) as ws:
        client.delete(f"/v1/threads/{thread_id}")
        try:
            ws.recv(timeout=10)
            raise AssertionError("the socket should have closed")
        except ConnectionClosed as closed:
            assert closed.rcvd is not None and closed.rcvd.code == 4009


def test_ndjson_refuses_a_bad_since(client: httpx.Client):
    thread_id = client.post("/v1/threads", json={}).json()["id"]
    response = client.get(f"/v1/timbal/threads/{thread_id}?since=soon")
    assert response.status_code == 400 and "since" in response.json()["errors"]
