"""The hot writes (a run's start, its log batches, its end) written as the engine sends them
(PostgreSQL: one fused statement each; SQLite: grouped with the transactions waiting
meanwhile) leave exactly the rows that the same writes leave as plain transactions, one
statement at a time."""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy import select

from gateway.protocol.clock import new_id
from gateway.store.engines.postgres import PostgresEngine
from gateway.store.queries.frames import LogBatch
from gateway.store.repository import Store
from gateway.store.tables import MessageRow, RunFrameRow, RunRow, RunUsageRow, ThreadRow
from tests.integration.store.conftest import PROJECT, run_row

NOW = 1_700_000_000_000


def plain(store: Store) -> Store:
    """The same database, each write a plain transaction on a pooled connection."""
    other = Store(store.engine)
    other.travel = PostgresEngine(store.engine)
    other.travel.fused = False
    return other


def messages(thread_id: str, run_id: str, role: str, count: int) -> list[MessageRow]:
    return [MessageRow(id=new_id("msg_"), thread_id=thread_id, run_id=run_id, role=role,
                       parts=[{"type": "text", "text": f"#{k} ✓"}],
                       meta={"k": k, "none": None} if k % 2 else None,
                       created_ms=NOW + k, is_cancelled=k == 2)
                for k in range(count)]


async def one_run(store: Store) -> tuple[str, str]:
    """A thread started with its first run, a log in batches, the end with answer and usage;
    then a second run queued and started by `start_run` after it."""
    thread = ThreadRow(id=new_id("thr_"), project_id=PROJECT, user_key="u", created_ms=NOW,
                       updated_ms=NOW, meta={"a": [1, 2]})
    run = run_row(thread.id)
    run.request, run.created_ms = {"messages": [{"text": "héllo"}]}, NOW
    await store.start_run_on_new_thread(thread, [], run, messages(thread.id, run.id, "user", 1))
    first = [LogBatch(run.id, [(1, NOW, {"t": "a"}), (2, NOW, {"t": "b", "n": None})],
                      "process-a", thread.id)]
    assert await store.append_frames_batch(first) == set()
    assert await store.append_frames(run.id, [(3, NOW, {"t": "c"})], "process-a")
    usage = [{"run_id": run.id, "model": "m1", "thread_id": thread.id, "project_id": PROJECT,
              "agent": "default", "api_key_id": None, "cost_usd": 0.5, "created_ms": NOW,
              "estimated_calls": 0, "calls": 1, "input_tokens": 3, "output_tokens": 4,
              "reasoning_tokens": 0, "cached_input_tokens": 0}]
    queued: list[str] = []
    assert await store.finish_run(run.id, thread.id, "completed", NOW, owner="process-a",
                                  frames=[(4, NOW, {"t": "end"})], usage=usage,
                                  first_token_ms=NOW, queued=queued,
                                  messages=messages(thread.id, run.id, "assistant", 3))
    assert queued == []
    second = run_row(thread.id)
    second.created_ms = NOW
    assert await store.start_run(second, messages(thread.id, second.id, "user", 2), NOW,
                                 run.id) == "started"
    assert await store.finish_run(second.id, thread.id, "failed", NOW,
                                  error={"code": "X", "message": "m"}) is True
    return thread.id, run.id


async def rows_of(store: Store, thread_id: str) -> dict[str, list[dict[str, Any]]]:
    """Every row the writes left, ids replaced by their order of appearance."""
    names: dict[str, str] = {}

    def same(value: Any) -> Any:
        if isinstance(value, str) and value.split("_")[0] in {"thr", "run", "msg"}:
            return names.setdefault(value, f"id{len(names)}")
        return value

    found: dict[str, list[dict[str, Any]]] = {}
    for model, order in ((ThreadRow, "id"), (RunRow, "created_ms"), (MessageRow, "seq"),
                         (RunFrameRow, "seq"), (RunUsageRow, "model")):
        table = model.__table__  # type: ignore[attr-defined]
        where = (table.c.id == thread_id if model is ThreadRow
                 else table.c.thread_id == thread_id if "thread_id" in table.c
                 else table.c.run_id.in_(select(RunRow.__table__.c.id).where(  # type: ignore[attr-defined]
                     RunRow.__table__.c.thread_id == thread_id)))  # type: ignore[attr-defined]
        query = select(table).where(where).order_by(table.c[order], *table.primary_key)
        rows = await store.transaction(lambda tx, query=query: tx.execute(query).all())
        found[model.__name__] = [{k: same(v) for k, v in row._mapping.items() if k != "seq"}
                                 for row in rows]
    return found


async def test_the_engines_hot_writes_leave_the_rows_plain_transactions_leave(
        store: Store) -> None:
    sent = await one_run(store)
    alone = await one_run(plain(store))
    assert await rows_of(store, sent[0]) == await rows_of(store, alone[0])


async def test_concurrent_hot_writes_each_get_their_own_outcome(store: Store) -> None:
    """Starts racing for one thread and log batches of several runs at once, as the engine
    groups or fuses them: one start wins, a fenced batch is refused alone."""
    threads = [ThreadRow(id=new_id("thr_"), project_id=PROJECT, created_ms=NOW, updated_ms=NOW)
               for _ in range(3)]
    runs = [run_row(thread.id) for thread in threads]
    await asyncio.gather(*(store.start_run_on_new_thread(t, [], r, [])
                           for t, r in zip(threads, runs, strict=True)))
    racing = [run_row(threads[0].id) for _ in range(4)]
    outcomes = await asyncio.gather(*(store.start_run(r, [], NOW, None) for r in racing))
    assert outcomes == ["conflict"] * 4  # the thread is held by its first run
    batches = [LogBatch(r.id, [(1, NOW, {"i": r.id})], "process-a") for r in runs]
    batches.append(LogBatch(runs[0].id, [(2, NOW, {"i": "x"})], "process-b"))  # not its owner
    assert await store.append_frames_batch(batches) == {runs[0].id}
    for run in runs:
        assert [f.frame for f in await store.read_frames(run.id)] == [{"i": run.id}]


async def test_a_batch_with_one_run_ended_meanwhile_writes_the_other_runs(
        store: Store) -> None:
    """One process's batch of three runs, one of them ended meanwhile (a reaper failed it)
    (the lease check of each run is one step of the chain, or one `= ANY` of the fused
    statement): the other two are written, the ended one is refused and left as it was."""
    threads = [ThreadRow(id=new_id("thr_"), project_id=PROJECT, created_ms=NOW, updated_ms=NOW)
               for _ in range(3)]
    runs = [run_row(thread.id, owner="process-a") for thread in threads]
    for thread, run in zip(threads, runs, strict=True):
        await store.start_run_on_new_thread(thread, [], run, [])
    assert await store.append_frames(runs[1].id, [(1, NOW, {"by": "b"})], "process-a")
    assert await store.finish_run(runs[1].id, threads[1].id, "failed", NOW, owner="process-a")
    batches = [LogBatch(r.id, [(2, NOW, {"i": r.id})], "process-a", t.id)
               for r, t in zip(runs, threads, strict=True)]
    assert await store.append_frames_batch(batches) == {runs[1].id}
    for index, run in enumerate(runs):
        frames = [f.frame for f in await store.read_frames(run.id)]
        assert frames == ([{"by": "b"}] if index == 1 else [{"i": run.id}])
    states = [(await store.get_thread(PROJECT, t.id)) for t in threads]
    assert [s.run_status if s else None for s in states] == ["streaming", "idle", "streaming"]
