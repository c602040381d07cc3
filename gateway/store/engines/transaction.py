"""A store transaction on the pool's connection, without SQLAlchemy's `Connection` around it.

A run's start and end are each one transaction of a few fixed statements run on the driver's
cursor (`prepared`). `engine.begin()` around them builds a `Connection` and its
`RootTransaction`, dispatches their events and commits through them: about 40 Python calls a
transaction, on the event loop every stream shares, for what comes down, with these drivers, to
the pool's checkout, the statements, and the DB-API `commit()` (neither SQLite's driver nor
asyncpg's adapter does anything at a begin: each opens its transaction at the first
statement). `run` does that much: the pool's checkout (its pre-ping, its reset on return),
`work`, the commit, or the rollback if `work` raised. The driver's errors are raised as
SQLAlchemy's (`DBAPIError`), and a connection that fails to commit or roll back is invalidated
(not returned to the pool), as SQLAlchemy does.

A Core statement that `Prepared` cannot run (an expanding `IN`) runs through a SQLAlchemy
`Connection` made on the same DB-API connection, in the same transaction (`execute`).

On SQLite, `Queries.transaction` does not come here: concurrent transactions are gathered and
run together on aiosqlite's thread, in one trip with one commit (`group_commit`), each work
given an `InGroup` on the sqlite3 connection itself. There, statements cost no trip, so one
per row is as cheap as one for many (`cheap_statements`), and Core statements are not
available. `run` still works on SQLite (a trip per statement).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy import Connection, CursorResult, Engine, Executable
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import PoolProxiedConnection

R = TypeVar("R")


class Transaction:
    """What a transaction's work is given: the dialect and the DB-API connection its
    statements run on (`Prepared` needs no more), and `rollback`."""

    cheap_statements = False  # a statement per row costs a trip each (see the module's doc)

    def __init__(self, engine: Engine, connection: Any) -> None:
        self.engine, self.dialect, self.connection = engine, engine.dialect, connection
        self.rolled_back = False
        self._core: Connection | None = None

    def rollback(self) -> None:
        """Undo the work so far: nothing of this transaction is committed."""
        self.rolled_back = True
        _finish(self.connection, self.connection.rollback, self.dialect)

    def execute(self, statement: Executable, parameters: dict[str, Any]) -> CursorResult[Any]:
        """A Core statement through SQLAlchemy, on this transaction's connection."""
        if self._core is None:
            self._core = Connection(self.engine, self.connection)
        return self._core.execute(statement, parameters)


def run(engine: Engine, work: Callable[[Transaction], R]) -> R:
    """`work` in one transaction: committed if it returns (unless it rolled back), rolled
    back if it raises."""
    dbapi = engine.dialect.loaded_dbapi
    try:
        connection = engine.raw_connection()
    except dbapi.Error as error:
        raise DBAPIError.instance(None, None, error, dbapi.Error) from error
    try:
        transaction = Transaction(engine, connection)
        try:
            result = work(transaction)
        except BaseException:
            if not transaction.rolled_back:
                try:
                    transaction.rollback()
                except DBAPIError:
                    pass  # the connection is gone (invalidated); the work's error is the news
            raise
        if not transaction.rolled_back:
            _finish(connection, connection.commit, engine.dialect)
        return result
    finally:
        connection.close()


def run_alone(engine: Engine, work: Callable[[Transaction], R]) -> R:
    """`work` with every statement committed by itself, without `BEGIN` or `COMMIT`: for a
    work of one statement (atomic alone), or of statements that need not be atomic together
    (`one_statement`). PostgreSQL's asyncpg adapter only: it skips its `BEGIN` in autocommit
    mode. A connection lost meanwhile is invalidated (not returned to the pool)."""
    dbapi = engine.dialect.loaded_dbapi
    try:
        connection = engine.raw_connection()
    except dbapi.Error as error:
        raise DBAPIError.instance(None, None, error, dbapi.Error) from error
    adapted = connection.dbapi_connection
    try:
        adapted.autocommit = True  # type: ignore[union-attr]
        return work(Transaction(engine, connection))
    except DBAPIError as error:
        if error.orig is not None and engine.dialect.is_disconnect(
                error.orig, connection, None):  # type: ignore[arg-type]
            connection.invalidate(error.orig)
        raise
    finally:
        if connection.dbapi_connection is not None:
            adapted.autocommit = False  # type: ignore[union-attr]
        connection.close()


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
