"""Group commit on SQLite: store transactions that wait for the process's one connection at the
same time go to aiosqlite's thread together, in one trip with one commit, and each still gets
its own answer: one that raises or rolls back loses only its own writes, a failing commit fails
all of them and the next group starts clean, and a later one sees the earlier ones' writes."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import (
    Column,
    ForeignKey,
    Integer,
    MetaData,
    String,
    Table,
    event,
    insert,
    select,
    text,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from gateway.store.base import Queries
from gateway.store.db import create_engine
from gateway.store.engines import sqlite as group_commit
from gateway.store.engines.prepared import Prepared
from gateway.store.engines.transaction import Transaction

_metadata = MetaData()
_items = Table("items", _metadata, Column("id", String, primary_key=True),
               Column("n", Integer), Column("parent", String, ForeignKey("items.id")))
INSERT = Prepared(insert(_items))
READ = Prepared(select(_items.c.n).where(_items.c.id == "a"))


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    made = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'group.db'}")
    async with made.begin() as connection:  # a deferred foreign key fails only at COMMIT
        await connection.execute(text(
            "CREATE TABLE items (id TEXT PRIMARY KEY, n INTEGER, parent TEXT REFERENCES "
            "items (id) DEFERRABLE INITIALLY DEFERRED)"))
    yield made
    await made.dispose()


def adds(item: str, n: int = 1, parent: str | None = None) -> Callable[[Transaction], str]:
    def work(connection: Transaction) -> str:
        INSERT.execute(connection, {"id": item, "n": n, "parent": parent})
        return item
    return work


def held(item: str) -> tuple[Callable[[Transaction], str], threading.Event, threading.Event]:
    """A work that adds `item` once released, and the events: it has begun (on the database's
    thread), and its release."""
    entered, release = threading.Event(), threading.Event()

    def work(connection: Transaction) -> str:
        entered.set()
        release.wait(30)
        return adds(item)(connection)

    return work, entered, release


async def together(engine: AsyncEngine, works: list[Callable[[Transaction], Any]],
                   trips: list[str] | None = None) -> list[Any]:
    """Run `works` as concurrent store transactions, all queued while the connection is held
    elsewhere, so that they meet in the next group; their outcomes (results or exceptions)."""
    queries = Queries(engine)
    async with engine.connect() as holder:
        await holder.execute(text("SELECT 1"))
        tasks = [asyncio.create_task(queries.transaction(work)) for work in works]
        while len(queries.travel._waiting) < len(works):  # type: ignore[attr-defined]
            await asyncio.sleep(0)
    return await asyncio.gather(*tasks, return_exceptions=True)


async def stored(engine: AsyncEngine) -> dict[str, int]:
    async with engine.connect() as connection:
        return dict((await connection.execute(text("SELECT id, n FROM items"))).all())  # type: ignore[arg-type]


async def test_concurrent_transactions_commit_in_one_trip_each_with_its_own_result(
        engine: AsyncEngine, trips: list[str]) -> None:
    results = await together(engine, [adds(name) for name in "abcdef"], trips)
    assert results == list("abcdef")
    assert trips.count("_Trip") == 1  # six transactions, one trip, one commit
    assert await stored(engine) == dict.fromkeys("abcdef", 1)


async def test_a_member_that_raises_is_rolled_back_alone(engine: AsyncEngine) -> None:
    def fails(connection: Transaction) -> None:
        INSERT.execute(connection, {"id": "b", "n": 1, "parent": None})
        raise ValueError("the work's own error")

    duplicate = adds("a", 2)  # the key 'a' is taken by the first member: IntegrityError
    results = await together(engine, [adds("a"), fails, duplicate, adds("c")])
    assert results[0] == "a" and results[3] == "c"
    assert isinstance(results[1], ValueError) and str(results[1]) == "the work's own error"
    assert isinstance(results[2], IntegrityError)
    assert await stored(engine) == {"a": 1, "c": 1}


async def test_a_member_that_rolls_back_loses_only_its_writes_and_keeps_its_answer(
        engine: AsyncEngine) -> None:
    def changes_its_mind(connection: Transaction) -> str:
        INSERT.execute(connection, {"id": "b", "n": 1, "parent": None})
        connection.rollback()
        return "conflict"

    results = await together(engine, [adds("a"), changes_its_mind, adds("c")])
    assert results == ["a", "conflict", "c"]
    assert await stored(engine) == {"a": 1, "c": 1}


async def test_a_failing_commit_fails_every_member_and_the_next_group_starts_clean(
        engine: AsyncEngine) -> None:
    orphan = adds("b", parent="nobody")  # the deferred foreign key fails at COMMIT
    results = await together(engine, [adds("a"), orphan, adds("c")])
    assert all(isinstance(result, IntegrityError) for result in results)
    assert await stored(engine) == {}
    assert await together(engine, [adds("a"), adds("c")]) == ["a", "c"]
    assert await Queries(engine).transaction(adds("d")) == "d"  # a group of one, too
    assert await stored(engine) == {"a": 1, "c": 1, "d": 1}


async def test_a_failing_commit_of_a_lone_transaction_leaves_the_connection_usable(
        engine: AsyncEngine) -> None:
    queries = Queries(engine)
    with pytest.raises(IntegrityError):
        await queries.transaction(adds("b", parent="nobody"))
    assert await queries.transaction(adds("a")) == "a"
    assert await stored(engine) == {"a": 1}


async def test_a_member_sees_the_writes_of_those_queued_before_it(engine: AsyncEngine) -> None:
    def reads(connection: Transaction) -> list[Any]:
        return READ.rows(connection, {})

    results = await together(engine, [reads, adds("a", 7), reads])
    assert results == [[], "a", [(7,)]]


def group_sizes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many transactions each commit carried."""
    sizes: list[int] = []
    run_group = group_commit._run_group

    def counted(engine: Any, raw: Any, members: list[Any]) -> int:
        sizes.append(ran := run_group(engine, raw, members))
        return ran

    monkeypatch.setattr(group_commit, "_run_group", counted)
    return sizes


