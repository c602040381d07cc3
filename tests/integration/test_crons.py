"""Schedules (docs/crons.md): `POST /v1/crons` as a client, runs started by the gateway itself
at each due time, through the same door and metered to the schedule's owner; exactly one
process fires each due time; a bounded catch-up after an outage; the schedule survives a
restart.

The app in the test process (two on PostgreSQL + Redis), with the interval's minimum lowered
(`GATEWAY_CRON_MIN_INTERVAL_SECONDS=1`); gateway processes of their own for the two-process
and the restart tests.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

import httpx
import pytest

from gateway.protocol.clock import now_ms
from gateway.store.repository import Store
from gateway.store.tables import CronRow, RunRow
from tests.conftest import scripted_env
from tests.support import engines
from tests.support.gateway_server import USER, GatewayCluster, GatewayServer, read_store
from tests.support.inprocess_app import (
    InProcess,
    InProcessCluster,
    InProcessGateway,
    refusing_runs,
)
from tests.support.receiver import PostReceiver
from tests.support.run_stream import wait_for
from tests.support.scripted_model import ScriptedModel

FAST = {"GATEWAY_CRON_MIN_INTERVAL_SECONDS": "1", "GATEWAY_CRON_POLL_SECONDS": "0.1",
        "GATEWAY_WEBHOOK_SECRET": "whsec-crons-0123456789-0123456789-abc",
        "GATEWAY_WEBHOOK_ALLOWED_HOSTS": "127.0.0.1",
        "GATEWAY_API_KEYS": "test-key"}


@pytest.fixture(scope="module")
def scheduled(scripted_model: ScriptedModel, tmp_path_factory: pytest.TempPathFactory
              ) -> Iterator[InProcess]:
    env = scripted_env(scripted_model, **FAST, GATEWAY_CRON_CATCHUP_SECONDS="300")
    workdir = tmp_path_factory.mktemp("crons")
    server = (InProcessCluster(workdir, env) if engines.ENGINES is not None
              else InProcessGateway(workdir, env)).start()
    yield server
    server.stop()


@pytest.fixture
def http(scheduled: InProcess) -> Iterator[httpx.Client]:
    with scheduled.client(event_hooks=USER, timeout=30, headers={"x-api-key": "test-key"}) as c:
        yield c


def on_store(gateway: InProcess, work: Callable[[Store], Coroutine[Any, Any, Any]]) -> Any:
    """`work` on the (first) app's own store, on its loop."""
    app = gateway.servers[0] if isinstance(gateway, InProcessCluster) else gateway
    return app.call(work(app.app.state.services.store))


def cron_runs(store: Store, cron_id: str) -> Coroutine[Any, Any, list[RunRow]]:
    async def read() -> list[RunRow]:
        from sqlalchemy import select

        from gateway.store.base import rows_as, table
        query = select(table(RunRow))
        rows = rows_as(RunRow, await store.transaction(lambda tx: tx.execute(query).all()))
        return [r for r in rows
                if ((r.request or {}).get("metadata") or {}).get("cronId") == cron_id]
    return read()


def due_at(run: RunRow) -> dt.datetime:
    """The due time a schedule's run was started for (its metadata's `dueAt`)."""
    return dt.datetime.fromisoformat((run.request or {})["metadata"]["dueAt"])


def listed(http: httpx.Client) -> list[dict[str, Any]]:
    response = http.get("/v1/crons")
    assert response.status_code == 200, response.text
    crons: list[dict[str, Any]] = response.json()["crons"]
    return crons


def test_an_interval_schedule_starts_runs_as_its_owner_until_deleted(
        http: httpx.Client, scheduled: InProcess) -> None:
    receiver = PostReceiver()
    try:
        created = http.post("/v1/crons", json={
            "schedule": {"every": 1}, "message": "check the queue",
            "metadata": {"team": "ops"}, "webhook": receiver.base + "/cron"})
        assert created.status_code == 201, created.text
        cron = created.json()
        assert cron["id"].startswith("cron_") and cron["userKey"] == "test-user"
        assert cron["agent"] == "default" and cron["nextRunAt"]
        wait_for(lambda: len(receiver.delivered()) >= 2, what="two runs' webhooks")
        assert http.delete(f"/v1/crons/{cron['id']}").status_code == 204
        sent = [json.loads(p.body) for p in receiver.delivered()]
        assert {s["status"] for s in sent} == {"completed"}
        assert all(s["metadata"]["cronId"] == cron["id"] and s["metadata"]["team"] == "ops"
                   for s in sent)
        # Each run on a new thread of the owner's user scope, which the owner can read.
        thread = http.get(f"/v1/threads/{sent[0]['threadId']}?userKey=test-user").json()
        assert thread["userKey"] == "test-user"
        assert thread["messages"][0]["content"][0]["text"] == "check the queue"
        # Metered to the owner: the run's usage is attributed to its API key.
        runs = on_store(scheduled, lambda store: cron_runs(store, cron["id"]))
        usage = on_store(scheduled, lambda store: store.run_usage(runs[0].id))
        assert usage and usage[0]["totalTokens"] > 0
        assert cron["id"] not in [c["id"] for c in listed(http)]
        gone = http.delete(f"/v1/crons/{cron['id']}")
        assert gone.status_code == 404 and gone.json()["code"] == "CRON_NOT_FOUND"
    finally:
        receiver.close()


