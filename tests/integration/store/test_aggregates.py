"""Each aggregate's queries, on SQLite and PostgreSQL alike (`conftest`): what a caller reads
back is what was written, and each conditional write happens once."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import text

from gateway.protocol.clock import new_id, now_ms
from gateway.store.queries.admin import Window
from gateway.store.repository import Store
from gateway.store.tables import ApiKeyRow, ComponentRow, MessageRow, RunUsageRow
from tests.integration.store.conftest import PROJECT, new_thread, run_row


def message(thread_id: str, run_id: str | None = None, role: str = "user") -> MessageRow:
    return MessageRow(id=new_id("msg_"), thread_id=thread_id, run_id=run_id, role=role,
                      parts=[{"type": "text", "text": "hé"}], created_ms=now_ms())


async def test_threads_and_messages(store: Store) -> None:
    thread = await new_thread(store, user_key="u")
    named = await new_thread(store)
    await store.update_thread(named.id, client_id="client-1", meta={"m": 1}, name="N")
    assert (await store.get_thread_by_client_id(PROJECT, "client-1")).id == named.id
    assert (await store.get_thread_by_client_id(PROJECT, thread.id)).id == thread.id
    assert (await store.get_thread(PROJECT, named.id)).meta == {"m": 1}
    assert await store.get_thread("another-project", named.id) is None
    assert await store.count_threads(PROJECT, None, 10) == 2
    assert await store.count_threads(PROJECT, "u", 10) == 1
    rows = [message(thread.id) for _ in range(5)]
    assert await store.add(*rows)
    assert [m.id for m in await store.history(thread.id)] == [m.id for m in rows]
    page = await store.list_messages(thread.id, 2, None, descending=True)
    assert [m.id for m in page.rows] == [rows[4].id, rows[3].id] and page.has_more
    page = await store.list_messages(thread.id, 10, page.next_cursor, descending=True)
    assert [m.id for m in page.rows] == [m.id for m in reversed(rows[:3])]
    assert await store.save_message_parts(rows[0].id, [{"type": "text", "text": "x"}], True)
    saved = await store.get_message(thread.id, rows[0].id)
    assert saved.parts == [{"type": "text", "text": "x"}] and saved.is_cancelled
    await store.save_message_meta(rows[1].id, {"k": "v"})
    assert (await store.get_message(thread.id, rows[1].id)).meta == {"k": "v"}
    await store.delete_thread(thread.id)
    assert await store.get_thread(PROJECT, thread.id) is None
    assert await store.history(thread.id) == []


async def test_a_fenced_write_needs_the_lease(store: Store) -> None:
    thread = await new_thread(store)
    run = run_row(thread.id, owner="process-a")
    assert await store.start_run(run, [], now_ms(), None) == "started"
    assert not await store.add(message(thread.id, run.id), fence=(run.id, "process-b"))
    assert not await store.add_message(message(thread.id, run.id), fence=(run.id, "process-b"))
    assert await store.add_message(message(thread.id, run.id), fence=(run.id, "process-a"))
    assert len(await store.history(thread.id)) == 1
    answer = message(thread.id, run.id, "assistant")
    assert await store.add(answer, fence=(run.id, "process-a"))
    assert await store.mark_run_answer(run.id, "flag") == 1
    assert (await store.get_message(thread.id, answer.id)).meta == {"flag": True}


async def test_queued_runs_wait_for_their_thread_and_are_promoted_once(store: Store) -> None:
    thread = await new_thread(store)
    first = run_row(thread.id)
    first.status = "running"
    assert await store.start_run(first, [], now_ms(), None) == "started"
    queued = run_row(thread.id, owner="")
    queued.lease_owner = queued.lease_expires_ms = None
    await store.enqueue_run(queued)
    assert (await store.next_queued_run(thread.id)).id == queued.id
    found: list[str] = []
    assert await store.finish_run(first.id, thread.id, "completed", now_ms(), queued=found)
    assert found == [queued.id]
    promotions = await asyncio.gather(*(
        store.promote_run(queued.id, thread.id, first.id, [message(thread.id, queued.id)],
                          "process-a", now_ms() + 30_000, now_ms()) for _ in range(3)))
    assert sorted(promotions) == [False, False, True]
    promoted = await store.get_run(queued.id)
    assert (promoted.status, promoted.previous_run_id) == ("running", first.id)
    assert await store.next_queued_run(thread.id) is None
    assert await store.renew_leases([queued.id, first.id], "process-a", 123) == {queued.id}
    assert [r.id for r in await store.expired_runs(now_ms())] == [queued.id]
    assert await store.end_orphaned_run(promoted, now_ms(), "failed", {"code": "LOST"},
                                        {"t": "end"})
    assert not await store.end_orphaned_run(promoted, now_ms(), "failed", {"code": "LOST"},
                                            {"t": "end"})
    assert [f.frame for f in await store.read_frames(queued.id)] == [{"t": "end"}]
    assert (await store.last_frame(queued.id)).frame == {"t": "end"}
    ended = await store.runs_ended_since(queued.id, 0, 5)
    assert ended == [(queued.id, first.id), (first.id, None)]
    page = await store.list_runs(thread.id, 1, None)
    assert len(page.rows) == 1 and page.has_more
    assert len((await store.list_runs(thread.id, 1, page.next_cursor)).rows) == 1


async def test_a_pause_is_ended_once(store: Store) -> None:
    thread = await new_thread(store)
    run = run_row(thread.id)
    assert await store.start_run(run, [], now_ms(), None) == "started"
    assert await store.finish_run(run.id, thread.id, "awaiting_input", now_ms(),
                                  pending=[{"toolCallId": "c"}])
    results = message(thread.id, run.id, "tool")
    assert await store.end_pause(run.id, thread.id, now_ms(), {"code": "CANCELLED"}, results)
    assert not await store.end_pause(run.id, thread.id, now_ms(), {"code": "CANCELLED"},
                                     message(thread.id, run.id, "tool"))
    assert (await store.get_run(run.id)).status == "cancelled"
    assert [m.id for m in await store.history(thread.id)] == [results.id]


async def test_run_fields_and_lookups(store: Store) -> None:
    thread = await new_thread(store)
    run = run_row(thread.id)
    run.idempotency_key, run.client_id = "key", "agui-run"
    assert await store.start_run(run, [], now_ms(), None) == "started"
    await store.set_run_model(run.id, "fallback-model")
    await store.touch_watched(run.id, 42)
    stored = await store.get_run(run.id)
    assert (stored.model, stored.watched_ms) == ("fallback-model", 42)
    assert (await store.find_run_by_idempotency_key(thread.id, "key")).id == run.id
    await store.forget_run_idempotency_key(run.id)
    assert await store.find_run_by_idempotency_key(thread.id, "key") is None
    assert (await store.get_run_by_client_id(PROJECT, "agui-run")).id == run.id
    assert (await store.get_run_by_client_id(PROJECT, run.id)) is None  # it has a name


async def test_components_and_their_states_as_of_a_message(store: Store) -> None:
    thread = await new_thread(store)
    run = run_row(thread.id)
    assert await store.start_run(run, [], now_ms(), None) == "started"
    component = ComponentRow(id=new_id("comp_"), thread_id=thread.id, message_id="m1",
                             name="Card", props={"p": 1}, state={"s": 0}, updated_ms=now_ms())
    assert not await store.put_component(component, fence=(run.id, "process-b"))
    assert await store.put_component(component, fence=(run.id, "process-a"))
    assert await store.add(message(thread.id))
    current = await store.get_component(thread.id, component.id)
    assert current.message_seq is None and current.props == {"p": 1}
    assert await store.set_component_state(current, {"s": 1}, now_ms())
    later = await store.get_component(thread.id, component.id)
    assert later.revision == 1 and later.message_seq is not None
    await store.add(message(thread.id))
    assert await store.set_component_state(later, {"s": 2}, now_ms())
    kept = await store.component_states_as_of([component.id], later.message_seq)
    assert kept[component.id].state == {"s": 1}
    assert set(await store.components_of(thread.id)) == {component.id}
    assert await store.get_component("another-thread", component.id) is None


async def test_an_idempotency_key_is_claimed_once(store: Store) -> None:
    claims = await asyncio.gather(*(store.claim_idempotency_key(PROJECT, "k", 1)
                                    for _ in range(4)))
    assert claims.count(None) == 1
    await store.set_idempotency_key(PROJECT, "k", thread_id="thr_1", run_id="run_1")
    held = await store.claim_idempotency_key(PROJECT, "k", 2)
    assert (held.thread_id, held.run_id) == ("thr_1", "run_1")
    await store.release_idempotency_key(PROJECT, "k")
    assert await store.get_idempotency_key(PROJECT, "k") is None


async def test_api_keys(store: Store) -> None:
    key = ApiKeyRow(id=new_id("key_"), project_id=PROJECT, key_hash="h" * 64, prefix="gw_",
                    created_ms=now_ms())
    await store.add_api_key(key)
    assert (await store.find_api_key("h" * 64)).id == key.id
    assert await store.count_api_keys() == 1
    await store.touch_api_key(key.id, 50)
    await store.touch_api_key(key.id, 40)  # an older use does not move it back
    assert (await store.get_api_key(key.id)).last_used_ms == 50
    assert not await store.revoke_api_key(key.id, "another-project", now_ms())
    assert await store.revoke_api_key(key.id, PROJECT, now_ms())
    assert not await store.revoke_api_key(key.id, PROJECT, now_ms())
    assert [k.id for k in await store.list_api_keys(PROJECT)] == [key.id]


async def test_usage_sums_and_the_operators_listings(store: Store) -> None:
    thread = await new_thread(store, user_key="u")
    run = run_row(thread.id)
    assert await store.start_run(run, [], now_ms(), None) == "started"
    now = now_ms()
    usage = [{"run_id": run.id, "model": model, "thread_id": thread.id, "project_id": PROJECT,
              "agent": "default", "api_key_id": "key_1", "cost_usd": cost, "created_ms": now,
              "estimated_calls": 0, "calls": 1, "input_tokens": 10, "output_tokens": 5,
              "reasoning_tokens": 0, "cached_input_tokens": 0}
             for model, cost in (("a", 0.25), ("b", None))]
    assert await store.finish_run(run.id, thread.id, "completed", now, usage=usage)
    assert [e["model"] for e in await store.run_usage(run.id)] == ["a", "b"]
    assert (await store.runs_usage([run.id]))[run.id][0]["totalTokens"] == 15
    assert [e["costUsd"] for e in await store.thread_usage(thread.id)] == [0.25, None]
    [by_user] = await store.usage_report(0, "user")
    assert (by_user["name"], by_user["runs"], by_user["unpriced"]) == ("u", 1, 1)
    window = Window(PROJECT, 0, now + 1)
    assert [r.id for r in (await store.admin_threads(window, 10, None)).rows] == [thread.id]
    assert [r.id for r in (await store.admin_runs(window, 10, None)).rows] == [run.id]
    assert (await store.admin_run(PROJECT, run.id)).user_key == "u"
    assert (await store.admin_runs_usage([run.id]))[run.id]["apiKeyId"] == "key_1"
    [row] = await store.admin_usage(window, "model", 1)
    assert row["inputTokens"] == 10
    assert await store.admin_models(PROJECT, 0, 10) == ["a", "b"]


async def test_retention_deletes_old_idle_threads_with_theirs_and_keeps_usage(
        store: Store) -> None:
    old, live = await new_thread(store), await new_thread(store)
    run = run_row(old.id)
    assert await store.start_run(run, [message(old.id, run.id)], now_ms(), None) == "started"
    assert await store.finish_run(run.id, old.id, "completed", now_ms(),
                                  frames=[(1, 1, {"t": "end"})])
    assert await store.start_run(run_row(live.id), [], now_ms(), None) == "started"
    for thread in (old, live):
        await store.update_thread(thread.id, updated_ms=1)
    ids, cursor = await store.old_threads(10, 10)
    assert ids == [old.id] and cursor is None  # the live one is busy
    assert (await store.count_old(10)).threads == 1
    pruned = await store.delete_old_threads(ids, 10)
    assert (pruned.threads, pruned.runs) == (1, 1)
    assert await store.get_run(run.id) is None and await store.read_frames(run.id) == []
    assert await store.get_thread(PROJECT, live.id) is not None
    assert RunUsageRow  # accounting is kept: `test_usage` checks the rows


async def test_a_transaction_cancelled_mid_statement_stays_cancelled(store: Store) -> None:
    """A run interrupted while its store read is in flight is cancelled, not failed: the
    caller gets `CancelledError` (on PostgreSQL the interrupted connection is dropped, not
    rolled back), and the store goes on answering."""
    long = text("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c "
                "WHERE x < 5000000) SELECT count(*) FROM c")
    reading = asyncio.create_task(store.transaction(lambda tx: tx.execute(long).scalar_one()))
    await asyncio.sleep(0.2)
    reading.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reading
    thread = await new_thread(store)
    assert (await store.get_thread(PROJECT, thread.id)).id == thread.id
