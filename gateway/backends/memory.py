"""In-process parts: quota counters that only this process counts.

On one machine a run's live log is already in memory (`runs/log/live.py`, read by its subscribers in
`runs/log/subscription.py`), so the memory backend has only the counters to give: exact for one
process; several processes sharing a SQLite file each count their own runs. The database
backend (`database.py`) uses them for every deployment without Redis.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..auth.subjects import Subject
from ..runs.admission.quotas import DAY_MS, MINUTE_MS, Exceeded


@dataclass
class MemoryCounters:
    """One process's counters; exact for a single process. A window's counts are dropped when
    the next window begins, so subjects seen once (every user scope) are not kept forever."""

    running: dict[str, set[str]] = field(default_factory=dict)
    starts: dict[str, tuple[int, int]] = field(default_factory=dict)  # (minute, count)
    tokens: dict[str, tuple[int, int]] = field(default_factory=dict)  # (day, count)
    windows: tuple[int, int] = (0, 0)  # the (minute, day) the counts were last pruned in
    processes: int = 1  # these counters are this process's alone

    def _prune(self, minute: int, day: int) -> None:
        if self.windows[0] != minute:
            self.starts = {n: c for n, c in self.starts.items() if c[0] == minute}
        if self.windows[1] != day:
            self.tokens = {n: c for n, c in self.tokens.items() if c[0] == day}
        self.windows = (minute, day)

    async def acquire(self, ticket: str, subjects: Sequence[Subject], now: int,
                      weight: int = 1) -> tuple[int, Exceeded] | None:
        minute, day = now // MINUTE_MS, now // DAY_MS
        self._prune(minute, day)
        for index, subject in enumerate(subjects):
            limits = subject.limits
            if limits.daily_tokens and _in(self.tokens, subject.name, day) >= limits.daily_tokens:
                return index, "tokens"
            if (limits.runs_per_minute
                    and _in(self.starts, subject.name, minute) >= limits.runs_per_minute):
                return index, "rate"
            if (limits.concurrent_runs
                    and len(self.running.get(subject.name, ())) >= limits.concurrent_runs):
                return index, "concurrent"
        for subject in subjects:
            if subject.limits.concurrent_runs:
                self.running.setdefault(subject.name, set()).add(ticket)
        self.count_starts(subjects, now, weight)
        return None

    def count_starts(self, subjects: Sequence[Subject], now: int, weight: int) -> None:
        minute = now // MINUTE_MS
        self._prune(minute, now // DAY_MS)
        for subject in subjects:
            if subject.limits.runs_per_minute:
                self.starts[subject.name] = (minute,
                                             _in(self.starts, subject.name, minute) + weight)

    async def release(self, ticket: str, subjects: Sequence[Subject]) -> None:
        for subject in subjects:
            running = self.running.get(subject.name)
            if running is not None:
                running.discard(ticket)
                if not running:
                    del self.running[subject.name]

    async def add_tokens(self, subjects: Sequence[Subject], tokens: int, now: int) -> None:
        day = now // DAY_MS
        self._prune(now // MINUTE_MS, day)
        for subject in subjects:
            self.tokens[subject.name] = (day, _in(self.tokens, subject.name, day) + tokens)


def _in(counts: dict[str, tuple[int, int]], name: str, window: int) -> int:
    counted = counts.get(name)
    return counted[1] if counted is not None and counted[0] == window else 0