def test_a_schedule_on_a_thread_continues_it(http: httpx.Client) -> None:
    thread = http.post("/v1/threads", json={}).json()
    cron = http.post("/v1/crons", json={"schedule": {"every": 1}, "message": "again",
                                        "threadId": thread["id"]}).json()
    try:
        def two_answers() -> bool:
            messages = http.get(f"/v1/threads/{thread['id']}").json()["messages"]
            return sum(m["role"] == "assistant" for m in messages) >= 2
        wait_for(two_answers, what="two runs on the thread")
    finally:
        http.delete(f"/v1/crons/{cron['id']}")
    assert [c for c in listed(http) if c["id"] == cron["id"]] == []


@pytest.mark.parametrize("body, code", [
    ({"schedule": {"every": 0}, "message": "x"}, "VALIDATION_ERROR"),
    ({"schedule": {"cron": "61 * * * *"}, "message": "x"}, "INVALID_SCHEDULE"),
    ({"schedule": {"cron": "0 0 30 2 *"}, "message": "x"}, "INVALID_SCHEDULE"),
    ({"schedule": {"cron": "0 9 * * *", "timezone": "Mars/Base"}, "message": "x"},
     "INVALID_SCHEDULE"),
    ({"schedule": {"every": 60}, "message": "x", "webhook": "http://example.com/h"},
     "WEBHOOK_NOT_ALLOWED"),
    ({"schedule": {"every": 60}, "message": "x", "agent": "nobody"}, "AGENT_NOT_FOUND"),
    ({"schedule": {"every": 60}, "message": "x", "threadId": "thr_missing"},
     "THREAD_NOT_FOUND"),
])
def test_a_schedule_that_cannot_run_is_refused(http: httpx.Client, body: dict[str, Any],
                                               code: str) -> None:
    response = http.post("/v1/crons", json=body)
    assert response.status_code in (400, 404), response.text
    assert response.json()["code"] == code


def test_a_schedule_needs_a_user_scope(scheduled: InProcess) -> None:
    with scheduled.client(timeout=30, headers={"x-api-key": "test-key"}) as bare:
        response = bare.post("/v1/crons", json={"schedule": {"every": 60}, "message": "x"})
        assert response.json()["code"] == "USER_SCOPE_REQUIRED"
        assert bare.get("/v1/crons").json()["code"] == "USER_SCOPE_REQUIRED"


def test_another_user_scope_neither_sees_nor_deletes_it(http: httpx.Client,
                                                        scheduled: InProcess) -> None:
    cron = http.post("/v1/crons", json={"schedule": {"cron": "0 3 * * *"},
                                        "message": "x"}).json()
    try:
        with scheduled.client(timeout=30, headers={"x-api-key": "test-key"}) as other:
            assert other.get("/v1/crons?userKey=someone-else").json() == {"crons": []}
            refused = other.delete(f"/v1/crons/{cron['id']}?userKey=someone-else")
            assert refused.status_code == 404
    finally:
        assert http.delete(f"/v1/crons/{cron['id']}").status_code == 204


def test_a_due_time_refused_for_a_moment_fires_later(http: httpx.Client,
                                                     scheduled: InProcess) -> None:
    """A due time whose run cannot start for a moment (here every process drains for a
    restart: 503 `SHUTTING_DOWN`, as for an overloaded process or a database away) is not
    spent: the schedule stays at that due time, `lastError` says why, and the due time fires
    once a process can start it."""
    with refusing_runs(scheduled):
        created = http.post("/v1/crons", json={"schedule": {"every": 1},
                                               "message": "after the restart"})
        assert created.status_code == 201, created.text
        cron = created.json()

        def refused() -> dict[str, Any] | None:
            (found,) = [c for c in listed(http) if c["id"] == cron["id"]]
            return found if found.get("lastError") == "SHUTTING_DOWN" else None
        waiting = wait_for(refused, what="the due time refused")
        assert waiting["nextRunAt"] == cron["nextRunAt"] and waiting["runsStarted"] == 0
    runs = wait_for(lambda: on_store(scheduled, lambda s: cron_runs(s, cron["id"])),
                    what="the due time's run")
    assert http.delete(f"/v1/crons/{cron['id']}").status_code == 204
    assert min(due_at(r) for r in runs) == dt.datetime.fromisoformat(cron["nextRunAt"])


