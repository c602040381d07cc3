"""How much of the event loop a run start takes while starts queue: what a newcomer waits for.

The start gate (`start_gate.py`) refuses a newcomer that would take longer than
`GATEWAY_MAX_START_WAIT_SECONDS` to be started. All the starts of a burst arrive before any of
them ends, so the gate can only predict that from what it saw before. It used to predict from
how long recent starts held their turn, divided by the gate's width: a wall-clock figure of
another moment, which misjudged bursts both ways. A turn is mostly a wait for the database's
one connection (on SQLite), and in a burst those waits overlap (one group commit carries many
starts): the pace is set by the loop's CPU. Judged by turns, the gate refused half of a burst
it could carry on a quiet machine, and expected far less waiting than the starts met on a
loaded one (docs/decisions/0026-start-gate.md).

So the pace is measured in the loop thread's CPU, and only while starts queue (the gate full,
the pace set by the process rather than by arrivals): the CPU the loop spent from one turn's
end to the next, per turn ended. That counts the start's own work and whatever else the loop
did meanwhile (the streams already running, refusals), which a start really waits behind; not
a wait for the database, which the starts of a burst share. A ratio of decaying sums (about the
last `1 / (1 - DECAY)` turns), as turns end in lumps (a group commit ends 16 at once).

And it is a pace of this queue only: when the queue empties the pace is forgotten, and a new
queue's pace is known once `MIN_TURNS` of its turns have ended. A pace carried from another
moment measured other work: kept across queues, it counted the CPU of the streams running
meanwhile, and refused half of a burst that came after them. So a
burst that arrives in one instant is let in whole (up to `GATEWAY_MAX_ACTIVE_RUNS`); what
arrives once its first starts have ended is judged by their pace, and a start under way for
`GATEWAY_MAX_START_WAIT_SECONDS` refuses newcomers whatever the pace.
"""

from __future__ import annotations

import time
from collections.abc import Callable

DECAY = 0.97  # per turn ended while starts queued: the last 30 or so count
MIN_TURNS = 8  # turns ended while starts queued before the queue's pace is told


class StartPace:
    """Seconds of the loop's CPU per run start while starts queue (0 while unknown)."""

    def __init__(self, cpu: Callable[[], float] = time.thread_time) -> None:
        self._cpu = cpu  # the loop thread's CPU clock (the gate runs on the loop)
        self._spent = self._ended = 0.0  # decaying sums over this queue: CPU, turns ended
        self._turns = 0  # turns ended in this queue
        self._since: float | None = None  # CPU at the last turn's end while starts queued

    def ended(self, queued: int) -> None:
        """A turn ended with `queued` starts still waiting for theirs."""
        now = self._cpu()
        if self._since is not None:
            self._spent = DECAY * self._spent + (now - self._since)
            self._ended = DECAY * self._ended + 1
            self._turns += 1
        if queued:
            self._since = now
        else:  # the queue is gone: so is its pace
            self._since, self._spent, self._ended, self._turns = None, 0.0, 0.0, 0

    def seconds(self) -> float:
        return self._spent / self._ended if self._turns >= MIN_TURNS else 0.0
