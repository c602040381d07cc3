"""Ending a pause: the way out of a run that waits for the client (`awaiting_input`).

A paused run waits for results its client may never send: the page reloaded, the tab closed, the
tool's handler threw. Without a way out the thread is stuck, since a new message is refused
while calls are pending (400 `MISSING_RESULTS`). Ending the pause answers every pending call
with an error result ("cancelled by the user"), ends the run as cancelled and leaves the thread
idle, in one transaction (`Store.end_pause`): the model sees on the next run what happened to
its calls, and the thread's history stays well formed (no call without its result).

A pause ends when its run is cancelled (`DELETE` of the run, `RunManager.cancel`), or when a new
user message arrives on the paused thread and either asks for it (`abandonPendingTools`) or the
pause is older than `GATEWAY_PENDING_TOOL_TTL_SECONDS` (`abandon_stale_pause`). Every way a pause
ends goes through `end_pause`, so any kind of pause (client tools, approvals) ends the same way.
"""

from __future__ import annotations

from typing import Any

from ..protocol.clock import new_id, now_ms
from ..protocol.run_spec import RunSpec, ToolResult
from ..store.repository import Store
from ..store.tables import MessageRow, ThreadRow
from .admission.admit import input_parts
from .execution import CANCELLED_ERROR

# What the model reads as the result of each call its pause was ended with.
CANCELLED_BY_USER = "cancelled by the user"


def cancelled_results(thread_id: str, run_id: str, pending: list[dict[str, Any]],
                      now: int) -> MessageRow:
    """The message that answers each pending call with the error "cancelled by the user", as
    a client's error results are written (`admission.input_parts`), on the paused run."""
    results = [ToolResult(p["toolCallId"], [{"type": "text", "text": CANCELLED_BY_USER}],
                          is_error=True) for p in pending]
    parts = input_parts(RunSpec(tool_results=results), {p["toolCallId"]: p for p in pending},
                        now)
    return MessageRow(id=new_id(), thread_id=thread_id, run_id=run_id, role="user",
                      parts=parts, created_ms=now)


async def end_pause(store: Store, thread_id: str, run_id: str,
                    pending: list[dict[str, Any]]) -> bool:
    """End the pause of `run_id` (its `pending` calls answered as cancelled, the run
    cancelled); False when it is not the thread's open pause any more (already ended,
    answered, or not a pause)."""
    now = now_ms()
    return await store.end_pause(run_id, thread_id, now, CANCELLED_ERROR,
                                 cancelled_results(thread_id, run_id, pending, now))


async def abandon_stale_pause(store: Store, thread: ThreadRow, spec: RunSpec,
                              ttl_seconds: float | None) -> bool:
    """Before a run starts on `thread`: end its pause if the request brings a new user message
    (and no results) on it and either asks to (`abandonPendingTools`) or the pause is older
    than `ttl_seconds`. True if a pause was ended (the caller reads the thread again); a
    request that does not qualify is validated as usual (400 `MISSING_RESULTS`)."""
    paused_run = thread.last_completed_run_id
    if (not thread.pending_tool_calls or paused_run is None or spec.user is None
            or spec.tool_results or spec.previous_run_id != paused_run):
        return False
    if not spec.abandon_pending_tools:
        if not ttl_seconds:
            return False
        run = await store.get_run(paused_run)
        paused_ms = (run.finished_ms or run.created_ms) if run is not None else None
        if paused_ms is None or now_ms() - paused_ms < ttl_seconds * 1000:
            return False
    await end_pause(store, thread.id, paused_run, thread.pending_tool_calls)
    return True  # ended here or by a racing request: either way, look at the thread again
