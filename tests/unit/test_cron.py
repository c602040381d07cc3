"""The cron parser (`gateway/runs/automation/cron.py`) against known due times, daylight-saving
changes included."""

from __future__ import annotations

import datetime as dt

import pytest

from gateway.runs.automation.cron import CronError, parse


def ms(text: str) -> int:
    """An ISO instant with its offset, as epoch ms."""
    return int(dt.datetime.fromisoformat(text).timestamp() * 1000)


def iso(millis: int, zone: str = "UTC") -> str:
    from zoneinfo import ZoneInfo
    return dt.datetime.fromtimestamp(millis / 1000, ZoneInfo(zone)).isoformat()


def upcoming(expression: str, start: str, count: int, zone: str = "UTC") -> list[str]:
    cron = parse(expression, zone)
    found, at = [], ms(start)
    for _ in range(count):
        at = cron.next_after(at)
        found.append(iso(at, zone))
    return found


def test_every_minute_is_strictly_after() -> None:
    assert upcoming("* * * * *", "2026-03-01T10:00:00+00:00", 2) == [
        "2026-03-01T10:01:00+00:00", "2026-03-01T10:02:00+00:00"]


def test_steps_ranges_lists_and_names() -> None:
    assert upcoming("*/15 9-10 * * mon-fri", "2026-12-04T10:40:00+00:00", 3) == [
        "2026-12-04T10:45:00+00:00",  # a Friday
        "2026-12-07T09:00:00+00:00",  # then Monday
        "2026-12-07T09:15:00+00:00"]
    assert upcoming("0 12 1,15 jan,jul *", "2026-01-01T12:00:00+00:00", 3) == [
        "2026-01-15T12:00:00+00:00", "2026-07-01T12:00:00+00:00", "2026-07-15T12:00:00+00:00"]


def test_day_of_month_or_day_of_week_when_both_are_restricted() -> None:
    # The 13th, or any Friday (Vixie cron): 2026-02-06 is a Friday, the 13th is too.
    assert upcoming("0 0 13 * 5", "2026-02-01T00:00:00+00:00", 3) == [
        "2026-02-06T00:00:00+00:00", "2026-02-13T00:00:00+00:00", "2026-02-20T00:00:00+00:00"]


def test_sunday_is_zero_or_seven() -> None:
    assert parse("0 0 * * 7").weekdays == parse("0 0 * * 0").weekdays == frozenset({0})


def test_leap_day() -> None:
    assert upcoming("0 0 29 2 *", "2026-01-01T00:00:00+00:00", 1) == [
        "2028-02-29T00:00:00+00:00"]


def test_a_time_zone() -> None:
    assert upcoming("30 9 * * *", "2026-07-01T00:00:00+00:00", 1, "Europe/Paris") == [
        "2026-07-01T09:30:00+02:00"]


def test_spring_forward_skipped_time_fires_once_at_the_jump() -> None:
    # New York, 2026-03-08: 02:00 EST becomes 03:00 EDT; 02:30 does not exist that day.
    assert upcoming("30 2 * * *", "2026-03-07T12:00:00-05:00", 3, "America/New_York") == [
        "2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00", "2026-03-10T02:30:00-04:00"]
    # Every quarter hour through the gap: the skipped ones are one firing at the jump.
    assert upcoming("*/15 * * * *", "2026-03-08T01:40:00-05:00", 4, "America/New_York") == [
        "2026-03-08T01:45:00-05:00", "2026-03-08T03:00:00-04:00",
        "2026-03-08T03:15:00-04:00", "2026-03-08T03:30:00-04:00"]


def test_fall_back_repeated_time_fires_once() -> None:
    # New York, 2026-11-01: 02:00 EDT becomes 01:00 EST; 01:30 happens twice.
    assert upcoming("30 1 * * *", "2026-10-31T12:00:00-04:00", 2, "America/New_York") == [
        "2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"]
    # An hourly job runs once in the repeated hour, then at 02:00 EST.
    assert upcoming("0 * * * *", "2026-11-01T00:30:00-04:00", 3, "America/New_York") == [
        "2026-11-01T01:00:00-04:00", "2026-11-01T02:00:00-05:00", "2026-11-01T03:00:00-05:00"]


def test_half_hour_zone_lord_howe() -> None:
    # Lord Howe moves its clocks by 30 minutes: 2026-10-04 02:00 becomes 02:30.
    assert upcoming("15 2 * * *", "2026-10-03T12:00:00+10:30", 1, "Australia/Lord_Howe") == [
        "2026-10-04T02:30:00+11:00"]


@pytest.mark.parametrize("expression", [
    "* * * *", "60 * * * *", "* 24 * * *", "* * 0 * *", "* * * 13 *", "* * * * 8",
    "5-1 * * * *", "*/0 * * * *", "x * * * *", "0 0 30 2 *", "1,,2 * * * *", "-1 * * * *",
])
def test_refused(expression: str) -> None:
    with pytest.raises(CronError):
        parse(expression).next_after(0)


def test_unknown_zone_refused() -> None:
    with pytest.raises(CronError):
        parse("* * * * *", "Mars/Olympus")
