"""How a store transaction travels on PostgreSQL: a pooled connection, without SQLAlchemy's
`Connection` around the transaction itself.

A transaction's work runs in one switch to SQLAlchemy's synchronous side (`greenlet_spawn`):
the pool's checkout, `work`, the DB-API `commit()`, or the rollback if `work` raised. Neither
asyncpg's adapter nor SQLite's driver does anything at a begin (each opens its transaction at
the first statement), so nothing is sent for it. A Core statement runs through a SQLAlchemy
`Connection` made on the same DB-API connection, in the same transaction (`execute`); the
fixed statements of the hot path go straight to the driver's cursor (`Prepared`). The driver's
errors are raised as SQLAlchemy's (`DBAPIError`), and a connection that fails to commit or
roll back is invalidated (not returned to the pool), as SQLAlchemy does.

`alone` runs a work without a transaction block (asyncpg's adapter in autocommit mode sends no
`BEGIN`): for a run's start, its log batch and its end, whose chains of statements it fuses
into one statement each (`chain`), which PostgreSQL runs atomically by itself.

The pool pings a connection before use only when it sat idle (`ping_when_idle`).
docs/decisions/ keeps the measurements behind each of these.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, Executable, event
from sqlalchemy.exc import DBAPIError, DisconnectionError
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import PoolProxiedConnection
from sqlalchemy.util.concurrency import greenlet_spawn

from .transaction import Result, Transaction

R = TypeVar("R")


class PoolTransaction:
    """A `Transaction` on a pooled DB-API connection."""

    def __init__(self, engine: Engine, connection: Any, fuses: bool = False) -> None:
        self.engine, self.dialect, self.connection = engine, engine.dialect, connection
        self.fuses = fuses  # run `alone`: a chain goes as one statement
        self.rolled_back = False
        self._core: Connection | None = None

    def rollback(self) -> None:
        self.rolled_back = True
        _finish(self.connection, self.connection.rollback, self.dialect)

    def execute(self, statement: Executable,
                parameters: dict[str, Any] | list[dict[str, Any]] | None = None
                ) -> Result:
        if self._core is None:
            self._core = Connection(self.engine, self.connection)
        return self._core.execute(statement, parameters)


class PostgresEngine:
    """The `Engine` of a pooled database (PostgreSQL; any other but SQLite)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine.sync_engine
        self.fused = engine.dialect.name == "postgresql"

    async def transaction(self, work: Callable[[Transaction], R]) -> R:
        return await greenlet_spawn(run, self.engine, work)

    async def alone(self, work: Callable[[Transaction], R]) -> R:
        if not self.fused:
            return await self.transaction(work)
        return await greenlet_spawn(run_alone, self.engine, work)

    async def hot(self, work: Callable[[Transaction], R]) -> R:
        return await self.alone(work)


def run(engine: Engine, work: Callable[[Transaction], R]) -> R:
    """`work` in one transaction: committed if it returns (unless it rolled back), rolled
    back if it raises."""
    connection = _checkout(engine)
    try:
        transaction = PoolTransaction(engine, connection)
        try:
            result = work(transaction)
        except BaseException:
            # A statement interrupted (a cancelled task) or a lost connection leaves the
            # connection invalidated by SQLAlchemy: nothing to roll back, and the work's
            # exception (a cancellation stays a cancellation) is the news.
            if not transaction.rolled_back and connection.dbapi_connection is not None:
                try:
                    transaction.rollback()
                except DBAPIError:
                    pass  # the connection is gone (invalidated)
            raise
        if not transaction.rolled_back:
            _finish(connection, connection.commit, engine.dialect)
        return result
    finally:
        connection.close()


def run_alone(engine: Engine, work: Callable[[Transaction], R]) -> R:
    """`work` with every statement committed by itself, without `BEGIN` or `COMMIT`
    (asyncpg's adapter skips its `BEGIN` in autocommit mode). A connection lost meanwhile is
    invalidated (not returned to the pool)."""
    connection = _checkout(engine)
    adapted: Any = connection.dbapi_connection
    try:
        adapted.autocommit = True
        return work(PoolTransaction(engine, connection, fuses=True))
    except DBAPIError as error:
        if error.orig is not None and engine.dialect.is_disconnect(
                error.orig, connection, None):  # type: ignore[arg-type]
            connection.invalidate(error.orig)
        raise
    finally:
        if connection.dbapi_connection is not None:
            adapted.autocommit = False
        connection.close()


def _checkout(engine: Engine) -> PoolProxiedConnection:
    dbapi = engine.dialect.loaded_dbapi
    try:
        return engine.raw_connection()
    except dbapi.Error as error:
        raise DBAPIError.instance(None, None, error, dbapi.Error) from error


def _finish(connection: PoolProxiedConnection, end: Callable[[], None], dialect: Any) -> None:
    """Commit or roll back; a failure invalidates the connection and is raised as
    SQLAlchemy's error."""
    dbapi = dialect.loaded_dbapi
    try:
        end()
    except dbapi.Error as error:
        connection.invalidate(error)
        raise DBAPIError.instance(None, None, error, dbapi.Error,
                                  connection_invalidated=True) from error


def ping_when_idle(engine: AsyncEngine, idle_seconds: float) -> None:
    """Ping a pooled connection before use only if it sat in the pool `idle_seconds` or more.

    SQLAlchemy's `pool_pre_ping` pings at every checkout, and asyncpg's ping outside a
    transaction is three round trips (`BEGIN`, `;`, `ROLLBACK`), as many again for every
    start, end and log commit. A connection back in use within the window was working a
    moment ago; one idle longer may have been closed by a database restart, a failover or an
    idle timeout, and is pinged, and replaced if the ping fails (the pool retries the checkout
    with a new connection), so the request never sees it. The same rule as the alive-check
    bypass of Java's HikariCP pool. A connection that drops within the window fails its
    statement, and is invalidated there."""

    @event.listens_for(engine.sync_engine, "checkin")
    def _idle_from(_dbapi_connection: Any, record: Any) -> None:
        record.info["idle_from"] = time.monotonic()

    @event.listens_for(engine.sync_engine, "checkout")
    def _ping_if_idle(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        idle_from = record.info.pop("idle_from", None)
        if idle_from is None or time.monotonic() - idle_from < idle_seconds:
            return  # new (it just connected), or in use a moment ago
        try:
            engine.sync_engine.dialect.do_ping(dbapi_connection)
        except Exception as error:
            raise DisconnectionError(f"a pooled connection failed its ping: {error}") from error
