"""The shared log writer on the real database of the selected configuration (an SQLite file, or
PostgreSQL with `GATEWAY_TEST_BACKEND=postgres`, where a commit is one statement): the flushes
of many runs share commits, and a run that was fenced out (its log positions taken, or its lease)
is told so without failing the others."""

from __future__ import annotations

import asyncio
from pathlib import Path

from gateway.protocol.clock import now_ms
from gateway.runs.log.writer import LogWriter
from gateway.store.db import create_engine, migrate
from gateway.store.repository import Store
from gateway.store.tables import RunRow
from tests.integration.test_fencing import database_url


async def _store(tmp_path: Path) -> Store:
    engine = create_engine(database_url(tmp_path))
    await migrate(engine)
    return Store(engine)


def _frames(start: int, count: int) -> list[tuple[int, int, dict]]:
    return [(seq, 1000 + seq, {"c": "append", "i": "x", "d": f"t{seq}"})
            for seq in range(start, start + count)]


async def test_flushes_of_many_runs_share_one_commit(tmp_path: Path):
    store = await _store(tmp_path)
    # Each store transaction is one commit, made on the DB-API connection itself
    # (store/engines/postgres.py: SQLAlchemy's commit events do not see it), so they are counted here.
    commits = []
    transaction, alone, hot = store.transaction, store.alone, store.hot

    async def counted(work):
        commits.append(1)
        return await transaction(work)

    async def counted_alone(work):
        commits.append(1)
        return await alone(work)

    async def counted_hot(work):
        commits.append(1)
        return await hot(work)

    store.transaction, store.alone, store.hot = counted, counted_alone, counted_hot
    writer = LogWriter(store)
    try:
        results = await asyncio.gather(*(writer.append(f"run_{n}", _frames(1, 5))
                                         for n in range(50)))
        assert results == [True] * 50
        assert len(commits) == 1
        for n in (0, 49):
            rows = await store.read_frames(f"run_{n}")
            assert [(r.seq, r.frame["d"]) for r in rows] == [(s, f"t{s}") for s in range(1, 6)]
    finally:
        await writer.close()
        await store.engine.dispose()


async def test_a_fenced_run_does_not_fail_the_others(tmp_path: Path):
    store = await _store(tmp_path)
    writer = LogWriter(store)
    try:
        # Another process already wrote position 3 of run_b (it ended the run meanwhile).
        assert await store.append_frames("run_b", _frames(3, 1))
        results = await asyncio.gather(writer.append("run_a", _frames(1, 4)),
                                       writer.append("run_b", _frames(1, 4)),
                                       writer.append("run_c", _frames(1, 2)))
        assert results == [True, False, True]
        assert [r.seq for r in await store.read_frames("run_a")] == [1, 2, 3, 4]
        assert [r.seq for r in await store.read_frames("run_c")] == [1, 2]
        assert [r.seq for r in await store.read_frames("run_b")] == [3]
    finally:
        await writer.close()
        await store.engine.dispose()


async def test_a_run_whose_lease_was_taken_does_not_fail_the_others(tmp_path: Path):
    store = await _store(tmp_path)
    writer = LogWriter(store)
    now = now_ms()
    for name, owner in (("run_a", "me"), ("run_b", "someone else"), ("run_c", "me")):
        await store.add(RunRow(id=name, thread_id=f"thr_{name}", project_id="p", created_ms=now,
                               status="running", lease_owner=owner,
                               lease_expires_ms=now + 60_000))
    try:
        results = await asyncio.gather(*(writer.append(name, _frames(1, 3), "me")
                                         for name in ("run_a", "run_b", "run_c")))
        assert results == [True, False, True]
        assert [r.seq for r in await store.read_frames("run_a")] == [1, 2, 3]
        assert [r.seq for r in await store.read_frames("run_c")] == [1, 2, 3]
        assert await store.read_frames("run_b") == []
    finally:
        await writer.close()
        await store.engine.dispose()
