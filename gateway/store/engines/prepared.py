"""The statements of a run's start and end, compiled once per database and run on the driver.

SQLAlchemy's `Connection.execute` builds an execution context, a compiled cache's key and a
result object for each statement, on top of the driver's own work, and a run's start, its
answer and its end take a dozen statements on the event loop that every stream shares
(docs/decisions/0019-prepared-statements.md has the measurement). These few statements are
fixed, so
`Prepared` compiles each one once per dialect (and set of columns) with SQLAlchemy's own
compiler, then hands the SQL and its parameters, converted by the columns' own types (JSON,
booleans), to the DB-API cursor of the transaction's connection: same SQL, same driver, same
transaction, none of the machinery around them.

Only plain statements qualify: no expanding `IN` (write `or_` of equalities), no values computed
by SQLAlchemy at execution (every column an INSERT names is given). Errors are raised as
SQLAlchemy's (`IntegrityError`, `DBAPIError`), as callers expect.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import Dialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql.expression import Executable

from .transaction import Transaction

Params = Mapping[str, Any]
T = TypeVar("T")


@dataclass(frozen=True)
class _Form:
    """The statement as one dialect runs it: its SQL and how a parameter dict becomes the
    driver's positional parameters."""

    sql: str
    names: tuple[str, ...]
    fixed: dict[str, Any]  # parameters whose value is part of the statement
    processors: tuple[tuple[int, Callable[[Any], Any]], ...]  # (position, type's converter)

    def positional(self, params: Params) -> tuple[Any, ...]:
        given = {**self.fixed, **params} if self.fixed else params
        values = [given[name] for name in self.names]
        for position, process in self.processors:
            values[position] = process(values[position])
        return tuple(values)


class Prepared:
    """A Core statement run straight on the driver's cursor (see the module's docstring)."""

    def __init__(self, statement: Executable) -> None:
        self.statement = statement
        self._forms: dict[tuple[str, tuple[str, ...]], _Form] = {}

    def execute(self, connection: Transaction, params: Params | list[Params]) -> int:
        """Run with one parameter dict, or with each of a list (`executemany`); the number of
        rows it changed."""
        batch = params if isinstance(params, list) else None
        first = batch[0] if batch is not None else params
        form = self._form(connection.dialect, tuple(first))  # type: ignore[arg-type]

        def run(cursor: Any) -> int:
            if batch is not None:
                cursor.executemany(form.sql, [form.positional(p) for p in batch])
            else:
                cursor.execute(form.sql, form.positional(first))  # type: ignore[arg-type]
            return int(cursor.rowcount)

        return self._run(connection, form, run)

    def rows(self, connection: Transaction, params: Params) -> list[Any]:
        """Run a SELECT; its rows as the driver returns them (tuples)."""
        form = self._form(connection.dialect, tuple(params))

        def run(cursor: Any) -> list[Any]:
            cursor.execute(form.sql, form.positional(params))
            return list(cursor.fetchall())

        return self._run(connection, form, run)

    @staticmethod
    def _run(connection: Transaction, form: _Form, work: Callable[[Any], T]) -> T:
        """`work` on a cursor of the transaction's connection; the driver's errors as
        SQLAlchemy's."""
        dbapi = connection.dialect.loaded_dbapi
        cursor = connection.connection.cursor()
        try:
            return work(cursor)
        except dbapi.Error as error:
            raise DBAPIError.instance(form.sql, None, error, dbapi.Error) from error
        finally:
            cursor.close()

    def _form(self, dialect: Dialect, keys: tuple[str, ...]) -> _Form:
        form = self._forms.get((dialect.name, keys))
        if form is None:
            form = self._forms[(dialect.name, keys)] = _compiled(self.statement, dialect, keys)
        return form


def _compiled(statement: Executable, dialect: Dialect, keys: tuple[str, ...]) -> _Form:
    # `column_keys`: the columns an INSERT or UPDATE writes; for a SELECT none (they would
    # apply to its data-modifying `WITH` parts, which name their columns, `one_statement`).
    # `for_executemany`: no RETURNING of a key the database numbers, which nobody reads here.
    columns = list(keys) if statement.is_dml else None
    compiled = statement.compile(dialect=dialect, column_keys=columns,  # type: ignore[attr-defined]
                                 for_executemany=True)
    if compiled.post_compile_params or not compiled.positional:
        raise ValueError(f"not a plain positional statement: {compiled.string}")
    names = tuple(compiled.positiontup)
    binds = compiled.binds
    if any(binds[name].callable is not None for name in names):
        raise ValueError(f"values computed at execution: {compiled.string}")
    fixed = {name: binds[name].value for name in names
             if name not in keys and not binds[name].required}
    processors = []
    for position, name in enumerate(names):
        process = binds[name].type.dialect_impl(dialect).bind_processor(dialect)
        if process is not None:
            processors.append((position, process))
    return _Form(compiled.string, names, fixed, tuple(processors))
