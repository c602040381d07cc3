"""A run's model calls are watched through the agent loop's hooks, not through model wrappers:
a streamed chunk crosses one generator (the adapter's) on its way to the run's log, and the
metrics an operator scrapes still count it."""

from __future__ import annotations

import asyncio
import inspect
import sys
from collections.abc import AsyncIterator
from typing import Any

from prometheus_client import REGISTRY

from gateway.engine.deltas import Delta, TextDelta, Usage
from gateway.engine.models.litellm_model import ModelRequest
from gateway.runs.manager import RunManager
from gateway.store.repository import Store
from tests.inprocess.conftest import (
    ManagerFactory,
    ScriptedDeltas,
    events,
    new_thread,
    user,
)


def generators_on_the_stack() -> int:
    """How many async generators are running, from the caller's frame up to the first frame
    that is not one (the consumer of the chunk being yielded)."""
    frame: Any = sys._getframe(1)
    depth = 0
    while frame is not None and frame.f_code.co_flags & inspect.CO_ASYNC_GENERATOR:
        depth += 1
        frame = frame.f_back
    return depth


class GeneratorCounting(ScriptedDeltas):
    """The adapter: records, at each yield, how many async generators hand its chunk on
    (itself included) before a plain coroutine consumes it."""

    def __init__(self) -> None:
        super().__init__()
        self.depths: list[int] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[Delta]:
        async for delta in super().stream(request):
            self.depths.append(generators_on_the_stack())
            yield delta


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def test_a_chunk_crosses_one_generator_and_is_still_counted(
        managers: ManagerFactory, store: Store) -> None:
    model = GeneratorCounting()
    model.enqueue([TextDelta("Hel"), TextDelta("lo"), Usage(3, 2)])
    manager: RunManager = managers(model)
    before = sample("gateway_tokens_streamed_total")
    thread = await new_thread(store)
    run = (await manager.start(thread, user("hi"))).run
    await events(manager, run.id)
    assert model.depths and set(model.depths) == {1}
    assert sample("gateway_tokens_streamed_total") - before == 2


async def test_store_operations_are_timed_through_its_hook(
        managers: ManagerFactory, store: Store, model: ScriptedDeltas) -> None:
    timed: list[str] = []

    class Hook:
        def operation_timed(self, name: str, seconds: float) -> None:
            assert seconds >= 0
            timed.append(name)

    store.hooks = Hook()
    manager = managers()
    thread = await new_thread(store)
    run = (await manager.start(thread, user("hi"))).run
    await events(manager, run.id)
    assert {"add", "start_run", "finish_run"} <= set(timed)


async def test_the_count_sees_a_wrapping_generator() -> None:
    async def adapter() -> AsyncIterator[int]:
        yield generators_on_the_stack()

    async def wrapper() -> AsyncIterator[int]:
        async for depth in adapter():
            yield depth

    assert [depth async for depth in adapter()] == [1]
    assert [depth async for depth in wrapper()] == [2]


async def test_a_run_answering_in_one_message_writes_its_start_and_its_end(
        managers: ManagerFactory, store: Store, model: ScriptedDeltas) -> None:
    """Its answer is written in its end's transaction, which also looks for the thread's
    queued runs: no transaction of their own (`RunRecorder`, `finish_run`)."""
    timed: list[str] = []

    class Hook:
        def operation_timed(self, name: str, seconds: float) -> None:
            timed.append(name)

    manager = managers()
    thread = await new_thread(store)
    store.hooks = Hook()
    run = (await manager.start(thread, user("hi"))).run
    await events(manager, run.id)
    promoting = [t for t in asyncio.all_tasks() if t.get_name().startswith("promote after")]
    await asyncio.gather(*promoting)  # what its retirement started in the background, if any
    assert "finish_run" in timed
    assert {"add_message", "next_queued_run"}.isdisjoint(timed)
    [answer] = [m for m in await store.history(thread.id) if m.role == "assistant"]
    assert answer.run_id == run.id and answer.parts
