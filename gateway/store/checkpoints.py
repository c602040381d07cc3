"""SQLite's WAL checkpoints, off the write path.

By default SQLite checkpoints inside the commit that takes the WAL past 1,000 pages: that
commit, on the process's one connection (`db.py`), then copies the WAL into the database file
and syncs it, while every run start queued for the connection waits. Under 300 streams the log
writer's commits held the connection up to 100 ms at p99 that way (bench/README.md, "WAL
checkpoints"). The process's connection turns that off (`PRAGMA wal_autocheckpoint=0`), and
`keep_checkpointing` checkpoints every `CHECKPOINT_SECONDS` on a connection of its own, on a
worker thread. PASSIVE: it never waits for the writer and never blocks it; what it cannot copy
yet (a reader's snapshot still needs it) it copies the next time. When the last connection to
the file closes, SQLite checkpoints what is left itself.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading

from sqlalchemy.engine import make_url

CHECKPOINT_SECONDS = 1.0

log = logging.getLogger(__name__)


def sqlite_path(url: str) -> str | None:
    """The database file of an SQLite URL; None for another database or one in memory."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return parsed.database


class _Checkpointer:
    """A connection of its own; the lock keeps its close from meeting a checkpoint still
    running on the worker thread (a cancelled `to_thread` does not stop the thread)."""

    def __init__(self, path: str) -> None:
        self.connection = sqlite3.connect(path, timeout=0, check_same_thread=False)
        self.lock = threading.Lock()

    def checkpoint(self) -> None:
        with self.lock:
            self.connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()

    def close(self) -> None:
        with self.lock:
            self.connection.close()


async def keep_checkpointing(path: str, interval: float = CHECKPOINT_SECONDS) -> None:
    """Checkpoint `path`'s WAL every `interval` seconds until cancelled."""
    checkpointer = await asyncio.to_thread(_Checkpointer, path)
    try:
        while True:
            await asyncio.sleep(interval)
            try:
                await asyncio.to_thread(checkpointer.checkpoint)
            except sqlite3.Error as error:  # busy, or the file is gone: the next one retries
                log.debug("WAL checkpoint skipped: %s", error)
    finally:
        checkpointer.close()
