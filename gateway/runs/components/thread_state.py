"""The thread's shared state (AG-UI agent state), kept with the thread and changed by the
run's server tools (`engine/tools/shared_state.py` says what a tool may call).

One run at a time holds a thread, and a server tool runs in its run's process, so a change
needs no compare-and-set across processes: a lock per run orders its own tools' changes. The
client's `state` (the AG-UI input's) is stored when its run starts, so it is what `connect`
answers; a tool's change is stored and then sent to the run's readers as a `thread.state`
frame (AG-UI `STATE_DELTA`). Both are bounded as a component's state is.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any, cast

import jsonpatch

from ...protocol import timbal
from ...protocol.frames_schema import JsonPatchOp
from ...protocol.problems import Problem
from ...store.repository import Store
from .state import ComponentStateError, apply_patch, check_patch, check_size


class ThreadState:
    """The state of one run's thread, as its server tools change it."""

    def __init__(self, store: Store, thread_id: str, state: dict[str, Any],
                 sink: timbal.FrameSink, max_bytes: int) -> None:
        self.store, self.thread_id, self.sink = store, thread_id, sink
        self.state, self.max_bytes = state, max_bytes
        self._lock = asyncio.Lock()

    def get(self) -> dict[str, Any]:
        return copy.deepcopy(self.state)

    async def update(self, *, state: dict[str, Any] | None = None,
                     patch: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        if (state is None) == (patch is None):
            raise ComponentStateError(Problem.VALIDATION_ERROR, "Provide exactly one of "
                                      "'state' (a full replacement) or 'patch'")
        if state is not None and not isinstance(state, dict):
            raise ComponentStateError(Problem.VALIDATION_ERROR, "'state' must be a JSON object")
        if patch is not None:
            check_patch(patch)
        async with self._lock:
            old = self.state
            new = apply_patch(old, patch) if patch is not None else copy.deepcopy(state or {})
            check_size(new, self.max_bytes)
            await asyncio.shield(self.store.set_thread_state(self.thread_id, new))
            self.state = new
            ops = cast(list[JsonPatchOp], jsonpatch.make_patch(old, new).patch)
            if ops:
                await self.sink.emit({"c": timbal.THREAD_STATE, "operations": ops})
            return copy.deepcopy(new)


async def thread_state(store: Store, thread_id: str, sent: dict[str, Any] | None,
                       stored: dict[str, Any] | None, sink: timbal.FrameSink,
                       max_bytes: int) -> ThreadState:
    """The run's thread state: the client's (`sent`, stored now) or the thread's (`stored`)."""
    if sent is not None:
        await store.set_thread_state(thread_id, sent)
        return ThreadState(store, thread_id, copy.deepcopy(sent), sink, max_bytes)
    return ThreadState(store, thread_id, copy.deepcopy(stored or {}), sink, max_bytes)
