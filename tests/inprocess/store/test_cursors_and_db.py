"""Pagination cursors and the database engine: garbage cursors are refused cleanly, SQLite
gets its directory and WAL mode, and migrating twice is harmless."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from gateway.store import cursors
from gateway.store.db import create_engine, migrate


def test_cursors_round_trip_and_garbage_is_refused() -> None:
    cursor = cursors.encode([1767607200000, "thr_1"])
    assert cursors.decode(cursor, (int, str)) == [1767607200000, "thr_1"]
    for garbage in ("", "%%%", cursors.encode([1]), cursors.encode(["x", "y"]),
                    cursors.encode([True, "y"]),
                    # no query can bind these: SQLite answered 500, PostgreSQL 503
                    cursors.encode([2 ** 63, "y"]), cursors.encode([-(2 ** 63) - 1, "y"]),
                    cursors.encode([1, "thr\x00"])):
        with pytest.raises(cursors.InvalidCursor):
            cursors.decode(garbage, (int, str))


async def test_sqlite_gets_its_directory_wal_and_an_idempotent_migration(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "dir" / "gateway.db"
    engine = create_engine(f"sqlite+aiosqlite:///{path}")
    try:
        await migrate(engine)
        await migrate(engine)
        async with engine.connect() as connection:
            mode = (await connection.execute(text("PRAGMA journal_mode"))).scalar()
            tables = {row[0] for row in await connection.execute(
                text("SELECT name FROM sqlite_master WHERE type = 'table'"))}
        assert path.exists() and mode == "wal"
        assert {"threads", "messages", "runs", "run_frames", "components"} <= tables
    finally:
        await engine.dispose()
