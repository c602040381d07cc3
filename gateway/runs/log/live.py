"""The per-run log: frames in order, each with a position (`seq`) and a timestamp.

While a run is active its log lives in memory (`LiveLog`) and subscribers follow it there; it is
written to the database in batches by `RunRecorder`, never once per token. Subscribers pull from
the shared list at their own pace, so a slow reader never slows the run or other readers, and a
reader costs one position in the log, not a buffer of its own: the only per-reader buffer
is its socket's (bounded by uvicorn's flow control; a reader stuck on it is disconnected, see
`Timings.slow_reader_seconds`, and resumes with its cursor).

Only the tail of the log stays in memory: once a batch is on disk, the recorder `forget`s it,
except what a holder has not consumed yet (each reader in memory, the Redis publisher `hold`
their positions). Kept whole, the log cost about 350 bytes per token for the run's lifetime; a
reader that comes with an older cursor reads the database up to the tail (`read_persisted`,
from `subscription`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import cast

from ...protocol.clock import now_ms
from ...protocol.timbal import Frame
from ...store.repository import Store
from ...store.tables import RunFrameRow

PAGE_FRAMES = 1000  # replay from the database in pages, never one giant read


@dataclass(frozen=True, slots=True)
class Entry:
    seq: int
    ts: int
    frame: Frame


class LiveLog:
    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.first = 0  # the positions up to this one are on disk and no longer in memory
        self.on_disk = 0  # the positions up to this one are on disk (`forget`)
        self.entries: list[Entry] = []  # the tail: positions first + 1 to last
        # The position of the last entry (0 while empty): `first + len(entries)`, kept as a
        # field because it is read several times per frame (it was a property: one call each).
        self.last = 0
        self.holds: dict[str, int] = {}  # holder -> the position it has consumed
        self.closed = False
        # The run's end is being committed (`RunRecorder.finish`): its terminal entries follow
        # within that commit, or the log closes. The Redis publisher sends what it has with them.
        self.ending = False
        self._waiters: list[asyncio.Future[None]] = []  # woken at the next change

    def append(self, frame: Frame) -> Entry:
        entry = self.next_entry(frame)
        self.entries.append(entry)
        self.last = entry.seq
        self._notify()
        return entry

    def since(self, seq: int) -> list[Entry]:
        """The entries in memory after position `seq` (from `first + 1` if `seq` is older)."""
        return self.entries[max(0, seq - self.first):]

    def forget(self, seq: int) -> None:
        """Drop the entries up to `seq` (on disk by now) from memory, except what a holder has
        not consumed yet (dropped when it lets go: `release`)."""
        self.on_disk = seq = max(seq, self.on_disk)
        upto = min(seq, *self.holds.values()) if self.holds else seq
        if upto > self.first:
            del self.entries[:upto - self.first]
            self.first = upto

    def hold(self, holder: str, seq: int) -> None:
        """Keep the entries after `seq` in memory for `holder` (until `release`)."""
        self.holds[holder] = seq

    def release(self, holder: str) -> None:
        """`holder` needs nothing more: what is on disk and nobody else holds leaves memory
        (else a run's tail stayed whole while its log lingered, `registry.LINGER_SECONDS`,
        and a replay read it there instead of from the database)."""
        if self.holds.pop(holder, None) is not None:
            self.forget(self.on_disk)

    def next_entry(self, frame: Frame, offset: int = 0) -> Entry:
        """The entry `frame` would get `offset` positions after the next append."""
        return Entry(self.last + 1 + offset, now_ms(), frame)

    def extend(self, entries: list[Entry]) -> None:
        """Publish entries built ahead with `next_entry` (persisted before being shown)."""
        for entry in entries:
            if entry.seq != self.last + 1:
                raise ValueError(f"log position {entry.seq} out of order in run {self.run_id}")
            self.entries.append(entry)
            self.last = entry.seq
        self._notify()

    def close(self) -> None:
        self.closed = True
        self._notify()

    async def wait_beyond(self, count: int) -> None:
        """Return once the log has more than `count` entries or is closed."""
        while self.last <= count and not self.closed:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            await waiter

    def _notify(self) -> None:
        # Wake every waiter once; nothing to do (no object made) while nobody waits, as
        # while a reader is busy sending what it has.
        if self._waiters:
            waiters, self._waiters = self._waiters, []
            for waiter in waiters:
                if not waiter.done():  # a reader that left meanwhile was cancelled
                    waiter.set_result(None)


async def read_persisted(store: Store, run_id: str, after: int) -> AsyncGenerator[Entry, None]:
    """The entries on disk now with `seq > after`, read in pages."""
    while True:
        rows = await store.read_frames(run_id, after, PAGE_FRAMES)
        for row in rows:
            after = row.seq
            yield persisted(row)
        if len(rows) < PAGE_FRAMES:
            return


def persisted(row: RunFrameRow) -> Entry:
    """A log entry as the database keeps it: its frame is the JSON of one the recorder wrote
    (typed, `RunRecorder.emit`), so it is that frame again."""
    return Entry(row.seq, row.ts_ms, cast(Frame, row.frame))
