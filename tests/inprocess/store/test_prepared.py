"""`Prepared` runs a compiled statement on the driver's cursor, without SQLAlchemy's execution
machinery: what it stores must be what SQLAlchemy stores, byte for byte and type for type (JSON
values, JSON's NULL markers, what orjson refuses, booleans), and what SQLAlchemy refuses must
still be refused."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import JSON, Boolean, Column, Integer, MetaData, String, Table, insert, null, text
from sqlalchemy.exc import StatementError
from sqlalchemy.ext.asyncio import AsyncEngine

from gateway.store.base import Queries
from gateway.store.db import create_engine
from gateway.store.engines.prepared import Prepared
from gateway.store.engines.transaction import Transaction

_metadata = MetaData()
_values = Table("prepared_values", _metadata, Column("id", Integer, primary_key=True),
                Column("doc", JSON), Column("maybe", JSON(none_as_null=True)),
                Column("flag", Boolean), Column("label", String))
INSERT = Prepared(insert(_values))

# What a column may be given: what orjson takes, and what it refuses (JSON's NULL markers, an
# integer beyond 64 bits, a lone surrogate, a key that is not a string: `json.dumps`'s part).
DOCS: list[Any] = [{"a": [1, 2.5, "é", None, True]}, [], "text", 0, None, JSON.NULL, null(),
                   2**70, "\ud800", {1: "not a string key"}, {"nested": {"x": [{"y": None}]}}]
FLAGS: list[Any] = [True, False, None, 1, 0]


def rows() -> list[dict[str, Any]]:
    return [{"id": i, "doc": doc, "maybe": doc, "flag": FLAGS[i % len(FLAGS)],
             "label": f"row {i}"} for i, doc in enumerate(DOCS)]


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    made = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'prepared.db'}")
    async with made.begin() as connection:
        await connection.run_sync(_metadata.create_all)
    yield made
    await made.dispose()


async def stored(engine: AsyncEngine) -> list[tuple[Any, ...]]:
    """Each row's columns as SQLite holds them: their type and their exact text."""
    query = ("SELECT id, typeof(doc), quote(doc), typeof(maybe), quote(maybe), typeof(flag), "
             "quote(flag), quote(label) FROM prepared_values ORDER BY id")
    async with engine.connect() as connection:
        return [tuple(row) for row in (await connection.execute(text(query))).all()]


async def test_values_are_stored_as_sqlalchemy_stores_them(engine: AsyncEngine) -> None:
    async with engine.begin() as connection:
        await connection.execute(insert(_values), rows())
    by_sqlalchemy = await stored(engine)
    async with engine.begin() as connection:
        await connection.execute(text("DELETE FROM prepared_values"))

    def work(connection: Transaction) -> None:  # in the group commit, on the sqlite3 connection
        for row in rows()[:3]:
            INSERT.execute(connection, row)
        INSERT.execute(connection, rows()[3:])

    await Queries(engine).transaction(work)
    assert await stored(engine) == by_sqlalchemy
    assert by_sqlalchemy[4][1:3] == ("text", "'null'")  # None in a JSON column is JSON's null


@pytest.mark.parametrize("flag", ["yes", 2])
async def test_a_value_sqlalchemy_refuses_for_a_boolean_is_still_refused(
        engine: AsyncEngine, flag: Any) -> None:
    def work(connection: Transaction) -> None:
        INSERT.execute(connection, {**rows()[0], "flag": flag})

    with pytest.raises((TypeError, ValueError)):
        await Queries(engine).transaction(work)
    async with engine.begin() as connection:
        with pytest.raises(StatementError):
            await connection.execute(insert(_values), {**rows()[0], "flag": flag})
