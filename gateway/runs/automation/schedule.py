"""A schedule's due times: `POST /v1/crons` (`api/crons.py`) takes a five-field cron
expression with a time zone, or an interval in seconds; both answer "the first due time after
this instant", the only question the scheduler asks (`runs/admission/schedules.py`)."""

from __future__ import annotations

from typing import Any

from ...config import Settings
from ...protocol.problems import ApiError, Problem
from . import cron


def check(settings: Settings, every: int | None, expression: str | None = None,
          timezone: str = "UTC") -> dict[str, Any]:
    """The schedule (`every` seconds, or a cron `expression` in `timezone`) as it is stored, if
    it can fire; `INVALID_SCHEDULE` otherwise."""
    if every is not None:
        if every < settings.cron_min_interval_seconds:
            raise ApiError(Problem.INVALID_SCHEDULE, "schedule.every is below the minimum "
                           f"of {settings.cron_min_interval_seconds} s",
                           errors={"schedule.every": "too short"})
        return {"every": every}
    try:
        cron.parse(expression or "", timezone).next_after(0)
    except cron.CronError as exc:
        raise ApiError(Problem.INVALID_SCHEDULE, f"schedule: {exc}",
                       errors={"schedule": str(exc)}) from None
    return {"cron": expression, "timezone": timezone}


def next_due(schedule: dict[str, Any], anchor_ms: int, after_ms: int) -> int:
    """The first due time strictly after `after_ms`: an interval counts from `anchor_ms` (the
    schedule's creation), a cron expression from the clock."""
    every = schedule.get("every")
    if every is not None:
        step = int(every) * 1000
        if after_ms < anchor_ms:
            return anchor_ms + step
        return anchor_ms + ((after_ms - anchor_ms) // step + 1) * step
    return cron.parse(schedule["cron"], schedule.get("timezone", "UTC")).next_after(after_ms)
