"""Component state: patch checks, schema checks, compare-and-set under concurrent writers,
If-Match, and live deltas to the run streaming on the thread."""

from __future__ import annotations

import asyncio

import jsonpatch
import pytest

from gateway.runs.components.state import ComponentStateError
from gateway.runs.manager import RunManager
from gateway.store.repository import Store
from tests.inprocess.conftest import (
    ScriptedDeltas,
    events,
    new_thread,
    tool_turn,
    user,
)

CARD = {"name": "Card", "description": "A card.",
        "propsSchema": {"type": "object", "properties": {"title": {"type": "string"}}},
        "stateSchema": {"type": "object", "properties": {"items": {"type": "array"},
                                                         "pinned": {"type": "boolean"}},
                        "additionalProperties": False}}


async def rendered_card(manager: RunManager, store: Store, model: ScriptedDeltas,
                        then: list | None = None) -> tuple[str, str, str]:
    """(thread id, run id, component id) of a Card the model has just shown."""
    thread = await new_thread(store)
    model.enqueue(tool_turn("call_card", "show_component_Card", '{"title": "News"}')
                  + (then or []))
    run = (await manager.start(thread, user("show a card",
                                                     availableComponents=[CARD]))).run
    while not await store.components_of(thread.id):
        await asyncio.sleep(0.005)
    [component_id] = await store.components_of(thread.id)
    return thread.id, run.id, component_id


async def test_patches_are_checked_before_anything_changes(
        manager: RunManager, store: Store, model: ScriptedDeltas) -> None:
    thread_id, run_id, card = await rendered_card(manager, store, model)
    await events(manager, run_id)
    states = manager.components
    refusals = {
        "INVALID_JSON_PATCH": {"patch": [{"op": "jump", "path": "/x"}]},
        "VALIDATION_ERROR": {"patch": []},
        "JSON_PATCH_TEST_FAILED": {"patch": [{"op": "test", "path": "/pinned", "value": True}]},
        "STATE_SCHEMA_VIOLATION": {"state": {"unknown": 1}},
    }
    for code, update in refusals.items():
        with pytest.raises(ComponentStateError) as refused:
            await states.update(thread_id, card, **update)
        assert refused.value.code == code
    with pytest.raises(ComponentStateError) as missing:
        await states.update(thread_id, "comp_nope", state={})
    assert missing.value.code == "COMPONENT_NOT_FOUND"
    assert (await states.get(thread_id, card)).revision == 0  # nothing changed

    state, revision = await states.update(thread_id, card, state={"items": [], "pinned": False})
    assert (state, revision) == ({"items": [], "pinned": False}, 1)
    with pytest.raises(ComponentStateError) as stale:
        await states.update(thread_id, card, patch=[{"op": "replace", "path": "/pinned",
                                                     "value": True}], if_match=0)
    assert (stale.value.code, stale.value.details["revision"]) == ("REVISION_MISMATCH", 1)


async def test_concurrent_writers_lose_no_update(
        manager: RunManager, managers, store: Store, model: ScriptedDeltas) -> None:
    thread_id, run_id, card = await rendered_card(manager, store, model)
    await events(manager, run_id)
    await manager.components.update(thread_id, card, state={"items": []})
    other_process = managers().components  # its own locks: only compare-and-set protects
    writers = [(manager.components if n % 2 else other_process).update(
        thread_id, card, patch=[{"op": "add", "path": "/items/-", "value": n}])
        for n in range(20)]
    results = await asyncio.gather(*writers)
    assert sorted(revision for _, revision in results) == list(range(2, 22))
    final = await manager.components.get(thread_id, card)
    assert sorted(final.state["items"]) == list(range(20)) and final.revision == 21


async def test_an_update_during_a_run_reaches_its_stream_as_a_state_delta(
        manager: RunManager, store: Store, model: ScriptedDeltas) -> None:
    hold = asyncio.Event()  # the model's stream stays open after the component
    thread_id, run_id, card = await rendered_card(manager, store, model, then=[hold])
    reader = asyncio.create_task(events(manager, run_id))
    assert manager.active_run_for_thread(thread_id) is not None
    await manager.components.update(thread_id, card, state={"items": [1]})
    await manager.components.update(thread_id, card,
                                    patch=[{"op": "add", "path": "/items/-", "value": 2}])
    hold.set()
    deltas = [e["value"] for _, e in await reader if e.get("name") ==
              "tambo.component.state_delta"]
    assert [d["revision"] for d in deltas] == [1, 2]
    assert deltas[1]["operations"] == [{"op": "add", "path": "/items/-", "value": 2}]


async def test_racing_updates_during_a_run_reach_its_stream_in_revision_order(
        manager: RunManager, store: Store, model: ScriptedDeltas) -> None:
    hold = asyncio.Event()
    thread_id, run_id, card = await rendered_card(manager, store, model, then=[hold])
    reader = asyncio.create_task(events(manager, run_id))
    await manager.components.update(thread_id, card, state={"items": []})
    await asyncio.gather(*[manager.components.update(
        thread_id, card, patch=[{"op": "add", "path": "/items/-", "value": n}])
        for n in range(20)])
    hold.set()
    deltas = [e["value"] for _, e in await reader if e.get("name") ==
              "tambo.component.state_delta"]
    assert [d["revision"] for d in deltas] == list(range(1, 22))
    copy: dict = {}  # what a client holds, patched delta by delta
    for delta in deltas:
        copy = jsonpatch.apply_patch(copy, delta["operations"])
    assert copy == (await manager.components.get(thread_id, card)).state
    assert sorted(copy["items"]) == list(range(20))
