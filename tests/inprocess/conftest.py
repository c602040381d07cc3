"""The in-process layer: the run manager, the agent loop and the store, driven directly.

No HTTP, no subprocess, no litellm: a `RunManager` over a `Store` on a temporary SQLite file
(migrated once per session, copied per test) and a scripted `Model` that yields deltas, so a
whole run takes milliseconds. What needs real processes, sockets or the real clients stays in
tests/integration, tests/conformance and tests/e2e.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import shutil
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis

from gateway.auth.caller import Caller
from gateway.auth.subjects import Subject
from gateway.backends.database import database_backend
from gateway.dialects.tambo.input import keyed, run_spec
from gateway.dialects.tambo.translate import TamboDialect
from gateway.engine.agents.file import registry_for
from gateway.engine.deltas import (
    Delta,
    Finish,
    ModelError,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
)
from gateway.engine.models.litellm_model import ModelRequest
from gateway.protocol.clock import new_id, now_ms
from gateway.protocol.run_spec import RunSpec
from gateway.protocol.tambo import RunRequest
from gateway.protocol.translation import positioned
from gateway.runs.admission.submit import Admission
from gateway.runs.admission.threads import ThreadRows
from gateway.runs.backend import Counters
from gateway.runs.execution import LoopSetup
from gateway.runs.limits import RunLimits
from gateway.runs.manager import RunManager
from gateway.runs.timings import Timings
from gateway.store.db import create_engine, migrate
from gateway.store.repository import Store
from gateway.store.tables import ThreadRow
from tests.support.engines import RedisServer
from tests.support.inprocess_app import settings_from

PROJECT = "project-1"
Step = Delta | float | ModelError | asyncio.Event


@dataclass
class ScriptedDeltas:
    """A `Model` whose turns are scripted: each turn is a list of steps, taken in order.

    A step is a delta (yielded), a float (a pause of that many seconds), an `asyncio.Event`
    (waits until it is set: a run held open for as long as a test needs) or a `ModelError`
    (raised). With no turn queued, the model answers "ok". Every request is recorded.
    """

    turns: list[list[Step]] = field(default_factory=list)
    requests: list[ModelRequest] = field(default_factory=list)

    def enqueue(self, *turns: list[Step]) -> None:
        self.turns.extend(turns)

    async def stream(self, request: ModelRequest) -> AsyncIterator[Delta]:
        # A copy: the loop goes on appending to the history list it sent.
        self.requests.append(dataclasses.replace(request, messages=copy.deepcopy(request.messages)))
        steps = self.turns.pop(0) if self.turns else [TextDelta("ok")]
        for step in steps:
            if isinstance(step, float):
                await asyncio.sleep(step)
            elif isinstance(step, asyncio.Event):
                await step.wait()
            elif isinstance(step, ModelError):
                raise step
            else:
                yield step
        if not any(isinstance(step, Finish) for step in steps):
            yield Finish("stop")

    async def complete(self, messages: list[dict[str, Any]], max_tokens: int = 200,
                       task: str | None = None, usage: Any = None) -> str:
        return "ok"


def text_turn(*texts: str, reasoning: str = "") -> list[Step]:
    steps: list[Step] = [ReasoningDelta(reasoning)] if reasoning else []
    return steps + [TextDelta(text) for text in texts]


def tool_turn(call_id: str, name: str, arguments: str) -> list[Step]:
    middle = len(arguments) // 2
    return [ToolCallDelta(0, call_id, name, arguments[:middle]),
            ToolCallDelta(0, None, None, arguments[middle:]), Finish("tool_calls")]


def tambo_spec(body: dict[str, Any], key: str | None = None) -> RunSpec:
    """The run a Tambo request body asks for (with `key` as its Idempotency-Key)."""
    request = RunRequest.model_validate(body)
    return keyed(run_spec(request), request, key)


def user(text: str, key: str | None = None, **extra: Any) -> RunSpec:
    return tambo_spec(
        {"message": {"role": "user", "content": [{"type": "text", "text": text}]}, **extra}, key)


def tool_results(results: dict[str, str], **extra: Any) -> RunSpec:
    content = [{"type": "tool_result", "toolUseId": call_id,
                "content": [{"type": "text", "text": text}]} for call_id, text in results.items()]
    return tambo_spec({"message": {"role": "user", "content": content}, **extra})


@pytest.fixture(scope="session")
def migrated_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One migrated SQLite file; each test gets a copy (alembic runs once per session)."""
    path = tmp_path_factory.mktemp("inprocess") / "template.db"

    async def build() -> None:
        engine = create_engine(f"sqlite+aiosqlite:///{path}")
        await migrate(engine)
        await engine.dispose()

    asyncio.run(build())
    return path


