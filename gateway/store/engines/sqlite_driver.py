"""SQLite statements in one trip to aiosqlite's thread instead of three or four.

aiosqlite runs every call on its own thread, and SQLAlchemy's adapter makes a call of each
DB-API step: open a cursor, execute, fetch the rows, close the cursor. Each call is a round trip
that waits for the event loop (and for the GIL) twice, so on a busy process each statement
cost several waits in the queue of a loop that every stream shares
(docs/decisions/0016-sqlite-statement-in-one-call.md). Here a statement's steps run together on
the thread, in one trip: the same sqlite3 calls in the same order on the same connection, so
transactions, errors and results are SQLite's own as before.

Server-side cursors (`stream_results`) keep SQLAlchemy's own cursor; the gateway uses none.
"""

from __future__ import annotations

import collections
import functools
import sqlite3
from collections.abc import Awaitable, Callable
from typing import Any

import aiosqlite
from sqlalchemy.dialects.sqlite.aiosqlite import (
    AsyncAdapt_aiosqlite_connection,
    AsyncAdapt_aiosqlite_cursor,
    AsyncAdapt_aiosqlite_dbapi,
)
from sqlalchemy.util import EMPTY_DICT
from sqlalchemy.util.concurrency import await_

Outcome = tuple[Any, list[Any], int, int | None]  # description, rows, rowcount, lastrowid


def _run(connection: sqlite3.Connection, operation: str, parameters: Any,
         many: bool) -> Outcome:
    """On aiosqlite's thread: what SQLAlchemy's adapter did in separate calls."""
    cursor = connection.cursor()
    try:
        if many:
            cursor.executemany(operation, parameters)
        elif parameters is None:
            cursor.execute(operation)
        else:
            cursor.execute(operation, parameters)
        description = cursor.description
        rows = cursor.fetchall() if description else []
        return description, rows, cursor.rowcount, cursor.lastrowid
    finally:
        cursor.close()


class OneTripCursor(AsyncAdapt_aiosqlite_cursor):
    """A buffered cursor whose `execute` is one call on aiosqlite's thread; it holds no
    sqlite3 cursor between calls, so there is nothing to open or close."""

    __slots__ = ("_meta",)

    def __init__(self, adapt_connection: Any) -> None:
        self._adapt_connection = adapt_connection
        self._connection = adapt_connection._connection
        self._cursor = None  # type: ignore[assignment]
        self._soft_closed_memoized = EMPTY_DICT
        self._rows = collections.deque()
        # description, rowcount, lastrowid of the last statement; its rows are in `_rows`
        self._meta: tuple[Any, int, int | None] = (None, -1, None)

    @property
    def description(self) -> Any:
        return self._meta[0]

    @property
    def rowcount(self) -> int:
        return self._meta[1]

    @property
    def lastrowid(self) -> Any:
        return self._meta[2]

    @property
    def arraysize(self) -> int:
        return 1

    @arraysize.setter
    def arraysize(self, value: int) -> None:
        pass

    def execute(self, operation: Any, parameters: Any = None) -> Any:
        return self._execute(operation, parameters, False)

    def executemany(self, operation: Any, seq_of_parameters: Any) -> Any:
        return self._execute(operation, seq_of_parameters, True)

    def _execute(self, operation: Any, parameters: Any, many: bool) -> None:
        try:
            await_(self._in_one_trip(operation, parameters, many))
        except Exception as error:
            self._adapt_connection._handle_exception(error)

    async def _in_one_trip(self, operation: Any, parameters: Any, many: bool) -> None:
        connection: aiosqlite.Connection = self._connection  # type: ignore[assignment]
        execute: Callable[..., Awaitable[Outcome]] = connection._execute
        async with self._adapt_connection._execute_mutex:
            description, rows, rowcount, lastrowid = await execute(
                _run, connection._conn, operation, parameters, many)
        self._meta = (description, rowcount, lastrowid)
        self._rows = collections.deque(rows)

    async def _async_soft_close(self) -> None:
        """Nothing to close: the rows are already here."""

    def close(self) -> None:
        self._rows.clear()

    def setinputsizes(self, *inputsizes: Any) -> None:
        """sqlite3 ignores them too."""


class OneTripConnection(AsyncAdapt_aiosqlite_connection):
    __slots__ = ()
    _cursor_cls = OneTripCursor

    def rollback(self) -> None:
        """No trip when no transaction is open: sqlite3 opens one only before a write (legacy
        transaction control, as SQLAlchemy leaves it) and ignores a rollback or commit outside
        one, so a session that only read ended with a trip to the thread and back for
        nothing, waiting for the busy loop with the process's one connection held."""
        if self._open():
            super().rollback()

    def commit(self) -> None:
        if self._open():
            super().commit()

    def _open(self) -> bool:
        """A transaction is open (or the connection is closed: the driver says so). Read on
        the loop while the connection is checked out, so its thread is not using it."""
        raw: sqlite3.Connection | None = self._connection._connection
        return raw is None or raw.in_transaction


class OneTripDBAPI(AsyncAdapt_aiosqlite_dbapi):
    """SQLAlchemy's aiosqlite DB-API adapter, whose connections make `OneTripCursor`s."""

    def connect(self, *arg: Any, **kw: Any) -> OneTripConnection:
        connection = super().connect(*arg, **kw)
        connection.__class__ = OneTripConnection  # the same slots: only the cursor differs
        return connection  # type: ignore[return-value]


def one_trip_dbapi() -> OneTripDBAPI:
    """The `module` for `create_async_engine` on an `sqlite+aiosqlite` URL."""
    return OneTripDBAPI(aiosqlite, sqlite3)


def hand_over(connection: Any, work: Callable[[sqlite3.Connection], None]) -> None:
    """`work` on aiosqlite's thread, given the sqlite3 connection, without waiting for it: the
    caller does not need the event loop to take the outcome back, so `work` reports it itself
    (`engines.sqlite`: the connection goes on to the next transactions on the thread instead of
    waiting for a busy loop between them). `work` must not raise. From the event loop;
    `connection` is a checked-out `OneTripConnection`, used by nobody else meanwhile."""
    driver: aiosqlite.Connection = connection._connection
    if not driver._running or not driver._connection:
        raise ValueError("Connection closed")
    driver._tx.put_nowait((None, functools.partial(work, driver._conn)))
