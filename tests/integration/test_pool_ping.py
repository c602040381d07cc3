"""PostgreSQL's connection pool (`store.db.create_engine`). A pooled connection is pinged
before use only after sitting idle (`store.engines.postgres.ping_when_idle`): one the server closed while it
was idle is replaced before a request can use it, and one back in use within the window is not
pinged (a run start no longer pays three round trips for it). A burst's connections stay for
the next burst, up to twice the pool size and no more."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from gateway.store import db
from tests.support import engines

pytestmark = pytest.mark.skipif(engines.backend() != "postgres",
                                reason="PostgreSQL's connection pool")


def new_engine(monkeypatch: pytest.MonkeyPatch, idle_seconds: float, pool_size: int = 1
               ) -> AsyncEngine:
    assert engines.ENGINES is not None
    url = engines.ENGINES.postgres.create_database(f"ping_{uuid.uuid4().hex[:12]}")
    monkeypatch.setattr(db, "PING_AFTER_IDLE_SECONDS", idle_seconds)
    return db.create_engine(url.replace("postgresql://", "postgresql+asyncpg://", 1),
                            pool_size=pool_size)


async def backend_pid(engine: AsyncEngine) -> int:
    async with engine.connect() as connection:
        return int((await connection.execute(text("SELECT pg_backend_pid()"))).scalar_one())


async def terminate(engine: AsyncEngine, pid: int) -> None:
    """Close the pooled connection from the server's side, as a restart would."""
    other = db.create_engine(engine.url.render_as_string(hide_password=False), pool_size=1)
    try:
        async with other.connect() as connection:
            await connection.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
    finally:
        await other.dispose()


async def test_a_connection_closed_while_idle_is_replaced_before_use(
        monkeypatch: pytest.MonkeyPatch) -> None:
    engine = new_engine(monkeypatch, idle_seconds=0.0)  # every reuse is "idle": pinged
    try:
        first = await backend_pid(engine)
        await terminate(engine, first)
        assert await backend_pid(engine) != first  # the ping failed; a new connection served
    finally:
        await engine.dispose()


async def test_within_the_window_the_connection_is_used_without_a_ping(
        monkeypatch: pytest.MonkeyPatch) -> None:
    engine = new_engine(monkeypatch, idle_seconds=3600.0)
    try:
        first = await backend_pid(engine)
        assert await backend_pid(engine) == first  # reused, and not pinged:
        await terminate(engine, first)
        with pytest.raises(DBAPIError):  # so a connection that dropped meanwhile fails once,
            await backend_pid(engine)
        assert await backend_pid(engine) != first  # and is replaced at the next use
    finally:
        await engine.dispose()


async def burst(engine: AsyncEngine, size: int) -> set[int]:
    """`size` connections held at once (each waits for all the others), then returned: their
    server processes."""
    held = asyncio.Barrier(size)

    async def one() -> int:
        async with engine.connect() as connection:
            pid = int((await connection.execute(text("SELECT pg_backend_pid()"))).scalar_one())
            await held.wait()
            return pid

    return set(await asyncio.gather(*(one() for _ in range(size))))


async def test_a_bursts_connections_stay_for_the_next_one_up_to_twice_the_pool_size(
        monkeypatch: pytest.MonkeyPatch) -> None:
    engine = new_engine(monkeypatch, idle_seconds=3600.0, pool_size=2)
    try:
        first = await burst(engine, 4)
        assert len(first) == 4
        # The same connections serve the next burst: none was closed when it came back (a new
        # one costs its connection, TLS negotiation and statements prepared anew).
        assert await burst(engine, 4) == first
        # And the pool holds no more than twice its size: a fifth waits for one of them.
        async with engine.connect(), engine.connect(), engine.connect(), engine.connect():
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(engine.connect().__aenter__(), 0.5)
    finally:
        await engine.dispose()
