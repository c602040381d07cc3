"""Concurrent store transactions on SQLite, committed together: one trip, one commit.

The process has one SQLite connection (`db.py` says why), and a transaction runs on
aiosqlite's thread in one trip (`sqlite_driver.hand_over`). A trip still waits for the
event loop twice (to be handed over, and for its result to be taken back), and on a busy loop
that wait, not SQLite's work, is most of a hold of the connection: N transactions at once made N
trips and N commits, one after the other, and a run start queued behind all of them, the log
writer's batch among them (docs/decisions/0018-sqlite-group-commit.md). Here the transactions
waiting for
the connection go to the thread together, in one trip with one commit: each member's work runs
in its own SAVEPOINT, so a work that raises or calls `rollback()` undoes only its own statements
(`ROLLBACK TO`) and gets its own answer, while the others are committed. A failing COMMIT fails
every member that was to be committed (the transaction is rolled back, so the next group starts
clean). Whoever arrives while a group is on the thread joins the next group. A group is bounded
(`MAX_MEMBERS`; no member starts after `MAX_SECONDS` on the thread, the rest go in the next
group) so that a large log batch cannot hold the starts queued behind it for long.

The groups of one taking of the connection go without the loop between them (`_Trip`): the
thread goes on with whoever arrived during a group, posting each group's answers to the loop as
soon as it has committed, and whoever arrives as the trip ends goes in another trip at once, on
the connection still taken; the connection goes back to the pool after `TRIP_SECONDS`, or when
nobody waits. Waiting for the loop to take a trip's outcome back, with the connection held, was
most of its long holds.

Order: members run in the order they came, in one transaction, so a member sees the writes of
those before it, and a later group sees the earlier ones committed. A group holds the pool's
connection from checkout to checkin like any other user of it, so anything else on the engine
(`engine.begin()`, the migrations) queues with it for the one connection.

Traps of Python's sqlite3 (legacy transaction control, as SQLAlchemy leaves it): it opens a
transaction only before a DML statement, and the RELEASE of a savepoint opened outside a
transaction commits; so the group opens its transaction itself, as `BEGIN IMMEDIATE`: a member
that reads before another writes would otherwise hold a read snapshot that SQLite refuses to
upgrade (at once, without the busy timeout) if another process (a `gateway` command on the same
file) wrote meanwhile. A statement that makes SQLite roll back the whole transaction (a full
disk, an I/O error) ends the group: the members run so far get that error, the others go in
the next group. A group of one is a plain transaction (no savepoint: nothing is added for a
process at rest).

SQLite only: on PostgreSQL the pool spreads transactions over its connections
(`engines.postgres`).
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import sqlite3
import time
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, Executable
from sqlalchemy.exc import DBAPIError
from sqlalchemy.util.concurrency import greenlet_spawn

from .sqlite_driver import OneTripDBAPI, hand_over
from .transaction import Result, Transaction

R = TypeVar("R")

# At most this many transactions in one trip and one commit.
MAX_MEMBERS = 64
# No member starts after the group has been this long on the database's thread: a large log
# batch ahead delays the members behind it by one trip, not by everything else in the group.
MAX_SECONDS = 0.02
# A trip goes on with the transactions that come while it is on the database's thread for at
# most this long; then the connection goes back to the pool, where sessions wait for it too.
TRIP_SECONDS = 0.05
SAVEPOINT = "group_member"


class _Raw:
    """The sqlite3 connection as SQLAlchemy's `Connection` uses a pooled one: for the Core
    statements of a member's work, run on the database's thread (no greenlet, no trip)."""

    __slots__ = ("dbapi_connection", "driver_connection", "info")

    def __init__(self, connection: sqlite3.Connection) -> None:
        self.dbapi_connection = self.driver_connection = connection
        self.info: dict[str, Any] = {}

    def cursor(self, *args: Any) -> sqlite3.Cursor:
        return self.dbapi_connection.cursor()

    def invalidate(self, e: BaseException | None = None, soft: bool = False) -> None:
        """Nothing to do here: the group's trip fails, and the pool's checkin decides."""

    def close(self) -> None:
        """The group's trip gives the connection back, not a member."""


