"""A run's start and its end on PostgreSQL, each as one statement: one round trip to the
database instead of one per statement plus `BEGIN` and `COMMIT`.

Through SQLAlchemy's asyncpg adapter a transaction costs a round trip for `BEGIN`, one per
statement (each a prepared statement, parsed once per connection) and one for `COMMIT`: a run
start on a new thread made 5 (the thread, the run, its messages), its end 8 (the run, its
answer, the rest of its log, its usage, the thread, the thread's queued runs). Each trip waits
for a PostgreSQL backend and then for a turn of the gateway's busy event loop
(bench/README.md, "PostgreSQL under load"). Here the same writes are one statement, whose
parts are data-modifying `WITH` queries: PostgreSQL runs a statement outside a transaction
block atomically (all of it is committed, or none), so it needs no `BEGIN` or `COMMIT`, and the
adapter runs it without them (`transaction.run_alone`).

The conditions stay what they were: a write that depends on another (the run and its input on
taking the thread's lock; the log, the usage and the thread's release on the run's fenced
end) reads the first one's `RETURNING` (`WHERE EXISTS (SELECT 1 FROM <first>)`), so PostgreSQL
runs the first one first and the others write nothing when it matched no row, as the rollback
did. A duplicate key anywhere fails the whole statement, as it failed the transaction.

Rows go in as one array per column (`unnest`), in order (`WITH ORDINALITY ... ORDER BY`), so a
statement has one text whatever the number of rows, and each connection prepares it once.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from sqlalchemy import Dialect, Table, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql.expression import Executable

from .prepared import _compiled, _Form
from .transaction import Transaction

_PLACEHOLDER = re.compile(r"\$(\d+)")


def _shifted(sql: str, by: int) -> str:
    """`sql`'s parameters `$1`.. renumbered from `$1 + by`, to sit after another part's."""
    return _PLACEHOLDER.sub(lambda found: f"${int(found[1]) + by}", sql) if by else sql


@dataclass(frozen=True)
class Rows:
    """An INSERT of any number of rows of `table` with these columns, from one array each;
    `computed`: further columns given as SQL of the statement's own parameters (`$1`..)."""

    table: Table
    columns: tuple[str, ...]
    computed: tuple[tuple[str, str], ...] = ()

    def sql(self, dialect: Dialect, first: int, condition: str | None) -> str:
        """The INSERT, its arrays from parameter `$first` on, writing only if `condition`."""
        quote = dialect.identifier_preparer.quote
        names = [quote(column) for column in self.columns]
        arrays = ", ".join(f"${first + i}::{self.table.c[column].type.compile(dialect)}[]"
                           for i, column in enumerate(self.columns))
        into = ", ".join([*names, *(quote(column) for column, _ in self.computed)])
        values = ", ".join([*names, *(expression for _, expression in self.computed)])
        where = f" WHERE {condition}" if condition else ""
        return (f"INSERT INTO {quote(self.table.name)} ({into}) SELECT {values} FROM "
                f"unnest({arrays}) WITH ORDINALITY AS given ({', '.join(names)}, at_){where} "
                "ORDER BY at_")

    def arrays(self, dialect: Dialect, rows: Sequence[Mapping[str, Any]]) -> list[list[Any]]:
        """The rows' values, one array per column, each converted by its column's type."""
        return [[process(row[column]) for row in rows] if process else
                [row[column] for row in rows]
                for column, process in _processors(self, dialect)]


@cache
def _processors(rows: Rows, dialect: Dialect) -> tuple[tuple[str, Callable[[Any], Any] | None], ...]:
    """Each column of `rows` with its type's converter for `dialect` (None: as given)."""
    return tuple((column, rows.table.c[column].type.dialect_impl(dialect).bind_processor(dialect))
                 for column in rows.columns)


@dataclass(frozen=True)
class Guard:
    """The first part of a statement: an UPDATE the rest depend on, returning its rows; they
    write if it matched a row, or if `all_of` (one of its array parameters) is given, if it
    matched as many rows as that array has."""

    name: str
    statement: Executable
    keys: tuple[str, ...]
    all_of: str | None = None

    def form(self, dialect: Dialect) -> _Form:
        return _compiled(self.statement, dialect, self.keys)

    def condition(self, form: _Form) -> str:
        """What the rest of the statement writes on (the guard is its first part, so its
        parameters keep their numbers)."""
        if self.all_of is None:
            return f"EXISTS (SELECT 1 FROM {self.name})"
        given = form.names.index(self.all_of) + 1
        return f"(SELECT count(*) FROM {self.name}) = cardinality(${given})"

    def answer(self) -> str:
        return f"SELECT count(*) FROM {self.name}"


class OneStatement:
    """A guard (or none), then inserts of rows and further UPDATEs, as one statement whose
    answer is how many rows the guard matched (1 without a guard)."""

    def __init__(self, guard: Guard | None, rows: Sequence[tuple[str, Rows]],
                 updates: Sequence[tuple[str, Guard]] = ()) -> None:
        self.guard, self.rows, self.updates = guard, tuple(rows), tuple(updates)
        self._built: dict[str, tuple[str, list[_Form]]] = {}

    def execute(self, connection: Transaction, params: Mapping[str, Any],
                rows: Mapping[str, Sequence[Mapping[str, Any]]]) -> int:
        """Run it with `params` (of the guard and the updates) and the rows of each insert (by
        its name; an insert without rows writes nothing)."""
        dialect = connection.dialect
        sql, forms = self._sql(dialect)
        values: list[Any] = []
        for form in forms:
            values += form.positional(params)
        for name, insert in self.rows:
            values += insert.arrays(dialect, rows.get(name, ()))
        cursor = connection.connection.cursor()
        try:
            cursor.execute(sql, tuple(values))
            return int(cursor.fetchall()[0][0])
        except dialect.loaded_dbapi.Error as error:
            raise DBAPIError.instance(sql, None, error, dialect.loaded_dbapi.Error) from error
        finally:
            cursor.close()

    def _sql(self, dialect: Dialect) -> tuple[str, list[_Form]]:
        built = self._built.get(dialect.name)
        if built is None:
            built = self._built[dialect.name] = self._build(dialect)
        return built

    def _build(self, dialect: Dialect) -> tuple[str, list[_Form]]:
        parts, forms, count = [], [], 0
        guard, condition = self.guard, None
        for name, part in ([(guard.name, guard)] if guard else []) + list(self.updates):
            form = part.form(dialect)
            if guard is not None and condition is None:
                condition = guard.condition(form)
            parts.append((name, _shifted(form.sql, count).replace(_GUARDED, condition or "")))
            forms.append(form)
            count += len(form.names)
        for name, insert in self.rows:
            parts.append((name, insert.sql(dialect, count + 1, condition)))
            count += len(insert.columns)
        ctes = ", ".join(f"{name} AS ({sql})" for name, sql in parts)
        return f"WITH {ctes} {guard.answer() if guard else 'SELECT 1'}", forms


_GUARDED = "(__guard_condition__)"


def guarded() -> Any:
    """A condition for a further UPDATE of a statement: what its guard says (`Guard`)."""
    return text(_GUARDED)
