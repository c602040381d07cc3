"""`Store`: the atomic writes the rest relies on (on SQLite and PostgreSQL: `conftest`)."""

from __future__ import annotations

import asyncio

from gateway.protocol.clock import new_id, now_ms
from gateway.store.repository import Store
from gateway.store.tables import ChorusDeliveryRow, ComponentRow
from tests.integration.store.conftest import PROJECT, new_thread, run_row


async def test_the_thread_lock_is_taken_by_exactly_one_of_racing_starts(store: Store) -> None:
    thread = await new_thread(store)
    runs = [run_row(thread.id) for _ in range(5)]
    outcomes = await asyncio.gather(*[store.start_run(run, [], now_ms(), None) for run in runs])
    assert sorted(outcomes) == ["conflict"] * 4 + ["started"]
    winner = runs[outcomes.index("started")]
    locked = await store.get_thread(PROJECT, thread.id)
    assert (locked.run_status, locked.current_run_id) == ("waiting", winner.id)


async def test_a_cancel_flag_is_seen_by_the_owner_s_poll_for_its_active_runs_only(
        store: Store) -> None:
    threads = [await new_thread(store) for _ in range(3)]
    flagged, other, ended = (run_row(thread.id) for thread in threads)
    for run in (flagged, other, ended):
        assert await store.start_run(run, [], now_ms(), None) == "started"
    assert await store.cancel_requested([flagged.id, other.id]) == []
    assert await store.request_cancel(flagged.id, now_ms())
    assert await store.request_cancel(ended.id, now_ms())
    assert await store.finish_run(ended.id, threads[2].id, "cancelled", now_ms(),
                                  owner="process-a")
    assert await store.cancel_requested([flagged.id, other.id, ended.id]) == [flagged.id]
    assert await store.cancel_requested([other.id]) == []  # only the runs asked about


async def test_a_start_validated_against_an_older_thread_state_is_refused(store: Store) -> None:
    thread = await new_thread(store)
    first = run_row(thread.id)
    assert await store.start_run(first, [], now_ms(), None) == "started"
    assert await store.finish_run(first.id, thread.id, "completed", now_ms(),
                                  owner="process-a")
    # A request checked before the first run ended still believes there was no run.
    assert await store.start_run(run_row(thread.id), [], now_ms(), None) == "conflict"
    assert await store.start_run(run_row(thread.id), [], now_ms(), first.id) == "started"


async def test_finishing_is_fenced_on_the_lease_owner(store: Store) -> None:
    thread = await new_thread(store)
    run = run_row(thread.id, owner="process-a")
    await store.start_run(run, [], now_ms(), None)
    assert not await store.finish_run(run.id, thread.id, "completed", now_ms(),
                                      owner="process-b")
    assert (await store.get_run(run.id)).status == "queued"
    frames = [(1, now_ms(), {"c": "run.finished"})]
    assert await store.finish_run(run.id, thread.id, "completed", now_ms(),
                                  owner="process-a", frames=frames)
    assert not await store.finish_run(run.id, thread.id, "failed", now_ms(),
                                      owner="process-a")  # ended runs stay ended
    assert [r.frame for r in await store.read_frames(run.id)] == [{"c": "run.finished"}]


async def test_a_start_whose_idempotency_key_is_taken_is_a_duplicate_and_writes_nothing(
        store: Store) -> None:
    thread = await new_thread(store)
    first, retry = run_row(thread.id), run_row(thread.id)
    first.idempotency_key = retry.idempotency_key = "key-1"
    first.request = {"messages": [{"text": "héllo"}], "nested": {"n": 1}}
    assert await store.start_run(first, [], now_ms(), None) == "started"
    assert await store.finish_run(first.id, thread.id, "completed", now_ms(), owner="process-a",
                                  pending=[{"toolCallId": "c1"}])
    assert await store.start_run(retry, [], now_ms(), first.id) == "duplicate"
    assert await store.get_run(retry.id) is None
    thread_now = await store.get_thread(PROJECT, thread.id)
    assert (thread_now.run_status, thread_now.last_completed_run_id) == ("idle", first.id)
    stored = await store.get_run(first.id)  # JSON columns read back as they were written
    assert stored.request == first.request and stored.pending_tool_calls == [
        {"toolCallId": "c1"}]
    assert stored.error is None and thread_now.pending_tool_calls == [{"toolCallId": "c1"}]