def test_after_an_outage_only_due_times_within_the_catch_up_window_fire(
        scheduled: InProcess) -> None:
    """A schedule no process fired for an hour (written as if every gateway had been down):
    its due times older than `GATEWAY_CRON_CATCHUP_SECONDS` (300 s here) are skipped, each
    one within it fires once, and it goes on from now."""
    now = now_ms()
    created = now - 3_630_000  # due times at now - 30 s, - 90 s, ... (every 60 s)
    row = CronRow(id="cron_outage", project_id="default", user_key="test-user",
                  key_id=None, agent="default", schedule={"every": 60}, message="catch up",
                  created_ms=created, next_due_ms=created + 60_000)

    async def add(store: Store) -> None:
        from gateway.auth.caller import env_key_id
        row.key_id = env_key_id("test-key")
        await store.add_cron(row)
    on_store(scheduled, add)

    def caught_up() -> bool:
        cron: CronRow | None = on_store(scheduled, lambda s: s.get_cron("default", row.id))
        assert cron is not None and cron.last_error is None, cron
        # Past `now`, and every due time it took has recorded its run.
        return (cron.next_due_ms is not None and cron.next_due_ms > now
                and cron.runs_started >= 5)
    wait_for(caught_up, what="the catch-up")
    runs = on_store(scheduled, lambda s: cron_runs(s, row.id))
    due = sorted(due_at(r) for r in runs)
    assert len(due) == len(set(due)) == 5, due
    assert all((now - d.timestamp() * 1000) < 300_000 for d in due)
    on_store(scheduled, lambda s: s.delete_cron("default", row.id, None))


@pytest.mark.skipif(engines.backend() != "postgres",
                    reason="several processes on one database: PostgreSQL")
def test_two_processes_fire_each_due_time_exactly_once(
        scripted_model: ScriptedModel, tmp_path_factory: pytest.TempPathFactory) -> None:
    cluster = GatewayCluster(tmp_path_factory.mktemp("crons-two"),
                             scripted_env(scripted_model, **FAST), size=2).start()
    try:
        with httpx.Client(base_url=cluster.url, timeout=30, event_hooks=USER,
                          headers={"x-api-key": "test-key"}) as http:
            cron = http.post("/v1/crons", json={"schedule": {"every": 1},
                                                "message": "tick"}).json()

            def started() -> int:
                found = [c for c in listed(http) if c["id"] == cron["id"]]
                return found[0]["runsStarted"] >= 8
            wait_for(started, timeout=60, what="eight firings")
            assert http.delete(f"/v1/crons/{cron['id']}").status_code == 204
        runs = read_store(cluster, lambda store: cron_runs(store, cron["id"]))
    finally:
        cluster.stop()
    due = sorted(due_at(r) for r in runs)
    assert len(runs) >= 8
    assert len(due) == len(set(due)), f"a due time fired twice: {due}"
    gaps = {(b - a).total_seconds() for a, b in zip(due, due[1:], strict=False)}
    assert gaps == {1.0}, f"a due time was missed: {due}"


def test_a_schedule_survives_a_restart(scripted_model: ScriptedModel,
                                       tmp_path_factory: pytest.TempPathFactory) -> None:
    server = GatewayServer(tmp_path_factory.mktemp("crons-restart"),
                           scripted_env(scripted_model, **FAST))
    server.start()
    try:
        with httpx.Client(base_url=server.url, timeout=30, event_hooks=USER,
                          headers={"x-api-key": "test-key"}) as http:
            cron = http.post("/v1/crons", json={"schedule": {"every": 1},
                                                "message": "tick"}).json()
        server.stop()
        server.start()
        with httpx.Client(base_url=server.url, timeout=30, event_hooks=USER,
                          headers={"x-api-key": "test-key"}) as http:
            assert [c["id"] for c in listed(http)] == [cron["id"]]
            before = listed(http)[0]["runsStarted"]
            wait_for(lambda: listed(http)[0]["runsStarted"] > before,
                     what="a firing after the restart")
    finally:
        server.stop()


def test_the_python_client_makes_lists_and_deletes_a_schedule(scheduled: InProcess) -> None:
    from gateway.client import Client, GatewayError

    with Client(scheduled.url, api_key="test-key", user_key="client-user",
                transport=scheduled.sync_transport()) as client:
        cron = client.create_cron({"cron": "0 8 * * 1-5", "timezone": "Europe/Paris"},
                                  "digest", metadata={"team": "support"})
        assert [c["id"] for c in client.crons()] == [cron["id"]]
        assert cron["nextRunAt"].endswith(("06:00:00.000Z", "07:00:00.000Z"))
        client.delete_cron(cron["id"])
        assert client.crons() == []
        with pytest.raises(GatewayError) as refused:
            client.create_cron({"every": 0}, "x")
        assert refused.value.code == "VALIDATION_ERROR"
