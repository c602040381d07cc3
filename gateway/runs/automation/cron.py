"""Five-field cron expressions (minute, hour, day of month, month, day of week) in a time zone.

Parsed here rather than with a library: the grammar is small (`*`, numbers, names, `a-b`
ranges, `/n` steps, `,` lists) and what matters most, what happens around daylight-saving
changes, is a rule we choose and test (`tests/unit/test_cron.py`):

- a wall time that does not exist (the hour skipped when clocks go forward) fires once, at the
  instant the clocks jumped (so a daily 02:30 job still runs that day, at 03:00);
- a wall time that happens twice (the hour repeated when clocks go back) fires once, at its
  first occurrence.

As in Vixie cron, when both the day of month and the day of week are restricted (neither is
`*`), a day matching either fires; 0 and 7 are both Sunday.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

UTC = dt.UTC
MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
# How far ahead a due time is looked for: past it, an expression is taken never to fire (a
# 30th of February). Leap days on a given weekday recur within 28 years.
HORIZON_DAYS = 366 * 29
MAX_EXPRESSION_CHARS = 200


class CronError(ValueError):
    """An expression or time zone that cannot be used (the message says why)."""


@dataclass(frozen=True)
class Cron:
    """A parsed expression: the allowed values of each field, and the zone it is read in."""

    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    any_day: bool  # the day-of-month field is `*`
    any_weekday: bool  # the day-of-week field is `*`
    zone: ZoneInfo

    def day_matches(self, day: dt.date) -> bool:
        if day.month not in self.months:
            return False
        by_day = day.day in self.days
        by_weekday = (day.isoweekday() % 7) in self.weekdays
        if self.any_day or self.any_weekday:
            return by_day and by_weekday
        return by_day or by_weekday

    def next_after(self, after_ms: int) -> int:
        """The first due time strictly after `after_ms` (epoch ms), as epoch ms."""
        after = dt.datetime.fromtimestamp(after_ms / 1000, UTC)
        local = after.astimezone(self.zone).replace(tzinfo=None)
        # Wall times this far before `after`'s own are before it whatever the offsets (no
        # zone moves its clocks by more than two hours at once).
        floor = local - dt.timedelta(hours=3)
        day = local.date() - dt.timedelta(days=1)
        for _ in range(HORIZON_DAYS):
            if self.day_matches(day):
                for hour in sorted(self.hours):
                    for minute in sorted(self.minutes):
                        wall = dt.datetime.combine(day, dt.time(hour, minute))
                        if wall < floor:
                            continue
                        instant = _instant(wall, self.zone)
                        if instant > after:
                            return int(instant.timestamp() * 1000)
            day += dt.timedelta(days=1)
        raise CronError("the expression never fires")


def _instant(wall: dt.datetime, zone: ZoneInfo) -> dt.datetime:
    """The UTC instant of a wall time: its first occurrence, or, for a time the clocks skipped,
    the instant they jumped."""
    first = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
    if first.astimezone(zone).replace(tzinfo=None) == wall:
        return first
    # Skipped: `fold=1` reads the time with the offset after the jump, `fold=0` with the one
    # before; the jump is between the two, at a whole minute.
    low = wall.replace(tzinfo=zone, fold=1).astimezone(UTC)
    high = first
    while high - low > dt.timedelta(minutes=1):
        middle = low + dt.timedelta(minutes=((high - low) // dt.timedelta(minutes=1)) // 2)
        if _offset(middle, zone) == _offset(high, zone):
            high = middle
        else:
            low = middle
    return high


def _offset(instant: dt.datetime, zone: ZoneInfo) -> dt.timedelta | None:
    return instant.astimezone(zone).utcoffset()


def zone_of(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        raise CronError(f"unknown time zone {name[:64]!r}") from None


def _value(text: str, names: tuple[str, ...] | None, offset: int) -> int:
    if names is not None and text.lower() in names:
        return names.index(text.lower()) + offset
    if not text.isdigit() or len(text) > 2:
        raise CronError(f"{text[:16]!r} is not a number")
    return int(text)


def _field(text: str, low: int, high: int, names: tuple[str, ...] | None = None,
           offset: int = 0, top: int | None = None) -> frozenset[int]:
    """The values a field allows; `top`: the largest value the field accepts (7 for Sunday)."""
    top = high if top is None else top
    values: set[int] = set()
    for part in text.split(","):
        step = 1
        if "/" in part:
            part, step_text = part.split("/", 1)
            if not step_text.isdigit() or not 0 < int(step_text) <= top:
                raise CronError(f"bad step {step_text[:16]!r}")
            step = int(step_text)
        if part == "*":
            first, last = low, high
        elif "-" in part:
            a, b = part.split("-", 1)
            first, last = _value(a, names, offset), _value(b, names, offset)
        else:
            first = _value(part, names, offset)
            last = top if step > 1 else first
        if not (low <= first <= top and low <= last <= top) or first > last:
            raise CronError(f"{part[:16]!r} is outside {low}-{top}")
        values.update(range(first, last + 1, step))
    return frozenset(values)


def parse(expression: str, timezone: str = "UTC") -> Cron:
    """A five-field expression read in `timezone` (an IANA name); `CronError` otherwise."""
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise CronError("the expression is too long")
    fields = expression.split()
    if len(fields) != 5:
        raise CronError("a cron expression has five fields: minute hour day month weekday")
    minute, hour, day, month, weekday = fields
    weekdays = _field(weekday, 0, 6, DAYS, 0, top=7)
    cron = Cron(_field(minute, 0, 59), _field(hour, 0, 23), _field(day, 1, 31),
                _field(month, 1, 12, MONTHS, 1),
                frozenset(0 if d == 7 else d for d in weekdays),
                day.startswith("*"), weekday.startswith("*"), zone_of(timezone))
    return cron
