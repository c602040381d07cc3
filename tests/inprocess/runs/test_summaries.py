"""An agent with `context = "summarize"` (docs/context.md): when a thread outgrows the input
budget, the turns left out are replaced by a summary the model writes once, kept on the thread
and in the log of the run that wrote it, and reused by the next runs until what follows it no
longer fits."""

from __future__ import annotations

import dataclasses
import random

from gateway.backends.database import database_backend
from gateway.engine.agents.agent import Agent, AgentDefaults, build_registry
from gateway.engine.context_window import SUMMARY_PREFIX
from gateway.protocol.frames_schema import frame_adapter
from gateway.runs.execution import LoopSetup
from gateway.runs.manager import RunManager
from gateway.runs.summaries import INSTRUCTIONS
from gateway.store.repository import Store
from gateway.store.tables import ThreadRow
from tests.inprocess.conftest import (
    FAST,
    PROJECT,
    UNLIMITED,
    ScriptedDeltas,
    events,
    new_thread,
    types,
    user,
)

MODEL = "openai/not-a-known-model"
WORDS = ("river", "lamp", "orange", "quiet", "paper", "window", "garden", "cloud", "engine")


def summarising_manager(store: Store, model: ScriptedDeltas, context: str) -> RunManager:
    agents = build_registry([Agent(name="default", context=context)],
                            AgentDefaults(model=MODEL), "test")
    limits = dataclasses.replace(UNLIMITED, max_input_tokens=400, output_reserve_tokens=0)
    return RunManager(store, LoopSetup(model, MODEL, {}, agents), database_backend(store, FAST),
                      limits, FAST)


def words(n: int) -> str:
    pick = random.Random(n)
    return f"message {n}: " + " ".join(pick.choice(WORDS) for _ in range(40))


def is_summary_call(request) -> bool:
    return request.messages[0] == {"role": "system", "content": INSTRUCTIONS}


async def long_thread(store: Store, model: ScriptedDeltas, context: str, runs: int
                      ) -> ThreadRow:
    """A thread of `runs` runs of the agent, each finished before the next starts."""
    manager = summarising_manager(store, model, context)
    thread = await new_thread(store)
    previous = None
    try:
        for n in range(runs):
            extra = {"previousRunId": previous} if previous else {}
            run = (await manager.start(thread, user(words(n), **extra))).run
            assert types(await events(manager, run.id))[-1] == "RUN_FINISHED"
            previous = run.id
            thread = await store.get_thread(PROJECT, thread.id)
    finally:
        await manager.shutdown()
    return thread


async def test_older_turns_are_summarised_once_and_the_summary_is_reused(
        store: Store, model: ScriptedDeltas) -> None:
    thread = await long_thread(store, model, "summarize", 16)

    summaries = [r for r in model.requests if is_summary_call(r)]
    answers = [r for r in model.requests if not is_summary_call(r)]
    assert len(answers) == 16
    assert 1 <= len(summaries) < 8  # written now and then, not on every trimmed run
    for request in answers:  # the newest message always reaches the model
        assert request.messages[-1]["role"] == "user"
    last = answers[-1].messages
    assert last[-1]["content"] == words(15)
    assert any(m["role"] == "system" and m["content"].startswith(SUMMARY_PREFIX)
               for m in last)
    assert thread.context_trimmed is True
    assert thread.context_summary["covers"] > 0
    # In the log of a run that wrote one (the Timbal view), as its own value.
    found = []
    for run in (await store.list_runs(thread.id, 100, None)).rows:
        frames = [f.frame for f in await store.read_frames(run.id)
                  if f.frame.get("v", {}).get("type") == "x-summary"]
        for frame in frames:
            frame_adapter.validate_python(frame)  # the published frame schema accepts it
        found += [frame["v"] for frame in frames]
    assert len(found) == len(summaries)
    assert thread.context_summary["text"] in [value["content"] for value in found]


async def test_without_summarize_older_turns_are_only_left_out(
        store: Store, model: ScriptedDeltas) -> None:
    thread = await long_thread(store, model, "trim", 10)

    assert not any(is_summary_call(r) for r in model.requests)
    last = model.requests[-1].messages
    assert last[0]["content"] != words(0) and last[-1]["content"] == words(9)
    assert thread.context_trimmed is True and thread.context_summary is None
