"""A hot write (a run's start, its log batch, its end) written once, as a chain of steps that
the transaction it runs in either takes one at a time or fuses into one statement.

A chain is a guard (an UPDATE the rest depend on: the thread's lock, the run's fenced end,
the leases of a log batch), then, if the guard matched, inserts of rows and further UPDATEs.
The query modules declare each chain once, as data; how it travels is the transaction's
business (`Transaction.fuses`):

- **Step by step** (SQLite, where a statement costs no trip; and any transaction that does not
  fuse): each step is a `Prepared` statement on the driver's cursor, in the order declared:
  the guard, and if it matched fewer rows than it must the transaction is rolled back and
  nothing else is written; then the inserts; then the updates.
- **Fused** (PostgreSQL, `postgres.run_alone`): the same steps as one statement, whose parts are
  data-modifying `WITH` queries: one round trip instead of `BEGIN`, one per statement and
  `COMMIT`, each of which waits for a PostgreSQL backend and then for a turn of the gateway's
  busy event loop (docs/decisions/0020-postgres-one-statement.md). PostgreSQL runs a statement
  outside a transaction block atomically, so it needs no `BEGIN` or `COMMIT`. The other steps
  read the guard's `RETURNING` (`WHERE EXISTS (SELECT ... FROM <guard>)`), so PostgreSQL runs
  the guard first and they write nothing when it did not match, as the rollback did. A
  duplicate key anywhere fails the whole statement, as it failed the transaction.

A step may be taken once for each element of some of its parameters (`each`): given lists of
equal length, the step form runs once per position; the fused form compares the column with
`= ANY(:list)`, so a statement has one text whatever the number of elements. (Matching two
lists by `ANY` matches their pairs only when one value determines the other, as a run id
determines its thread: `each` is for such lists.)

Rows go into a fused insert as one array per column (`unnest(...) WITH ORDINALITY ... ORDER
BY`, in order); a part given exactly one row takes it as one scalar parameter per column
instead: asyncpg encodes an array parameter by checking it and each element against abstract
collection classes, and SQLAlchemy's `ARRAY` converts it element by element, a cost paid for
every one-element array. A fused statement therefore has one text per combination of its
parts' "no rows, one row or more" (a part without rows is left out), each compiled and
prepared once when first used.
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
    any_,
    bindparam,
    exists,
    func,
    insert,
    literal,
    select,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.sql import visitors
from sqlalchemy.sql.selectable import NamedFromClause

from .prepared import Prepared
from .transaction import Transaction

Params = Mapping[str, Any]
# A column computed from the given rows (`given`: the `unnest` of the arrays, or the one row).
Computed = Callable[[NamedFromClause], ColumnElement[Any]]


@dataclass(frozen=True)
class Rows:
    """An INSERT of any number of rows of `table` with these columns; `computed`: further
    columns, each an expression of the given row (a column the database numbers, such as a
    message's `seq`, is left out and left to it)."""

    table: Table
    columns: tuple[str, ...]
    computed: tuple[tuple[str, Computed], ...] = ()

    def insert(self, name: str, condition: ColumnElement[bool] | None, one: bool) -> CTE:
        """The fused INSERT, part `name` of a statement, writing only if `condition`: its
        parameters are `<name>_<column>`, the column's value if it writes `one` row, else an
        array of them."""
        cte: CTE = self._from_given(name, condition, one).cte(name)
        return cte

    def params(self, name: str, rows: Sequence[Params]) -> dict[str, Any]:
        """The rows as the fused part's parameters: the row's values if there is one, else
        one array per column."""
        if len(rows) == 1:
            return {f"{name}_{column}": rows[0][column] for column in self.columns}
        return {f"{name}_{column}": [row[column] for row in rows] for column in self.columns}

    def step(self, name: str) -> Prepared:
        """The INSERT taken as a step, run once per row: a plain one, or one selecting the
        computed columns from the given row."""
        if not self.computed:
            return Prepared(insert(self.table))
        return Prepared(self._from_given(name, None, True))

    def step_params(self, name: str, rows: Sequence[Params]) -> list[Params]:
        """The step's parameters, one dict per row: the rows themselves for a plain insert
        (each row is its columns' values, as the fused form reads them: not copied, a run's
        log being most of the rows the gateway writes)."""
        if not self.computed:
            return list(rows)
        return [{f"{name}_{column}": row[column] for column in self.columns} for row in rows]

    def _from_given(self, name: str, condition: ColumnElement[bool] | None,
                    one: bool) -> Any:
        given: NamedFromClause
        if one:
            given = select(*(bindparam(f"{name}_{column}", type_=self.table.c[column].type)
                             .label(column) for column in self.columns)).subquery("given")
        else:
            arrays = (bindparam(f"{name}_{column}",
                                type_=ARRAY(self.table.c[column].type, dimensions=1))
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
        return insert(self.table).from_select(names, values)


class Step:
    """An UPDATE of a chain (its guard, or a later one), taken once, or once per element of
    the list parameters named in `each`."""

    def __init__(self, statement: Update, each: tuple[str, ...] = ()) -> None:
        self.statement, self.each = statement, each
        self.prepared = Prepared(statement)
        binds = statement.compile().binds
        # Only its own parameters: a key naming one of its table's columns would become a
        # column to set (`Prepared`).
        self.keys = tuple(key for key, bind in binds.items() if not bind.unique)
        # Each `each` parameter as the array the fused form compares with `= ANY(...)`.
        self.arrays = {key: bindparam(key, type_=ARRAY(binds[key].type, dimensions=1))
                       for key in each}

    def take(self, connection: Transaction, params: Params) -> int:
        """Run it step by step; the rows it changed, in all."""
        own = {key: params[key] for key in self.keys}
        if not self.each:
            return self.prepared.execute(connection, own)
        lists = [own[name] for name in self.each]
        return sum(self.prepared.execute(connection, {**own, **dict(zip(self.each, values,
                                                                        strict=True))})
                   for values in zip(*lists, strict=True))

    def expected(self, params: Params) -> int:
        """How many rows it must match: one per element when taken for each."""
        return len(params[self.each[0]]) if self.each else 1

    def fused(self) -> Update:
        """The statement with each `each` parameter compared by `= ANY(:list)`."""
        if not self.each:
            return self.statement

        def to_any(element: Any) -> Any:
            if isinstance(element, BindParameter) and element.key in self.arrays:
                return any_(self.arrays[element.key])
            return None

        fused: Update = visitors.replacement_traverse(
            self.statement, {}, to_any)  # type: ignore[call-overload]
        return fused


class Chain:
    """A guard (or none), then inserts of rows and further updates, written only if the guard
    matched as many rows as it must (see the module's docstring)."""

    def __init__(self, guard: Step | None, rows: Sequence[tuple[str, Rows]],
                 updates: Sequence[tuple[str, Step]] = ()) -> None:
        self.guard, self.rows, self.updates = guard, tuple(rows), tuple(updates)
        self._steps = {name: insert_rows.step(name) for name, insert_rows in self.rows}
        self._forms: dict[tuple[int, ...], Prepared] = {}  # by the inserts' rows: 0, 1, more

    def write(self, connection: Transaction, params: Params,
              rows: Mapping[str, Sequence[Params]]) -> int:
        """Write it with `params` (of the guard and the updates) and the rows of each insert
        (by its name; an insert without rows writes nothing). How many rows the guard matched
        (1 without a guard); the rest is written only if that is as many as it must."""
        if connection.fuses:
            return self._fused(connection, params, rows)
        matched = 1
        if self.guard is not None:
            matched = self.guard.take(connection, params)
            if matched != self.guard.expected(params):
                connection.rollback()
                return matched
        for name, insert_rows in self.rows:
            if these := rows.get(name):
                self._steps[name].execute(connection, insert_rows.step_params(name, these))
        for _, update in self.updates:
            update.take(connection, params)
        return matched

    def _fused(self, connection: Transaction, params: Params,
               rows: Mapping[str, Sequence[Params]]) -> int:
        given, shape = dict(params), []
        for name, insert_rows in self.rows:
            these = rows.get(name, ())
            shape.append(min(len(these), 2))
            if these:
                given.update(insert_rows.params(name, these))
        form = self._forms.get(tuple(shape))
        if form is None:
            form = self._forms[tuple(shape)] = Prepared(self._statement(shape))
        return int(form.rows(connection, given)[0][0])

    def _statement(self, shape: Sequence[int]) -> Select[Any]:
        """The fused statement: the guard's part first (the others read it), then the updates
        and the inserts given rows (`shape`: none, one, or more, by insert), attached to the
        SELECT of the answer."""
        condition: ColumnElement[bool] | None = None
        parts: list[CTE] = []
        if self.guard is not None:
            guard = self.guard.fused()
            matched = guard.returning(*guard.table.primary_key).cte("guard")
            condition = _enough(matched, self.guard)
            answer = select(func.count()).select_from(matched)
            parts.append(matched)
        else:
            answer = select(literal(1))
        for name, update in self.updates:
            statement = update.fused()
            parts.append((statement if condition is None else statement.where(condition))
                         .cte(name))
        parts += [insert_rows.insert(name, condition, count == 1)
                  for (name, insert_rows), count in zip(self.rows, shape, strict=True) if count]
        return answer.add_cte(*parts)


def _enough(matched: CTE, guard: Step) -> ColumnElement[bool]:
    """What the rest of a fused statement writes on: the guard matched a row, or, taken for
    each element, one row per element."""
    if not guard.each:
        return exists(select(matched))
    return (select(func.count()).select_from(matched).scalar_subquery()
            == func.cardinality(guard.arrays[guard.each[0]]))
