"""A run's subscribers: who follows it, what memory keeps for them, and what happens to the run
when the last one leaves.

Every SSE response (or socket) of a run is one subscription. A run of this process (or one that
just ended here) is read from memory (`log.LiveLog`); the log of a run of another process comes
through the backend's run feed (`backend.RunFeed`).

A reader in memory holds its position, so memory keeps what it has not read: a reader a little
behind a fast run must not be sent to the database (far more CPU per entry). A reader
stuck on its socket is disconnected after `Timings.slow_reader_seconds`, which bounds what it
can hold. What memory already forgot (a reconnect with an older cursor) is read from the
database first.

Leaving is not cancelling. When the last subscriber leaves, the run's `onDisconnect` decides:

- `grace` (default): the run goes on; if nobody has come back `grace` seconds after the last
  subscriber left, it is cancelled (a reload or a flaky network reconnects well within that);
- `cancel`: it is cancelled as soon as the last subscriber leaves (the real Tambo server's
  behaviour, for clients that rely on it);
- `continue`: it always runs to its end.

A run that has reached `awaiting_input` or any terminal state is never cancelled by a
disconnect: the Tambo clients close the stream on purpose the moment they read
`awaiting_input`. A follower in another process (it reads the log through the backend) counts as
a subscriber too: it marks the run as watched every second (`Timings.watch_touch_ms`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import AsyncGenerator, Callable

from ...observability import metrics
from ...protocol.clock import now_ms
from ...store.repository import UNAVAILABLE, Store
from ..backend import RunFeed
from ..registry import ActiveRun, RunRegistry
from ..timings import Timings
from .live import Entry, LiveLog, read_persisted

log = logging.getLogger(__name__)


def grace_for(policy: str, grace_seconds: float) -> float | None:
    """Seconds an unwatched run may go on; None if the policy never cancels."""
    if policy == "continue":
        return None
    return 0.0 if policy == "cancel" else grace_seconds


class Subscriptions:
    """The subscriptions of this process: counted per run, each holding its place in memory,
    and the disconnect policy armed at the last departure (`cancel` is called to cancel)."""

    def __init__(self, store: Store, timings: Timings, registry: RunRegistry, remote: RunFeed,
                 cancel: Callable[[str], None]) -> None:
        self.store, self.timings, self.registry, self.remote = store, timings, registry, remote
        self._cancel = cancel
        self._counts: dict[str, int] = {}  # run id -> subscribers in this process
        self._graces: dict[str, asyncio.Task[None]] = {}  # the policy's pending cancels
        self._holders = itertools.count()

    def count(self, run_id: str) -> int:
        return self._counts.get(run_id, 0)

    async def follow(self, run_id: str, after: int = 0) -> AsyncGenerator[Entry, None]:
        """The run's log from after `after`, then live until it ends: from memory if it runs
        (or just ended) here, else from the backend's feed. Leaving before the end is a
        departure (`_departed`)."""
        async with contextlib.aclosing(self.batches(run_id, after)) as batches:
            async for batch in batches:
                for entry in batch:
                    yield entry

    async def batches(self, run_id: str, after: int = 0) -> AsyncGenerator[list[Entry], None]:
        """`follow`'s entries, as many at a time as there are: from memory, everything the
        log has beyond the reader at each wake-up (a run response encodes and sends them as
        one chunk); from the backend's feed, one at a time. The memory's reader is this
        generator itself, not one more layer under it: each wake-up of a run response resumes
        one frame less (docs/decisions/0035)."""
        live = self.registry.live_log(run_id)
        metrics.ACTIVE_SUBSCRIBERS.inc()
        self._counts[run_id] = self.count(run_id) + 1
        holder = None
        try:
            if live is None:
                async with contextlib.aclosing(self.remote.subscribe(run_id, after)) as feed:
                    async for entry in feed:
                        yield [entry]
                return
            holder = f"reader-{next(self._holders)}"  # what this reader has not read stays
            seq = after
            while True:
                if seq < live.first:
                    async with contextlib.aclosing(self._forgotten(live, seq)) as forgotten:
                        async for entry in forgotten:
                            yield [entry]
                            seq = entry.seq
                    continue
                live.hold(holder, seq)  # once per wake-up: until the next, memory keeps a
                # little more than this reader needs, never less
                batch = live.since(seq)
                if batch:
                    yield batch
                    seq = batch[-1].seq
                if live.closed and seq >= live.last:
                    return
                await live.wait_beyond(seq)
        finally:
            if live is not None and holder is not None:
                live.release(holder)
            metrics.ACTIVE_SUBSCRIBERS.dec()
            if self._counts[run_id] > 1:
                self._counts[run_id] -= 1
            else:
                del self._counts[run_id]
            self._departed(run_id)

    def run_ended(self, run_id: str) -> None:
        """The run ended: its disconnect policy has nothing left to cancel."""
        grace = self._graces.pop(run_id, None)
        if grace is not None:
            grace.cancel()

    # -- memory -----------------------------------------------------------------------------

    async def _forgotten(self, live: LiveLog, after: int) -> AsyncGenerator[Entry, None]:
        """The entries after `after` that memory forgot, from the database: up to `live.first`
        only, since past it a fenced run's memory and the database can differ (the reaper's
        end), and memory is what this process has shown."""
        run_id, seq = live.run_id, after
        while seq < live.first:
            before = seq
            try:
                async with contextlib.aclosing(
                        read_persisted(self.store, run_id, seq)) as persisted:
                    async for entry in persisted:
                        if entry.seq > live.first:
                            break
                        yield entry
                        seq = entry.seq
            except UNAVAILABLE as error:  # the reader waits; the run goes on
                log.warning("run %s: reading its log failed (%s); retrying", run_id,
                            type(error).__name__)
                await asyncio.sleep(self.timings.feed_poll_seconds)
                continue
            if seq == before:
                raise RuntimeError(f"run {run_id}: positions {seq + 1} to {live.first} are "
                                   "neither in memory nor in the database")

    # -- the disconnect policy --------------------------------------------------------------

    def _departed(self, run_id: str) -> None:
        """A subscriber left: if it was the last one, arm the run's disconnect policy (the
        window counts from the last departure)."""
        active = self.registry.active.get(run_id)
        if active is None or active.ending or self.count(run_id) > 0:
            return
        grace = grace_for(active.row.on_disconnect, self.timings.disconnect_grace_seconds)
        if grace is None:
            return
        self.run_ended(run_id)  # a window armed at an earlier departure starts again
        self._graces[run_id] = asyncio.create_task(self._cancel_when_unwatched(active, grace),
                                                   name=f"disconnect policy {run_id}")

    async def _cancel_when_unwatched(self, active: ActiveRun, grace: float) -> None:
        """Cancel the run unless a subscriber is back `grace` seconds from now.

        A follower in another process leaves without telling this one: its departure is known
        only as its last touch, up to `timings.watch_touch_ms` (plus lag) before it left. So it
        gets its own grace from that touch, plus the freshness margin; with the margin alone, a
        reader reconnecting through another process was cancelled 2 to 3 s after it left,
        whatever the grace (found by the soak)."""
        await asyncio.sleep(grace)
        run_id = active.run_id
        while not active.ending and self.count(run_id) == 0:
            row = await self.store.get_run(run_id)
            if row is None:
                return
            if (row.watched_ms is None
                    or now_ms() - row.watched_ms > grace * 1000 + self.timings.watch_fresh_ms):
                log.info("run %s: no subscriber came back; cancelling it (disconnect policy)",
                         run_id)
                self._cancel(run_id)
                return
            await asyncio.sleep(self.timings.watch_recheck_seconds)
