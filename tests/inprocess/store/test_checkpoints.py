"""SQLite's WAL checkpoints run beside the process's writes, not inside its commits
(`store.checkpoints`): the engine's own connection never checkpoints, and the checkpointer,
on a connection of its own, copies what was committed into the database file."""

from __future__ import annotations

import asyncio
from pathlib import Path

from sqlalchemy import text

from gateway.store.checkpoints import keep_checkpointing, sqlite_path
from gateway.store.db import create_engine


def test_only_a_file_database_is_checkpointed(tmp_path: Path) -> None:
    assert sqlite_path(f"sqlite+aiosqlite:///{tmp_path}/g.db") == f"{tmp_path}/g.db"
    assert sqlite_path("sqlite+aiosqlite:///:memory:") is None
    assert sqlite_path("postgresql+asyncpg://u@h/db") is None


async def test_committed_pages_reach_the_database_file_by_the_checkpointer(tmp_path: Path
                                                                           ) -> None:
    path = tmp_path / "gateway.db"
    engine = create_engine(f"sqlite+aiosqlite:///{path}")
    try:
        async with engine.begin() as connection:
            await connection.execute(text("CREATE TABLE t (v TEXT)"))
        for _ in range(3):  # about 6 MB: far past the 1,000 pages that checkpointed by default
            async with engine.begin() as connection:
                await connection.execute(text("INSERT INTO t VALUES (:v)"),
                                         [{"v": "x" * 2000} for _ in range(1000)])
        before = path.stat().st_size
        assert before < 1_000_000  # all of it still in the WAL: the commits did not copy it

        checkpointer = asyncio.create_task(keep_checkpointing(str(path), interval=0.01))
        try:
            for _ in range(500):
                if path.stat().st_size > 5_000_000:
                    break
                await asyncio.sleep(0.01)
        finally:
            checkpointer.cancel()
            await asyncio.gather(checkpointer, return_exceptions=True)
        assert path.stat().st_size > 5_000_000  # copied into the database file
        async with engine.connect() as connection:  # and the writer's connection still works
            assert (await connection.execute(text("SELECT count(*) FROM t"))).scalar() == 3000
    finally:
        await engine.dispose()
