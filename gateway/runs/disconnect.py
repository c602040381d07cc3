"""The disconnect policy: what happens to a run when the last subscriber leaves.

Leaving is not cancelling. A run's `onDisconnect` decides:

- `grace` (default): the run goes on; if nobody has come back `grace` seconds after the last
  subscriber left, it is cancelled (a reload or a flaky network reconnects well within that);
- `cancel`: it is cancelled as soon as the last subscriber leaves (the real Tambo server's
  behaviour, for clients that rely on it);
- `continue`: it always runs to its end.

A run that has reached `awaiting_input` or any terminal state is never cancelled by a
disconnect: the Tambo clients close the stream on purpose the moment they read
`awaiting_input`. A follower in another process (it reads the log from the database) counts as
a subscriber too: it marks the run as watched every second (`Timings.watch_touch_ms`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Protocol

from ..protocol.clock import now_ms
from ..store.repository import Store
from .timings import Timings


class Attended(Protocol):
    """What the policy reads of an active run (`manager.ActiveRun`)."""

    @property
    def run_id(self) -> str: ...
    @property
    def subscribers(self) -> int: ...
    @property
    def ending(self) -> bool: ...


def grace_for(policy: str, grace_seconds: float) -> float | None:
    """Seconds an unwatched run may go on; None if the policy never cancels."""
    if policy == "continue":
        return None
    return 0.0 if policy == "cancel" else grace_seconds


async def cancel_when_unwatched(run: Attended, grace: float, store: Store, timings: Timings,
                                cancel: Callable[[], Awaitable[object]]) -> None:
    """Cancel `run` unless a subscriber is back `grace` seconds from now (re-armed by the
    manager at each departure, so the window counts from the last one).

    A follower in another process leaves without telling this one: its departure is known
    only as its last touch, up to `timings.watch_touch_ms` (plus lag) before it left. So it gets its
    own grace from that touch, plus the freshness margin; with the margin alone, a reader
    reconnecting through another process was cancelled 2 to 3 s after it left, whatever the
    grace (found by the soak)."""
    await asyncio.sleep(grace)
    while not run.ending and run.subscribers == 0:
        row = await store.get_run(run.run_id)
        if row is None:
            return
        if (row.watched_ms is None
                or now_ms() - row.watched_ms > grace * 1000 + timings.watch_fresh_ms):
            await cancel()
            return
        await asyncio.sleep(timings.watch_recheck_seconds)