@pytest.fixture
async def store(migrated_db: Path, tmp_path: Path) -> AsyncIterator[Store]:
    path = tmp_path / "gateway.db"
    shutil.copy(migrated_db, path)
    engine = create_engine(f"sqlite+aiosqlite:///{path}")
    yield Store(engine)
    await engine.dispose()


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A throwaway Redis on loopback for the tests that need one (they skip without
    `redis-server`); each test flushes it first."""
    server = RedisServer(Path(tmp_path_factory.mktemp("redis"))).start()
    yield server
    server.stop()


@pytest.fixture
async def redis(redis_server: RedisServer) -> AsyncIterator[Redis]:
    """A client of `redis_server`, on an empty database."""
    client = Redis.from_url(redis_server.url)
    await client.flushdb()
    yield client
    await client.aclose()


@pytest.fixture
def model() -> ScriptedDeltas:
    return ScriptedDeltas()


ManagerFactory = Callable[..., RunManager]

# The server's polls, shrunk: the database every few ms instead of every 250 ms, so a test of
# a cancel, a follower or an idempotent retry takes milliseconds. Upper bounds (how long a
# retry or a cancel may wait) keep their defaults: they cost nothing when things work, and a
# loaded machine must not fail a test. A test shrinks or stretches any of them further by
# name: `managers(lease_seconds=0.2)`.
FAST = Timings(supervisor_tick_seconds=0.01, cancel_poll_seconds=0.01,
               feed_min_poll_seconds=0.005, feed_poll_seconds=0.02, watch_touch_ms=50,
               watch_fresh_ms=300, watch_recheck_seconds=0.02, commit_retry_seconds=0.02,
               idempotency_poll_seconds=0.005, remote_cancel_poll_seconds=0.005,
               publish_wait_seconds=0.2, shutdown_flush_seconds=0.01)
TIMING_NAMES = {f.name for f in dataclasses.fields(Timings)}
# The server's limits, without its wall time: a test's run takes as long as the test says.
UNLIMITED = RunLimits(run_max_seconds=None)


@pytest.fixture
async def managers(store: Store, model: ScriptedDeltas) -> AsyncIterator[ManagerFactory]:
    """Make run managers on the test's store (several: one per simulated process), each with
    the database backend (`backends/database.py`) as a server on SQLite has it, and `FAST`
    timings. A keyword named like a `Timings` or `RunLimits` field overrides one; `model_name`
    names the configured model, `server_tools` are the project's tools, `counters` replaces
    the process's own quota counters (shared by several managers: processes sharing Redis).
    Each is shut down at the end."""
    made: list[RunManager] = []

    def make(model_: Any = None, *, model_name: str | None = None,
             counters: Counters | None = None, server_tools: dict[str, Any] | None = None,
             **options: Any) -> RunManager:
        timings = dataclasses.replace(
            FAST, **{k: options.pop(k) for k in TIMING_NAMES & options.keys()})
        limits = dataclasses.replace(UNLIMITED, **options)
        backend = database_backend(store, timings)
        if counters is not None:
            backend = dataclasses.replace(backend, counters=counters)
        setup = LoopSetup(model_ or model, model_name, server_tools or {})
        manager = RunManager(store, setup, backend, limits, timings)
        made.append(manager)
        return manager

    yield make
    for manager in made:
        await manager.shutdown()


@pytest.fixture
async def manager(managers: ManagerFactory) -> RunManager:
    return managers()


def door(manager: RunManager, **settings: str) -> Admission:
    """The door in front of `manager` (`runs/admission/submit.py`), with the default settings
    (`GATEWAY_*` names to values override them) and the environment's one agent."""
    configured = settings_from({f"GATEWAY_{k.upper()}": v for k, v in settings.items()})
    return Admission(configured, registry_for(configured), manager)


def client(quota: Subject | None = None) -> Caller:
    """A caller of `PROJECT` whose credential's quota is `quota` (None: none counted)."""
    return Caller(PROJECT, key_id="key-1" if quota else None, quota=quota)


def new_thread_rows(user_key: str | None = None) -> ThreadRows:
    """A new thread of `PROJECT`, not written yet (a start creates it with its run)."""
    now = now_ms()
    return ThreadRows(ThreadRow(id=new_id("thr_"), project_id=PROJECT, user_key=user_key,
                                created_ms=now, updated_ms=now), [])


async def new_thread(store: Store, user_key: str | None = None) -> ThreadRow:
    now = now_ms()
    thread = ThreadRow(id=new_id("thr_"), project_id=PROJECT, user_key=user_key,
                       created_ms=now, updated_ms=now)
    await store.add(thread)
    return thread


async def events(manager: RunManager, run_id: str, after: int = 0
                 ) -> list[tuple[int, dict[str, Any]]]:
    """The run's Tambo-dialect events after position `after`, until the run ends."""
    return [item async for item in positioned(manager.entries(run_id), TamboDialect(), after)]


def types(items: list[tuple[int, dict[str, Any]]]) -> list[str]:
    return [event["type"] if event["type"] != "CUSTOM" else event["name"]
            for _, event in items]


async def finished(manager: RunManager, run_id: str) -> None:
    """Wait for a run of this manager to end (its task and its log)."""
    active = manager.active.get(run_id)
    if active is not None:
        await asyncio.wait_for(active.done.wait(), 10)

