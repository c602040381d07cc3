"""Runs across gateway processes sharing one database: reconnect, cancel, and a process
stalling or dying mid-run. (The disconnect policy itself is proven in-process:
tests/inprocess/runs/test_disconnect.py.)

Dedicated gateways with short windows (`GATEWAY_DISCONNECT_GRACE_SECONDS=1`,
`GATEWAY_LEASE_SECONDS=2`), so these tests do not wait for the production defaults. Timings
below are upper bounds for polling, never assertions.
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import scripted_env
from tests.support.gateway_server import DEFAULT_USER, USER, GatewayServer, read_store
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

SHORT = {"GATEWAY_DISCONNECT_GRACE_SECONDS": "1", "GATEWAY_LEASE_SECONDS": "2"}
BODY = {"message": message("go"), "thread": {"userKey": DEFAULT_USER}}


def http(server: GatewayServer) -> httpx.Client:
    return httpx.Client(base_url=server.url, event_hooks=USER, timeout=30, headers={"x-api-key": "test-key"})


def idle_thread(client: httpx.Client, thread_id: str) -> dict | None:
    thread = client.get(f"/v1/threads/{thread_id}").json()
    return thread if thread["runStatus"] == "idle" else None


@pytest.fixture(scope="module")
def pair(scripted_model: ScriptedModel, tmp_path_factory: pytest.TempPathFactory
         ) -> Iterator[tuple[GatewayServer, GatewayServer]]:
    """Two gateway processes on one SQLite database, as behind a load balancer."""
    workdir = tmp_path_factory.mktemp("pair")
    env = scripted_env(scripted_model, **SHORT)
    a, b = GatewayServer(workdir, env), GatewayServer(workdir, env)
    a.start()
    b.start()
    yield a, b
    a.stop()
    b.stop()


def test_reconnect_through_another_process(pair, scripted_model: ScriptedModel):
    a, b = pair
    scripted_model.enqueue(slow_turn(50, 0.04))
    with http(a) as on_a, http(b) as on_b:
        first = read_and_leave(on_a, "/v1/threads/runs", BODY, 5)
        run = started_ids(first)
        # Through B, which reads the log from the database while A runs it; A's disconnect
        # grace (1 s) must not cancel a run B's reader is following.
        rest = resume(on_b, run, first[-1].id)
        both = first + rest
        assert [e.id for e in both] == list(range(1, len(both) + 1))
        assert text_of(both) == slow_text(50)
        assert rest[-1].type == "RUN_FINISHED"
        assert run_status(on_b, *run)["status"] == "completed"
        with open_stream(on_b, "GET", ids(run)) as (_, events):
            assert [(e.id, e.data) for e in events] == [(e.id, e.data) for e in both]


def test_cancel_through_another_process(pair, scripted_model: ScriptedModel):
    a, b = pair
    scripted_model.enqueue(slow_turn(400, 0.05), [{"content": "After."}])
    with http(a) as on_a, http(b) as on_b:
        with open_stream(on_a, "POST", "/v1/threads/runs", json=BODY) as (_, events):
            seen = read_until(events, lambda seen: texts(seen) >= 3)
            run = started_ids(seen)
            sent = time.monotonic()
            cancelled = on_b.delete(ids(run))
            rest = list(events)
        assert cancelled.status_code == 200
        assert cancelled.json() == {"runId": run[1], "status": "cancelled"}
        closed = wait_for(lambda: disconnects_after(scripted_model, sent), 10,
                          what="the upstream stream to be closed")
        assert closed[0] - sent < 1.0, "the model's stream must be closed within a second"
        assert rest[-1].type == "RUN_ERROR" and rest[-1].data["code"] == "CANCELLED"
        thread = on_b.get(f"/v1/threads/{run[0]}").json()
        assert thread["runStatus"] == "idle" and thread["lastRunCancelled"] is True
        follow_up = run_events(on_b, "POST", f"/v1/threads/{run[0]}/runs",
                               json={"message": message("next"), "previousRunId": run[1]})
        assert text_of(follow_up) == "After."


def test_a_stalled_owner_past_its_lease_writes_nothing_more(pair,
                                                            scripted_model: ScriptedModel):
    """A process frozen past its lease (SIGSTOP: a long GC pause, a stalled VM) is failed by
    the other one; once it wakes up, its lease token is stale and nothing it does reaches the
    database: no frame after the loss, no assistant message of that run."""
    a, b = pair
    scripted_model.enqueue(slow_turn(60, 0.03), [{"content": "Next."}])
    body = {**BODY, "onDisconnect": "continue"}
    with http(a) as on_a, http(b) as on_b:
        run = started_ids(read_and_leave(on_a, "/v1/threads/runs", body, 5))
        assert a.process is not None
        a.process.send_signal(signal.SIGSTOP)
        try:
            status = wait_for_status(on_b, *run, "failed", timeout=20)
        finally:
            a.process.send_signal(signal.SIGCONT)
        assert status["error"]["code"] == "RUN_LOST"
        time.sleep(3)  # A resumes: its model stream ends, it tries to save and to finish

        async def frames(store) -> list[dict]:
            return [row.frame for row in await store.read_frames(run[1])]

        saved = read_store(b, frames)
        assert [f.get("code") for f in saved if f.get("c") == "error"] == ["RUN_LOST"]
        assert saved[-1].get("code") == "RUN_LOST", "nothing was written after the loss"
        # The reaper may keep the part of the answer that was saved (marked failed); the stale
        # owner, which went on streaming to the end, must not have saved the whole answer.
        messages = on_b.get(f"/v1/threads/{run[0]}/messages").json()["messages"]
        assert not any(slow_text(60).strip() in json.dumps(m) for m in messages)
        follow_up = run_events(on_b, "POST", f"/v1/threads/{run[0]}/runs",
                               json={"message": message("next"), "previousRunId": run[1]})
        assert text_of(follow_up) == "Next."


def test_a_surviving_process_fails_the_run_of_a_dead_one(pair, scripted_model: ScriptedModel):
    """Last in this module: it kills process A."""
    a, b = pair
    scripted_model.enqueue(slow_turn(400, 0.05))
    with http(a) as on_a, http(b) as on_b:
        with open_stream(on_a, "POST", "/v1/threads/runs", json=BODY) as (_, events):
            seen = read_until(events, lambda seen: texts(seen) >= 10)
            run = started_ids(seen)
            a.kill()
        assert run_status(on_b, *run)["status"] == "running"
        status = wait_for_status(on_b, *run, "failed", timeout=20)
        assert status["error"]["code"] == "RUN_LOST" and status["error"]["isRetryable"] is True
        assert idle_thread(on_b, run[0])
        replay = resume(on_b, run)
        assert replay[-1].type == "RUN_ERROR" and replay[-1].data["code"] == "RUN_LOST"


def test_a_killed_process_restarted_recovers_its_run(
        scripted_model: ScriptedModel, tmp_path: Path):
    env = scripted_env(scripted_model, GATEWAY_LEASE_SECONDS="2")
    server = GatewayServer(tmp_path, env).start()
    scripted_model.enqueue(slow_turn(400, 0.05), [{"content": "Back again."}])
    try:
        with http(server) as client:
            with open_stream(client, "POST", "/v1/threads/runs", json=BODY) as (_, events):
                seen = read_until(events, lambda seen: texts(seen) >= 20)
                server.kill()  # what it showed last is not written yet (batches: 100 ms)
            run = started_ids(seen)
    finally:
        server.kill()

    restarted = GatewayServer(tmp_path, env).start()
    try:
        with http(restarted) as client:
            thread = wait_for(lambda: idle_thread(client, run[0]), 20,
                              what="the thread to unlock")
            assert "currentRunId" not in thread
            assert thread["lastCompletedRunId"] == run[1]
            status = run_status(client, *run)
            assert status["status"] == "failed"
            assert status["error"]["code"] == "RUN_LOST"

            # The replay is what was persisted, then the loss, never a silent end.
            replay = resume(client, run)
            assert replay[0].type == "RUN_STARTED"
            assert replay[-1].type == "RUN_ERROR"
            assert replay[-1].data["code"] == "RUN_LOST"
            assert replay[-1].data["isRetryable"] is True
            saved = text_of(replay)
            assert saved and slow_text(400).startswith(saved)
            # The partial answer stays in the thread's messages, marked as failed.
            partial = client.get(f"/v1/threads/{run[0]}/messages").json()["messages"][-1]
            started = next(e for e in replay if e.type == "TEXT_MESSAGE_START")
            assert partial["id"] == started.data["messageId"]
            assert partial["role"] == "assistant" and partial["isCancelled"] is True
            assert partial["metadata"]["runFailed"]["code"] == "RUN_LOST"
            assert partial["content"] == [{"type": "text", "text": saved}]
            # What was saved replays with its ids; the loss comes after every id the client
            # was shown, never on one of them (no id names two events).
            assert [e.id for e in replay[:-1]] == list(range(1, len(replay)))
            assert replay[-1].id > seen[-1].id
            # The events before the crash agree with the replay wherever both have them.
            common = min(len(seen), len(replay) - 1)
            assert [(e.id, e.data) for e in replay[:common]] == [
                (e.id, e.data) for e in seen[:common]]
            # Resumed after the last event it was shown: the loss, at once.
            assert [(e.type, e.data["code"]) for e in resume(client, run, seen[-1].id)] == [
                ("RUN_ERROR", "RUN_LOST")]

            # A reader that saw events the dead process never saved still learns the outcome.
            with open_stream(client, "GET", ids(run),
                             headers={"last-event-id": str(seen[-1].id + 1000)}) as (_, events):
                tail = list(events)
            assert [e.type for e in tail] == ["RUN_ERROR"]
            assert tail[0].data["code"] == "RUN_LOST"

            follow_up = run_events(client, "POST", f"/v1/threads/{run[0]}/runs",
                                   json={"message": message("again"), "previousRunId": run[1]})
            assert text_of(follow_up) == "Back again."
    finally:
        restarted.stop()
