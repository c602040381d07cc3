"""`open_services`: the whole process as the server opens it (store, backend, run manager and
its background tasks), without HTTP; the backend follows the settings, `/ready`'s pings come
from it, and leaving closes everything."""

from __future__ import annotations

import asyncio
import shutil
import socket
from pathlib import Path

import pytest

from gateway.config import Settings
from gateway.protocol.problems import Problem
from gateway.runs.backend import Unreachable
from gateway.services import open_services
from tests.inprocess.conftest import (
    FAST,
    ScriptedDeltas,
    events,
    new_thread,
    text_turn,
    types,
    user,
)
from tests.support.engines import RedisServer

BACKGROUND = {"run supervisor", "signals"}


def settings_on(migrated_db: Path, tmp_path: Path, **overrides: object) -> Settings:
    path = tmp_path / "gateway.db"
    shutil.copy(migrated_db, path)
    return Settings(database_url=f"sqlite+aiosqlite:///{path}", **overrides)


def background() -> set[str]:
    return {task.get_name() for task in asyncio.all_tasks() if not task.done()} & BACKGROUND


async def test_the_services_run_a_run_and_close_their_background_tasks(
        migrated_db: Path, tmp_path: Path, model: ScriptedDeltas) -> None:
    async with open_services(settings_on(migrated_db, tmp_path), model=model,
                             timings=FAST) as services:
        assert services.backend.name == "database"
        assert await services.backend.ping() == ["database"]
        assert background() == BACKGROUND
        model.enqueue(text_turn("Hello"))
        thread = await new_thread(services.store)
        run = (await services.runs.start(thread, user("hi"))).run
        assert types(await events(services.runs, run.id))[-1] == "RUN_FINISHED"
    assert background() == set()


async def test_with_a_redis_url_the_backend_is_redis_and_ready_pings_it(
        migrated_db: Path, tmp_path: Path, model: ScriptedDeltas,
        redis_server: RedisServer) -> None:
    settings = settings_on(migrated_db, tmp_path, redis_url=redis_server.url)
    async with open_services(settings, model=model, timings=FAST) as services:
        assert services.backend.name == "redis"
        assert await services.backend.ping() == ["database", "redis"]


async def test_a_redis_that_does_not_answer_makes_the_process_unready(
        migrated_db: Path, tmp_path: Path, model: ScriptedDeltas) -> None:
    with socket.socket() as unused:  # a port nothing listens on
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    settings = settings_on(migrated_db, tmp_path, redis_url=f"redis://127.0.0.1:{port}/0")
    async with open_services(settings, model=model, timings=FAST) as services:
        with pytest.raises(Unreachable) as unreachable:
            await services.backend.ping()
    assert unreachable.value.probe.problem is Problem.REDIS_UNAVAILABLE
