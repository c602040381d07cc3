"""The per-run log: frames in order, each with a position (`seq`) and a timestamp.

While a run is active its log lives in memory (`LiveLog`) and subscribers follow it there; it is
written to the database in batches by `RunRecorder`, never once per token. Subscribers pull from
the shared list at their own pace, so a slow reader never slows the run or other readers, and a
reader costs one index into the shared list, not a buffer of its own: the only per-reader buffer
is its socket's (bounded by uvicorn's flow control; a reader stuck on it is disconnected, see
`Timings.slow_reader_seconds`, and resumes with its cursor).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from ..protocol.clock import now_ms


@dataclass(frozen=True, slots=True)
class Entry:
    seq: int
    ts: int
    frame: dict[str, Any]


class LiveLog:
    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.entries: list[Entry] = []
        self.closed = False
        self.subscribers = 0
        self._changed = asyncio.Event()

    def append(self, frame: dict[str, Any]) -> Entry:
        entry = self.next_entry(frame)
        self.entries.append(entry)
        self._notify()
        return entry

    def next_entry(self, frame: dict[str, Any], offset: int = 0) -> Entry:
        """The entry `frame` would get `offset` positions after the next append."""
        return Entry(len(self.entries) + 1 + offset, now_ms(), frame)

    def extend(self, entries: list[Entry]) -> None:
        """Publish entries built ahead with `next_entry` (persisted before being shown)."""
        for entry in entries:
            if entry.seq != len(self.entries) + 1:
                raise ValueError(f"log position {entry.seq} out of order in run {self.run_id}")
            self.entries.append(entry)
        self._notify()

    def close(self) -> None:
        self.closed = True
        self._notify()

    async def wait_beyond(self, count: int) -> None:
        """Return once the log has more than `count` entries or is closed."""
        while len(self.entries) <= count and not self.closed:
            await self._changed.wait()

    def _notify(self) -> None:
        # Wake every waiter once, then arm a fresh event: O(1) per append whatever the readers.
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()
