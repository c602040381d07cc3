"""Timbal views over loopback: a raw WebSocket client and the NDJSON views of the same runs.

A WebSocket needs a port: these tests use the gateway process (`gateway` and `client` below
override the in-process ones of tests/integration/conftest.py).

The run log is the whole transcript (the user's input is a set frame too), the WebSocket
delivers exactly the log, and a client that comes back with `sync since` gets the completed
messages it missed.
"""

from __future__ import annotations

import json
import socket as socket_module
import time
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from tests.conftest import scripted_env
from tests.support.gateway_server import GatewayCluster, GatewayServer
from tests.support.run_stream import message, open_stream, read_until, slow_turn, wait_for_status
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


def socket(gateway: GatewayServer | GatewayCluster, thread_id: str,
           query: dict[str, str] | None = None) -> ClientConnection:
    url = gateway.url.replace("http://", "ws://") + f"/v1/timbal/threads/{thread_id}/stream"
    if query:
        url += "?" + urlencode(query)
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

    with socket(gateway, thread_id, {"userKey": "test-user"}) as ws:
        run_events(client, "POST", f"/v1/threads/{thread_id}/runs",
                   json={"message": message("hello")})
        first = receive(ws, lambda f: f.get("c") == "run.finished")
    run1 = first[0]["runId"]
    assert first[0] == {"c": "run.started", "threadId": thread_id, "runId": run1}
    # `sender`: the thread's user scope on the user's message (shown to its owner), the
    # agent's name on its own.
    assert first[1]["v"] == {"type": "user", "content": "hello", "sender": "test-user",
                             "blocks": [{"type": "text", "text": "hello"}]}
    assert {f["v"]["sender"] for f in sets(first)[1:]} == {"default"}
    assert first == ndjson(client, f"/v1/timbal/threads/{thread_id}/runs/{run1}"
                                   "?userKey=test-user")

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


def test_a_caller_holding_only_the_thread_id_is_not_shown_its_owner(
        client: httpx.Client, gateway: GatewayServer, scripted_model: ScriptedModel):
    """The user's messages carry the thread's user scope as `sender`: the Timbal views show it
    to a caller that names that scope, and leave it out for one that holds only the thread's
    id (the API key is public): the history, a run's log and the socket alike."""
    owner = "owner-7f3a"
    thread_id = client.post("/v1/threads", json={"userKey": owner}).json()["id"]
    scripted_model.enqueue([{"content": "Hi."}])
    events = run_events(client, "POST", f"/v1/threads/{thread_id}/runs",
                        json={"message": message("hello"), "userKey": owner})
    run_id = events[0].data["runId"]
    for path in (f"/v1/timbal/threads/{thread_id}",
                 f"/v1/timbal/threads/{thread_id}/runs/{run_id}"):
        anonymous = client.get(path)
        assert anonymous.status_code == 200 and "hello" in anonymous.text
        assert owner not in anonymous.text, path
        assert owner in client.get(path, params={"userKey": owner}).text
    with socket(gateway, thread_id) as ws:
        ws.send(json.dumps({"c": "sync"}))
        answer = receive(ws, lambda f: f.get("c") == "synced")
    assert any(f["v"].get("content") == "hello" for f in sets(answer))
    assert owner not in json.dumps(answer)


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
        deleted = client.delete(f"/v1/threads/{thread_id}")
        assert deleted.status_code == 204, deleted.text
        try:
            ws.recv(timeout=10)
            raise AssertionError("the socket should have closed")
        except ConnectionClosed as closed:
            assert closed.rcvd is not None and closed.rcvd.code == 4009


def processes(gateway: GatewayServer | GatewayCluster) -> tuple[GatewayServer, GatewayServer]:
    """Two processes of the gateway (on PostgreSQL + Redis), else the one twice."""
    if isinstance(gateway, GatewayCluster):
        return gateway.servers[0], gateway.servers[1]
    return gateway, gateway