async def test_a_group_is_bounded_and_keeps_the_order(
        engine: AsyncEngine, trips: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    sizes = group_sizes(monkeypatch)
    monkeypatch.setattr(group_commit, "MAX_MEMBERS", 2)
    assert await together(engine, [adds(name) for name in "abcde"], trips) == list("abcde")
    assert sizes == [2, 2, 1]  # three commits, in one trip
    monkeypatch.setattr(group_commit, "MAX_MEMBERS", 64)
    monkeypatch.setattr(group_commit, "MAX_SECONDS", 0.0)  # each member past the time bound
    results = await together(engine, [adds("f", 1), adds("f", 2), adds("g")], trips)
    assert results[0] == "f" and isinstance(results[1], IntegrityError) and results[2] == "g"
    assert sizes == [2, 2, 1, 1, 1, 1]
    assert trips.count("_Trip") == 2
    assert await stored(engine) == dict.fromkeys("abcdefg", 1)


async def test_a_trip_goes_on_with_those_that_come_while_it_is_on_the_thread(
        engine: AsyncEngine, trips: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The connection does not wait for the event loop between groups: a transaction that
    comes while a group is on the thread is committed in the same trip, and the first
    group's caller has its answer before the second group is done."""
    sizes = group_sizes(monkeypatch)
    queries = Queries(engine)
    slow, entered, release = held("a")
    slower, entered_second, release_second = held("c")

    first = asyncio.create_task(queries.transaction(slow))
    await asyncio.to_thread(entered.wait, 30)  # the first group is on the thread
    second = asyncio.create_task(queries.transaction(adds("b")))
    third = asyncio.create_task(queries.transaction(slower))
    while len(queries.travel._waiting) < 2:  # type: ignore[attr-defined]
        await asyncio.sleep(0)
    release.set()
    await asyncio.to_thread(entered_second.wait, 30)  # the second group, on the thread
    assert await asyncio.wait_for(first, 30) == "a"  # its answer came before the trip's end
    assert not second.done() and not third.done()
    release_second.set()
    assert await asyncio.gather(second, third) == ["b", "c"]
    assert trips.count("_Trip") == 1 and sizes == [1, 2]
    assert await stored(engine) == dict.fromkeys("abc", 1)


async def test_a_cancelled_caller_s_work_is_not_run_and_the_others_go_on(
        engine: AsyncEngine) -> None:
    queries = Queries(engine)
    async with engine.connect() as holder:
        await holder.execute(text("SELECT 1"))
        # the first leads the group (it waits for the connection), the others wait for it
        first, second, third = (asyncio.create_task(queries.transaction(adds(name)))
                                for name in "abc")
        await asyncio.sleep(0)
        first.cancel()
        second.cancel()
        await asyncio.sleep(0)
    assert await third == "c"
    for cancelled in (first, second):
        with pytest.raises(asyncio.CancelledError):
            await cancelled
    assert await stored(engine) == {"c": 1}
    assert await queries.transaction(adds("d")) == "d"  # and nothing is stuck


async def test_reads_on_the_same_connection_see_what_was_committed_before_them(
        engine: AsyncEngine) -> None:
    queries = Queries(engine)

    async def writes_then_reads(name: str) -> int:
        await queries.transaction(adds(name, 3))
        query = select(_items.c.n).where(_items.c.id == name)
        return int(await queries.transaction(lambda tx: tx.execute(query).scalar_one()))

    assert await asyncio.gather(*(writes_then_reads(name) for name in "abcd")) == [3] * 4
    async with engine.begin() as connection:  # and `engine.begin()` between groups
        await connection.execute(text("UPDATE items SET n = 4 WHERE id = 'a'"))
    assert await queries.transaction(lambda connection: READ.rows(connection, {})) == [(4,)]


async def test_core_statements_run_in_a_group_and_a_failing_one_undoes_only_its_member(
        engine: AsyncEngine) -> None:
    """A member's work is given the same `Transaction` as on PostgreSQL: Core statements
    (an expanding `IN`, JSON-free rows, `RETURNING`) run on the database's thread inside its
    savepoint; a duplicate key raises SQLAlchemy's `IntegrityError` to that member alone."""
    def core_adds(name: str) -> Callable[[Transaction], Any]:
        def work(connection: Transaction) -> Any:
            connection.execute(insert(_items).values(id=name, n=1))
            found = connection.execute(select(_items.c.id).where(
                _items.c.id.in_([name, "nobody"]))).scalars().all()
            return list(found)
        return work

    def duplicate(connection: Transaction) -> Any:
        connection.execute(insert(_items).values(id="z", n=1))
        connection.execute(insert(_items).values(id="a", n=1))  # "a" is another member's

    results = await together(engine, [core_adds("a"), duplicate, core_adds("b")])
    assert results[0] == ["a"] and results[2] == ["b"]
    assert isinstance(results[1], IntegrityError)
    assert await stored(engine) == {"a": 1, "b": 1}  # "z" went with its member's savepoint


async def test_a_leader_cancelled_while_its_group_is_on_the_thread_strands_nobody(
        engine: AsyncEngine) -> None:
    queries = Queries(engine)
    slow, entered, release = held("a")
    async with engine.connect() as holder:
        await holder.execute(text("SELECT 1"))
        leader = asyncio.create_task(queries.transaction(slow))  # the first: it leads
        await asyncio.sleep(0)
        follower = asyncio.create_task(queries.transaction(adds("b")))
        while len(queries.travel._waiting) < 2:  # type: ignore[attr-defined]
            await asyncio.sleep(0)
    await asyncio.to_thread(entered.wait, 30)  # the group is on the database's thread
    leader.cancel()
    await asyncio.sleep(0)
    release.set()
    assert await asyncio.wait_for(follower, 30) == "b"  # handed back by the thread itself
    with pytest.raises(asyncio.CancelledError):
        await leader
    assert await stored(engine) == {"a": 1, "b": 1}  # the group was committed all the same
    assert await queries.transaction(adds("c")) == "c"


async def test_a_group_that_reads_first_still_writes_when_another_process_writes_meanwhile(
        engine: AsyncEngine, tmp_path: Path) -> None:
    """Another process (a `gateway` command on the same file) cannot slip a write in between a
    member's read and the next member's write: the group holds the write lock from its start,
    so the outsider waits for it instead of making SQLite refuse the group's write."""
    def reads_while_an_outsider_writes(connection: Transaction) -> str:
        READ.rows(connection, {})
        outsider = sqlite3.connect(tmp_path / "group.db", timeout=0)
        try:
            outsider.execute("INSERT INTO items (id, n) VALUES ('x', 1)")
            outsider.commit()
            return "outsider wrote"
        except sqlite3.OperationalError:
            return "outsider waits"
        finally:
            outsider.close()

    results = await together(engine, [reads_while_an_outsider_writes, adds("b")])
    assert results == ["outsider waits", "b"]
    assert await stored(engine) == {"b": 1}


async def test_one_that_comes_as_a_trip_ends_goes_next_on_the_same_connection(
        engine: AsyncEngine, trips: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A transaction that arrives after the thread last looked, before the loop has seen the
    trip end, goes in a trip of its own at once, on the connection still taken: no new
    checkout, no task to wait for."""
    queries = Queries(engine)
    checkouts: list[int] = []
    event.listen(engine.sync_engine, "checkout", lambda *_: checkouts.append(1))
    ended = threading.Event()
    post = group_commit._post

    def posting(loop: Any, callback: Any, *args: Any) -> None:
        post(loop, callback, *args)
        if getattr(callback, "__name__", "") == "over":
            ended.set()

    monkeypatch.setattr(group_commit, "_post", posting)
    slow, entered, release = held("a")
    first = asyncio.create_task(queries.transaction(slow))
    await asyncio.to_thread(entered.wait, 30)
    release.set()
    assert ended.wait(30)  # the loop is blocked here: the trip has ended, `over` not yet run
    late: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    queries.travel._waiting.append(group_commit._Member(adds("b"), late))  # type: ignore[attr-defined]
    assert await asyncio.wait_for(first, 30) == "a"
    assert await asyncio.wait_for(late, 30) == "b"
    assert trips.count("_Trip") == 2 and len(checkouts) == 1
    assert await stored(engine) == dict.fromkeys("ab", 1)
