"""A run's start and its end on PostgreSQL, each as one statement: one round trip to the
database instead of one per statement plus `BEGIN` and `COMMIT`.

Through SQLAlchemy's asyncpg adapter a transaction costs a round trip for `BEGIN`, one per
statement (each a prepared statement, parsed once per connection) and one for `COMMIT`, and
each trip waits for a PostgreSQL backend and then for a turn of the gateway's busy event loop
(docs/decisions/0020-postgres-one-statement.md). Here the same writes are one statement, whose
parts are data-modifying `WITH` queries: PostgreSQL runs a statement outside a transaction
block atomically (all of it is committed, or none), so it needs no `BEGIN` or `COMMIT`, and the
adapter runs it without them (`postgres.run_alone`, the engine's `alone`).

The conditions stay what they were: a write that depends on another (the run and its input on
taking the thread's lock; the log, the usage and the thread's release on the run's fenced
end) reads the first one's `RETURNING` (`WHERE EXISTS (SELECT ... FROM <first>)`), so
PostgreSQL runs the first one first and the others write nothing when it matched no row, as the
rollback did. A duplicate key anywhere fails the whole statement, as it failed the transaction.

Rows go in as one array per column (`unnest(...) WITH ORDINALITY ... ORDER BY`, in order), so
a statement has one text whatever the number of rows, and each connection prepares it once.
A part given exactly one row (a start's thread and run always, its input and a run's answer
and usage mostly) takes it as one scalar parameter per column instead: asyncpg encodes an
array parameter by checking the array and each element against abstract collection classes,
and SQLAlchemy's `ARRAY` converts it element by element, a cost paid for every one-element
array. A statement therefore has one text per combination of its parts' "one row or not",
each compiled and prepared once when first used.

The statement is SQLAlchemy Core's own: the parts are DML CTEs (`update(...).returning(...)
.cte(name)`, `insert(...).from_select(...).cte(name)`), the arrays bound parameters of
`ARRAY(<the column's type>)` (SQLAlchemy renders their casts and converts each element by
the column's type), all attached to the `SELECT` of the answer (`add_cte`). It is compiled once
per dialect and run on the driver's cursor (`Prepared`), like the store's other fixed
statements.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    CTE,
    BindParameter,
    ColumnElement,
    Select,
    Table,
    Update,
    bindparam,
    exists,
    func,
    insert,
    literal,
    select,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.sql.selectable import NamedFromClause
from sqlalchemy.types import TypeEngine

from .prepared import Prepared
from .transaction import Transaction

# A column computed from the given rows (`given`: the `unnest` of the arrays, or the one row).
Computed = Callable[[NamedFromClause], ColumnElement[Any]]


@dataclass(frozen=True)
class Rows:
    """An INSERT of any number of rows of `table` with these columns, from one array each;
    `computed`: further columns, each an expression of the given rows."""

    table: Table
    columns: tuple[str, ...]
    computed: tuple[tuple[str, Computed], ...] = ()

    def insert(self, name: str, condition: ColumnElement[bool] | None, one: bool) -> CTE:
        """The INSERT as the part `name` of a statement, writing only if `condition`: its
        parameters are `<name>_<column>`, the column's value if it writes `one` row, else
        an array of them."""
        given: NamedFromClause
        if one:
            given = select(*(bindparam(f"{name}_{column}", type_=self.table.c[column].type)
                             .label(column) for column in self.columns)).subquery("given")
        else:
            arrays = (bindparam(f"{name}_{column}", type_=_array_of(self.table.c[column].type))
                      for column in self.columns)
            given = (func.unnest(*arrays).table_valued(*self.columns, with_ordinality="at_")
                     .render_derived("given"))
        values = select(*(given.c[column] for column in self.columns),
                        *(compute(given) for _, compute in self.computed))
        if condition is not None:
            values = values.where(condition)
        if not one:
            values = values.order_by(given.c.at_)
        names = [*self.columns, *(column for column, _ in self.computed)]
        return insert(self.table).from_select(names, values).cte(name)

    def params(self, name: str, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """The rows as the parameters of the part `name`: the row's values if there is one
        (`insert(..., one=True)`), else one array per column."""
        if len(rows) == 1:
            return {f"{name}_{column}": rows[0][column] for column in self.columns}
        return {f"{name}_{column}": [row[column] for row in rows] for column in self.columns}


def _array_of(item: TypeEngine[Any]) -> ARRAY[Any]:
    """An array of `item`s, one dimension: a JSON value that is a list is one element."""
    return ARRAY(item, dimensions=1)


@dataclass(frozen=True)
class Guard:
    """The first part of a statement: an UPDATE the rest depend on, returning its rows; they
    write if it matched a row, or if `all_of` (an array parameter of it) is given, if it
    matched as many rows as that array has."""

    name: str
    statement: Update
    all_of: BindParameter[Any] | None = None

    def condition(self, matched: CTE) -> ColumnElement[bool]:
        """What the rest of the statement writes on, `matched` being the guard's part."""
        if self.all_of is None:
            return exists(select(matched))
        return (select(func.count()).select_from(matched).scalar_subquery()
                == func.cardinality(self.all_of))


class OneStatement:
    """A guard (or none), then inserts of rows and further UPDATEs (which write only if the
    guard says so), as one statement whose answer is how many rows the guard matched (1
    without a guard)."""

    def __init__(self, guard: Guard | None, rows: Sequence[tuple[str, Rows]],
                 updates: Sequence[tuple[str, Update]] = ()) -> None:
        self.guard, self.rows, self.updates = guard, tuple(rows), tuple(updates)
        self._forms: dict[tuple[bool, ...], Prepared] = {}  # by which inserts write one row

    def execute(self, connection: Transaction, params: Mapping[str, Any],
                rows: Mapping[str, Sequence[Mapping[str, Any]]]) -> int:
        """Run it with `params` (of the guard and the updates) and the rows of each insert (by
        its name; an insert without rows writes nothing)."""
        given, ones = dict(params), []
        for name, insert_rows in self.rows:
            these = rows.get(name, ())
            ones.append(len(these) == 1)
            given.update(insert_rows.params(name, these))
        return int(self.statement(tuple(ones)).rows(connection, given)[0][0])

    def statement(self, ones: tuple[bool, ...]) -> Prepared:
        """The statement whose inserts take one row where `ones` says so (built once)."""
        form = self._forms.get(ones)
        if form is None:
            form = self._forms[ones] = Prepared(
                _statement(self.guard, self.rows, self.updates, ones))
        return form


def _statement(guard: Guard | None, rows: Sequence[tuple[str, Rows]],
               updates: Sequence[tuple[str, Update]], ones: Sequence[bool]) -> Select[Any]:
    """The statement: the guard's part first (the others read it), then the updates and the
    inserts (each of one row where `ones` says so), attached to the SELECT of the answer."""
    condition, parts = None, []
    if guard is not None:
        matched = guard.statement.cte(guard.name)
        condition = guard.condition(matched)
        answer = select(func.count()).select_from(matched)
        parts.append(matched)
    else:
        answer = select(literal(1))
    for name, update in updates:
        parts.append((update if condition is None else update.where(condition)).cte(name))
    parts += [insert_rows.insert(name, condition, one)
              for (name, insert_rows), one in zip(rows, ones, strict=True)]
    return answer.add_cte(*parts)
