"""SQLite's transactions as its connection's thread runs them, seen through the standard library
only: no name of the gateway's store is wrapped or replaced.

A profile function (`threading.setprofile`, for the threads started after `install`: aiosqlite
starts its connection's thread when the app connects) sees each call of sqlite3's C
`Connection.commit` on that thread, and the first call on a connection sets sqlite3's trace
callback on it, which gives every statement as SQLite runs it (its parameters in the text).
Per commit: the statements since the previous one, when the first began (wall clock and the
thread's CPU clock), the commit's own wall and CPU time, and the WAL index (`mxFrame`,
`nBackfill` in `<db>-shm`) before and after it: the frames it wrote and whether it checkpointed
(SQLite's autocheckpoint runs inside the commit that crosses it).

The probe costs the thread a Python call per call it makes (the profile function): figures
with it are a little worse than without.
"""

from __future__ import annotations

import functools
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# Transaction control and the probe's own reads: not the work of a transaction.
CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE", "PRAGMA")


@dataclass
class Commit:
    path: str  # the database file
    statements: list[str]  # as SQLite ran them, transaction control left out
    savepoints: int  # SAVEPOINTs in it: the group commit's members, when more than one
    began: float  # perf_counter at its first statement (or at the commit, if none)
    cpu: float  # the thread's CPU seconds from its first statement to the commit's end
    commit_at: float  # perf_counter as `commit` was called
    commit_s: float  # the commit's wall seconds
    commit_cpu: float  # the commit's CPU seconds
    wal_before: tuple[int, int]  # (mxFrame, nBackfill)
    wal_after: tuple[int, int]

    @property
    def frames(self) -> int:
        """WAL frames the commit wrote (from the WAL's start if a checkpoint restarted it)."""
        before, after = self.wal_before[0], self.wal_after[0]
        return after - before if after >= before else after

    @property
    def checkpointed(self) -> bool:
        return self.wal_after[1] > self.wal_before[1] or (
            self.wal_after[0] < self.wal_before[0] and self.wal_after[1] > 0)

    @property
    def writes(self) -> list[str]:
        return [s for s in self.statements if s.split(None, 1)[0].upper() in (
            "INSERT", "UPDATE", "DELETE", "REPLACE", "WITH")]


@dataclass
class _Open:
    """A connection's transaction so far."""

    path: str
    statements: list[str] = field(default_factory=list)
    savepoints: int = 0
    began: float | None = None
    cpu_began: float = 0.0
    commit: tuple[float, float, tuple[int, int]] | None = None


def wal_index(path: str) -> tuple[int, int]:
    """(mxFrame, nBackfill) of the WAL index: frames in the WAL, frames checkpointed."""
    try:
        with open(f"{path}-shm", "rb") as shm:
            header = shm.read(100)
    except FileNotFoundError:
        return 0, 0
    return int.from_bytes(header[16:20], "little"), int.from_bytes(header[96:100], "little")


class SqliteWatch:
    """Calls `on_commit(Commit)` on the connection's thread for every commit of every SQLite
    connection made on a thread started after `install()`."""

    def __init__(self, on_commit: Callable[[Commit], None]) -> None:
        self.on_commit = on_commit
        self.open: dict[int, _Open] = {}

    def install(self) -> None:
        threading.setprofile(self._profile)

    def _profile(self, frame: Any, event: str, arg: Any) -> None:
        if event[0] != "c":  # c_call, c_return, c_exception: a C function
            return
        raw = getattr(arg, "__self__", None)
        if not isinstance(raw, sqlite3.Connection):
            return
        state = self.open.get(id(raw))
        if state is None:
            path = raw.execute("PRAGMA database_list").fetchone()[2]
            state = self.open[id(raw)] = _Open(path)
            raw.set_trace_callback(functools.partial(self._traced, state))
        if getattr(arg, "__name__", "") != "commit":
            return
        if event == "c_call":
            state.commit = (time.perf_counter(), time.thread_time(), wal_index(state.path))
        elif state.commit is not None:
            self._committed(state)

    @staticmethod
    def _traced(state: _Open, sql: str) -> None:
        if state.began is None:
            state.began, state.cpu_began = time.perf_counter(), time.thread_time()
        verb = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else ""
        if verb == "SAVEPOINT":
            state.savepoints += 1
        if verb not in CONTROL:
            state.statements.append(sql)

    def _committed(self, state: _Open) -> None:
        assert state.commit is not None
        at, cpu_at, before = state.commit
        now, cpu_now = time.perf_counter(), time.thread_time()
        began = state.began if state.began is not None else at
        cpu_began = state.cpu_began if state.began is not None else cpu_at
        commit = Commit(state.path, state.statements, state.savepoints, began,
                        cpu_now - cpu_began, at, now - at, cpu_now - cpu_at, before,
                        wal_index(state.path))
        state.statements, state.savepoints, state.began, state.commit = [], 0, None, None
        self.on_commit(commit)


def frame_pages(path: str, first: int, last: int, page_size: int,
                header: int = 32, frame_header: int = 24) -> list[int]:
    """The page number of each WAL frame `first`..`last` (1-based), from the frame headers."""
    pages: list[int] = []
    if last < first or not os.path.exists(f"{path}-wal"):
        return pages
    with open(f"{path}-wal", "rb") as wal:
        for frame in range(first, last + 1):
            wal.seek(header + (frame - 1) * (frame_header + page_size))
            pages.append(int.from_bytes(wal.read(4), "big"))
    return pages
