"""The shared log writer on a real SQLite database: the flushes of many runs share commits, and
a run whose log positions were taken (fenced out) is told so without failing the others."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from gateway.runs.log_writer import LogWriter
from gateway.store.db import create_engine, migrate
from gateway.store.repository import Store

# On a SQLite database of its own whatever the configuration.
pytestmark = pytest.mark.sqlite_only


async def _store(tmp_path: Path) -> Store:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'gateway.db'}")
    await migrate(engine)
    return Store(engine)


def _frames(start: int, count: int) -> list[tuple[int, int, dict]]:
    return [(seq, 1000 + seq, {"c": "append", "i": "x", "d": f"t{seq}"})
            for seq in range(start, start + count)]


async def test_flushes_of_many_runs_share_one_commit(tmp_path: Path):
    store = await _store(tmp_path)
    # Each store transaction is one commit, made on the DB-API connection itself
    # (store/transaction.py: SQLAlchemy's commit events do not see it), so they are counted here.
    commits = []
    transaction = store.transaction

    async def counted(work):
        commits.append(1)
        return await transaction(work)

    store.transaction = counted
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
