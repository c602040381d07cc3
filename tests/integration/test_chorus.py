"""Chorus 0.1 (docs/chorus.md): a connection string made by the CLI, messages from a channel,
and the agent's output POSTed to a real callback receiver on loopback.

The app in the test process (two on PostgreSQL + Redis, requests alternating between them),
with API keys, allowed to call 127.0.0.1 only.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.dialects.chorus.routes_sweeper import sweep
from gateway.engine.tools.mcp import open_run_tools
from gateway.engine.tools.mcp_pinned import Pin
from gateway.protocol.clock import new_id, now_ms
from gateway.store.tables import ChorusDeliveryRow
from tests.conftest import scripted_env
from tests.support import engines
from tests.support.gateway_server import GatewayServer, gateway_command
from tests.support.inprocess_app import (
    InProcess,
    InProcessCluster,
    InProcessGateway,
    processes,
    refusing_runs,
)
from tests.support.mcp_server import HttpMcpServer
from tests.support.receiver import PostReceiver
from tests.support.run_stream import wait_for
from tests.support.scripted_model import ScriptedModel


class Receiver(PostReceiver):
    """A callback endpoint on loopback: records each POSTed event; answers 503 to the first
    `fail_first` POSTs."""

    @property
    def url(self) -> str:
        return self.base + "/cb/tok_1"

    @property
    def posts(self) -> int:
        return len(self.received)

    @property
    def events(self) -> list[dict[str, Any]]:
        return [json.loads(post.body) for post in self.delivered()]

    def idle(self, count: int) -> list[dict[str, Any]]:
        """The events once `count` turns have ended."""
        wait_for(lambda: sum(e == {"type": "lifecycle", "status": "idle"}
                             for e in self.events) >= count, what=f"{count} idle events")
        return self.events


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver()
    yield found
    found.close()


@pytest.fixture(scope="module")
def chorus_gateway(scripted_model: ScriptedModel, tmp_path_factory: pytest.TempPathFactory
                   ) -> Iterator[InProcess]:
    workdir = tmp_path_factory.mktemp("chorus")
    # With API keys: a connection string needs none (its secret is the credential).
    env = scripted_env(scripted_model, GATEWAY_CHORUS_ALLOWED_HOSTS="127.0.0.1",
                       GATEWAY_API_KEYS="chorus-test-key")
    server = (InProcessCluster(workdir, env) if engines.ENGINES is not None
              else InProcessGateway(workdir, env)).start()
    yield server
    server.stop()


def cli(gateway: InProcess | GatewayServer, *args: str, command: str = "chorus") -> str:
    env = gateway.servers[0].env if isinstance(gateway, InProcessCluster) else gateway.env
    done = gateway_command([command, *args, "--database-url", env["GATEWAY_DATABASE_URL"]])
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def connect(gateway: InProcess | GatewayServer, *limits: str) -> tuple[str, str]:
    """(the connection's id, the path of its connection string)."""
    out = cli(gateway, "connect", "--agent", "default", "--url", "http://gateway.test", *limits)
    connection_id = out.split()[1]
    url = out.strip().splitlines()[-1]
    assert url.startswith("http://gateway.test/v1/chorus/chs_")
    return connection_id, url.removeprefix("http://gateway.test")


def delivery(receiver: Receiver, text: str, message_id: str, channel: str = "C1"
             ) -> dict[str, Any]:
    return {"channel": {"id": channel, "name": "ops", "service": "Slack",
                        "context": "The ops team's channel."},
            "message": {"id": message_id, "sender": "alice", "content": text},
            "callback": receiver.url}


def test_a_channel_talks_to_its_agent_through_the_callback(
        chorus_gateway: InProcess, scripted_model: ScriptedModel, receiver: Receiver):
    _, path = connect(chorus_gateway)
    scripted_model.enqueue([{"delay": 0.5}, {"content": "Hello "}, {"content": "alice."}],
                           [{"content": "You said hello."}])
    receiver.fail_first = 1  # the first POST is retried
    with chorus_gateway.client(timeout=30) as http:
        first = http.post(path, json=delivery(receiver, "hello", "m1"))
        # Arrives while the first runs: queued, then answered in order.
        second = http.post(path, json=delivery(receiver, "what did I say?", "m2"))
    assert first.status_code == 200 and second.status_code == 200, first.text + second.text
    assert first.json()["threadId"] == second.json()["threadId"]

    events = receiver.idle(2)
    processing, idle = {"type": "lifecycle", "status": "processing"}, {
        "type": "lifecycle", "status": "idle"}
    assert events == [processing, {"type": "message", "content": "Hello alice."}, idle,
                      processing, {"type": "message", "content": "You said hello."}, idle]
    assert receiver.posts == len(events) + 1

    # The second run saw the first exchange, and the channel and sender as context.
    messages = scripted_model.requests[-1]["messages"]
    said = json.dumps(messages)
    assert "Hello alice." in said and "hello" in said
    assert "The ops team's channel." in said and "alice" in said


def test_a_bad_or_revoked_secret_and_a_bad_body_are_refused(
        chorus_gateway: InProcess, receiver: Receiver):
    connection_id, path = connect(chorus_gateway)
    with chorus_gateway.client(timeout=30) as http:
        assert http.post("/v1/chorus/chs_made-up", json=delivery(
            receiver, "hi", "m1")).status_code == 404
        bad = http.post(path, json={"channel": {"id": "C1"}, "callback": receiver.url})
        assert bad.status_code == 400 and bad.json()["code"] == "VALIDATION_ERROR"
        huge = http.post(path, json=delivery(receiver, "x" * 200_001, "m2"))
        assert huge.status_code == 413 and huge.json()["code"] == "MESSAGE_TOO_LARGE"
        cli(chorus_gateway, "revoke", connection_id)
        revoked = http.post(path, json=delivery(receiver, "hi", "m1"))
    assert revoked.status_code == 404
    assert revoked.json()["code"] == "CHORUS_CONNECTION_NOT_FOUND"
    assert receiver.posts == 0


def test_a_callback_outside_the_allow_list_is_never_called(
        chorus_gateway: InProcess, receiver: Receiver, scripted_model: ScriptedModel):
    _, path = connect(chorus_gateway)
    # `localhost` is the receiver, but only 127.0.0.1 is listed: the name is not.
    elsewhere = receiver.url.replace("127.0.0.1", "localhost")
    with chorus_gateway.client(timeout=30) as http:
        refused = http.post(path, json={**delivery(receiver, "hi", "m1"),
                                        "callback": elsewhere})
        mcp = http.post(path, json={**delivery(receiver, "hi", "m1"), "mcp": [
            {"name": "meta", "url": "http://169.254.169.254/latest"}]})
    assert refused.status_code == 400 and refused.json()["code"] == "CHORUS_URL_NOT_ALLOWED"
    assert mcp.status_code == 400 and "mcp.meta" in mcp.json()["errors"]
    assert receiver.posts == 0 and scripted_model.requests == []


def test_the_messages_mcp_server_gives_its_run_tools(
        chorus_gateway: InProcess, scripted_model: ScriptedModel, receiver: Receiver):
    """The message's `mcp` server (with its headers) adds `<name>__<tool>` tools to that run:
    the model calls them, and the callback gets each call, the progress the server reports
    while it runs (`notifications/progress`, as `status` events) and its result."""
    server = HttpMcpServer("--token", "mcp-secret").start()
    try:
        _, path = connect(chorus_gateway)
        scripted_model.enqueue(
            [{"tool_call": {"index": 0, "id": "call_0", "name": "calc__count",
                            "arguments": '{"steps": 2}'}},
             {"tool_call": {"index": 1, "id": "call_1", "name": "calc__add",
                            "arguments": '{"a": 2, "b": 3}'}}],
            [{"content": "It is 5."}])
        body = {**delivery(receiver, "2 + 3?", "m1", channel="C-mcp"), "mcp": [
            {"name": "calc", "url": server.url,
             "headers": {"Authorization": "Bearer mcp-secret"}}]}
        with chorus_gateway.client(timeout=30) as http:
            assert http.post(path, json=body).status_code == 200
        events = receiver.idle(1)
    finally:
        server.stop()
    assert events[1:-1] == [
        {"type": "tool_call", "name": "calc__count", "args": {"steps": 2}, "id": "call_0"},
        {"type": "tool_call", "name": "calc__add", "args": {"a": 2, "b": 3}, "id": "call_1"},
        {"type": "status", "status": "counted 1"},
        {"type": "status", "status": "2 of 2"},  # a progress without a message: its numbers
        {"type": "tool_result", "id": "call_0", "content": "counted to 2"},
        {"type": "tool_result", "id": "call_1", "content": "5"},
        {"type": "message", "content": "It is 5."}]
    offered = {t["function"]["name"] for t in scripted_model.requests[0].get("tools", [])}
    assert "calc__add" in offered


def test_a_connection_strings_limits_refuse_what_is_over_them(
        chorus_gateway: InProcess, scripted_model: ScriptedModel, receiver: Receiver):
    """A connection string is a credential: its own limits (one message in flight, a daily
    token budget) hold across channels and processes; a message over them is refused with 429
    and `Retry-After`, and is neither stored nor run. Its runs' usage is attributed to it."""
    connection_id, path = connect(chorus_gateway, "--max-concurrent-runs", "1",
                                  "--daily-tokens", "50")
    assert "concurrent=1,daily-tokens=50" in cli(chorus_gateway, "list")
    scripted_model.enqueue([{"delay": 3}, {"content": "Done."},
                            {"usage": {"prompt_tokens": 100, "completion_tokens": 1}}])
    with chorus_gateway.client(timeout=30) as http:
        first = http.post(path, json=delivery(receiver, "slow one", "m1", channel="C-q1"))
        busy = http.post(path, json=delivery(receiver, "another", "m2", channel="C-q2"))
        assert first.status_code == 200, first.text
        assert busy.status_code == 429, busy.text
        assert busy.json()["code"] == "TOO_MANY_CONCURRENT_RUNS"
        assert busy.json()["limitScope"] == "chorus" and busy.headers["retry-after"] == "1"
        receiver.idle(1)
        spent = http.post(path, json=delivery(receiver, "and another", "m3", channel="C-q2"))
    assert spent.status_code == 429 and spent.json()["code"] == "TOKEN_BUDGET_EXCEEDED"
    assert int(spent.headers["retry-after"]) >= 1
    assert len(scripted_model.requests) == 1  # neither refused message ran
    assert [e["type"] for e in receiver.events] == ["lifecycle", "message", "lifecycle"]
    usage = cli(chorus_gateway, "--by", "key", command="usage")
    assert connection_id in usage


def test_a_message_queued_by_a_process_that_died_is_run_by_another(
        scripted_model: ScriptedModel, receiver: Receiver, tmp_path: Path):
    """Process A takes two messages of a channel: the first runs, the second waits for the
    thread. A is killed. Process B fails A's lost run (its lease ran out); its sweeper POSTs
    the lost run's end to the first message's callback (`error` RUN_LOST, `lifecycle idle`),
    then runs the waiting message, once, and POSTs its answer to that message's callback."""
    env = scripted_env(scripted_model, GATEWAY_CHORUS_ALLOWED_HOSTS="127.0.0.1",
                       GATEWAY_API_KEYS="chorus-test-key", GATEWAY_LEASE_SECONDS="2")
    a, b = GatewayServer(tmp_path, env), GatewayServer(tmp_path, env)
    processing = {"type": "lifecycle", "status": "processing"}
    try:
        a.start(timeout=300)  # one after the other: the first migrates the database
        b.start(timeout=300)
        _, path = connect(a)
        scripted_model.enqueue([{"delay": 30}, {"content": "Never said."}],
                               [{"content": "The second, answered by B."}])
        with a.client(timeout=30) as on_a:
            assert on_a.post(path, json=delivery(receiver, "first", "m1")).status_code == 200
            wait_for(lambda: receiver.events, what="the first run to start")
            assert on_a.post(path, json=delivery(receiver, "second", "m2")).status_code == 200
        # A has taken the first (slow) answer before it dies: on a loaded machine its model call
        # can come after its `processing` event, and B's run would then take that answer.
        wait_for(lambda: scripted_model.requests, what="A's model call")
        a.kill()
        events = receiver.idle(2)
    finally:
        a.kill()
        b.stop()
    idle = {"type": "lifecycle", "status": "idle"}
    assert events == [processing,
                      {"type": "error", "code": "RUN_LOST", "message": "The gateway process "
                       "running this run stopped before it finished"}, idle,
                      processing,
                      {"type": "message", "content": "The second, answered by B."}, idle]
    assert len(scripted_model.requests) == 2
    assert "second" in json.dumps(scripted_model.requests[1]["messages"])


def test_a_started_message_whose_run_is_gone_does_not_hold_its_channel_back(
        chorus_gateway: InProcess, receiver: Receiver, scripted_model: ScriptedModel):
    """A started message's row waits for its run's end to be reported; when the process
    relaying the run died and the thread was then deleted (by hand or by retention), the row
    names a run that no longer exists. The sweeper reports it (`lifecycle idle`: how it ended
    is not known) and drops it, then starts the channel's next message, which waited for the
    sweeper (the process that took it died before starting it). Those two rows are written as
    the dead processes left them; the sweep is the app's own."""
    app = chorus_gateway.servers[0] if isinstance(chorus_gateway, InProcessCluster) \
        else chorus_gateway
    store = app.app.state.services.store
    connection_id, path = connect(chorus_gateway)
    scripted_model.enqueue([{"content": "First."}], [{"content": "Second, after the sweep."}])
    with chorus_gateway.client(timeout=30) as http:
        accepted = http.post(path, json=delivery(receiver, "first", "m1", channel="C-gone"))
    thread_id = accepted.json()["threadId"]
    receiver.idle(1)
    gone = ChorusDeliveryRow(id=new_id("chd_"), thread_id=thread_id, connection_id=connection_id,
                             payload={"callback": receiver.url}, created_ms=now_ms(),
                             run_id="run_chd_gone")
    waiting = ChorusDeliveryRow(id=new_id("chd_"), thread_id=thread_id,
                                connection_id=connection_id, created_ms=now_ms() + 1,
                                payload=delivery(receiver, "second", "m2", channel="C-gone"))
    app.call(store.add(gone, waiting))

    app.call(sweep(app.app.state.chorus))

    idle, processing = {"type": "lifecycle", "status": "idle"}, {"type": "lifecycle",
                                                                 "status": "processing"}
    assert receiver.idle(3)[3:] == [idle, processing, {
        "type": "message", "content": "Second, after the sweep."}, idle]
    assert app.call(store.next_chorus_delivery(thread_id)) is None
    assert app.call(store.ended_chorus_deliveries(now_ms(), 10)) == []


def test_a_message_refused_for_a_moment_waits_and_runs_later(
        chorus_gateway: InProcess, receiver: Receiver, scripted_model: ScriptedModel):
    """A message whose run cannot start for a moment (here every process drains for a
    shutdown: 503 `SHUTTING_DOWN`, as for a database or Redis away) is not dropped: no error
    reaches its callback, it waits in the database, and a sweep runs it once a process can."""
    apps = processes(chorus_gateway)
    store = apps[0].app.state.services.store
    _, path = connect(chorus_gateway)
    scripted_model.enqueue([{"content": "Run after the drain."}])
    with refusing_runs(chorus_gateway):
        with chorus_gateway.client(timeout=30) as http:
            accepted = http.post(path, json=delivery(receiver, "later", "m1", channel="C-drain"))
        assert accepted.status_code == 200
        thread_id = accepted.json()["threadId"]
        for app in apps:
            app.call(sweep(app.app.state.chorus))  # refused again: it still waits
        assert receiver.events == []
        assert apps[0].call(store.next_chorus_delivery(thread_id)) is not None
    apps[0].call(sweep(apps[0].app.state.chorus))
    assert receiver.idle(1) == [{"type": "lifecycle", "status": "processing"},
                                {"type": "message", "content": "Run after the drain."},
                                {"type": "lifecycle", "status": "idle"}]
    assert apps[0].call(store.next_chorus_delivery(thread_id)) is None


def test_a_messages_mcp_server_is_reached_at_the_checked_address_only():
    """A message's MCP server is connected at the address the allow-list checked, never by
    resolving its name again (here the name resolves nowhere: only the pin reaches the
    server), and an answer longer than the bound fails the connection (the server is left
    out, the run goes on without its tools)."""
    server = HttpMcpServer("--host-name", "mcp.chorus.invalid").start()
    try:
        port = httpx.URL(server.url).port
        assert port is not None
        url = server.url.replace("127.0.0.1", "mcp.chorus.invalid")

        async def offered(pin: Pin) -> list[str]:
            opened = await open_run_tools([("calc", url, {}, pin)], 30)
            try:
                return sorted(opened.tools)
            finally:
                await opened.close()

        pinned = asyncio.run(offered(Pin("mcp.chorus.invalid", port, "127.0.0.1")))
        bounded = asyncio.run(offered(Pin("mcp.chorus.invalid", port, "127.0.0.1",
                                          max_response_bytes=64)))
        elsewhere = asyncio.run(offered(Pin("other.chorus.invalid", port, "127.0.0.1")))
    finally:
        server.stop()
    assert "calc__add" in pinned
    assert bounded == [] and elsewhere == []


def test_a_channels_thread_is_closed_to_the_projects_client_key(
        chorus_gateway: InProcess, scripted_model: ScriptedModel, receiver: Receiver):
    """The channel's thread is in the connection's own scope and its id is keyed: with the
    project's client key, every client API answers 404 for it (read, rename, delete, run,
    fork, the Timbal views; AG-UI reads it as absent), whether or not a userKey is named; the id computed from
    the channel's public parts holds nothing; a client can neither name the scope nor create
    a thread under a `chorus_` id (nor any prefix the gateway mints) before the channel
    does."""
    import hashlib

    connection_id, path = connect(chorus_gateway)
    scripted_model.enqueue([{"content": "Hi."}])
    with chorus_gateway.client(timeout=30) as http:
        accepted = http.post(path, json=delivery(receiver, "hello", "m1", channel="C-closed"))
        assert accepted.status_code == 200, accepted.text
        thread_id = accepted.json()["threadId"]
        receiver.idle(1)
    digest = hashlib.sha256(b"default\0default\0C-closed").hexdigest()
    public_id = f"chorus_{digest[:40]}"
    assert thread_id != public_id
    key = {"x-api-key": "chorus-test-key"}
    run = {"message": {"role": "user", "content": [{"type": "text", "text": "leak"}]},
           "userKey": "u1"}
    with chorus_gateway.client(timeout=30, headers=key) as http:
        for params in ({}, {"userKey": "u1"}):
            for method, url, body in (
                    ("GET", f"/v1/threads/{thread_id}", None),
                    ("GET", f"/v1/threads/{thread_id}/messages", None),
                    ("PATCH", f"/v1/threads/{thread_id}", {"name": "mine"}),
                    ("POST", f"/v1/threads/{thread_id}/runs", run),
                    ("POST", f"/v1/threads/{thread_id}/fork", {"messageId": "x"}),
                    ("GET", f"/v1/timbal/threads/{thread_id}", None),
                    ("POST", f"/v1/timbal/threads/{thread_id}/messages",
                     {"content": "leak"}),
                    ("POST", f"/v1/timbal/threads/{thread_id}/cancel", None),
                    ("POST", "/v1/agui/agents/default/run", {
                        "threadId": thread_id, "runId": "r-1", "protocolVersion": "1.0",
                        "messages": [{"id": "m-1", "role": "user", "content": "leak"}],
                        "tools": [], "context": [], "state": {}, "forwardedProps": {}}),
                    ("DELETE", f"/v1/threads/{thread_id}", None)):
                answer = http.request(method, url, params=params, json=body)
                assert answer.status_code == 404, (method, url, answer.text)
        # AG-UI reads a thread it may not see as it reads one that does not exist.
        assert http.get(f"/v1/agui/threads/{thread_id}").json() == {
            "threadId": thread_id, "running": False, "runId": None}
        assert http.get("/v1/threads", params={"userKey": f"chorus:{connection_id}"}
                        ).json()["code"] == "VALIDATION_ERROR"
        for chosen in (public_id, "thr_01JTAKEN", "RUN_x"):
            squat = http.post(f"/v1/threads/{chosen}/runs", json={**run, "createThread": True})
            assert squat.status_code == 400, squat.text
            assert squat.json()["code"] == "RESERVED_THREAD_ID"
    # The channel still talks to its own thread, with its history.
    scripted_model.enqueue([{"content": "Again."}])
    with chorus_gateway.client(timeout=30) as http:
        again = http.post(path, json=delivery(receiver, "still there?", "m2", channel="C-closed"))
    assert again.json()["threadId"] == thread_id
    receiver.idle(2)
    assert "Hi." in json.dumps(scripted_model.requests[-1]["messages"])


def test_a_thread_under_the_channels_old_id_is_used_only_if_the_connections_own(
        chorus_gateway: InProcess, scripted_model: ScriptedModel, receiver: Receiver):
    """A channel thread from before ids were keyed (its id computed from the project, the agent
    and the channel) goes on serving its channel when it is the connection's own (migration
    0021 gives it its scope); one a client made under that id (no scope) is never used."""
    from gateway.dialects.chorus.input import legacy_thread_id
    from gateway.store.tables import ThreadRow

    app = chorus_gateway.servers[0] if isinstance(chorus_gateway, InProcessCluster) \
        else chorus_gateway
    store = app.app.state.services.store
    connection_id, path = connect(chorus_gateway)
    own, squatted = (legacy_thread_id("default", "default", c) for c in ("C-own", "C-squat"))
    app.call(store.add(
        ThreadRow(id=own, project_id="default", user_key=f"chorus:{connection_id}",
                  created_ms=now_ms(), updated_ms=now_ms(), agent="default"),
        ThreadRow(id=squatted, project_id="default", user_key=None, created_ms=now_ms(),
                  updated_ms=now_ms(), agent="default")))
    scripted_model.enqueue([{"content": "One."}], [{"content": "Two."}])
    with chorus_gateway.client(timeout=30) as http:
        first = http.post(path, json=delivery(receiver, "hi", "m1", channel="C-own"))
        second = http.post(path, json=delivery(receiver, "hi", "m2", channel="C-squat"))
    receiver.idle(2)
    assert first.json()["threadId"] == own
    assert second.json()["threadId"] not in (squatted, own)
