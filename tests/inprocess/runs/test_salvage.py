"""What a lost run had said, rebuilt from its log: the text and reasoning it streamed but never
completed. Saving them to the thread (a reaped run, a cancelled dead run, a database outage) is
covered end to end in test_supervisor.py and test_manager.py; across processes, with the live
tail its followers read from Redis, in tests/integration/test_fault_table.py."""

from __future__ import annotations

from typing import Any, cast

from gateway.protocol.clock import new_id, now_ms
from gateway.protocol.run_errors import error_frame
from gateway.runs.backend import RunFeed
from gateway.runs.execution import UNAVAILABLE_ERROR
from gateway.runs.log.live import Entry
from gateway.runs.log.recorder import SHOWN_AHEAD
from gateway.runs.salvage import end_dead_run, unfinished_values
from gateway.runs.supervisor import RUN_LOST_ERROR, lost_frame
from gateway.store.repository import Store
from gateway.store.tables import RunRow
from tests.inprocess.conftest import PROJECT, new_thread

OWNER = "host:1:token-dead"


def test_only_text_and_reasoning_left_unfinished_are_salvaged() -> None:
    frames: list[dict[str, Any]] = [
        {"c": "run.started"},
        {"i": "think", "m": {"type": "thinking", "messageId": "msg_1"}},
        {"i": "think", "a": "Let me "}, {"i": "think", "a": "see."},
        {"i": "done", "m": {"type": "agent", "messageId": "msg_1"}},
        {"i": "done", "a": "Complete."},
        {"i": "done", "v": {"type": "agent", "content": "Complete."}},  # saved when it ended
        {"i": "call", "m": {"type": "tool_call", "messageId": "msg_1"}},
        {"i": "call", "a": '{"city": "Pa'},  # incomplete JSON: never salvaged
        {"i": "empty", "m": {"type": "agent", "messageId": "msg_1"}},
        {"i": "gone", "m": {"type": "agent", "messageId": "msg_1"}},
        {"i": "gone", "a": "Retracted"}, {"i": "gone", "v": None},
        {"i": "text", "m": {"type": "agent", "messageId": "msg_1"}},
        {"i": "text", "a": "Half an ans"},
    ]
    assert unfinished_values(frames) == {
        "think": {"id": "think", "type": "thinking", "messageId": "msg_1",
                  "content": "Let me see.", "failed": True},
        "text": {"id": "text", "type": "agent", "messageId": "msg_1",
                 "content": "Half an ans", "failed": True},
    }


# -- a dead run's end (`end_dead_run`): what it had shown is kept, its end goes past it ----------

class LiveTail:
    """The feed of processes sharing Redis, as the reaper sees it: a dead run's stream holds
    `entries` (what its followers were shown, ahead of its written log)."""

    def __init__(self, entries: list[Entry]) -> None:
        self.entries = entries

    async def salvage(self, run_id: str, after: int, limit: int) -> list[Entry]:
        return [e for e in self.entries if e.seq > after][:limit]


async def dead_run(store: Store, written: list[dict[str, Any]]) -> RunRow:
    """A run whose owner wrote `written` (positions 1 to n) and then died: its lease is out."""
    thread = await new_thread(store)
    now = now_ms()
    run = RunRow(id=new_id("run_"), thread_id=thread.id, project_id=PROJECT, created_ms=now,
                 status="running", lease_owner=OWNER, lease_expires_ms=now + 60_000)
    assert await store.start_run(run, [], now, None) == "started"
    assert await store.append_frames(run.id, [(k + 1, now, f) for k, f in enumerate(written)],
                                     OWNER)
    await store.renew_leases([run.id], OWNER, now - 1)
    [expired] = await store.expired_runs(now_ms())
    return expired


def entries(first: int, frames: list[dict[str, Any]]) -> list[Entry]:
    return [Entry(first + k, now_ms(), f) for k, f in enumerate(frames)]


WRITTEN: list[dict[str, Any]] = [{"c": "run.started"},
                                 {"i": "t", "m": {"type": "agent", "messageId": "msg_dead"}},
                                 {"i": "t", "a": "Said "}]


async def test_a_dead_runs_shown_tail_is_kept_and_its_end_comes_after_all_it_showed(
        store: Store) -> None:
    run = await dead_run(store, WRITTEN)
    shown = entries(4, [{"i": "t", "a": "and "}, {"i": "t", "a": "shown."}])
    assert await end_dead_run(store, cast(RunFeed, LiveTail(shown)), run, now_ms(), "failed",
                              RUN_LOST_ERROR, lost_frame())
    saved = await store.read_frames(run.id)
    # What followers saw, at the ids they saw it; the end past anything the dead process's
    # own readers can have been shown.
    assert [(r.seq, r.frame) for r in saved[:-1]] == [
        *[(k + 1, f) for k, f in enumerate(WRITTEN)], *[(e.seq, e.frame) for e in shown]]
    assert (saved[-1].seq, saved[-1].frame["code"]) == (3 + SHOWN_AHEAD + 1, "RUN_LOST")
    [kept] = [m for m in await store.history(run.thread_id) if m.id == "msg_dead"]
    assert [p["content"] for p in kept.parts] == ["Said and shown."]
    row = await store.get_run(run.id)
    assert (row.status, row.error["code"]) == ("failed", "RUN_LOST")


async def test_a_tail_that_does_not_follow_the_log_is_not_kept(store: Store) -> None:
    run = await dead_run(store, WRITTEN)
    beyond = entries(5, [{"i": "t", "a": "a gap before me"}])  # the stream lost entry 4
    assert await end_dead_run(store, cast(RunFeed, LiveTail(beyond)), run, now_ms(), "failed",
                              RUN_LOST_ERROR, lost_frame())
    assert [r.seq for r in await store.read_frames(run.id)] == [1, 2, 3, 3 + SHOWN_AHEAD + 1]


async def test_an_end_shown_but_never_written_is_the_runs_end(store: Store) -> None:
    """The database stayed away past the lease: the owner showed its readers a retryable
    error it could not write. That error, where they saw it, is the run's end."""
    run = await dead_run(store, WRITTEN)
    unavailable = error_frame(UNAVAILABLE_ERROR)
    shown = entries(4, [{"i": "t", "a": "and "}, dict(unavailable)])
    assert await end_dead_run(store, cast(RunFeed, LiveTail(shown)), run, now_ms(), "failed",
                              RUN_LOST_ERROR, lost_frame())
    saved = await store.read_frames(run.id)
    assert [r.seq for r in saved] == [1, 2, 3, 4, 5]
    assert saved[-1].frame == unavailable
    row = await store.get_run(run.id)
    assert (row.status, row.error["code"]) == ("failed", "DATABASE_UNAVAILABLE")