class InGroup:
    """A `Transaction` on the sqlite3 connection itself, inside the member's savepoint (or,
    alone in its group, its own transaction)."""

    fuses = False  # statements cost no trip: the work is on the database's thread

    def __init__(self, engine: Engine, connection: sqlite3.Connection, savepoint: bool) -> None:
        self.engine, self.dialect, self.connection = engine, engine.dialect, connection
        self.rolled_back = False
        self._savepoint = savepoint
        self._core: Connection | None = None

    def rollback(self) -> None:
        self.rolled_back = True
        if self._savepoint:
            self.connection.execute(f"ROLLBACK TO {SAVEPOINT}")
        else:
            self.connection.rollback()

    def execute(self, statement: Executable,
                parameters: dict[str, Any] | list[dict[str, Any]] | None = None
                ) -> Result:
        """A Core statement through SQLAlchemy's `Connection`, made on the sqlite3 connection:
        SQLAlchemy compiles it, converts its parameters and rows by the columns' types, and
        raises the driver's errors as its own; it never begins, commits or rolls back here
        (the dialect's begin is a no-op, and a failing statement inside a transaction leaves
        the rollback to its caller: the member's savepoint)."""
        if self._core is None:
            self._core = Connection(self.engine, _Raw(self.connection))  # type: ignore[arg-type]
        return self._core.execute(statement, parameters)


class _Member:
    """A transaction waiting for its group: its work, and what its caller will get."""

    __slots__ = ("work", "future", "outcome", "failed", "committing")

    def __init__(self, work: Callable[[Transaction], Any], future: asyncio.Future[Any]) -> None:
        self.work, self.future = work, future
        self.outcome: Any = None  # the work's result, or the exception the caller gets
        self.failed = False
        self.committing = False  # its writes are kept: it succeeds only if the commit does


def _sqlalchemy_error(error: BaseException) -> BaseException:
    """The driver's error as SQLAlchemy's (as every store caller expects); others as they are."""
    if isinstance(error, sqlite3.Error):
        return DBAPIError.instance(None, None, error, sqlite3.Error)
    return error


def _attempt(member: _Member, transaction: InGroup) -> None:
    """The member's work; what it raises is its caller's answer, not the group's."""
    try:
        member.outcome = member.work(transaction)
    except Exception as error:
        member.outcome, member.failed = error, True


def _alone(engine: Engine, raw: sqlite3.Connection, member: _Member) -> None:
    """A group of one: a plain transaction, as sqlite3 opens it at the first write."""
    transaction = InGroup(engine, raw, savepoint=False)
    _attempt(member, transaction)
    if member.failed:
        if not transaction.rolled_back:
            raw.rollback()
        return
    member.committing = not transaction.rolled_back
    if member.committing:
        _commit(raw, [member])


def _in_savepoint(engine: Engine, raw: sqlite3.Connection, member: _Member) -> bool:
    """One member's work in its savepoint; False if SQLite ended the group's transaction."""
    raw.execute(f"SAVEPOINT {SAVEPOINT}")
    transaction = InGroup(engine, raw, savepoint=True)
    _attempt(member, transaction)
    if not raw.in_transaction:
        return False
    if member.failed or transaction.rolled_back:
        raw.execute(f"ROLLBACK TO {SAVEPOINT}")
    else:
        member.committing = True
    raw.execute(f"RELEASE {SAVEPOINT}")
    return True


def _commit(raw: sqlite3.Connection, members: list[_Member]) -> None:
    """Commit; if that fails, roll back, and every member that was to be committed gets the
    error."""
    try:
        raw.commit()
    except sqlite3.Error as error:
        try:
            raw.rollback()
        except sqlite3.Error:
            pass  # the rollback's failure is not news: the commit's error is
        _fail_committing(members, error)


def _fail_committing(members: list[_Member], error: BaseException) -> None:
    for member in members:
        if member.committing:
            member.committing, member.failed = False, True
            member.outcome = _sqlalchemy_error(error)


