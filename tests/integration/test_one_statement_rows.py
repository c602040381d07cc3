"""PostgreSQL's one-statement start (the fused form of `store/engines/chain.py`): a part given one row takes it
as scalar parameters, a part given several as arrays; either way the rows stored are the rows
given, column by column (JSON values, JSON null and SQL NULL, booleans), in their order."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import select

from gateway.store import db
from gateway.store.base import values_of
from gateway.store.repository import Store
from gateway.store.tables import MessageRow, RunRow, ThreadRow
from tests.support import engines

pytestmark = pytest.mark.skipif(engines.backend() != "postgres",
                                reason="PostgreSQL's one-statement writes")


@pytest.fixture
async def store() -> AsyncIterator[Store]:
    assert engines.ENGINES is not None
    url = engines.ENGINES.postgres.create_database(f"rows_{uuid.uuid4().hex[:12]}")
    engine = db.create_engine(url.replace("postgresql://", "postgresql+asyncpg://", 1),
                              pool_size=1)
    await db.migrate(engine)
    yield Store(engine)
    await engine.dispose()


async def stored(store: Store, model: Any, *where: Any) -> list[dict[str, Any]]:
    table = model.__table__
    order = [table.c.seq] if "seq" in table.c else []
    async with store.engine.connect() as connection:
        rows = (await connection.execute(select(table).where(*where).order_by(*order))).all()
    return [dict(row._mapping) for row in rows]


def messages(thread_id: str, run_id: str, count: int) -> list[MessageRow]:
    return [MessageRow(id=f"msg_{run_id}_{k}", thread_id=thread_id, run_id=run_id, role="user",
                       parts=[{"type": "text", "text": f"#{k} ✓"}],
                       meta={"k": k, "none": None} if k % 2 else None, created_ms=1000 + k,
                       is_cancelled=k == 2)
            for k in range(count)]


@pytest.mark.parametrize("count", [1, 3])
async def test_a_start_on_a_new_thread_stores_what_it_was_given(store: Store,
                                                                count: int) -> None:
    thread = ThreadRow(id=f"thr_{count}", project_id="p", user_key="u", name="näme",
                       meta={"a": [1, None]}, created_ms=5, updated_ms=6, agent=None)
    run = RunRow(id=f"run_{count}", thread_id=thread.id, project_id="p", status="running",
                 created_ms=7, started_ms=8, request={"message": {"x": 1}}, error=None,
                 lease_owner="me", lease_expires_ms=9, model="m")
    inputs = messages(thread.id, run.id, count)
    await store.start_run_on_new_thread(thread, [], run, inputs)

    assert await stored(store, ThreadRow, ThreadRow.id == thread.id) == [values_of(thread)]
    assert await stored(store, RunRow, RunRow.id == run.id) == [values_of(run)]
    rows = await stored(store, MessageRow, MessageRow.thread_id == thread.id)
    assert [{k: v for k, v in row.items() if k != "seq"} for row in rows] == [
        values_of(m) for m in inputs]


@pytest.mark.parametrize("count", [1, 2])
async def test_a_start_on_an_idle_thread_stores_what_it_was_given(store: Store,
                                                                  count: int) -> None:
    thread = ThreadRow(id=f"thr_idle_{count}", project_id="p", created_ms=1, updated_ms=1)
    await store.add(thread)
    run = RunRow(id=f"run_idle_{count}", thread_id=thread.id, project_id="p", created_ms=2)
    inputs = messages(thread.id, run.id, count)
    assert await store.start_run(run, inputs, 3, None) == "started"
    assert await stored(store, RunRow, RunRow.id == run.id) == [values_of(run)]
    rows = await stored(store, MessageRow, MessageRow.thread_id == thread.id)
    assert [{k: v for k, v in row.items() if k != "seq"} for row in rows] == [
        values_of(m) for m in inputs]
    second = RunRow(id=f"run_idle_{count}_b", thread_id=thread.id, project_id="p",
                    created_ms=4)
    assert await store.start_run(second, [], 5, None) == "conflict"  # the lock still holds
    assert await stored(store, RunRow, RunRow.id == second.id) == []
