"""A schedule's due times (`runs/automation/schedule.py`) and a webhook's waits and status
(`runs/automation/webhooks.py`): the arithmetic the scheduler and the sender rely on."""

from __future__ import annotations

from gateway.config import Settings
from gateway.runs.automation.schedule import next_due
from gateway.runs.automation.webhooks import backoff_ms, status_of
from gateway.store.tables import RunRow


def test_an_interval_counts_from_its_creation() -> None:
    every = {"every": 60}
    assert next_due(every, 1_000, 1_000) == 61_000
    assert next_due(every, 1_000, 61_000) == 121_000  # strictly after
    assert next_due(every, 1_000, 61_001) == 121_000
    assert next_due(every, 1_000, 0) == 61_000  # before its creation: the first


def test_a_cron_schedule_reads_its_zone() -> None:
    paris = {"cron": "0 8 * * *", "timezone": "Europe/Paris"}
    # 2026-07-01T00:00Z: 08:00 in Paris is 06:00 UTC in summer.
    assert next_due(paris, 0, 1_782_864_000_000) == 1_782_864_000_000 + 6 * 3_600_000


def test_webhook_waits_double_up_to_a_cap() -> None:
    settings = Settings(webhook_backoff_seconds=5)
    assert [backoff_ms(settings, n) for n in (1, 2, 3)] == [5_000, 10_000, 20_000]
    assert backoff_ms(settings, 30) == 900_000


def test_a_run_lost_with_its_process_is_reported_lost() -> None:
    lost = RunRow(id="r", thread_id="t", project_id="p", status="failed", created_ms=0,
                  error={"code": "RUN_LOST", "message": "its process stopped"})
    failed = RunRow(id="r", thread_id="t", project_id="p", status="failed", created_ms=0,
                    error={"code": "LLM_ERROR", "message": "no"})
    assert (status_of(lost), status_of(failed)) == ("lost", "failed")