def test_a_socket_opened_before_the_thread_gets_every_frame_of_its_runs(
        gateway: GatewayServer | GatewayCluster, scripted_model: ScriptedModel):
    """Timbal HTTP/1.0 (spec/http.md §5.3, scenario 1): connect, create, send. The thread is
    created and written through one process; sockets on it, opened on another before it
    existed and on the first after, each get the user's message and the agent's frames; a
    cancel shows on them as the run's end."""
    writer, reader = processes(gateway)
    thread_id = str(uuid.uuid4())
    user = {"userKey": "timbal-socket"}
    scripted_model.enqueue([{"content": "Hello "}, {"content": "there."}], slow_turn(400, 0.05))
    with writer.client(timeout=30, headers={"x-api-key": "test-key"}) as http, \
            socket(reader, thread_id, user) as early:
        assert http.post(f"/v1/timbal/threads/{thread_id}", json=user).status_code == 201
        with socket(writer, thread_id, user) as late:
            sent = http.post(f"/v1/timbal/threads/{thread_id}/messages", params=user,
                             json={"content": "hi"})
            assert sent.status_code == 202, sent.text
            frames = [receive(ws, lambda f: f.get("c") == "run.finished") for ws in (early, late)]
            assert frames[0] == frames[1]
            user_frame = frames[0][1]
            assert user_frame["i"] == sent.json()["messageId"]
            assert user_frame["v"]["type"] == "user" and user_frame["v"]["content"] == "hi"
            assert [f["v"]["content"] for f in sets(frames[0])[1:]] == ["Hello there."]

            assert http.post(f"/v1/timbal/threads/{thread_id}/messages", params=user,
                             json={"content": "count"}).status_code == 202
            receive(early, lambda f: f.get("a") == "t2 ")  # the slow run is streaming
            cancel = http.post(f"/v1/timbal/threads/{thread_id}/cancel", params=user)
            assert cancel.status_code == 200 and cancel.json()["status"] == "cancelling"
            for ws in (early, late):
                ended = receive(ws, lambda f: "c" in f and f["c"] != "run.started")
                assert ended[-1]["c"] == "run.cancelled", ended[-1]


def test_ndjson_refuses_a_bad_since(client: httpx.Client):
    thread_id = client.post("/v1/threads", json={}).json()["id"]
    response = client.get(f"/v1/timbal/threads/{thread_id}?since=soon")
    assert response.status_code == 400 and "since" in response.json()["errors"]


def test_socket_refuses_deep_frames_and_throttles_sync(client: httpx.Client,
                                                        gateway: GatewayServer):
    """A deeply nested frame closes the socket (1003) instead of failing in the JSON parser, and
    a sync (which reads the thread's history) is answered once per second at most."""
    thread_id = client.post("/v1/threads", json={}).json()["id"]
    with socket(gateway, thread_id) as ws:
        ws.send(json.dumps({"c": "sync"}))
        assert json.loads(ws.recv(timeout=10))["c"] == "synced"
        ws.send(json.dumps({"c": "sync"}))
        assert json.loads(ws.recv(timeout=10))["code"] == "rate_limited"
        ws.send("[" * 30_000 + "]" * 30_000)  # under the frame cap, but too deep
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=10)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1003
    assert "RecursionError" not in gateway.log()


@pytest.mark.parametrize("frame", ['{"c": "sync", "since": 1e400}', '{"c": "sync\\u0000"}'])
def test_socket_closes_on_a_frame_no_peer_can_carry(client: httpx.Client,
                                                    gateway: GatewayServer, frame: str):
    """A number beyond a double or a NUL character (which PostgreSQL cannot store) closes the
    socket with 1003, as the HTTP bodies are refused with 400."""
    thread_id = client.post("/v1/threads", json={}).json()["id"]
    with socket(gateway, thread_id) as ws:
        ws.send(frame)
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=10)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1003


def test_socket_refuses_a_frame_over_the_cap_unread(client: httpx.Client,
                                                     gateway: GatewayServer):
    """A multi-MiB frame closes the socket with 1009 (`GATEWAY_MAX_WEBSOCKET_FRAME_BYTES`,
    64 KiB) before it is read whole or parsed, and `/health` answers meanwhile; a frame under
    the cap, but large enough to be parsed off the loop, is answered as any other."""
    thread_id = client.post("/v1/threads", json={}).json()["id"]
    with socket(gateway, thread_id) as ws:
        ws.send(json.dumps({"c": "sync", "pad": "x" * 40_000}))
        assert json.loads(ws.recv(timeout=10))["c"] == "synced"
        ws.send('{"c": "sync", "pad": "' + "NaN " * (1024 * 1024) + '"}')
        assert client.get("/health").status_code == 200
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=10)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009
    assert client.get("/health").status_code == 200


# -- slow readers ---------------------------------------------------------------------------------

SLOW_READER_SECONDS = 1


@pytest.fixture(scope="module")
def impatient(scripted_model: ScriptedModel, tmp_path_factory: pytest.TempPathFactory
              ) -> Iterator[GatewayServer]:
    """One process: a proxy in front would buffer for the reader. Its tests are `sqlite_only`:
    a reader is cut off by this process's own sends, and the thread wait is a timer."""
    workdir = tmp_path_factory.mktemp("slow-readers")
    env = scripted_env(scripted_model, GATEWAY_SLOW_READER_SECONDS=str(SLOW_READER_SECONDS),
                       GATEWAY_TIMBAL_THREAD_WAIT_SECONDS="1")
    server = GatewayServer(workdir, env)
    server.start()
    yield server
    server.stop()


