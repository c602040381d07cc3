"""How late the event loop is: the signal that a process has more work than its one core.

Every stream, start and refusal of the process shares one event loop; when it is full (too
many tokens a second, too many starts, or a machine whose other jobs take the core), every
callback waits for its turn, and a new run's first token waits longest. So does a refusal: a
request waits for the loop before anything can answer it, so a process whose loop runs late
refuses late, however cheap the refusal.

A timer every `TICK` records how late it wakes. `sustained()` is how late the loop has been
over its last `SUSTAIN` ticks, all of them (the least late of them): a loop that is full is late
at every tick, while one pause (a garbage collection, one long step) makes one tick late and
is gone. The largest lateness of the last second, which the start gate read before, refused
runs for a second after any such pause (docs/decisions/0029-sustained-loop-lag-limit.md). A loop
held now for longer than `WINDOW` (no tick at all) is late by that much. The start gate
refuses new runs while it is past `GATEWAY_MAX_LOOP_LAG_SECONDS` (`start_gate.py`). One timer
per tick: nothing per token.

The same tick samples the loop thread's CPU clock: `cpu_share()` is the share of one core the
loop used over the last `CPU_WINDOW` (its streams, starts, refusals: everything the process
does on its loop, and nothing the machine's other jobs do). A loop near a full core has no room
for another run's tokens before it runs late, so the start gate refuses new runs past
`GATEWAY_MAX_LOOP_CPU` before the lateness shows (`start_gate.py`). One clock read per tick, and
one per question at the door.

The timer runs only while there is work: runs going (`busy`), or requests asking (each POST
reads `sustained()` at the door, which wakes it). An idle loop is not late, and a timer that
woke it at every tick cost an idle process its CPU and every next request cold caches
(docs/decisions/0028-no-idle-timers.md). Not watched, `sustained()` is 0: the first starts
after a quiet spell are judged by the other limits until `SUSTAIN` ticks have measured the
loop again.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable

TICK = 0.05
SUSTAIN = 3
WINDOW = 1.0
CPU_WINDOW = 1.0  # the loop's CPU share is over this much of the recent past


class LoopLateness:
    def __init__(self, busy: Callable[[], bool] = lambda: True,
                 cpu: Callable[[], float] = time.thread_time) -> None:
        self._late: deque[tuple[float, float]] = deque(maxlen=SUSTAIN)  # (woke at, s late)
        # (woke at, the loop thread's CPU then), a window's worth of ticks
        self._cpu_at: deque[tuple[float, float]] = deque(maxlen=int(CPU_WINDOW / TICK) + 2)
        self._cpu = cpu  # the loop thread's CPU clock (read on the loop)
        self._due: float | None = None  # when the running timer should fire
        self._busy = busy  # work going on that keeps the timer running (the runs)
        self._asked = asyncio.Event()  # `sustained()` was read since the last tick

    @property
    def watching(self) -> bool:
        """Whether the timer runs now (it stops while the process is idle)."""
        return self._due is not None

    async def watch(self) -> None:
        """Until cancelled: tick while there is work, sleep without a timer while there is
        none."""
        loop = asyncio.get_running_loop()
        while True:
            if not (self._asked.is_set() or self._busy()):
                self._due = None
                await self._asked.wait()
            self._asked.clear()
            self._due = loop.time() + TICK
            await asyncio.sleep(TICK)
            now = loop.time()
            self._late.append((now, max(0.0, now - self._due)))
            self._cpu_at.append((now, self._cpu()))

    def sustained(self) -> float:
        """Seconds: how late the loop has been at each of its last `SUSTAIN` ticks within
        `WINDOW`, or how long it has been held now past `WINDOW` (0 when not watched). Reading
        it keeps the timer running, or starts it."""
        self._asked.set()
        if self._due is None:
            return 0.0
        now = asyncio.get_running_loop().time()
        overdue = now - self._due
        if overdue >= WINDOW:
            return overdue
        recent = [late for woke, late in self._late if woke >= now - WINDOW]
        return min(recent) if len(recent) == SUSTAIN else 0.0

    def cpu_share(self) -> float:
        """The share of one core the loop's thread used over the last `CPU_WINDOW` (0 when
        not watched, or watched for less than half of it: not yet measured). Reading it keeps
        the timer running, or starts it."""
        self._asked.set()
        if self._due is None:
            return 0.0
        now = asyncio.get_running_loop().time()
        since = next(((at, cpu) for at, cpu in self._cpu_at if at >= now - CPU_WINDOW), None)
        if since is None or now - since[0] < CPU_WINDOW / 2:
            return 0.0
        return max(0.0, self._cpu() - since[1]) / (now - since[0])
