"""The statements of a run's start and end, compiled once per database and run on the driver.

SQLAlchemy's `Connection.execute` costs about 250 Python calls a statement (the execution
context, the compiled cache's key, the result object) on top of the driver's own work, and a
run's start, its answer and its end take a dozen statements: a large part of a start's CPU, on
the event loop that every stream shares (bench/README.md). These few statements are fixed, so
`Prepared` compiles each one once per dialect (and set of columns) with SQLAlchemy's own
compiler, then hands the SQL and its parameters, converted as the columns' own types convert
them, to the DB-API cursor of the transaction's connection: same SQL, same driver, same
transaction, none of the machinery around them. JSON and boolean values, about twenty a start
and one per logged frame, are converted here rather than by SQLAlchemy's converters (a few
Python calls each, on SQLite's one thread): the same values reach the driver
(`tests/inprocess/store/test_prepared.py`).

Only plain statements qualify: no expanding `IN` (write `or_` of equalities), no values computed
by SQLAlchemy at execution (every column an INSERT names is given). Errors are raised as
SQLAlchemy's (`IntegrityError`, `DBAPIError`), as callers expect.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from orjson import dumps
from sqlalchemy import JSON, Boolean, Dialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql.expression import Executable
from sqlalchemy.types import TypeEngine

from .db import json_text
from .transaction import Transaction

Params = Mapping[str, Any]


@dataclass(frozen=True)
class _Form:
    """The statement as one dialect runs it: its SQL and how a parameter dict becomes the
    driver's positional parameters."""

    sql: str
    names: tuple[str, ...]
    fixed: dict[str, Any]  # parameters whose value is part of the statement
    processors: tuple[tuple[int, Callable[[Any], Any]], ...]  # (position, type's converter)
    # JSON columns whose converter is `json_text` and nothing more: serialized here, in
    # orjson's one C call instead of SQLAlchemy's four Python calls around it; (position,
    # the type's converter for what orjson refuses, `json.dumps`'s cases, and JSON's NULL
    # markers: `JSON.NULL` is an int subclass, so it is sent there before orjson sees it)
    json: tuple[tuple[int, Callable[[Any], Any]], ...] = ()
    # booleans: `True`, `False` and `None` bound as they are (sqlite3 stores a bool as the
    # integer 0 or 1, as SQLAlchemy's `int(value)` did); anything else through the type's
    # converter, which refuses it as before
    booleans: tuple[tuple[int, Callable[[Any], Any]], ...] = ()
    # the parameters in the statement's order, as a tuple, in C (no Python loop per row)
    pick: Callable[[Params], tuple[Any, ...]] = field(init=False)

    def __post_init__(self) -> None:
        names = self.names
        pick = (itemgetter(*names) if len(names) > 1 else
                (lambda params: (params[names[0]],)) if names else (lambda params: ()))
        object.__setattr__(self, "pick", pick)

    def positional(self, params: Params) -> list[Any]:
        values = list(self.pick({**self.fixed, **params} if self.fixed else params))
        for position, process in self.processors:
            values[position] = process(values[position])
        for position, process in self.json:
            value = values[position]
            try:
                if value is JSON.NULL:  # an int to orjson
                    raise TypeError
                values[position] = dumps(value).decode()
            except TypeError:
                values[position] = process(value)
        for position, process in self.booleans:
            value = values[position]
            if value.__class__ is not bool and value is not None:
                values[position] = process(value)
        return values


class Prepared:
    """A Core statement run straight on the driver's cursor (see the module's docstring)."""

    def __init__(self, statement: Executable) -> None:
        self.statement = statement
        self._forms: dict[tuple[str, tuple[str, ...]], _Form] = {}

    def execute(self, connection: Transaction, params: Params | list[Params]) -> int:
        """Run with one parameter dict, or with each of a list (`executemany`); the number of
        rows it changed."""
        if isinstance(params, list):
            form = self._form(connection.dialect, tuple(params[0]))
            values = [form.positional(p) for p in params]
            return self._run(connection, form, values, True, False)[0]
        form = self._form(connection.dialect, tuple(params))
        return self._run(connection, form, form.positional(params), False, False)[0]

    def rows(self, connection: Transaction, params: Params) -> list[Any]:
        """Run a SELECT; its rows as the driver returns them (tuples)."""
        form = self._form(connection.dialect, tuple(params))
        return self._run(connection, form, form.positional(params), False, True)[1]

    @staticmethod
    def _run(connection: Transaction, form: _Form, values: Any, many: bool,
             fetch: bool) -> tuple[int, list[Any]]:
        """The statement on a cursor of the transaction's connection (`many`: `values` is a
        list of parameter lists, for `executemany`); the rows it changed, and its rows if
        `fetch`. The driver's errors as SQLAlchemy's."""
        dbapi = connection.dialect.loaded_dbapi
        cursor = connection.connection.cursor()
        try:
            if many:
                cursor.executemany(form.sql, values)
            else:
                cursor.execute(form.sql, values)
            return int(cursor.rowcount), list(cursor.fetchall()) if fetch else []
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
    kinds: dict[str, list[tuple[int, Callable[[Any], Any]]]] = {
        "processors": [], "json": [], "booleans": []}
    for position, name in enumerate(names):
        impl = binds[name].type.dialect_impl(dialect)
        process = impl.bind_processor(dialect)
        if process is not None:
            kinds[_kind(impl, dialect)].append((position, process))
    return _Form(compiled.string, names, fixed,
                 **{kind: tuple(found) for kind, found in kinds.items()})


def _kind(impl: TypeEngine[Any], dialect: Dialect) -> str:
    """How `_Form.positional` converts a value of this type: `json` when SQLAlchemy's
    converter is `json_text(value)` for every value orjson takes (None included, written as
    JSON's `null`), `booleans` for SQLAlchemy's own Boolean, else `processors` (the type's
    converter)."""
    if (isinstance(impl, JSON) and type(impl).bind_processor is JSON.bind_processor
            and not impl.none_as_null and dialect._json_serializer is json_text
            and impl._str_impl.bind_processor(dialect) is None):
        return "json"
    if type(impl) is Boolean:
        return "booleans"
    return "processors"