# More than the kernel's socket buffers on loopback take (several MB), so a reader that does
# not read makes the gateway's sends wait.
BIG_TURN = [{"content": "x" * 10_000}] * 800


def _long_run(http: httpx.Client, scripted_model: ScriptedModel) -> tuple[str, str]:
    scripted_model.enqueue(BIG_TURN)
    with open_stream(http, "POST", "/v1/threads/runs",
                     json={"message": message("lots"), "thread": {"userKey": "reader"}}
                     ) as (_, events):
        started = read_until(events, lambda seen: True)[0].data
    return started["threadId"], started["runId"]


def _stalled_socket(gateway: GatewayServer) -> socket_module.socket:
    stalled = socket_module.socket()
    stalled.setsockopt(socket_module.SOL_SOCKET, socket_module.SO_RCVBUF, 4096)
    host, port = gateway.url.removeprefix("http://").split(":")
    stalled.connect((host, int(port)))
    return stalled


def _stall() -> None:
    """Read nothing for longer than the bound. The reader's stream is stalled only while the
    test reads nothing; a warm gateway can finish a run before one send has waited the bound,
    and a reader that starts reading then gets everything (the bound was never reached)."""
    time.sleep(SLOW_READER_SECONDS * 3)


def _drain(stalled: socket_module.socket) -> bytes:
    """Everything the server sent, once it has closed (a `TimeoutError` if it never does)."""
    stalled.settimeout(15)
    received = b""
    while chunk := stalled.recv(65536):
        received += chunk
    return received


@pytest.mark.sqlite_only
def test_an_ndjson_reader_that_never_reads_is_disconnected(
        impatient: GatewayServer, scripted_model: ScriptedModel):
    with httpx.Client(base_url=impatient.url, timeout=30, headers={"x-api-key": "k"}) as http:
        thread_id, run_id = _long_run(http, scripted_model)
        path = f"/v1/timbal/threads/{thread_id}/runs/{run_id}"
        stalled = _stalled_socket(impatient)
        try:
            stalled.sendall(f"GET {path}?userKey=reader HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                            "x-api-key: k\r\n\r\n".encode())
            wait_for_status(http, thread_id, run_id, "completed", timeout=60)
            _stall()
            received = _drain(stalled)
        finally:
            stalled.close()
        whole = http.get(path, params={"userKey": "reader"}).text
    assert received.startswith(b"HTTP/1.1 200")
    # Cut off: the run's log went on (and is whole), the reader got only a part of it.
    assert json.loads(whole.splitlines()[-1])["c"] == "run.finished"
    assert b"run.finished" not in received and not received.endswith(b"0\r\n\r\n")


@pytest.mark.sqlite_only
def test_a_websocket_reader_that_never_reads_is_disconnected(
        impatient: GatewayServer, scripted_model: ScriptedModel):
    with httpx.Client(base_url=impatient.url, timeout=30, headers={"x-api-key": "k"}) as http:
        thread_id = http.post("/v1/threads", json={"userKey": "reader"}).json()["id"]
        url = impatient.url.replace("http://", "ws://") + f"/v1/timbal/threads/{thread_id}/stream"
        # No size limit: the client must not close the socket itself (on the completed
        # message's frame, several MB), only the gateway.
        with connect(url, sock=_stalled_socket(impatient), max_queue=1, compression=None,
                     max_size=None,
                     additional_headers={"x-api-key": "k"}, open_timeout=10) as ws:
            scripted_model.enqueue(BIG_TURN)
            with open_stream(http, "POST", f"/v1/threads/{thread_id}/runs",
                             json={"message": message("lots"), "userKey": "reader"}
                             ) as (_, events):
                assert list(events)[-1].type == "RUN_FINISHED"
            _stall()
            got = 0
            with pytest.raises(ConnectionClosed) as closed:
                while True:
                    ws.recv(timeout=15)
                    got += 1
    # Dropped by the gateway (the client sent no close), after a part of the run's frames.
    assert closed.value.sent is None, closed.value
    assert 0 < got < len(BIG_TURN)


@pytest.mark.sqlite_only
def test_a_socket_to_a_thread_never_created_closes_with_4004(impatient: GatewayServer):
    """After the wait for the thread (`GATEWAY_TIMBAL_THREAD_WAIT_SECONDS`, 1 s here; 30 s by
    default, as the spec asks)."""
    with socket(impatient, str(uuid.uuid4())) as ws:
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=30)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4004
