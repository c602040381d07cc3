"""Component state: the one write path for every writer (the REST route and server tools).

A rendered component's state has several writers, possibly at once and in several processes:
the browser (React's `useTamboComponentState`), a server tool streaming rows into a table, a
second tab. Every update is a read-modify-write done as a compare-and-set on the component's
revision, retried on conflict, so no update is ever lost and each success is exactly one new
revision. A lock per component in this process keeps local writers from retrying against each
other, and keeps the deltas published to a live run in revision order.

Server tools reach the service through `run_components()`: the run manager binds it to the run's
thread (a context variable) before the agent loop starts, so an async tool called by that run
can update a component with `await run_components().update(component_id, patch=[...])`.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import json
import logging
import random
import weakref
from collections.abc import Awaitable, Callable, Collection
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Protocol, cast

import jsonpatch
import jsonpointer
from jsonschema import SchemaError
from jsonschema.exceptions import best_match
from jsonschema.protocols import Validator

from ...engine.loop import ToolError
from ...engine.tools import client_schema as state_schema
from ...protocol import timbal
from ...protocol.clock import now_ms
from ...protocol.frames_schema import JsonPatchOp
from ...protocol.problems import Problem, echo
from ...store.repository import Store
from ...store.tables import ComponentRow
from ..backend import ThreadEvent
from ..log.live import LiveLog

log = logging.getLogger(__name__)

# Compare-and-set attempts before giving up (only writers in other processes can make one fail).
MAX_ATTEMPTS = 64
# A component's state as JSON, at most (the app sets the configured cap).
DEFAULT_MAX_STATE_BYTES = 256 * 1024
PATCH_OPS = frozenset({"add", "remove", "replace", "move", "copy", "test"})
# Operations in one patch, at most: a client patches what a user just did, a few at a time.
MAX_PATCH_OPERATIONS = 256
# A patch of at most this many ops is applied on the loop (a client's usual few); a longer one
# on a worker thread.
PATCH_OPS_ON_LOOP = 8


class ComponentStateError(ToolError):
    """An update or read refused, with a stable `code` (`COMPONENT_NOT_FOUND`,
    `INVALID_JSON_PATCH`, `JSON_PATCH_TEST_FAILED`, `REVISION_MISMATCH`,
    `STATE_SCHEMA_TOO_COMPLEX`, `STATE_SCHEMA_VIOLATION`, `STATE_TOO_LARGE`,
    `STATE_UPDATE_CONFLICT`, `VALIDATION_ERROR`) and details.

    A domain error, not an HTTP one: a server tool catches it like any exception (or lets the
    model see it as the tool's error), and the REST route turns the code into its HTTP status.
    """

    def __init__(self, code: Problem | str, message: str, **details: Any) -> None:
        super().__init__(message)
        # A member of the catalogue; a code by name too, for tools written against the
        # public `code` string.
        self.problem = code if isinstance(code, Problem) else Problem[code]
        self.code, self.message, self.details = self.problem.name, message, details


class LiveRun(Protocol):
    @property
    def live(self) -> LiveLog: ...

    @property
    def recorder(self) -> timbal.FrameSink | None: ...


class RunLookup(Protocol):
    def active_run_for_thread(self, thread_id: str) -> LiveRun | None: ...


@dataclass(frozen=True)
class ComponentState:
    component_id: str
    name: str
    state: dict[str, Any]
    revision: int


class ComponentStates:
    """Reads and updates component state; publishes each update to the thread's live run."""

    def __init__(self, store: Store, runs: RunLookup,
                 relay: Callable[[str, ThreadEvent], Awaitable[None]] | None = None) -> None:
        self.store, self.runs = store, runs
        self.max_state_bytes = DEFAULT_MAX_STATE_BYTES  # `GATEWAY_MAX_COMPONENT_STATE_BYTES`
        # Hands an update to the other processes when the thread's run is not here.
        self.relay = relay
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = (
            weakref.WeakValueDictionary())
        # Per live run (its frame sink): the last revision of each component it published.
        self._published: weakref.WeakKeyDictionary[timbal.FrameSink, dict[str, int]] = (
            weakref.WeakKeyDictionary())

    async def get(self, thread_id: str, component_id: str) -> ComponentState:
        return _view(await self._row(thread_id, component_id))

    async def update(self, thread_id: str, component_id: str, *,
                     state: dict[str, Any] | None = None, patch: list[Any] | None = None,
                     if_match: int | Collection[int] | None = None) -> tuple[dict[str, Any], int]:
        """Replace the state (`state`) or apply an RFC 6902 `patch`; returns (state, revision).

        `if_match` (a revision, or several) refuses to overwrite a newer state with 412. A
        refused update changes nothing.
        """
        if (state is None) == (patch is None):
            raise ComponentStateError(Problem.VALIDATION_ERROR,
                           "Provide exactly one of 'state' (a full replacement) or 'patch'",
                           threadId=thread_id, componentId=component_id)
        if state is not None and not isinstance(state, dict):
            raise ComponentStateError(Problem.VALIDATION_ERROR, "'state' must be a JSON object",
                           threadId=thread_id, componentId=component_id)
        if patch is not None:
            check_patch(patch)
        expected = {if_match} if isinstance(if_match, int) else if_match
        lock = self._locks.get(component_id)
        if lock is None:
            lock = self._locks[component_id] = asyncio.Lock()
        async with lock:
            for _ in range(MAX_ATTEMPTS):
                row = await self._row(thread_id, component_id)
                if expected is not None and row.revision not in expected:
                    raise ComponentStateError(Problem.REVISION_MISMATCH,
                                   f"Component {component_id} is at revision {row.revision}",
                                   componentId=component_id, revision=row.revision)
                old = row.state or {}
                # A patch of many ops over a large state is measured as it applies: on a
                # worker thread, so the loop's other streams go on meanwhile.
                new = (await asyncio.to_thread(apply_patch, old, patch, self.max_state_bytes)
                       if patch is not None and len(patch) > PATCH_OPS_ON_LOOP
                       else apply_patch(old, patch, self.max_state_bytes) if patch is not None
                       else copy.deepcopy(state or {}))
                check_size(new, self.max_state_bytes)
                check_state(row.state_schema, new)
                # Shielded: a cancelled caller (a server tool of a cancelled run) must not cut
                # the write in half. If it lands unpublished, the next delta resends the state.
                written = asyncio.shield(self.store.set_component_state(row, new, now_ms()))
                if await written:
                    # RFC 6902 operations: jsonpatch's diff, or the patch `check_patch` passed.
                    ops = cast(list[JsonPatchOp], copy.deepcopy(
                        jsonpatch.make_patch(old, new).patch if patch is None
                        else [op for op in patch if op["op"] != "test"]))
                    await self._publish(thread_id, component_id, row.revision, old, new, ops)
                    return new, row.revision + 1
                await asyncio.sleep(random.uniform(0, 0.005))  # another process wrote first
        raise ComponentStateError(Problem.STATE_UPDATE_CONFLICT,
                       f"Component {component_id} is being updated too often; retry",
                       componentId=component_id, isRetryable=True)

    def for_thread(self, thread_id: str) -> ThreadComponents:
        return ThreadComponents(self, thread_id)

    async def _row(self, thread_id: str, component_id: str) -> ComponentRow:
        row = await self.store.get_component(thread_id, component_id)
        if row is None:
            raise ComponentStateError(Problem.COMPONENT_NOT_FOUND,
                           f"Component {echo(component_id)} not found in thread {thread_id}",
                           threadId=thread_id, componentId=echo(component_id))
        return row

    async def _publish(self, thread_id: str, component_id: str, base: int,
                       old: dict[str, Any], new: dict[str, Any],
                       ops: list[JsonPatchOp]) -> None:
        """Send the change to the run streaming on this thread: here if it runs here, else
        through `relay` to the process that runs it (if any does)."""
        if not await self._publish_here(thread_id, component_id, base, old, new, ops) and \
                self.relay is not None:
            await self.relay(thread_id, {"kind": "component_state", "componentId": component_id,
                                         "base": base, "old": old, "new": new, "ops": ops})

    async def deliver(self, thread_id: str, event: ThreadEvent) -> None:
        """A thread event another process published: publish it to our run on the thread.
        One sent as a reference only (`reload`: it was too large for the channel) is read
        back from the database and sent whole."""
        if event.get("kind") != "component_state":
            return
        if "reload" in event:
            if self.runs.active_run_for_thread(thread_id) is None:
                return
            row = await self._row(thread_id, event["componentId"])
            state = row.state or {}
            await self._publish_here(thread_id, row.id, row.revision - 1, state, state,
                                     [{"op": "replace", "path": "", "value": state}])
            return
        await self._publish_here(thread_id, event["componentId"], event["base"],
                                 event["old"], event["new"], event["ops"])

    async def _publish_here(self, thread_id: str, component_id: str, base: int,
                            old: dict[str, Any], new: dict[str, Any],
                            ops: list[JsonPatchOp]) -> bool:
        """Send the change to the run streaming on this thread in this process, if any.

        Its subscribers apply the ops to their copy, which is only known to be at `base` if
        this run published `base` itself, or `base` is the empty start state every client
        gives a component. Otherwise (a component from an earlier run, or a write made by
        another process) the whole state is sent as one root `replace`, which any copy accepts.
        """
        active = self.runs.active_run_for_thread(thread_id)
        if active is None or active.recorder is None or active.live.closed:
            return False
        sink = active.recorder
        published = self._published.setdefault(sink, {})
        known = published.get(component_id, 0 if base == 0 and not old else None)
        if known is not None and base < known:
            return True  # relayed late: a newer revision went out already
        if known != base:
            ops = [{"op": "replace", "path": "", "value": new}]
        published[component_id] = base + 1
        await sink.emit({"c": timbal.COMPONENT_STATE, "componentId": component_id,
                         "operations": ops, "revision": base + 1})
        return True


@dataclass(frozen=True)
class ThreadComponents:
    """The component state service bound to one thread: what a server tool is handed."""

    states: ComponentStates
    thread_id: str

    async def get(self, component_id: str) -> ComponentState:
        return await self.states.get(self.thread_id, component_id)

    async def latest(self, name: str) -> ComponentState | None:
        """The most recently rendered component called `name` on this thread (a tool that
        fills a component the model just rendered does not know its generated id). Component
        ids are ULIDs, so the greatest id is the newest."""
        rows = await self.states.store.components_of(self.thread_id)
        named = [row for row in rows.values() if row.name == name]
        return _view(max(named, key=lambda r: r.id)) if named else None

    async def update(self, component_id: str, *, state: dict[str, Any] | None = None,
                     patch: list[Any] | None = None,
                     if_match: int | Collection[int] | None = None) -> tuple[dict[str, Any], int]:
        return await self.states.update(self.thread_id, component_id, state=state, patch=patch,
                                        if_match=if_match)


_current: ContextVar[ThreadComponents | None] = ContextVar("gateway_run_components", default=None)


def bind_run(states: ComponentStates, thread_id: str) -> None:
    """Make `run_components()` answer for `thread_id` in this task (the run's task) and in
    everything it awaits, which includes the server tools it calls."""
    _current.set(states.for_thread(thread_id))


def run_components() -> ThreadComponents:
    """For a server tool: the component state of the thread of the run that called it."""
    bound = _current.get()
    if bound is None:
        raise RuntimeError("run_components() is only available inside a run (a server tool)")
    return bound


def check_patch(patch: Any) -> None:
    """Refuse a patch that is not a list of well-formed RFC 6902 operations."""
    if not isinstance(patch, list):
        raise ComponentStateError(Problem.INVALID_JSON_PATCH, "'patch' must be an array of operations")
    if not patch:
        raise ComponentStateError(Problem.VALIDATION_ERROR, "'patch' must not be empty")
    if len(patch) > MAX_PATCH_OPERATIONS:
        raise ComponentStateError(Problem.JSON_PATCH_TOO_LONG,
                                  f"The patch has {len(patch)} operations; the limit is "
                                  f"{MAX_PATCH_OPERATIONS}", limit=MAX_PATCH_OPERATIONS)
    for index, op in enumerate(patch):
        if not isinstance(op, dict) or op.get("op") not in PATCH_OPS:
            raise _invalid(index, op, "an operation must be an object whose 'op' is one of "
                           + ", ".join(sorted(PATCH_OPS)))
        if not isinstance(op.get("path"), str):
            raise _invalid(index, op, "'path' must be a JSON Pointer string")
        if op["op"] in ("move", "copy") and not isinstance(op.get("from"), str):
            raise _invalid(index, op, f"'{op['op']}' needs a 'from' JSON Pointer string")
        if op["op"] in ("add", "replace", "test") and "value" not in op:
            raise _invalid(index, op, f"'{op['op']}' needs a 'value'")
        if op["op"] in ("move", "copy") and _within(op["path"], op["from"]):
            raise _invalid(index, op, f"'{op['op']}' may not put a value into itself (its "
                           "'path' is its 'from' or below it)")


def _within(path: str, source: str) -> bool:
    """Whether JSON Pointer `path` is `source` or below it: a copy there would double the
    value at each step, a move there is undefined (RFC 6902 4.4)."""
    return path == source or path.startswith(source + "/")


def apply_patch(state: dict[str, Any], patch: list[dict[str, Any]],
                limit: int = DEFAULT_MAX_STATE_BYTES) -> dict[str, Any]:
    """Apply the ops in order to a copy; a failing `test` is a 409 naming the op.

    The state's size is tracked while the ops apply, so a patch whose copies grow the state
    past `limit` is refused (413 `STATE_TOO_LARGE`) at the op that does it, before the memory
    is spent: `size` is an upper bound of the document's size (what each op may add), measured
    afresh only when it passes the limit. An op's value comes from the request, and a copied
    one from a document under the limit, so no step holds more than that beyond the limit."""
    doc: Any = copy.deepcopy(state)
    size = _json_size(doc)
    for index, op in enumerate(patch):
        try:
            added = _added(doc, op)
            doc = jsonpatch.JsonPatch([op]).apply(doc, in_place=True)
            size += added
            if size > limit:
                size = _json_size(doc)  # the bound is loose (replaces, removes): measure
                if size > limit:
                    raise ComponentStateError(
                        Problem.STATE_TOO_LARGE, f"Operation {index} makes the state larger "
                        f"than {limit} bytes", limit=limit, index=index)
        except jsonpatch.JsonPatchTestFailed as exc:
            raise ComponentStateError(Problem.JSON_PATCH_TEST_FAILED, f"Operation {index} (test) failed: {exc}",
                           index=index, operation=op) from None
        except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException, TypeError) as exc:
            raise _invalid(index, op, str(exc)) from None
    if not isinstance(doc, dict):
        raise ComponentStateError(Problem.INVALID_JSON_PATCH, "The patch would make the state a non-object")
    return doc


