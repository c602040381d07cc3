"""Graceful shutdown: refuse new runs, let running ones finish, end the rest retryably.

uvicorn, on SIGTERM, stops reading new requests and gives open connections a short grace before
closing them, and sse-starlette ends every event stream at once; a run's subscribers would lose
their stream with no terminal event. So the drain runs first, while the server still serves:
new runs are refused (503 `SHUTTING_DOWN` with `Retry-After`), running runs have
`GATEWAY_DRAIN_SECONDS` (`Timings.drain_seconds`) to finish, and the rest are cancelled, which ends each with one
retryable `RUN_ERROR` and releases its thread in the same commit, so a client's retry can start
on another process at once. Only then is uvicorn told to exit.
"""

from __future__ import annotations

import asyncio
import logging

from .protocol.problems import ApiError
from .runs.manager import RunManager

log = logging.getLogger(__name__)

# What a refused client is told to wait: long enough for a restart behind a load balancer.
RETRY_AFTER_SECONDS = 5


class ShuttingDown(ApiError):
    """The 503 a new run gets while the process drains; `headers` go on the response."""

    def __init__(self) -> None:
        super().__init__(503, "SHUTTING_DOWN", "The gateway is shutting down; retry the run "
                                               "(another instance may take it)")
        self.headers = {"Retry-After": str(RETRY_AFTER_SECONDS)}


async def drain(manager: RunManager) -> None:
    """Stop taking runs, wait up to `drain_seconds` for the running ones, then end the rest."""
    seconds, flush = manager.timings.drain_seconds, manager.timings.shutdown_flush_seconds
    manager.refusal = ShuttingDown
    running = [a.done for a in manager.active.values()]
    if running:
        log.info("shutting down: waiting up to %g s for %d running run(s)", seconds,
                 len(running))
        waiting = [asyncio.ensure_future(done.wait()) for done in running]
        _, pending = await asyncio.wait(waiting, timeout=seconds)
        for future in pending:
            future.cancel()
    if manager.active:
        log.warning("shutting down: ending %d run(s) still running after %g s with a "
                    "retryable error", len(manager.active), seconds)
        await manager.shutdown()
        await asyncio.sleep(flush)
    elif running:
        await asyncio.sleep(flush)