def _run_group(engine: Engine, raw: sqlite3.Connection, members: list[_Member]) -> int:
    """On aiosqlite's thread: the members' works in one transaction with one commit; returns
    how many ran (the others wait for the next group)."""
    if len(members) == 1:
        _alone(engine, raw, members[0])
        return 1
    started = time.perf_counter()
    if not raw.in_transaction:
        raw.execute("BEGIN IMMEDIATE")  # else the RELEASE of the first savepoint would commit
    ran = 0
    try:
        for member in members:
            if ran and time.perf_counter() - started > MAX_SECONDS:
                break
            ran += 1
            if not _in_savepoint(engine, raw, member):  # rolled back by SQLite: all is lost
                cause = member.outcome if member.failed else sqlite3.OperationalError(
                    "the transaction was rolled back by the database")
                member.committing = True
                _fail_committing(members[:ran], cause)
                return ran
    except BaseException:
        if raw.in_transaction:
            raw.rollback()
        raise  # every member gets the error (`GroupCommit._group`)
    _commit(raw, members[:ran])
    return ran


def _settle(members: list[_Member]) -> None:
    """Hand each caller its outcome (on the event loop)."""
    for member in members:
        future = member.future
        if future.done():
            continue  # its caller was cancelled meanwhile
        if not member.failed:
            future.set_result(member.outcome)
        elif isinstance(member.outcome, asyncio.CancelledError):
            future.cancel()
        else:
            future.set_exception(member.outcome)


class GroupCommit:
    """The transactions of one SQLite engine, gathered into groups (see the module's doc).

    Whoever finds no trip under way leads one: it takes the pool's connection and hands every
    transaction waiting by then (its own first) to the database's thread (`_Trip`), then waits
    for its own outcome like the others. The trip goes on there with those that come
    meanwhile, and gives the connection back itself (`_Trip.over`); if some are still waiting
    then, a task of its own leads the next trip."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._waiting: collections.deque[_Member] = collections.deque()  # also the thread's
        self._busy = False  # a trip is under way, or about to be
        self._loop: asyncio.AbstractEventLoop | None = None

    fused = False  # statements cost no trip here: nothing to fuse

    async def transaction(self, work: Callable[[Transaction], R]) -> R:
        return await self.run(work)

    async def alone(self, work: Callable[[Transaction], R]) -> R:
        return await self.run(work)

    async def hot(self, work: Callable[[Transaction], R]) -> R:
        return await self.run(work)  # grouped with the others: nothing to fuse

    async def run(self, work: Callable[[Transaction], R]) -> R:
        """`work` in the next group: committed if it returns (unless it rolled back), rolled
        back if it raises (as `postgres.run`)."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # a new loop (tests): the old one's state is gone
            self._loop, self._waiting, self._busy = loop, collections.deque(), False
        future: asyncio.Future[R] = loop.create_future()
        self._waiting.append(_Member(work, future))
        if not self._busy:
            self._busy = True
            try:
                await self._lead(loop)
            except asyncio.CancelledError:  # while it waited for the connection
                future.cancel()  # its work is not run; the others' trip is led by a task
                self._next(loop)
                raise
        return await future

    async def _lead(self, loop: asyncio.AbstractEventLoop) -> None:
        """Take the pool's connection, then hand those waiting by then to the thread."""
        try:
            connection = await greenlet_spawn(self.engine.raw_connection)
        except Exception as error:
            members = self._take()
            _fail_all(members, error)
            self._done(members, len(members))
            self._next(loop)
            return
        self._send(_Trip(self, loop, connection, self._take(), time.perf_counter()))

    def _send(self, trip: _Trip) -> None:
        """Hand `trip` to the database's thread (on the loop, the connection checked out)."""
        if not trip.members:  # every caller was cancelled meanwhile
            trip.over(trip.members, 0)
            return
        try:
            hand_over(trip.connection.dbapi_connection, trip)
        except Exception as error:  # the connection is closed
            _fail_all(trip.members, error)
            trip.over(trip.members, len(trip.members))

    async def _lead_next(self, loop: asyncio.AbstractEventLoop) -> None:
        try:
            await self._lead(loop)
        except BaseException:
            self._busy = False
            while self._waiting:  # cancelled: nobody may wait for a group that never comes
                self._waiting.popleft().future.cancel()
            raise

    def _next(self, loop: asyncio.AbstractEventLoop) -> None:
        """A trip is over (or never began): the next one, if any transaction waits."""
        if self._waiting:  # in a context of its own: not this caller's
            loop.create_task(self._lead_next(loop), name="store group commit",
                             context=contextvars.Context())
        else:
            self._busy = False

    def _take(self, limit: int | None = None) -> list[_Member]:
        """Those waiting, up to `limit` (`MAX_MEMBERS`), in order; on the loop or, during a
        trip, on the database's thread (a deque's appends and pops are atomic)."""
        limit = MAX_MEMBERS if limit is None else limit
        members: list[_Member] = []
        while len(members) < limit:
            try:
                member = self._waiting.popleft()
            except IndexError:
                break
            if not member.future.done():  # a cancelled caller's work is not run
                members.append(member)
        return members

    def _done(self, members: list[_Member], ran: int) -> None:
        """On the loop: the outcomes of those that ran; the others first in the next group."""
        self._waiting.extendleft(reversed(members[ran:]))
        _settle(members[:ran])


