"""What every query class shares: a session factory on one engine, the operation hook, and
keyset pages."""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from asyncpg.exceptions import CannotConnectNowError
from sqlalchemy import ColumnElement, Table, bindparam, inspect, or_, text, update
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.util.concurrency import greenlet_spawn
from sqlmodel import SQLModel
from sqlmodel.ext.asyncio.session import AsyncSession

from . import cursors
from .db import session_factory
from .engines.group_commit import group_commit_for
from .engines.prepared import Prepared
from .engines.transaction import Transaction, run_alone
from .engines.transaction import run as run_transaction
from .tables import RunRow

ACTIVE_RUN_STATUSES = ("queued", "running")

# What a query raises when the database is unreachable for a moment (a restart, a network
# blip): connecting fails with the driver's own error or the OS's, a dropped connection with
# SQLAlchemy's. Callers that can wait it out catch these, and nothing else.
UNAVAILABLE: tuple[type[Exception], ...] = (DBAPIError, OSError, CannotConnectNowError)



def is_refused_value(exc: BaseException) -> bool:
    """Whether a database error is the database refusing a value (SQLSTATE class 22, "data
    exception": a NUL character in text, which PostgreSQL cannot store), not the database
    being unreachable: the request is at fault, and retrying it cannot help."""
    orig = getattr(exc, "orig", None)
    sqlstate = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    return isinstance(exc, DBAPIError) and str(sqlstate or "").startswith("22")


# A frame of the run log as written: (seq, timestamp ms, Timbal frame).
FrameEntry = tuple[int, int, Mapping[str, Any]]


@dataclass(frozen=True)
class Page:
    rows: Sequence[Any]
    has_more: bool
    next_cursor: str | None


def _page(rows: list[Any], limit: int, key: Callable[[Any], list[Any]]) -> Page:
    """A page from `limit + 1` rows: the extra row only tells that there is more."""
    has_more = len(rows) > limit
    rows = rows[:limit]
    return Page(rows, has_more, cursors.encode(key(rows[-1])) if has_more else None)



# A run's fencing token as its writes carry it: (run id, lease owner).
Fence = tuple[str, str]


def table(model: type[SQLModel]) -> Table:
    """The Core table of a model: statements on it skip the ORM (no identity map to
    synchronise, no unit of work), which is most of a query's CPU on the hot paths."""
    return model.__table__


@cache
def _columns(model: type[SQLModel]) -> tuple[tuple[str, str, bool], ...]:
    """(attribute, column, generated): `generated` for a key the database numbers."""
    return tuple((attr.key, attr.columns[0].key,
                  attr.columns[0].primary_key and attr.columns[0].autoincrement is True)
                 for attr in inspect(model).column_attrs)


def values_of(row: SQLModel) -> dict[str, Any]:
    """A model instance as the column values of a Core INSERT (a key the database numbers is
    left to it while unset)."""
    values = {}
    loaded = row.__dict__  # read as the attribute would be, without its descriptor
    for attr, column, generated in _columns(type(row)):
        value = loaded[attr] if attr in loaded else getattr(row, attr)
        if value is not None or not generated:
            values[column] = value
    return values


def is_active(status: Any) -> ColumnElement[bool]:
    """`status IN ('queued', 'running')` as equalities: a statement run as `Prepared` has no
    expanding `IN`."""
    return or_(*(status == value for value in ACTIVE_RUN_STATUSES))


_runs = table(RunRow)
# Built once: building and caching a statement costs more than executing it on SQLite.
_HOLD_LEASE = (update(_runs)
               .where(_runs.c.id == bindparam("run_id"), _runs.c.lease_owner == bindparam("owner"),
                      is_active(_runs.c.status))
               .values(lease_owner=bindparam("owner")))
HOLD_LEASE = Prepared(_HOLD_LEASE)


