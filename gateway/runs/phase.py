"""Where a run of this process is in its life: one explicit phase instead of a set of flags."""

from __future__ import annotations

import enum


class RunPhase(enum.Enum):
    """`starting -> running -> ending -> done`, or `lost` from any phase before `done`.

    - `starting`: persisted and launched, not yet marked running under its lease;
    - `running`: the agent loop runs;
    - `ending`: its end is decided (finished, failed, or a cancel was requested): nothing may
      start it again, and the disconnect policy leaves it alone;
    - `done`: its terminal state is committed and its live log closed;
    - `lost`: another process ended it (our lease had expired): it writes nothing more.
    """

    STARTING = "starting"
    RUNNING = "running"
    ENDING = "ending"
    DONE = "done"
    LOST = "lost"

    @property
    def live(self) -> bool:
        """Still going: a cancel or a loss can still change how it ends."""
        return self in (RunPhase.STARTING, RunPhase.RUNNING)