async def test_a_log_position_is_written_once(store: Store) -> None:
    thread = await new_thread(store)
    run = run_row(thread.id)
    await store.start_run(run, [], now_ms(), None)
    assert await store.append_frames(run.id, [(1, 1, {"i": "a", "a": "x"})])
    assert not await store.append_frames(run.id, [(1, 2, {"i": "a", "a": "other"})])
    assert [r.frame["a"] for r in await store.read_frames(run.id)] == ["x"]


async def test_component_state_is_compare_and_set_on_the_revision(store: Store) -> None:
    thread = await new_thread(store)
    component = ComponentRow(id=new_id("comp_"), thread_id=thread.id, message_id="m",
                             name="Card", props={}, state={}, revision=0,
                             created_ms=now_ms(), updated_ms=now_ms())
    await store.put_component(component)
    current = await store.get_component(thread.id, component.id)
    writes = await asyncio.gather(*[store.set_component_state(current, {"n": n}, now_ms())
                                    for n in range(5)])
    assert sorted(writes) == [False] * 4 + [True]
    stored = await store.get_component(thread.id, component.id)
    assert stored.revision == 1 and stored.state == {"n": writes.index(True)}


async def test_thread_pages_follow_their_cursor_without_gaps(store: Store) -> None:
    made = {(await new_thread(store, user_key="u")).id for _ in range(7)}
    seen: list[str] = []
    cursor = None
    while True:
        page = await store.list_threads(PROJECT, "u", 3, cursor)
        seen += [row.id for row in page.rows]
        if not page.has_more:
            break
        cursor = page.next_cursor
    assert len(seen) == 7 and set(seen) == made
    assert (await store.list_threads(PROJECT, "someone-else", 3, None)).rows == []


async def test_a_started_chorus_message_is_kept_until_its_runs_end_is_taken_once(
        store: Store) -> None:
    """A Chorus message's row outlives its run's start (callback only), holds the channel's
    next message back from the sweeper until its end is reported, is left to the process
    relaying it while that one's claim holds, and is taken once."""
    thread = await new_thread(store)
    rows = [ChorusDeliveryRow(id=new_id("chd_"), thread_id=thread.id, connection_id="chc_1",
                              payload={"callback": "http://cb/1", "mcp": [{"headers": "h"}]},
                              created_ms=now_ms() + k) for k in range(2)]
    for row in rows:
        await store.add(row)
    run = run_row(thread.id)
    await store.start_run(run, [], now_ms(), None)
    until = now_ms() + 30_000
    await store.start_chorus_delivery(rows[0].id, run.id, "http://cb/1", "process-a", until)
    assert (await store.next_chorus_delivery(thread.id)).id == rows[1].id
    assert await store.ended_chorus_deliveries(now_ms(), 10) == []  # its run goes on
    assert await store.finish_run(run.id, thread.id, "failed", now_ms(),
                                  error={"code": "RUN_LOST"}, owner="process-a")
    # The thread is idle and the second message unclaimed, but the first's end comes first.
    assert await store.stranded_chorus_threads(now_ms(), 10) == []
    assert await store.ended_chorus_deliveries(now_ms(), 10) == []  # process-a reports it
    assert await store.claim_chorus_delivery(rows[0].id, "process-a", until + 1, now_ms())
    [(ended, ended_run)] = await store.ended_chorus_deliveries(until + 2, 10)  # it died
    assert (ended.id, ended.payload, ended_run.error) == (rows[0].id, {"callback": "http://cb/1"},
                                                          {"code": "RUN_LOST"})
    assert await asyncio.gather(*[store.take_chorus_delivery(ended.id) for _ in range(3)]) \
        in ([True, False, False], [False, True, False], [False, False, True])
    assert await store.stranded_chorus_threads(now_ms(), 10) == [(PROJECT, thread.id)]


async def test_a_started_chorus_message_whose_run_is_gone_is_ended(store: Store) -> None:
    """A started message whose run went with its deleted thread is ended (with no run), so
    the sweeper drops it instead of leaving the channel's next message behind it for good."""
    thread = await new_thread(store)
    run = run_row(thread.id)
    await store.start_run(run, [], now_ms(), None)
    started = ChorusDeliveryRow(id=new_id("chd_"), thread_id=thread.id, connection_id="chc_1",
                                payload={"callback": "http://cb/1"}, created_ms=now_ms())
    await store.add(started)
    await store.start_chorus_delivery(started.id, run.id, "http://cb/1")
    assert await store.ended_chorus_deliveries(now_ms(), 10) == []  # its run goes on
    await store.delete_thread(thread.id)
    [(ended, no_run)] = await store.ended_chorus_deliveries(now_ms(), 10)
    assert (ended.id, no_run) == (started.id, None)
