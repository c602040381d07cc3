"""What every query class shares: the engine a transaction travels on, the operation hook,
keyset pages, and rows as the SQLModel classes."""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from asyncpg.exceptions import CannotConnectNowError
from sqlalchemy import (
    ColumnElement,
    Row,
    Table,
    and_,
    bindparam,
    inspect,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlmodel import SQLModel

from . import cursors
from .engines.postgres import PostgresEngine
from .engines.prepared import Prepared
from .engines.sqlite import group_commit_for
from .engines.transaction import AnyRow, Engine, Transaction
from .rows import made
from .tables import RunRow, ThreadRow

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


M = TypeVar("M", bound=SQLModel)
Named = TypeVar("Named", ThreadRow, RunRow)  # the rows a client may name


def table(model: type[SQLModel]) -> Table:
    """The Core table of a model: every query is a Core statement on it (the SQLModel classes
    are the schema and the row types; no ORM session, identity map or unit of work)."""
    found: Table = model.__table__  # type: ignore[attr-defined]
    return found


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


@cache
def _attributes(model: type[SQLModel]) -> tuple[tuple[str, str], ...]:
    """(column, attribute): a column may be named otherwise than its field (`metadata`)."""
    return tuple((column, attr) for attr, column, _ in _columns(model))


def row_as(model: type[M], row: AnyRow | Mapping[str, Any]) -> M:
    """A selected row of `model`'s table (or its columns by name) as a `model` instance, as
    the ORM loaded it."""
    mapping = row._mapping if isinstance(row, Row) else row
    return made(model, **{attr: mapping[column] for column, attr in _attributes(model)})


def column_values(model: type[SQLModel], values: Mapping[str, Any]) -> dict[str, Any]:
    """Values by field name (`meta=`) as the values of `model`'s columns (`metadata`), for a
    Core INSERT or UPDATE; a name the model does not have is a `KeyError`."""
    columns = {attr: column for column, attr in _attributes(model)}
    return {columns[name]: value for name, value in values.items()}


def rows_as(model: type[M], rows: Sequence[AnyRow]) -> list[M]:
    return [row_as(model, row) for row in rows]


def first_as(model: type[M], rows: Sequence[AnyRow]) -> M | None:
    return row_as(model, rows[0]) if rows else None


def is_active(status: Any) -> ColumnElement[bool]:
    """`status IN ('queued', 'running')` as equalities: a statement run as `Prepared` has no
    expanding `IN`."""
    return or_(*(status == value for value in ACTIVE_RUN_STATUSES))


_runs = table(RunRow)
# Built once: building and caching a statement costs more than executing it on SQLite.
LEASE_CHECK = (update(_runs)
               .where(_runs.c.id == bindparam("run_id"), _runs.c.lease_owner == bindparam("owner"),
                      is_active(_runs.c.status))
               .values(lease_owner=bindparam("owner")))
HOLD_LEASE = Prepared(LEASE_CHECK)


def lease_held(connection: Transaction, fence: Fence | None) -> bool:
    """In `connection`'s transaction: does the fence's owner still hold the run's lease?
    The no-op UPDATE takes the run row's lock, so a reaper ending the run concurrently waits for
    this transaction (and then finds the writes in it) or has already taken the lease (and then
    this returns False and the caller writes nothing)."""
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


def engine_for(engine: AsyncEngine) -> Engine:
    """How `engine`'s transactions travel: SQLite's group commit on its one connection
    (`engines.sqlite`), else the pool (`engines.postgres`)."""
    group = group_commit_for(engine.sync_engine)
    return group if group is not None else PostgresEngine(engine)


class Queries:
    """Every write that must be atomic is one transaction (`transaction`) of plain Core
    statements, so the callers (`runs`, `api`) never hold a connection across an await on
    anything else.

    Each public operation is marked `@operation`: its time, waiting for a connection included,
    goes to `hooks` under the method's name."""

    def __init__(self, engine: AsyncEngine, hooks: StoreHooks | None = None) -> None:
        self.engine = engine
        self.hooks: StoreHooks = hooks if hooks is not None else _Untimed()
        self.travel = engine_for(engine)

    async def transaction(self, work: Callable[[Transaction], R]) -> R:
        """`work` in one transaction: committed if it returns, rolled back if it raises or
        calls `connection.rollback()` (how it travels: `engine_for`)."""
        return await self.travel.transaction(work)

    async def hot(self, work: Callable[[Transaction], R]) -> R:
        """A hot write, whose writes are one `chain` (then reads, if any): in one transaction,
        or alone with the chain fused into one statement where the engine fuses
        (`Engine.hot`)."""
        return await self.travel.hot(work)

    async def alone(self, work: Callable[[Transaction], R]) -> R:
        """`work` with each statement committed by itself (PostgreSQL: no `BEGIN`, no
        `COMMIT`; for a work of one statement, or of statements that need not be atomic
        together)."""
        return await self.travel.alone(work)

    async def by_client_id(self, model: type[Named], project_id: str, client_id: str
                           ) -> Named | None:
        """The project's row (thread or run) a client calls `client_id`: the one it named so,
        else one without a client's name whose own id it is."""
        of = table(model)
        query = select(of).where(of.c.project_id == project_id,
                                 or_(of.c.client_id == client_id,
                                     and_(of.c.id == client_id, of.c.client_id.is_(None))))
        found = rows_as(model, await self.transaction(lambda tx: tx.execute(query).all()))
        return min(found, key=lambda row: row.client_id is None, default=None)

    @operation
    async def ping(self) -> None:
        """A trivial query: raises if the database does not answer (`/ready`)."""
        await self.alone(lambda connection: connection.execute(text("SELECT 1")).all())

    @operation
    async def notify(self, channel: str, payload: str) -> None:
        """PostgreSQL's `NOTIFY` on `channel` (`backends/postgres.py`)."""
        await self.alone(lambda connection: connection.execute(
            text("SELECT pg_notify(:channel, :payload)"),
            {"channel": channel, "payload": payload}).all())