async def holds_lease(connection: AsyncSession | AsyncConnection, fence: Fence | None) -> bool:
    """In the transaction of `connection`: does the fence's owner still hold the run's lease?
    The no-op UPDATE takes the run row's lock, so a reaper ending the run concurrently waits for
    this transaction (and then finds the writes in it) or has already taken the lease (and then
    this returns False and the caller writes nothing)."""
    if fence is None:
        return True
    run_id, owner = fence
    held = await connection.execute(_HOLD_LEASE, {"run_id": run_id, "owner": owner})
    return held.rowcount == 1


def lease_held(connection: Transaction, fence: Fence | None) -> bool:
    """`holds_lease` inside a `Queries.transaction`."""
    if fence is None:
        return True
    run_id, owner = fence
    return HOLD_LEASE.execute(connection, {"run_id": run_id, "owner": owner}) == 1


class StoreHooks(Protocol):
    """Told the time of each store operation (an operator's metrics); the store knows no more."""

    def operation_timed(self, name: str, seconds: float) -> None: ...


class _Untimed:
    def operation_timed(self, name: str, seconds: float) -> None:
        pass


Q = TypeVar("Q", bound="Queries")
P = ParamSpec("P")
R = TypeVar("R")


def operation(method: Callable[Concatenate[Q, P], Awaitable[R]]
              ) -> Callable[Concatenate[Q, P], Awaitable[R]]:
    """A store operation: its time (failed ones too: a timeout is latency) goes to the store's
    hooks, named after the method."""
    name = method.__name__

    @functools.wraps(method)
    async def timed(self: Q, /, *args: P.args, **kwargs: P.kwargs) -> R:
        started = time.perf_counter()
        try:
            return await method(self, *args, **kwargs)
        finally:
            self.hooks.operation_timed(name, time.perf_counter() - started)

    return timed


class Queries:
    """Every write that must be atomic is one statement or one transaction in a subclass, so the
    callers (`runs`, `api`) never hold a session across an await on anything else.

    Each public operation is marked `@operation`: its time, waiting for a connection included,
    goes to `hooks` under the method's name."""

    def __init__(self, engine: AsyncEngine, hooks: StoreHooks | None = None) -> None:
        self.engine = engine
        self.hooks: StoreHooks = hooks if hooks is not None else _Untimed()
        self._sessions = session_factory(engine)
        self._group = group_commit_for(engine.sync_engine)  # SQLite only
        # PostgreSQL: a run's start and end as one statement each (`one_statement`).
        self.one_statement = engine.dialect.name == "postgresql"

    def session(self) -> AsyncSession:
        return self._sessions()

    async def transaction(self, work: Callable[[Transaction], R]) -> R:
        """`work` in one transaction (committed if it returns, rolled back if it raises or
        calls `connection.rollback()`), in a single switch to SQLAlchemy's synchronous side:
        `async with engine.begin()` switches for the checkout, the begin, each statement, the
        commit and the return, and those switches were a large part of a run start's CPU
        (bench/README.md). The transaction is the DB-API connection's own, without
        SQLAlchemy's `Connection` around it (`transaction.run`); the database driver is the
        same asynchronous one, awaited inside. On SQLite, the transactions that wait for the
        process's one connection meanwhile go with it in one trip and one commit
        (`group_commit`)."""
        if self._group is not None:
            return await self._group.run(work)
        return await greenlet_spawn(run_transaction, self.engine.sync_engine, work)

    async def alone(self, work: Callable[[Transaction], R]) -> R:
        """`work` with each statement committed by itself (PostgreSQL: no `BEGIN`, no
        `COMMIT`; `one_statement` says when that is atomic enough)."""
        return await greenlet_spawn(run_alone, self.engine.sync_engine, work)

    @operation
    async def ping(self) -> None:
        """A trivial query: raises if the database does not answer (`/ready`)."""
        async with self.engine.connect() as connection:
            await connection.execute(text("SELECT 1"))

    @operation
    async def notify(self, channel: str, payload: str) -> None:
        """PostgreSQL's `NOTIFY` on `channel` (`backends/postgres.py`)."""
        async with self.engine.connect() as connection:
            await connection.execute(text("SELECT pg_notify(:channel, :payload)"),
                                     {"channel": channel, "payload": payload})
            await connection.commit()
