"""The store conformance suite: every test runs unchanged on a real SQLite file and on a real
PostgreSQL (a throwaway server: the session's when `GATEWAY_TEST_BACKEND=postgres`, else one
started here), each test on a database of its own, migrated by the gateway's migrations."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import AsyncIterator, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from gateway.protocol.clock import new_id, now_ms
from gateway.store import db
from gateway.store.repository import Store
from gateway.store.tables import RunRow
from tests.inprocess.conftest import PROJECT, new_thread
from tests.support import engines

__all__ = ["PROJECT", "new_thread", "run_row"]

TEMPLATE = "store_template"


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("store") / "template.db"
    _apart(_migrated(f"sqlite+aiosqlite:///{path}"))
    return path


@pytest.fixture(scope="session")
def postgres() -> Iterator[engines.Postgres]:
    """The session's PostgreSQL, or a throwaway one; a migrated template database on it."""
    if not engines.PG_BIN.exists():
        pytest.skip("PostgreSQL is not installed")
    own = None
    if engines.ENGINES is not None:
        server = engines.ENGINES.postgres
    else:
        # Under /tmp itself: initdb runs as `postgres`, which cannot enter pytest's directory.
        root = Path(tempfile.mkdtemp(prefix="gateway-store-"))
        server = own = engines.Postgres(root).start()
    _apart(_migrated(_asyncpg(server.create_database(TEMPLATE))))
    yield server
    if own is not None:
        own.stop()
        shutil.rmtree(root, ignore_errors=True)


def _apart(work: Coroutine[Any, Any, None]) -> None:
    """`work` on a loop of its own (the session fixtures are set up from a test's loop)."""
    with ThreadPoolExecutor(1) as thread:
        thread.submit(asyncio.run, work).result()


async def _migrated(url: str) -> None:
    engine = db.create_engine(url, pool_size=1)
    await db.migrate(engine)
    await engine.dispose()


def _asyncpg(url: str) -> str:
    return url.replace("postgresql://", "postgresql+asyncpg://", 1)


@pytest.fixture(params=["sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    if request.param == "sqlite":
        path = tmp_path / "gateway.db"
        shutil.copy(request.getfixturevalue("sqlite_template"), path)
        url = f"sqlite+aiosqlite:///{path}"
    else:
        server: engines.Postgres = request.getfixturevalue("postgres")
        name = f"store_{uuid.uuid4().hex[:12]}"
        subprocess.run([str(engines.PG_BIN / "createdb"), "-h", "127.0.0.1", "-p",
                        str(server.port), "-U", "postgres", "-T", TEMPLATE, name],
                       check=True, capture_output=True)
        url = _asyncpg(f"{server.url}/{name}")
    engine = db.create_engine(url, pool_size=2)
    yield Store(engine)
    await engine.dispose()


def run_row(thread_id: str, owner: str = "process-a") -> RunRow:
    now = now_ms()
    return RunRow(id=new_id("run_"), thread_id=thread_id, project_id=PROJECT, status="queued",
                  created_ms=now, lease_owner=owner, lease_expires_ms=now + 30_000,
                  on_disconnect="grace")
