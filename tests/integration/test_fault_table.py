"""The fault table of docs/scaling.md, as tests: two gateway processes on one PostgreSQL and one
Redis, runs streaming on one of them (the owner, with its own client) and followed from the
other (a follower), then Redis killed, PostgreSQL stopped, the owner SIGKILLed.

Each test checks the promises the table makes for its part, as a client sees them: every stream
ends with a terminal event, followers get exactly what owners get, a replay is what was seen
(same ids, same events), no answer is a 500, threads unlock, new runs work, and a cancel sent
to the other process arrives during a Redis outage. The processes are addressed directly (no
proxy): which one owns and which one follows is the point.

Only in the PostgreSQL + Redis configuration (`GATEWAY_TEST_BACKEND=postgres`); a lease of 8 s,
short enough that the crash is reaped in seconds, longer than the PostgreSQL outage with a
renewal's margin (a lease that runs out during the outage is the RUN_LOST case of the table,
which the crash test covers). Waits below are upper bounds, never assertions.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import scripted_env
from tests.support import engines
from tests.support.gateway_server import USER, GatewayServer
from tests.support.run_stream import (
    ids,
    message,
    open_stream,
    resume,
    slow_turn,
    started_ids,
    texts,
    wait_for,
    wait_for_status,
)
from tests.support.scripted_model import ScriptedModel
from tests.support.sse import SseEvent, run_events, text_of

pytestmark = pytest.mark.skipif(engines.backend() != "postgres",
                                reason="needs the PostgreSQL + Redis configuration")

BODY = {"message": message("go"), "thread": {"userKey": "u1"}}
LEASE = 8
POSTGRES_AWAY = 3.0  # seconds; under the lease less a renewal interval (a third of it)


@pytest.fixture(scope="module")
def pair(scripted_model: ScriptedModel, tmp_path_factory: pytest.TempPathFactory
         ) -> Iterator[tuple[GatewayServer, GatewayServer]]:
    workdir = tmp_path_factory.mktemp("fault-table")
    env = scripted_env(scripted_model, GATEWAY_LEASE_SECONDS=str(LEASE),
                       GATEWAY_DISCONNECT_GRACE_SECONDS="30")
    a, b = GatewayServer(workdir, env), GatewayServer(workdir, env)
    a.spawn()
    b.spawn()
    a.wait_ready(180)
    b.wait_ready(180)
    yield a, b
    a.stop()
    b.stop()


def http(server: GatewayServer) -> httpx.Client:
    return httpx.Client(base_url=server.url, event_hooks=USER, timeout=30,
                        headers={"x-api-key": "test-key"})


class Reader(threading.Thread):
    """A client reading one stream to its end (or until its connection breaks) beside the
    test: the owner's client, or a follower."""

    def __init__(self, server: GatewayServer, method: str, url: str, **request: Any) -> None:
        super().__init__(daemon=True)
        self.server, self.method, self.url, self.request = server, method, url, request
        self.events: list[SseEvent] = []
        self.broken: BaseException | None = None
        self.start()

    def run(self) -> None:
        try:
            with http(self.server) as client, open_stream(client, self.method, self.url,
                                                         **self.request) as (_, events):
                for event in events:
                    self.events.append(event)
        except (httpx.HTTPError, AssertionError) as error:  # its process died under it
            self.broken = error

    def until(self, count: int, what: str) -> None:
        wait_for(lambda: texts(list(self.events)) >= count, 30, what=what)

    def result(self) -> list[SseEvent]:
        self.join(60)
        assert not self.is_alive(), f"{self.url}: the stream never ended"
        return self.events


def owned_and_followed(owner: GatewayServer, follower: GatewayServer
                       ) -> tuple[tuple[str, str], Reader, Reader]:
    """A run started on `owner` by its client, and followed from its start on `follower`."""
    started = Reader(owner, "POST", "/v1/threads/runs", json=BODY)
    wait_for(lambda: started.events[:1], 30, what="the run to start")
    run = started_ids(started.events)
    return run, started, Reader(follower, "GET", ids(run), headers={"last-event-id": "0"})


def as_sent(events: list[SseEvent]) -> list[tuple[int | None, Any]]:
    return [(e.id, e.data) for e in events]


