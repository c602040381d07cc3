"""The one interface every query is written against: a store transaction.

A query is a plain function given a `Transaction`: it runs SQLAlchemy Core statements on the
SQLModel tables (`execute`) and reads their rows or scalars from the result, or gives up
(`rollback`). How the transaction travels is the engine's business, not the query's:
`engines.sqlite` runs it on the process's one connection, on the database's thread, grouped
with the transactions waiting meanwhile under one commit; `engines.postgres` runs it on a
pooled connection, or (`alone`) with each statement committed by itself, where a hot write's
chain of statements is fused into one (`chain`) and needs no `BEGIN` or `COMMIT`.

The few fixed statements of a run's start, its log and its end also run through `Prepared`,
which needs the transaction's dialect and DB-API connection only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar, Unpack

from sqlalchemy import CursorResult, Dialect, Executable, Row

# A result, and a row, of any width (`Row[Any]` would be a row of one column).
Result = CursorResult[Unpack[tuple[Any, ...]]]
AnyRow = Row[Unpack[tuple[Any, ...]]]


class Transaction(Protocol):
    """What a transaction's work is given, on either database."""

    dialect: Dialect
    connection: Any  # the DB-API connection its statements run on (`Prepared`)
    # Whether a hot write's chain goes as one fused statement (`chain`): on PostgreSQL, in a
    # work run `alone`, where nothing else would make its steps atomic together.
    fuses: bool
    rolled_back: bool

    def execute(self, statement: Executable,
                parameters: dict[str, Any] | list[dict[str, Any]] | None = None
                ) -> Result:
        """A Core statement in this transaction; its rows, scalars and row count."""
        ...

    def rollback(self) -> None:
        """Undo the work so far: nothing of this transaction is committed."""
        ...


R = TypeVar("R")


class Engine(Protocol):
    """How a transaction travels on one database (`engines.sqlite`, `engines.postgres`)."""

    # Whether the hot writes go as one fused statement each (`chain`), run `alone`.
    fused: bool

    async def transaction(self, work: Callable[[Transaction], R]) -> R:
        """`work` in one transaction: committed if it returns (unless it rolled back), rolled
        back if it raises."""
        ...

    async def alone(self, work: Callable[[Transaction], R]) -> R:
        """`work` with each statement committed by itself (for a work of one statement, or
        statements that need not be atomic together); where that is not cheaper, as
        `transaction`."""
        ...

    async def hot(self, work: Callable[[Transaction], R]) -> R:
        """A hot write (a run's start, its log batch, its end: a `chain`, then reads): `work`
        in one transaction, or, where the engine fuses the hot writes, `alone` with its chain
        fused into one statement."""
        ...
