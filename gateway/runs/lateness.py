"""How late the event loop is: the signal that a process has more work than its one core.

Every stream, start and refusal of the process shares one event loop; when it is full (too
many tokens a second, too many starts, or a machine whose other jobs take the core), every
callback waits for its turn, and a new run's first token waits longest. A timer every `TICK`
records how late it wakes; `recent()` is the largest lateness of the last `WINDOW` seconds,
or how overdue the timer is now (a loop held by one long step has not woken it yet). The start
gate refuses new runs while it is past `GATEWAY_MAX_LOOP_LAG_SECONDS` (`start_gate.py`). One
timer per tick: nothing per token.
"""

from __future__ import annotations

import asyncio
from collections import deque

TICK = 0.05
WINDOW = 1.0


class LoopLateness:
    def __init__(self) -> None:
        self._late: deque[tuple[float, float]] = deque()  # (woke at, seconds late)
        self._due: float | None = None  # when the running timer should fire

    async def watch(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            self._due = loop.time() + TICK
            await asyncio.sleep(TICK)
            now = loop.time()
            self._late.append((now, max(0.0, now - self._due)))
            while self._late and self._late[0][0] < now - WINDOW:
                self._late.popleft()

    def recent(self) -> float:
        """Seconds: the loop's largest lateness over the last `WINDOW` (0 when not watched)."""
        if self._due is None:
            return 0.0
        now = asyncio.get_running_loop().time()
        while self._late and self._late[0][0] < now - WINDOW:
            self._late.popleft()
        return max(now - self._due, max((late for _, late in self._late), default=0.0), 0.0)
