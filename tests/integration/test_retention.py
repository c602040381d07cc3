"""Retention (docs/context.md): `gateway prune --older-than` and `GATEWAY_RETENTION_DAYS`
delete threads not updated since, with their runs, logs, messages and component state, and
never a thread with a live or paused run. On SQLite, and on PostgreSQL + Redis with
GATEWAY_TEST_BACKEND=postgres."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from gateway.protocol.clock import now_ms
from gateway.store.repository import Store
from gateway.store.tables import MessageRow, RunFrameRow, RunRow, RunUsageRow
from tests.conftest import scripted_env
from tests.integration.test_contract import paused_run
from tests.support import engines
from tests.support.gateway_server import DEFAULT_USER, USER, gateway_command, read_store
from tests.support.inprocess_app import InProcess, InProcessCluster, InProcessGateway
from tests.support.run_stream import message, open_stream, read_until, slow_turn, texts, wait_for
from tests.support.scripted_model import ScriptedModel
from tests.support.sse import run_events

DAY_MS = 86_400_000


def finished_thread(client: httpx.Client, text: str = "hello") -> tuple[str, str]:
    events = run_events(client, "POST", "/v1/threads/runs", json={
        "message": message(text), "thread": {"userKey": DEFAULT_USER}})
    assert events[-1].type == "RUN_FINISHED"
    return events[0].data["threadId"], events[0].data["runId"]


def backdate(gateway: InProcess, *thread_ids: str, days: int = 100) -> None:
    async def go(store: Store) -> None:
        for thread_id in thread_ids:
            await store.update_thread(thread_id, updated_ms=now_ms() - days * DAY_MS)
    read_store(gateway, go)


def stored(gateway: InProcess, thread_id: str, run_id: str) -> dict[str, int]:
    """How many rows of each kind the database holds for the thread and its run."""
    async def go(store: Store) -> dict[str, int]:
        counts = {}
        for name, row, column in (("messages", MessageRow, "thread_id"),
                                  ("runs", RunRow, "thread_id"),
                                  ("frames", RunFrameRow, "run_id"),
                                  ("usage", RunUsageRow, "thread_id")):
            key = thread_id if column == "thread_id" else run_id
            of = row.__table__  # type: ignore[attr-defined]
            query = select(func.count()).select_from(of).where(of.c[column] == key)
            counts[name] = await store.transaction(
                lambda tx, query=query: tx.execute(query).scalar_one())
        return counts
    return read_store(gateway, go)


def prune_command(gateway: InProcess, *args: str) -> str:
    result = gateway_command(["prune", *args], gateway.env, gateway.workdir)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout.strip()


def test_prune_deletes_old_idle_threads_and_keeps_live_and_paused_ones(
        client: httpx.Client, gateway: InProcess, scripted_model: ScriptedModel) -> None:
    old, old_run = finished_thread(client, "old")
    recent, _ = finished_thread(client, "recent")
    paused, _, _ = paused_run(client, scripted_model)
    backdate(gateway, old, paused)
    before = stored(gateway, old, old_run)
    assert before["messages"] == 2 and before["runs"] == 1 and before["frames"] > 0

    assert prune_command(gateway, "--older-than", "30d", "--dry-run") == \
        "would delete 1 threads (1 runs)"
    assert client.get(f"/v1/threads/{old}").status_code == 200

    scripted_model.enqueue(slow_turn(400, 0.02))
    with open_stream(client, "POST", "/v1/threads/runs", json={
            "message": message("live"), "thread": {"userKey": DEFAULT_USER}}) as (_, events):
        seen = read_until(events, lambda seen: texts(seen) >= 1)
        live = seen[0].data["threadId"]
        backdate(gateway, live)
        assert prune_command(gateway, "--older-than", "30d") == "deleted 1 threads (1 runs)"
        assert client.get(f"/v1/threads/{live}").status_code == 200

    assert client.get(f"/v1/threads/{old}").status_code == 404
    after = stored(gateway, old, old_run)
    assert (after["messages"], after["runs"], after["frames"]) == (0, 0, 0)
    assert after["usage"] == before["usage"]  # accounting is kept
    for kept in (recent, paused):
        assert client.get(f"/v1/threads/{kept}").status_code == 200


@pytest.fixture(scope="module")
def retaining(scripted_model: ScriptedModel, tmp_path_factory: pytest.TempPathFactory
              ) -> Iterator[InProcess]:
    """A gateway that deletes threads not updated for two seconds (checked every second)."""
    env = scripted_env(scripted_model, GATEWAY_RETENTION_DAYS=str(2 / 86400))
    workdir = tmp_path_factory.mktemp("retention")
    server = (InProcessCluster(workdir, env) if engines.ENGINES is not None
              else InProcessGateway(workdir, env)).start()
    yield server
    server.stop()


def test_the_server_prunes_by_itself_with_retention_days(
        retaining: InProcess, scripted_model: ScriptedModel) -> None:
    with retaining.client(event_hooks=USER, timeout=30,
                          headers={"x-api-key": "test-key"}) as client:
        paused, _, _ = paused_run(client, scripted_model)
        old, _ = finished_thread(client)

        def gone() -> Any:
            return client.get(f"/v1/threads/{old}").status_code == 404 or None

        wait_for(gone, timeout=30)
        assert client.get(f"/v1/threads/{paused}").status_code == 200
