"""Double texting: what a run request does when its thread is busy (`multitaskStrategy`).

A message sent while a run streams used to be refused (409 `CONCURRENT_RUN`), so a chat UI had
to disable its input or queue messages itself. A request may now choose, as LangGraph names
the strategies:

- `reject` (the default): 409 `CONCURRENT_RUN`, as before;
- `interrupt`: cancel the running run (its partial answer stays in the thread, marked
  cancelled, and the model sees it), then start this one;
- `rollback`: the same, but the cancelled run's answer is marked `rolledBack` and left out of
  the model's history from then on (the thread's log keeps it: it is append-only);
- `enqueue`: the run is written at once as `queued` (no owner, no lease, its input kept on the
  run) and its stream opens at once; it starts when the thread is free, oldest first
  (`RunManager.promote_next`): whichever process ends a run on the thread, or ends its pause,
  promotes the next one, and so does the enqueuing request right after writing it (the run
  in the way may have ended meanwhile). Promotion is one conditional transaction
  (`Store.promote_run`), so two processes never start the same queued run or two at once. A
  queued run waits while the thread is paused for client tools (their results come first).

Starting stays atomic: the cancelled run releases the thread's lock, and this request takes it
with the same conditional update as any start (`admission`). Two racing `interrupt` requests
both succeed in turn, the later one interrupting the earlier (the newest message wins), and
never two runs at once. A request that finds a newer last run than its client named, every
run after the named one ended after it arrived (racing requests ended them), follows the
thread's last run (`follow_ended`); a view already stale when the request arrived is refused
with 400 `INVALID_PREVIOUS_RUN`. A run in another process is cancelled through the backend's
signal; if it has not ended within the cancel's wait, the request is refused with 409 as
`reject` would.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace

from ...protocol.clock import REQUEST_ARRIVED_MS, new_id, now_ms
from ...protocol.problems import ApiError, Problem
from ...protocol.run_spec import RunSpec
from ...store.repository import ACTIVE_RUN_STATUSES, Store
from ...store.rows import made
from ...store.tables import MessageRow, RunRow, ThreadRow
from .admit import input_parts, new_run

# The key on a message's metadata that leaves it out of the model's history.
ROLLED_BACK = "rolledBack"
# The key of a queued run's request snapshot that holds its input until it starts.
QUEUED_INPUT = "queued_input"
# How many runs ended after a request arrived it follows at most (`follow_ended`).
FOLLOW_LIMIT = 16


def queued_run(thread: ThreadRow, spec: RunSpec, client_run_id: str | None,
               default_model: str | None) -> RunRow:
    """`spec` as a run waiting for `thread`: its input (the user's message) kept on the run
    until it starts; `client_run_id` is the client's own name for it (AG-UI)."""
    run = new_run(new_id("run_"), thread, spec, "", now_ms(), 0, default_model)
    run.client_id = client_run_id
    run.status, run.started_ms, run.lease_owner, run.lease_expires_ms = "queued", None, None, None
    run.previous_run_id = None  # the run it follows is known when it starts
    run.request = {**(run.request or {}), QUEUED_INPUT: input_parts(spec, {}, run.created_ms)}
    return run


def queued_input(run: RunRow, now: int) -> list[MessageRow]:
    """The input message a queued run writes when it starts."""
    parts = (run.request or {}).get(QUEUED_INPUT) or []
    return [made(MessageRow, id=new_id(), thread_id=run.thread_id, run_id=run.id, role="user",
                       parts=parts, created_ms=now)] if parts else []


def run_in_the_way(refused: ApiError, spec: RunSpec) -> str | None:
    """The run to cancel so that `spec` can start, when it was refused for a busy thread and
    asks to interrupt or roll back (None: the refusal stands)."""
    if refused.problem is not Problem.CONCURRENT_RUN:
        return None
    if spec.multitask_strategy not in ("interrupt", "rollback"):
        return None
    current = refused.extra.get("currentRunId")
    return current if isinstance(current, str) else None


async def make_room(store: Store, cancel: Callable[[str], Awaitable[RunRow | None]],
                    run_id: str, spec: RunSpec) -> RunSpec | None:
    """Cancel `run_id` for `spec` (and roll back its answer if asked); the spec to start with
    (its `previousRunId` moved onto the cancelled run, which the client could not know yet),
    or None if the run is still going (another process did not end it in time)."""
    ended = await cancel(run_id)
    if ended is None or ended.status in ACTIVE_RUN_STATUSES:
        return None
    if spec.multitask_strategy == "rollback":
        await store.mark_run_answer(run_id, ROLLED_BACK)
    if spec.previous_run_id in (ended.previous_run_id, ended.id):
        spec = replace(spec, previous_run_id=ended.id)
    return spec


async def follow_ended(store: Store, refused: ApiError, spec: RunSpec) -> RunSpec | None:
    """The spec to start with when `spec` (to interrupt, roll back or queue) was refused for
    not naming the thread's last completed run, but every run after the one it names ended
    after the request arrived (`REQUEST_ARRIVED_MS`): its client named the thread's last
    completed run, or the run in the way, as they were then, and could not know the rest
    (racing requests ended them, before or after this one read the thread). Its
    `previousRunId` moves onto the thread's last completed run, as `make_room` moves it onto
    the run it cancels; for `rollback`, the answers of the runs it would have interrupted
    (every one that ended after it arrived, the named one too if it was in the way then) are
    left out. None: the refusal stands (a view already stale on arrival)."""
    arrived = REQUEST_ARRIVED_MS.get()
    last = refused.extra.get("lastCompletedRunId")
    if (arrived is None or refused.problem is not Problem.INVALID_PREVIOUS_RUN
            or spec.multitask_strategy not in ("interrupt", "rollback", "enqueue")
            or not isinstance(last, str)):
        return None
    ended = await store.runs_ended_since(last, arrived, FOLLOW_LIMIT)
    before = [previous for _, previous in ended]
    if spec.previous_run_id not in before:
        return None  # a run between the named one and the last ended before the request came
    if spec.multitask_strategy == "rollback":
        # The links are consecutive: the row after the named run's successor is the named
        # run itself, present only if it too ended after the request arrived.
        for run_id, _ in ended[:before.index(spec.previous_run_id) + 2]:
            await store.mark_run_answer(run_id, ROLLED_BACK)
    return replace(spec, previous_run_id=last)


def model_history(rows: Sequence[MessageRow]) -> list[MessageRow]:
    """The thread's messages the model reads: all but rolled-back answers."""
    return [row for row in rows if not (row.meta or {}).get(ROLLED_BACK)]

