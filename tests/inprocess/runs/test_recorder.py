"""`RunRecorder`: the log persisted in batches by a periodic flush, message values saved once
complete, terminal frames committed with the run's end, and nothing written once fenced."""

from __future__ import annotations

import asyncio
from typing import Any

from gateway.protocol import timbal
from gateway.protocol.clock import new_id, now_ms
from gateway.runs.log.live import LiveLog
from gateway.runs.log.recorder import FLUSH_SECONDS, RunRecorder
from gateway.store.repository import Store
from gateway.store.tables import RunRow
from tests.inprocess.conftest import PROJECT, new_thread


async def started_run(store: Store) -> RunRow:
    thread = await new_thread(store)
    now = now_ms()
    run = RunRow(id=new_id("run_"), thread_id=thread.id, project_id=PROJECT, status="queued",
                 created_ms=now, lease_owner="me", lease_expires_ms=now + 30_000,
                 on_disconnect="grace")
    assert await store.start_run(run, [], now, None) == "started"
    return run


async def test_frames_are_batched_and_values_saved_when_complete(store: Store) -> None:
    run = await started_run(store)
    recorder = RunRecorder(store, LiveLog(run.id), run.thread_id, run.id)
    await recorder.emit(timbal.start("a1", {"type": "agent", "messageId": "m1"}))
    for word in ("one ", "two ", "three"):
        await recorder.emit(timbal.append("a1", word))
    assert await store.history(run.thread_id) == []  # a value is saved once, when complete
    await recorder.emit(timbal.set_value("a1", {"type": "agent", "messageId": "m1",
                                                "content": "one two three"}, now_ms()))
    # A message's first value goes with the run's next write: here its end.
    assert await store.history(run.thread_id) == []
    for _ in range(100):  # the periodic flush (every FLUSH_SECONDS) writes the batch
        if len(await store.read_frames(run.id)) == 5:
            break
        await asyncio.sleep(FLUSH_SECONDS)
    assert [r.seq for r in await store.read_frames(run.id)] == [1, 2, 3, 4, 5]

    ended = await recorder.finish([{"c": timbal.RUN_FINISHED}], lambda rows, messages:
                                  store.finish_run(run.id, run.thread_id, "completed",
                                                   now_ms(), owner="me", frames=rows,
                                                   messages=messages))
    await recorder.close()
    assert ended and recorder.live.closed
    [message] = await store.history(run.thread_id)
    assert message.parts[0]["content"] == "one two three"
    assert [r.frame for r in await store.read_frames(run.id)][-1] == {"c": "run.finished"}
    await recorder.emit(timbal.append("a1", "late"))  # after the end: dropped
    assert recorder.live.last == 6


async def test_a_fenced_recorder_shows_but_never_writes(store: Store) -> None:
    run = await started_run(store)
    recorder = RunRecorder(store, LiveLog(run.id), run.thread_id, run.id)
    recorder.fenced = True
    await recorder.emit(timbal.set_value("a1", {"type": "agent", "messageId": "m1",
                                                "content": "x"}, now_ms()))
    await recorder.flush()
    ended = await recorder.finish([{"c": timbal.RUN_FINISHED}], lambda rows, messages:
                                  store.finish_run(run.id, run.thread_id, "completed",
                                                   now_ms(), owner="me", frames=rows,
                                                   messages=messages))
    await recorder.close()
    assert not ended
    assert recorder.live.last == 1
    assert await store.read_frames(run.id) == [] and await store.history(run.thread_id) == []
    assert (await store.get_run(run.id)).status == "queued"


async def test_a_first_value_is_written_before_the_next_frame(store: Store) -> None:
    run = await started_run(store)
    recorder = RunRecorder(store, LiveLog(run.id), run.thread_id, run.id)
    await recorder.emit(timbal.set_value("a1", {"type": "agent", "messageId": "m1",
                                                "content": "let me look"}, now_ms()))
    await recorder.emit(timbal.start("a2", {"type": "agent", "messageId": "m2"}))
    [message] = await store.history(run.thread_id)
    assert message.id == "m1" and message.parts[0]["content"] == "let me look"
    await recorder.close()


async def test_the_live_log_says_its_end_is_under_way_while_it_is_committed(
        store: Store) -> None:
    run = await started_run(store)
    recorder = RunRecorder(store, LiveLog(run.id), run.thread_id, run.id)
    await recorder.emit(timbal.append("a1", "token"))
    assert not recorder.live.ending
    seen: list[bool] = []

    async def commit(rows: Any, messages: Any) -> bool:
        seen.append(recorder.live.ending)  # what the Redis publisher reads meanwhile
        return await store.finish_run(run.id, run.thread_id, "completed", now_ms(), owner="me",
                                      frames=rows, messages=messages)

    assert await recorder.finish([{"c": timbal.RUN_FINISHED}], commit)
    await recorder.close()
    assert seen == [True]
