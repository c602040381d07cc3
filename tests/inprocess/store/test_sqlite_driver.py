"""SQLite statements in one trip to aiosqlite's thread: the same results, counts, transactions
and errors as SQLAlchemy's own adapter, with one call on the thread per statement."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from gateway.store.db import create_engine


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    made = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'trips.db'}")
    async with made.begin() as connection:
        await connection.execute(text("CREATE TABLE t (id TEXT PRIMARY KEY, n INTEGER)"))
    yield made
    await made.dispose()


async def test_each_statement_is_one_trip_and_a_transaction_adds_its_commit(
        engine: AsyncEngine, trips: list[str]) -> None:
    async with engine.begin() as connection:
        await connection.execute(text("INSERT INTO t VALUES (:id, :n)"),
                                 [{"id": "a", "n": 1}, {"id": "b", "n": 2}, {"id": "c", "n": 3}])
        updated = await connection.execute(text("UPDATE t SET n = n + 10 WHERE n >= 2"))
        rows = (await connection.execute(text("SELECT id, n FROM t ORDER BY id"))).all()
    assert updated.rowcount == 2
    assert [tuple(r) for r in rows] == [("a", 1), ("b", 12), ("c", 13)]
    assert trips == ["_run", "_run", "_run", "commit"]


async def test_a_session_that_only_reads_ends_without_a_trip_and_one_that_writes_commits(
        engine: AsyncEngine, trips: list[str]) -> None:
    """sqlite3 opens a transaction only before a write, so the end of a read is no trip to
    the database's thread (each waits for the event loop, the connection held meanwhile)."""
    async with AsyncSession(engine) as session:
        assert (await session.execute(text("SELECT count(*) FROM t"))).scalar() == 0
    assert trips == ["_run"]  # the read; its rollback is not a trip
    async with AsyncSession(engine) as session:
        await session.execute(text("INSERT INTO t VALUES ('a', 1)"))
        await session.commit()
    async with AsyncSession(engine) as session:
        await session.execute(text("INSERT INTO t VALUES ('b', 2)"))
    assert trips == ["_run", "_run", "commit", "_run", "rollback"]
    async with engine.connect() as connection:
        rows = (await connection.execute(text("SELECT id FROM t"))).all()
    assert [tuple(r) for r in rows] == [("a",)]  # committed, and the other rolled back


async def test_a_failed_statement_raises_sqlalchemys_error_and_rolls_back(
        engine: AsyncEngine) -> None:
    async with engine.begin() as connection:
        await connection.execute(text("INSERT INTO t VALUES ('a', 1)"))
    with pytest.raises(IntegrityError):
        async with engine.begin() as connection:
            await connection.execute(text("INSERT INTO t VALUES ('b', 2)"))
            await connection.execute(text("INSERT INTO t VALUES ('a', 3)"))
    async with engine.connect() as connection:
        rows = (await connection.execute(text("SELECT id, n FROM t"))).all()
    assert [tuple(r) for r in rows] == [("a", 1)]  # 'b' went with the failed transaction
