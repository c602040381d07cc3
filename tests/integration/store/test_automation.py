"""Schedules' and webhooks' queries (`store/queries/crons.py`, `webhooks.py`), on SQLite and
PostgreSQL alike: what is read back is what was written, a due time is taken by one caller,
and a webhook is claimed by one."""

from __future__ import annotations

import asyncio

from gateway.protocol.clock import new_id, now_ms
from gateway.store.repository import Store
from gateway.store.tables import CronRow, RunRow, ThreadRow, WebhookDeliveryRow
from tests.integration.store.conftest import PROJECT, new_thread, run_row


async def test_a_due_time_is_taken_once(store: Store) -> None:
    now = now_ms()
    cron = CronRow(id=new_id("cron_"), project_id=PROJECT, user_key="u", agent="default",
                   schedule={"every": 60}, message="hé", metadata_={"k": "v"},
                   created_ms=now - 60_000, next_due_ms=now)
    await store.add_cron(cron)
    assert (await store.get_cron(PROJECT, cron.id)).metadata_ == {"k": "v"}
    assert await store.get_cron("another-project", cron.id) is None
    assert [c.id for c in await store.due_crons(now, 10)] == [cron.id]
    taken = await asyncio.gather(*(store.take_due_time(cron.id, now, now + 60_000)
                                   for _ in range(4)))
    assert sorted(taken) == [False, False, False, True]
    assert await store.due_crons(now, 10) == []
    await store.cron_fired(cron.id, "run_1", None)
    await store.cron_fired(cron.id, None, "TOO_MANY_CONCURRENT_RUNS")
    fired = await store.get_cron(PROJECT, cron.id)
    assert (fired.runs_started, fired.last_run_id, fired.last_error, fired.last_due_ms) == (
        1, "run_1", "TOO_MANY_CONCURRENT_RUNS", now)
    assert [c.id for c in await store.list_crons(PROJECT, "u", 10)] == [cron.id]
    assert await store.list_crons(PROJECT, "someone-else", 10) == []
    assert await store.count_crons(PROJECT) == 1
    assert not await store.delete_cron(PROJECT, cron.id, "someone-else")
    assert await store.delete_cron(PROJECT, cron.id, "u")
    assert not await store.take_due_time(cron.id, now + 60_000, None)


async def test_a_due_time_given_back_is_due_again_once(store: Store) -> None:
    """A due time whose run could not start for a moment is given back: due again, with the
    reason; giving it back twice, or after the schedule moved on, changes nothing."""
    now = now_ms()
    cron = CronRow(id=new_id("cron_"), project_id=PROJECT, user_key="u", agent="default",
                   schedule={"every": 60}, message="again", created_ms=now - 60_000,
                   next_due_ms=now)
    await store.add_cron(cron)
    assert await store.take_due_time(cron.id, now, now + 60_000)
    assert await store.give_back_due_time(cron.id, now, now + 60_000, "SHUTTING_DOWN")
    assert not await store.give_back_due_time(cron.id, now, now + 60_000, "SHUTTING_DOWN")
    back = await store.get_cron(PROJECT, cron.id)
    assert (back.next_due_ms, back.last_error) == (now, "SHUTTING_DOWN")
    assert [c.id for c in await store.due_crons(now, 10)] == [cron.id]
    assert await store.take_due_time(cron.id, now, None)  # its last due time, taken again
    await store.cron_fired(cron.id, "run_1", None)
    assert not await store.give_back_due_time(cron.id, now - 60_000, None, "OVERLOADED")
    fired = await store.get_cron(PROJECT, cron.id)
    assert (fired.next_due_ms, fired.last_error, fired.runs_started) == (None, None, 1)


def webhook_of(run: RunRow, now: int) -> WebhookDeliveryRow:
    return WebhookDeliveryRow(run_id=run.id, thread_id=run.thread_id, project_id=PROJECT,
                              url="https://hooks.example.com/x", created_ms=now,
                              next_attempt_ms=now)


async def test_a_webhook_is_written_with_its_run_s_start_only(store: Store) -> None:
    """The start's own write keeps the webhook (a process that dies after it loses nothing);
    a start refused on a busy thread writes none; a new thread's start and a queued run's
    write keep theirs too."""
    thread = await new_thread(store)
    first, second = run_row(thread.id), run_row(thread.id)
    now = now_ms()
    assert await store.start_run(first, [], now, None, webhook=webhook_of(first, now)) == \
        "started"
    assert await store.start_run(second, [], now, None, webhook=webhook_of(second, now)) == \
        "conflict"
    assert (await store.get_webhook_delivery(first.id)) is not None
    assert (await store.get_webhook_delivery(second.id)) is None
    queued = run_row(thread.id)
    queued.status = "queued"
    await store.enqueue_run(queued, webhook_of(queued, now))
    assert (await store.get_webhook_delivery(queued.id)) is not None
    other = ThreadRow(id=new_id("thr_"), project_id=PROJECT, created_ms=now, updated_ms=now)
    third = run_row(other.id)
    await store.start_run_on_new_thread(other, [], third, [], webhook_of(third, now))
    assert (await store.get_webhook_delivery(third.id)) is not None


async def test_a_webhook_waits_for_its_run_and_is_claimed_once(store: Store) -> None:
    thread = await new_thread(store)
    run = run_row(thread.id)
    run.status = "running"
    now = now_ms()
    assert await store.start_run(run, [], now, None, webhook=webhook_of(run, now)) == "started"
    assert await store.ready_webhook_deliveries(now, 10) == []  # its run is going
    assert await store.finish_run(run.id, thread.id, "completed", now_ms())
    [(ready, ended)] = await store.ready_webhook_deliveries(now_ms(), 10)
    assert ready.run_id == run.id and ended is not None and ended.status == "completed"
    claims = await asyncio.gather(*(store.claim_webhook_delivery(run.id, f"p{i}",
                                                                 now + 60_000, now_ms())
                                    for i in range(4)))
    assert sorted(claims) == [False, False, False, True]
    owner = f"p{claims.index(True)}"
    await store.webhook_attempted(run.id, owner, state="delivered", attempts=1,
                                  next_attempt_ms=now, first_attempt_ms=now, status=200,
                                  error=None, now=now)
    [listed] = await store.list_webhook_deliveries(PROJECT, 10)
    assert (listed.state, listed.attempts, listed.last_status, listed.claimed_by) == (
        "delivered", 1, 200, None)
    assert await store.ready_webhook_deliveries(now_ms() + 10_000, 10) == []
    assert await store.prune_webhook_deliveries(now + 1) == 1
    assert await store.get_webhook_delivery(run.id) is None