def _added(doc: Any, op: dict[str, Any]) -> int:
    """Bytes `op` may add to `doc` at most: its value's (`add`, `replace`), or the copied
    value's (`copy`: resolved in `doc`, so no larger than it); nothing for the others."""
    if op["op"] in ("add", "replace"):
        return _json_size(op["value"])
    if op["op"] == "copy":
        return _json_size(jsonpointer.resolve_pointer(doc, op["from"]))
    return 0


def _json_size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


def check_size(state: dict[str, Any], limit: int) -> None:
    """413 `STATE_TOO_LARGE` for a state over the cap, before any schema is run on it."""
    size = len(json.dumps(state, separators=(",", ":"), ensure_ascii=False).encode())
    if size > limit:
        raise ComponentStateError(Problem.STATE_TOO_LARGE,
                                  f"The state takes {size} bytes; the limit is {limit}",
                                  limit=limit)


def check_state(schema: dict[str, Any] | None, state: dict[str, Any]) -> None:
    """422 if the state breaks the component's `stateSchema` (when its run declared one), or if
    checking it would cost more than `state_schema`'s budget."""
    if not schema:
        return
    validator = _validator(json.dumps(schema, sort_keys=True))
    if validator is None:
        return
    try:
        error = best_match(state_schema.errors(validator, state))
    except state_schema.SchemaTooCostly:
        raise ComponentStateError(Problem.STATE_SCHEMA_TOO_COMPLEX,
                                  "Checking the state against the component's stateSchema "
                                  "takes too long; simplify the schema") from None
    except SchemaError as exc:
        log.warning("ignoring an invalid stateSchema: %s", exc.message)
        return
    if error is not None:
        raise ComponentStateError(Problem.STATE_SCHEMA_VIOLATION,
                       f"The state does not match the component's stateSchema: {error.message}",
                       path=_pointer(error.absolute_path),
                       schemaPath=_pointer(error.absolute_schema_path))


@functools.lru_cache(maxsize=256)
def _validator(schema_json: str) -> Validator | None:
    """A compiled validator per distinct schema; an invalid schema validates nothing (it came
    from the client's component list, and refusing every update for it would help no one).
    Runs declaring a schema the gateway will not run are refused up front (`state_schema`), so
    one here predates that check."""
    try:
        return state_schema.validator(json.loads(schema_json))
    except SchemaError as exc:
        log.warning("ignoring an invalid stateSchema: %s", exc.message)
    except state_schema.SchemaRefused as exc:
        log.warning("ignoring an unsupported stateSchema: %s", exc.message)
    return None


def _invalid(index: int, op: Any, reason: str) -> ComponentStateError:
    return ComponentStateError(Problem.INVALID_JSON_PATCH, f"Operation {index} is invalid: {reason}",
                    index=index, operation=op)


def _pointer(parts: Any) -> str:
    return jsonpointer.JsonPointer.from_parts([str(p) for p in parts]).path


def _view(row: ComponentRow) -> ComponentState:
    return ComponentState(row.id, row.name, row.state or {}, row.revision)
