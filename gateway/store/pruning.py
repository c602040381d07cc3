"""Retention: threads not updated for a while are deleted, by hand (`gateway prune`) or by
every server (`GATEWAY_RETENTION_DAYS`) (docs/context.md, "Retention").

The deletes run in small batches, each its own short transaction (`store/queries/retention.py`), with
a pause between them, so live runs keep getting the database: on SQLite, whose one writer a
long delete would hold, and on PostgreSQL alike. A thread with a live or paused run is never
deleted. Several servers pruning at once only repeat each other's (idempotent) deletes.
"""

from __future__ import annotations

import asyncio
import logging

from ..protocol.clock import now_ms
from .queries.retention import PruneCount
from .repository import Store

log = logging.getLogger(__name__)

BATCH_THREADS = 20  # threads per delete transaction
BATCH_PAUSE_SECONDS = 0.05  # between two batches: the live runs' turn
DAY_MS = 86_400_000


async def prune(store: Store, before_ms: int, *, dry_run: bool = False,
                batch: int = BATCH_THREADS, pause: float = BATCH_PAUSE_SECONDS) -> PruneCount:
    """Delete the idle threads not updated since `before_ms` (with `dry_run`: only count
    them); how many threads and runs went."""
    if dry_run:
        return await store.count_old(before_ms)
    threads = runs = 0
    cursor: tuple[int, str] | None = None
    while True:
        ids, cursor = await store.old_threads(before_ms, batch, cursor)
        done = await store.delete_old_threads(ids, before_ms)
        threads, runs = threads + done.threads, runs + done.runs
        if cursor is None:
            return PruneCount(threads, runs)
        await asyncio.sleep(pause)


def check_interval(days: float) -> float:
    """Seconds between two prunes: hourly, more often for a retention shorter than a day."""
    return min(3600.0, max(1.0, days * 86400 / 24))


async def prune_periodically(store: Store, days: float) -> None:
    """The server's retention task: a prune at start-up, then every `check_interval`. A failed
    pass (the database away) is logged and tried again next time."""
    while True:
        try:
            done = await prune(store, now_ms() - int(days * DAY_MS))
            if done.threads:
                log.info("retention: deleted %d threads (%d runs) not updated for %g days",
                         done.threads, done.runs, days)
        except Exception as error:
            log.warning("retention: the prune failed (%s); trying again later",
                        type(error).__name__)
        await asyncio.sleep(check_interval(days))