def assert_ends_once(events: list[SseEvent], *codes: str) -> None:
    """The stream ends with one terminal event: RUN_FINISHED, or one retryable RUN_ERROR."""
    errors = [e for e in events if e.type == "RUN_ERROR"]
    assert events and events[-1].type in ("RUN_FINISHED", "RUN_ERROR"), events[-1:]
    if events[-1].type == "RUN_ERROR":
        assert errors == [events[-1]] and errors[0].data["code"] in codes, errors
    else:
        assert not errors


def assert_never_500(server: GatewayServer, thread_id: str) -> None:
    """Reads on `server` while a part is away: answered, with a 503 at worst, never a 500."""
    with http(server) as client:
        for url in (f"/v1/threads/{thread_id}", f"/v1/threads/{thread_id}/messages", "/ready"):
            status = client.get(url, timeout=10).status_code
            assert status < 500 or status == 503, (url, status)


def test_owner_sigkilled_its_followers_see_only_what_replays(
        pair: tuple[GatewayServer, GatewayServer], scripted_model: ScriptedModel):
    """The owner dies mid-run while a follower on the other process reads the run's live tail
    (ahead of the log, which is written in batches). What the follower was shown is in the
    stored log with the same ids, the loss comes after it, and a resume after any id it got
    returns that loss at once."""
    a, b = pair
    scripted_model.enqueue(slow_turn(400, 0.05), [{"content": "A new run."}])
    run, owner, follower = owned_and_followed(a, b)
    follower.until(12, "the follower to read a dozen tokens")
    a.kill()
    try:
        followed = follower.result()
        owned = owner.result()
        with http(b) as on_b:
            assert_ends_once(followed, "RUN_LOST")
            assert wait_for_status(on_b, *run, "failed")["error"]["code"] == "RUN_LOST"
            replay = resume(on_b, run)
            # The follower's stream is the stored log, id for id, ending with the loss.
            assert as_sent(followed) == as_sent(replay)
            assert [e.id for e in replay] == sorted({e.id for e in replay})
            # The owner's own client saw nothing the log names otherwise, and the loss comes
            # after everything it saw.
            stored = dict(as_sent(replay))
            assert all(stored.get(e.id, e.data) == e.data for e in owned)
            assert owned[-1].id < replay[-1].id
            for seen in (followed[-2], owned[-1]):  # resumed after the last id each was shown
                assert [(e.type, e.data["code"]) for e in resume(on_b, run, seen.id)] == [
                    ("RUN_ERROR", "RUN_LOST")]
            # The thread keeps everything the follower was shown, and is free again.
            wait_for(lambda: on_b.get(f"/v1/threads/{run[0]}").json()["runStatus"] == "idle",
                     2 * LEASE, what="the thread to unlock")
            kept = on_b.get(f"/v1/threads/{run[0]}/messages").json()["messages"][-1]
            assert kept["content"] == [{"type": "text", "text": text_of(followed)}]
            assert kept["metadata"]["runFailed"]["code"] == "RUN_LOST"
            after = run_events(on_b, "POST", f"/v1/threads/{run[0]}/runs",
                               params={"userKey": "u1"},
                               json={"message": message("again"), "previousRunId": run[1]})
            assert text_of(after) == "A new run." and after[-1].type == "RUN_FINISHED"
    finally:
        a.start()


