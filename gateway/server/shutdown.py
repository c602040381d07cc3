"""Graceful shutdown: refuse new runs, let running ones finish, end the rest retryably.

uvicorn, on SIGTERM, stops reading new requests and gives open connections a short grace before
closing them, and sse-starlette ends every event stream at once; a run's subscribers would lose
their stream with no terminal event. So the drain runs first, while the server still serves:
new runs are refused (503 `SHUTTING_DOWN` with `Retry-After`), running runs have
`GATEWAY_DRAIN_SECONDS` to finish, and the rest are cancelled, which ends each with one
retryable `RUN_ERROR` and releases its thread in the same commit, so a client's retry can start
on another process at once. Only then is uvicorn told to exit.

The app takes over the signals itself (`DrainOnSignals`, installed by its lifespan) rather than
through a uvicorn `Server` subclass: `gateway serve --workers N` runs uvicorn's own supervisor,
whose worker processes build plain `Server`s, and every one of them must drain.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

from ..protocol.problems import ApiError, Problem
from ..runs.manager import RunManager

log = logging.getLogger(__name__)

# What a refused client is told to wait: long enough for a restart behind a load balancer.
RETRY_AFTER_SECONDS = 5
SIGNALS = (signal.SIGINT, signal.SIGTERM)


class ShuttingDown(ApiError):
    """The 503 a new run gets while the process drains; `headers` go on the response."""

    def __init__(self) -> None:
        super().__init__(Problem.SHUTTING_DOWN, "The gateway is shutting down; retry the run "
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


Handler = Callable[[int, FrameType | None], Any]


class DrainOnSignals:
    """SIGTERM/SIGINT handlers that drain the runs before handing the signal to the server.

    Installed over the server's own handlers (uvicorn's `handle_exit`), which are called once
    the drain is over. While draining, a second SIGINT (Ctrl-C again) stops at once; a repeated
    SIGTERM is ignored: under `--workers` each worker gets one from the supervisor, and a
    process manager that signals the whole group (systemd's default) sends another.
    """

    def __init__(self, manager: RunManager) -> None:
        self.manager = manager
        self.loop = asyncio.get_running_loop()
        self.previous: dict[int, Handler] = {}
        self.draining = False
        self.task: asyncio.Task[None] | None = None  # held so it is not collected

    @classmethod
    def install(cls, manager: RunManager) -> DrainOnSignals | None:
        """Take over the signals if a server handles them here (else: nothing to drain on)."""
        if threading.current_thread() is not threading.main_thread():
            return None
        handlers = {sig: signal.getsignal(sig) for sig in SIGNALS}
        if not all(callable(h) for h in handlers.values()):
            return None  # not under a server that stops on them (default or ignored)
        self = cls(manager)
        for sig, handler in handlers.items():
            self.previous[sig] = handler  # type: ignore[assignment]
            signal.signal(sig, self.handle)
        return self

    def uninstall(self) -> None:
        for sig, handler in self.previous.items():
            if signal.getsignal(sig) == self.handle:
                signal.signal(sig, handler)

    def handle(self, sig: int, frame: FrameType | None) -> None:
        if not self.draining:
            self.draining = True
            self.loop.call_soon_threadsafe(self._start, sig, frame)
        elif sig == signal.SIGINT:
            self.previous[sig](sig, frame)
        else:
            log.info("already draining: %s ignored", signal.Signals(sig).name)

    def _start(self, sig: int, frame: FrameType | None) -> None:
        async def run() -> None:
            try:
                await drain(self.manager)
            finally:
                _end_event_streams()
                self.previous[sig](sig, frame)

        self.task = asyncio.ensure_future(run())


def _end_event_streams() -> None:
    """Tell sse-starlette the server is stopping, so open streams (idle readers, a thread's
    WebSocket) end now instead of at uvicorn's grace timeout; it learns it by patching
    uvicorn's handler, which a worker process bound before that patch was imported."""
    from sse_starlette.sse import AppStatus

    AppStatus.should_exit = True
