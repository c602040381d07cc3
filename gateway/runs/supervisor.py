"""The per-process background task that keeps runs honest across processes and crashes.

One task per process, a few cheap queries per tick, never anything per token:

- leases: every run holds a lease renewed every third of `lease_seconds`. A run whose lease
  could not be renewed was ended by a reaper meanwhile (this process stalled): it is stopped
  here without writing anything more (fenced);
- the reaper: at start-up and every quarter of `lease_seconds`, runs whose lease expired (their
  process died) are failed with a retryable `RUN_LOST` error appended to their log after
  everything they may have shown (`salvage.end_dead_run`), and their threads unlocked. Fenced on the lease: a slow but live owner that renewed in time wins.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection
from typing import Protocol

from ..observability import outages
from ..protocol.clock import now_ms
from ..protocol.frames_schema import ErrorFrame
from ..protocol.run_errors import error_frame, run_error
from ..protocol.timbal import RUN_LOST
from ..store.repository import UNAVAILABLE, Store
from .backend import RunFeed
from .salvage import end_dead_run
from .timings import Timings

RUN_LOST_ERROR = run_error(RUN_LOST,
                           "The gateway process running this run stopped before it finished",
                           retryable=True, status=503)

log = logging.getLogger(__name__)


def lost_frame() -> ErrorFrame:
    return error_frame(RUN_LOST_ERROR)


class Supervised(Protocol):
    """What the supervisor needs of the run manager."""

    store: Store
    owner: str
    timings: Timings
    remote_feed: RunFeed

    @property
    def active(self) -> Collection[str]: ...
    def lose(self, run_id: str) -> None: ...
    async def promote_next(self, thread_id: str) -> None: ...


class RunSupervisor:
    def __init__(self, manager: Supervised) -> None:
        self.manager = manager
        lease, self.tick = manager.timings.lease_seconds, manager.timings.supervisor_tick_seconds
        self.renew_every = max(self.tick, lease / 3)
        self.reap_every = max(self.tick, lease / 4)

    async def run(self) -> None:
        """Tick forever (until cancelled at shutdown); a failing tick is logged and retried."""
        loop = asyncio.get_running_loop()
        next_renew = next_reap = loop.time()
        while True:
            now = loop.time()
            try:
                if now >= next_renew:
                    next_renew = now + self.renew_every
                    await self.renew()
                if now >= next_reap:
                    next_reap = now + self.reap_every
                    await self.reap()
            except asyncio.CancelledError:
                raise
            except UNAVAILABLE as error:  # logged once per outage, not once per tick
                outages.down("database", f"renewing or reaping leases: {type(error).__name__}")
            except Exception:
                log.exception("run supervisor tick failed")
            # Asleep until the next renewal or reaping is due (not a tick every `tick`: an
            # idle process that wakes four times a second to find nothing due is not idle).
            await asyncio.sleep(max(self.tick, min(next_renew, next_reap) - loop.time()))

    async def renew(self) -> None:
        manager = self.manager
        ids = list(manager.active)
        if not ids:
            return
        until = now_ms() + manager.timings.lease_ms
        held = await manager.store.renew_leases(ids, manager.owner, until)
        for run_id in set(ids) - held:
            manager.lose(run_id)

    async def reap(self) -> int:
        """Fail the runs whose owner is gone; returns how many were failed here."""
        manager, now = self.manager, now_ms()
        failed = 0
        for row in await manager.store.expired_runs(now):
            if row.id in manager.active:
                continue  # ours: renewal is late, not lost
            if await end_dead_run(manager.store, manager.remote_feed, row, now, "failed",
                                  RUN_LOST_ERROR, lost_frame()):
                failed += 1
                await manager.promote_next(row.thread_id)  # its queued runs go on
                log.warning("run %s on thread %s was lost with its process (lease held by %s);"
                            " marked failed", row.id, row.thread_id, row.lease_owner)
        return failed