def test_redis_killed_mid_run(pair: tuple[GatewayServer, GatewayServer],
                              scripted_model: ScriptedModel):
    """Redis dies for 3 s under live runs: every stream finishes, the follower on the other
    process gets exactly the owner's events, replays match, a cancel sent to the other process
    meanwhile stops its run, `/ready` says Redis is out (and since when), and new runs work."""
    assert engines.ENGINES is not None
    a, b = pair
    scripted_model.enqueue(slow_turn(100, 0.05), slow_turn(400, 0.05),
                           [{"content": "After Redis."}])
    run, owner, follower = owned_and_followed(a, b)
    doomed, doomed_owner, _ = owned_and_followed(a, b)
    follower.until(5, "the follower to read five tokens")
    doomed_owner.until(3, "the second run to stream")
    engines.ENGINES.redis.stop()
    away = time.monotonic()
    try:
        with http(b) as on_b:
            ready = on_b.get("/ready")
            assert ready.status_code == 503 and ready.json()["code"] == "REDIS_UNAVAILABLE"
            assert ready.json()["unavailable"]["redis"]["since"] <= time.time() * 1000
            cancelled = on_b.delete(ids(doomed))
            assert cancelled.status_code == 200, cancelled.text
            assert cancelled.json() == {"runId": doomed[1], "status": "cancelled"}
        assert_never_500(b, run[0])
        time.sleep(max(0.0, 3 - (time.monotonic() - away)))
    finally:
        engines.ENGINES.redis.start()
    assert_ends_once(doomed_owner.result(), "CANCELLED")
    assert doomed_owner.events[-1].data["code"] == "CANCELLED"
    owned, followed = owner.result(), follower.result()
    assert owned[-1].type == "RUN_FINISHED" and as_sent(followed) == as_sent(owned)
    with http(a) as on_a, http(b) as on_b:
        for client in (on_a, on_b):
            assert as_sent(resume(client, run)) == as_sent(owned)
        for server in pair:
            wait_for(lambda url=server.url: httpx.get(f"{url}/ready").status_code == 200, 20,
                     what=f"{server.url}/ready to recover")
        fresh = run_events(on_b, "POST", "/v1/threads/runs", json=BODY)
        assert text_of(fresh) == "After Redis." and fresh[-1].type == "RUN_FINISHED"
    # The outage is in each process's log once, with when it began and when it ended, however
    # many requests and runs met it.
    for server in pair:
        said = server.log_path.read_text()
        assert said.count("redis unreachable since") == 1, server.log()
        assert said.count("redis reachable again") == 1, server.log()


def test_postgres_stopped_mid_run(pair: tuple[GatewayServer, GatewayServer],
                                  scripted_model: ScriptedModel):
    """PostgreSQL stops for 3 s under a live run: answers meanwhile are 503, never 500; the
    owner's and the follower's streams end with RUN_FINISHED or one retryable error and are the
    same; what they saw is what replays; the thread unlocks and runs again."""
    assert engines.ENGINES is not None
    a, b = pair
    scripted_model.enqueue(slow_turn(120, 0.05), [{"content": "After PostgreSQL."}])
    run, owner, follower = owned_and_followed(a, b)
    follower.until(5, "the follower to read five tokens")
    engines.ENGINES.postgres.pause()
    away = time.monotonic()
    try:
        for server in pair:
            for _ in range(5):
                assert_never_500(server, run[0])
            with http(server) as client:  # a start is refused at once, with the part it needs
                refused = client.post("/v1/threads/runs", json=BODY, timeout=10)
                assert refused.status_code == 503, refused.text
                assert refused.json()["code"] == "DATABASE_UNAVAILABLE"
        with http(b) as on_b:
            ready = on_b.get("/ready")
            assert ready.status_code == 503 and ready.json()["code"] == "DATABASE_UNAVAILABLE"
            assert ready.json()["unavailable"]["database"]["since"] <= time.time() * 1000
        time.sleep(max(0.0, POSTGRES_AWAY - (time.monotonic() - away)))
    finally:
        engines.ENGINES.postgres.resume()
    owned, followed = owner.result(), follower.result()
    for events in (owned, followed):
        assert_ends_once(events, "RUN_LOST", "DATABASE_UNAVAILABLE")
        assert events[-1].type == "RUN_FINISHED" or events[-1].data["isRetryable"] is True
    assert as_sent(followed) == as_sent(owned)
    with http(a) as on_a, http(b) as on_b:
        wait_for(lambda: on_b.get(f"/v1/threads/{run[0]}").json()["runStatus"] == "idle",
                 2 * LEASE, what="the thread to unlock")
        for client in (on_a, on_b):
            replay = resume(client, run)
            assert as_sent(replay[:len(owned) - 1]) == as_sent(owned[:-1])
            assert replay[-1].type == owned[-1].type
        follow_up = run_events(on_a, "POST", f"/v1/threads/{run[0]}/runs",
                               params={"userKey": "u1"},
                               json={"message": message("next"), "previousRunId": run[1]})
        assert text_of(follow_up) == "After PostgreSQL." and follow_up[-1].type == "RUN_FINISHED"
    # Said in the log when it began, not once per request (a pooled connection that died with
    # the restart may say it again once, when it is first used after).
    for server in pair:
        said = server.log_path.read_text()
        assert 1 <= said.count("database unreachable since") <= 2, server.log()