class _Trip:
    """A trip to aiosqlite's thread with the pool's connection (called there): group after
    group, each committed and its outcomes posted to the loop at once, while transactions
    keep coming and for at most `TRIP_SECONDS`; then the connection goes back to the pool
    (`over`, on the loop). The connection never waits for the event loop between two groups,
    and a transaction never waits for the loop to see the end of the group before it."""

    __slots__ = ("group", "loop", "connection", "members", "began")

    def __init__(self, group: GroupCommit, loop: asyncio.AbstractEventLoop, connection: Any,
                 members: list[_Member], began: float) -> None:
        self.group, self.loop, self.connection, self.members = group, loop, connection, members
        self.began = began  # when the connection was taken (`TRIP_SECONDS`)

    def __call__(self, raw: sqlite3.Connection) -> None:
        began, members = self.began, self.members
        while True:
            try:
                ran = _run_group(self.group.engine, raw, members)
            except BaseException as error:  # the connection itself failed: the trip ends
                _fail_all(members, error)
                ran = len(members)
                break
            if time.perf_counter() - began >= TRIP_SECONDS:
                break  # any left (past a group's bounds) go first in the next trip
            following = members[ran:]
            following += self.group._take(MAX_MEMBERS - len(following))
            if not following:
                break
            _post(self.loop, _settle, members[:ran])
            members = following
        _post(self.loop, self.over, members, ran)

    def over(self, members: list[_Member], ran: int) -> None:
        """On the loop: the last group's outcomes; then, if transactions came after the
        thread last looked and the connection has been taken for less than `TRIP_SECONDS`,
        another trip on it at once (no task to start, no checkout: one turn of a busy loop
        less for them), else the connection back to the pool and the next trip led by a task."""
        group = self.group
        try:
            group._done(members, ran)
        finally:
            if group._waiting and time.perf_counter() - self.began < TRIP_SECONDS:
                group._send(_Trip(group, self.loop, self.connection, group._take(), self.began))
            else:
                self.connection.close()
                group._next(self.loop)


def _post(loop: asyncio.AbstractEventLoop, callback: Callable[..., None], *args: Any) -> None:
    try:
        loop.call_soon_threadsafe(callback, *args)
    except RuntimeError:
        pass  # the loop is closed: nobody is waiting any more


def _fail_all(members: list[_Member], error: BaseException) -> None:
    for member in members:
        member.outcome, member.failed = _sqlalchemy_error(error), True


_GROUPS: weakref.WeakKeyDictionary[Engine, GroupCommit] = weakref.WeakKeyDictionary()


def group_commit_for(engine: Engine) -> GroupCommit | None:
    """The engine's group commit: on SQLite through `sqlite_driver` (as `db.create_engine`
    makes it), else None."""
    if not isinstance(engine.dialect.loaded_dbapi, OneTripDBAPI):
        return None
    group = _GROUPS.get(engine)
    if group is None:
        group = _GROUPS[engine] = GroupCommit(engine)
    return group
