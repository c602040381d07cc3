"""Concurrent store transactions on SQLite, committed together: one trip, one commit.

The process has one SQLite connection (`db.py` says why), and a transaction runs on
aiosqlite's thread in one trip (`sqlite_driver.whole_in_one_trip`). A trip still waits for the
event loop twice (to be handed over, and for its result to be taken back), and on a busy loop
that wait, not SQLite's work, is most of a hold of the connection: N transactions at once made N
trips and N commits, one after the other, and a run start queued behind all of them, the log
writer's batch among them (bench/README.md, "Group commit"). Here the transactions waiting for
the connection go to the thread together, in one trip with one commit: each member's work runs
in its own SAVEPOINT, so a work that raises or calls `rollback()` undoes only its own statements
(`ROLLBACK TO`) and gets its own answer, while the others are committed. A failing COMMIT fails
every member that was to be committed (the transaction is rolled back, so the next group starts
clean). Whoever arrives while a group is on the thread joins the next group. A group is bounded
(`MAX_MEMBERS`; no member starts after `MAX_SECONDS` on the thread, the rest go in the next
group) so that a large log batch cannot hold the starts queued behind it for long.

Order: members run in the order they came, in one transaction, so a member sees the writes of
those before it, and a later group sees the earlier ones committed. A group holds the pool's
connection from checkout to checkin like any other user of it, so ORM sessions and
`engine.begin()` on the same connection queue with it as before.

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
(`transaction.run`).
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy import Engine, Executable
from sqlalchemy.engine import CursorResult
from sqlalchemy.exc import DBAPIError
from sqlalchemy.util.concurrency import greenlet_spawn

from .sqlite_driver import OneTripDBAPI, whole_in_one_trip
from .transaction import Transaction

R = TypeVar("R")

# At most this many transactions in one trip and one commit.
MAX_MEMBERS = 64
# No member starts after the group has been this long on the database's thread: a large log
# batch ahead delays the members behind it by one trip, not by everything else in the group.
MAX_SECONDS = 0.02
SAVEPOINT = "group_member"


class InGroup(Transaction):
    """What a member's work is given: the sqlite3 connection itself, inside the member's
    savepoint (or, alone in its group, its own transaction)."""

    cheap_statements = True  # statements cost no trip here (see `transaction`)

    def __init__(self, engine: Engine, connection: sqlite3.Connection, savepoint: bool) -> None:
        super().__init__(engine, connection)
        self._savepoint = savepoint

    def rollback(self) -> None:
        self.rolled_back = True
        if self._savepoint:
            self.connection.execute(f"ROLLBACK TO {SAVEPOINT}")
        else:
            self.connection.rollback()

    def execute(self, statement: Executable, parameters: dict[str, Any]) -> CursorResult[Any]:
        raise TypeError("no SQLAlchemy statement on the database's thread: use `Prepared`")


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

    Whoever finds no group under way leads one in its own task: it takes the connection, then
    every transaction waiting by then (its own first), so a transaction on a quiet process
    costs no more hand-overs than one of its own. Those that come meanwhile wait for their
    outcome, handed to them as soon as their group has committed; if some are still waiting
    when the leader is done, a task of its own leads their groups."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._waiting: collections.deque[_Member] = collections.deque()
        self._busy = False  # a leader or the drain task is taking groups
        self._loop: asyncio.AbstractEventLoop | None = None

    async def run(self, work: Callable[[Transaction], R]) -> R:
        """`work` in the next group: committed if it returns (unless it rolled back), rolled
        back if it raises (as `transaction.run`)."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # a new loop (tests): the old one's state is gone
            self._loop, self._waiting, self._busy = loop, collections.deque(), False
        future: asyncio.Future[R] = loop.create_future()
        self._waiting.append(_Member(work, future))
        if self._busy:
            return await future
        self._busy = True
        try:
            while not future.done():  # its group is the next, or (past the bounds) a later one
                await greenlet_spawn(self._group, loop)
        finally:
            future.cancel()  # cancelled before its group: its work is not run (else a no-op)
            self._busy = False
            if self._waiting:  # in a context of its own: not this caller's
                self._busy = True
                loop.create_task(self._drain(loop), name="store group commit",
                                 context=contextvars.Context())
        return future.result()

    async def _drain(self, loop: asyncio.AbstractEventLoop) -> None:
        try:
            while True:
                await greenlet_spawn(self._group, loop)
                if not self._waiting:
                    break
                await asyncio.sleep(0)  # whoever waits for the pool's connection gets its turn
        finally:
            self._busy = False
            while self._waiting:  # cancelled: nobody may wait for a group that never comes
                self._waiting.popleft().future.cancel()

    def _take(self) -> list[_Member]:
        members: list[_Member] = []
        while self._waiting and len(members) < MAX_MEMBERS:
            member = self._waiting.popleft()
            if not member.future.done():  # a cancelled caller's work is not run
                members.append(member)
        return members

    def _group(self, loop: asyncio.AbstractEventLoop) -> None:
        """On SQLAlchemy's synchronous side: the pool's connection, then those waiting for it
        by then, in one trip."""
        try:
            connection = self.engine.raw_connection()
        except Exception as error:
            members = self._take()
            _fail_all(members, error)
            self._done(members, len(members))
            return
        trip = _Trip(self, loop, self._take())
        try:
            if trip.members:
                whole_in_one_trip(connection.dbapi_connection, trip)
        except BaseException as error:
            trip.cut_short(error)  # the members have their outcome (or will have it)
            if not isinstance(error, Exception):
                raise  # cancelled: so is whoever took the group
        else:
            self._done(trip.members, trip.ran)
        finally:
            connection.close()

    def _done(self, members: list[_Member], ran: int) -> None:
        """On the loop: the outcomes of those that ran; the others first in the next group."""
        self._waiting.extendleft(reversed(members[ran:]))
        _settle(members[:ran])


class _Trip:
    """A group's trip to aiosqlite's thread (called there). Whoever took the group hands the
    outcomes back when it sees the trip end; if it is cancelled meanwhile (the thread goes on
    with the group), the thread posts them to the loop itself: nobody is left waiting."""

    __slots__ = ("group", "loop", "members", "ran", "_lock", "_finished", "_abandoned")

    def __init__(self, group: GroupCommit, loop: asyncio.AbstractEventLoop,
                 members: list[_Member]) -> None:
        self.group, self.loop, self.members, self.ran = group, loop, members, len(members)
        self._lock = threading.Lock()
        self._finished = self._abandoned = False

    def __call__(self, raw: sqlite3.Connection) -> None:
        try:
            self.ran = _run_group(self.group.engine, raw, self.members)
        except BaseException as error:
            _fail_all(self.members, error)
        with self._lock:
            self._finished = True
            if self._abandoned:
                _post(self.loop, self.group._done, self.members, self.ran)

    def cut_short(self, error: BaseException) -> None:
        """On the loop: the trip's wait ended by `error`."""
        with self._lock:
            if not self._finished and isinstance(error, asyncio.CancelledError):
                self._abandoned = True  # the thread hands the outcomes back
                return
        if not self._finished:  # never made: the connection is closed
            _fail_all(self.members, error)
            self.ran = len(self.members)
        self.group._done(self.members, self.ran)


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
