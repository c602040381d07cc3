"""Scaled out: three gateway processes on PostgreSQL + Redis behind HAProxy (round robin, no
stickiness). Every request lands on whichever process comes next, so a run is started, followed,
resumed and cancelled by different processes; then processes and engines fail under it.

Only in the PostgreSQL + Redis configuration (`GATEWAY_TEST_BACKEND=postgres`). A dedicated
cluster with a short lease (2 s), so crash recovery does not wait for the production default.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import scripted_env
from tests.support import engines
from tests.support.gateway_server import USER, GatewayCluster, read_store
from tests.support.node import have_node, run_scenario
from tests.support.run_stream import (
    disconnects_after,
    ids,
    message,
    open_stream,
    read_until,
    resume,
    slow_text,
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


@pytest.fixture(scope="module")
def cluster(scripted_model: ScriptedModel, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[GatewayCluster]:
    env = scripted_env(scripted_model, GATEWAY_LEASE_SECONDS="2",
                       GATEWAY_DISCONNECT_GRACE_SECONDS="30")
    cluster = GatewayCluster(tmp_path_factory.mktemp("scale-out"), env, size=3).start()
    yield cluster
    cluster.stop()


@pytest.fixture
def http(cluster: GatewayCluster) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=cluster.url, timeout=30, event_hooks=USER,
                      headers={"x-api-key": "test-key"}) as client:
        yield client


def owner_pid(cluster: GatewayCluster, run_id: str) -> int:
    """The process that runs the run: its lease owner is `host:pid:token`."""
    async def lease(store) -> str | None:
        row = await store.get_run(run_id)
        return row.lease_owner if row is not None else None

    owner = wait_for(lambda: read_store(cluster, lease), 10, what="the run's lease")
    return int(owner.split(":")[1])


def assert_whole(events: list[SseEvent]) -> None:
    """Event ids 1..n: no gap, no duplicate, whichever processes served the pieces."""
    assert [e.id for e in events] == list(range(1, len(events) + 1))


def test_the_tambo_client_runs_and_cancels_through_the_proxy(cluster: GatewayCluster,
                                                             scripted_model: ScriptedModel):
    if not have_node():
        pytest.skip("node/npm not installed")
    stream = {"stream": True}
    scripted_model.enqueue(
        {"steps": slow_turn(400, 0.05), **stream}, {"steps": [{"content": "After one."}], **stream},
        {"steps": slow_turn(400, 0.05), **stream}, {"steps": [{"content": "After two."}], **stream},
    )
    result = run_scenario("cancel", cluster.url,
                          MODEL_URL=scripted_model.base_url.removesuffix("/v1"))
    assert "crash" not in result, result
    for cancelled in (result["newThread"], result["existingThread"]):
        # The scenario waits 10 s for the model to see its stream closed, half the 20 s the
        # turn would stream: seen, it was cut by the cancel (how soon is bench/'s to measure).
        assert cancelled["upstreamClosedMs"] is not None, "the model's stream was never closed"
    assert result["newThread"]["eventTypes"][-1] == "RUN_ERROR"
    assert result["afterNewThread"]["eventTypes"][-1] == "RUN_FINISHED"
    assert result["afterExistingThread"]["eventTypes"][-1] == "RUN_FINISHED"


def test_reconnect_mid_run_on_other_processes(cluster: GatewayCluster, http: httpx.Client,
                                              scripted_model: ScriptedModel):
    scripted_model.enqueue(slow_turn(60, 0.03))
    with open_stream(http, "POST", "/v1/threads/runs", json=BODY) as (_, events):
        seen = read_until(events, lambda seen: texts(seen) >= 5)
    run = started_ids(seen)
    # Three more short visits, each from the cursor the last one reached: round robin sends
    # them to the other processes, which follow the run through its Redis stream.
    for _ in range(3):
        headers = {"last-event-id": str(seen[-1].id)}
        with open_stream(http, "GET", ids(run), headers=headers) as (_, events):
            seen += read_until(events, lambda more: texts(more) >= 8)
    seen += resume(http, run, seen[-1].id)
    assert_whole(seen)
    assert text_of(seen) == slow_text(60)
    assert seen[-1].type == "RUN_FINISHED"
    # Replayed later from PostgreSQL, on any process: the same events.
    for _ in range(3):
        assert [(e.id, e.data) for e in resume(http, run)] == [(e.id, e.data) for e in seen]


def test_delete_on_any_process_closes_the_upstream_stream(cluster: GatewayCluster,
                                                          http: httpx.Client,
                                                          scripted_model: ScriptedModel):
    for _ in range(3):  # the DELETE lands on each process in turn, owner or not
        scripted_model.enqueue(slow_turn(400, 0.05))
        with open_stream(http, "POST", "/v1/threads/runs", json=BODY) as (_, events):
            seen = read_until(events, lambda seen: texts(seen) >= 2)
            run = started_ids(seen)
            sent = time.monotonic()
            response = http.delete(ids(run))
            rest = list(events)
        assert response.status_code == 200, response.text
        assert response.json() == {"runId": run[1], "status": "cancelled"}
        # Closed within 10 s of the DELETE, half the 20 s the turn would stream: cut by the
        # cancel, on whichever process owned the run (how soon is bench/'s to measure).
        wait_for(lambda since=sent: disconnects_after(scripted_model, since), 10,
                 what="the upstream stream to be closed")
        assert [e.data["code"] for e in rest if e.type == "RUN_ERROR"] == ["CANCELLED"]


def test_sigkill_of_the_owner_fails_the_run_with_run_lost(cluster: GatewayCluster,
                                                          http: httpx.Client,
                                                          scripted_model: ScriptedModel):
    scripted_model.enqueue(slow_turn(400, 0.05), [{"content": "A new run."}])
    with open_stream(http, "POST", "/v1/threads/runs", json=BODY) as (_, events):
        seen = read_until(events, lambda seen: texts(seen) >= 3)
    run = started_ids(seen)
    pid = owner_pid(cluster, run[1])
    victim = next(s for s in cluster.servers if s.process and s.process.pid == pid)
    killed = time.monotonic()
    victim.kill()
    try:
        status = wait_for_status(http, *run, "failed", timeout=15)
        assert time.monotonic() - killed < 2 * 2 + 3, "failed within the lease (and a reap)"
        assert status["status"] == "failed"
        thread = http.get(f"/v1/threads/{run[0]}").json()
        assert thread["runStatus"] == "idle"
        for _ in range(2):  # any surviving process replays it, ending with the loss
            replay = resume(http, run, seen[-1].id)
            errors = [e for e in replay if e.type == "RUN_ERROR"]
            assert [e.data["code"] for e in errors] == ["RUN_LOST"] and replay[-1] is errors[0]
        after = run_events(http, "POST", f"/v1/threads/{run[0]}/runs", params={"userKey": "u1"},
                           json={"message": message("again"), "previousRunId": run[1]})
        assert text_of(after) == "A new run." and after[-1].type == "RUN_FINISHED"
    finally:
        victim.start()


def test_redis_restart_then_postgres_outage_during_runs(cluster: GatewayCluster,
                                                        http: httpx.Client,
                                                        scripted_model: ScriptedModel):
    assert engines.ENGINES is not None
    scripted_model.enqueue(slow_turn(80, 0.05), slow_turn(80, 0.05),
                           [{"content": "Recovered."}])

    def through(trouble) -> tuple[tuple[str, str], list[SseEvent]]:
        with open_stream(http, "POST", "/v1/threads/runs", json=BODY) as (_, events):
            seen = read_until(events, lambda seen: texts(seen) >= 5)
            run = started_ids(seen)
            trouble()
            seen += list(events)
        return run, seen

    redis_run, during_redis = through(engines.ENGINES.redis.restart)

    def postgres_away() -> None:
        engines.ENGINES.postgres.pause()
        time.sleep(3)
        engines.ENGINES.postgres.resume()

    pg_run, during_pg = through(postgres_away)
    for run, seen in ((redis_run, during_redis), (pg_run, during_pg)):
        assert_whole(seen)
        errors = [e for e in seen if e.type == "RUN_ERROR"]
        ended = seen[-1].type
        assert (ended == "RUN_FINISHED" and not errors) or (ended == "RUN_ERROR"
                                                            and len(errors) == 1), ended
        if ended == "RUN_FINISHED":
            assert text_of(seen) == slow_text(80)
        # What was persisted replays, on any process: a finished run exactly as it streamed;
        # a failed one up to what was saved before the outage (the lease, 2 s here, is shorter
        # than the outage, so another process may have failed it with RUN_LOST), then its
        # one error.
        status = wait_for_status(http, *run, "completed", "failed", timeout=20)
        replay = resume(http, run)
        replay_errors = [e.data["code"] for e in replay if e.type == "RUN_ERROR"]
        if status["status"] == "completed":
            assert ended == "RUN_FINISHED" and text_of(replay) == text_of(seen)
        else:
            assert len(replay_errors) == 1 and replay[-1].type == "RUN_ERROR", replay_errors
            assert text_of(seen).startswith(text_of(replay))
    # Recovered by itself: every process is ready again and a new run works through any.
    for server in cluster.servers:
        wait_for(lambda url=server.url: httpx.get(f"{url}/ready", timeout=5).status_code == 200,
                 20, what=f"{server.url}/ready to recover")
    fresh = run_events(http, "POST", "/v1/threads/runs", json=BODY)
    assert text_of(fresh) == "Recovered." and fresh[-1].type == "RUN_FINISHED"
