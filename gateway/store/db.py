"""Database engine and schema migrations.

The schema is created and upgraded by alembic at start-up (`gateway serve` and `gateway migrate`),
on the same connection the app will use, so SQLite files and PostgreSQL databases follow one path.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
from alembic import command
from alembic.config import Config
from sqlalchemy import event, text
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from .engines.postgres import ping_when_idle
from .engines.sqlite_driver import one_trip_dbapi

MIGRATIONS = Path(__file__).parent / "migrations"
# How long a query may wait for the process's SQLite connection before failing.
SQLITE_POOL_TIMEOUT_SECONDS = 120
# A pooled PostgreSQL connection idle this long is pinged before use (`ping_when_idle`).
PING_AFTER_IDLE_SECONDS = 1.0
MIGRATION_LOCK = 0x6761746577  # any constant: the advisory lock all gateways migrate under


def json_text(value: Any) -> str:
    """A JSON column's value as written: orjson's compact text, cheaper than `json.dumps`, for
    every frame of every run's log and a dozen values at each start and end
    (docs/decisions/0024-orjson-json.md). What orjson refuses (an integer beyond 64 bits, a lone surrogate, a
    key that is not a string) is written as before, by `json.dumps`. Either reads back the
    same (`json.loads`)."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return json.dumps(value)


def create_engine(url: str, pool_size: int = 10) -> AsyncEngine:
    """An async engine; for SQLite, WAL mode and a busy timeout so readers never block writers;
    for PostgreSQL, a pool of up to twice `pool_size` connections, kept once opened."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        # One connection per process: SQLite has one write lock, and writers of one process
        # that compete for it on several connections wait in SQLite's busy handler, which
        # sleeps while holding a pooled connection (docs/decisions/0015-one-sqlite-connection.md).
        # On one connection they queue in order instead, with no sleeping. (Other processes on
        # the same file still meet the busy timeout.) Each statement in one trip to aiosqlite's
        # thread (`engines.sqlite_driver`), and the store's concurrent transactions together in
        # one trip and one commit (`engines.sqlite`).
        engine = create_async_engine(url, module=one_trip_dbapi(), json_serializer=json_text,
                                     connect_args={"timeout": 30}, pool_size=1,
                                     max_overflow=0, pool_timeout=SQLITE_POOL_TIMEOUT_SECONDS,
                                     pool_reset_on_return=None)

        @event.listens_for(engine.sync_engine, "connect")
        def _pragmas(dbapi_connection: Any, _record: Any) -> None:
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute("PRAGMA busy_timeout=30000")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.close()

        return engine
    # Up to twice `pool_size` connections, each kept once opened. With `pool_size` kept and as
    # many again as overflow, the pool closed every overflow connection as soon as it came
    # back, so a process that went past `pool_size` at times (a burst, a loop late under
    # load) opened and closed connections all along, each a connection, TLS negotiation,
    # SQLAlchemy's set-up and statements prepared anew, when the process was busiest
    # (docs/decisions/0022-postgres-pool-keeps-connections.md). The most the process holds is
    # unchanged; an idle one keeps what its busiest moment opened.
    engine = create_async_engine(url, pool_size=2 * pool_size, max_overflow=0,
                                 json_serializer=json_text)
    ping_when_idle(engine, PING_AFTER_IDLE_SECONDS)
    return engine


def alembic_config(connection: Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    return config


async def migrate(engine: AsyncEngine) -> None:
    """Upgrade the schema to the newest revision."""

    def upgrade(connection: Connection) -> None:
        if connection.dialect.name == "postgresql":
            # Several processes start at once (`--workers`, replicas): one migrates, the others
            # wait for it here and then find the schema up to date.
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"),
                               {"key": MIGRATION_LOCK})
        command.upgrade(alembic_config(connection), "head")

    async with engine.begin() as connection:
        await connection.run_sync(upgrade)
