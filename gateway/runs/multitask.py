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
never two runs at once. A request that read the thread while the run streamed, but
reached its start after another request's cancel had ended that run, finds the thread idle
with a newer last run than its client named: it follows that run (`follow_ended`) instead of
being refused with 400 `INVALID_PREVIOUS_RUN` (a view already stale when the request arrived
is still refused). A run in another process is cancelled through the backend's signal; if
it has not ended within the cancel's wait, the request is refused with 409 as `reject` would.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace

from ..protocol.clock import REQUEST_ARRIVED_MS, new_id, now_ms
from ..protocol.problems import ApiError, Problem
from ..protocol.run_spec import RunSpec
from ..store.repository import ACTIVE_RUN_STATUSES, Store
from ..store.rows import made
from ..store.tables import MessageRow, RunRow, ThreadRow
from .admission import input_parts, new_run

# The key on a message's metadata that leaves it out of the model's history.
ROLLED_BACK = "rolledBack"
# The key of a queued run's request snapshot that holds its input until it starts.
QUEUED_INPUT = "queued_input"


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


def arrived_behind_a_run(thread: ThreadRow, spec: RunSpec) -> bool:
    """Whether `spec` asks to interrupt, roll back or queue and arrived while a run held
    `thread` (the thread as its API read it), its client's view current then (naming the run
    before the one in the way, or that one). A run that ends after that is one its client
    could not know the end of: another request interrupted it, or it finished."""
    return (spec.multitask_strategy in ("interrupt", "rollback", "enqueue")
            and thread.run_status != "idle"
            and spec.previous_run_id in (thread.last_completed_run_id, thread.current_run_id))


async def follow_ended(store: Store, refused: ApiError, spec: RunSpec,
                       in_the_way: str | None) -> RunSpec | None:
    """The spec to start with when it was refused only for naming a run before the thread's
    last completed one, and the runs in between ended after it arrived (`arrived_behind_a_run`
    said so; `in_the_way` is the run that held the thread then): its `previousRunId` moved
    onto the thread's last completed run, as `make_room` moves it onto the run it cancelled
    (and, for `rollback`, that run's answer left out). None: the refusal stands."""
    last = refused.extra.get("lastCompletedRunId")
    if refused.problem is not Problem.INVALID_PREVIOUS_RUN or not isinstance(last, str):
        return None
    if spec.multitask_strategy == "rollback" and in_the_way is not None:
        await store.mark_run_answer(in_the_way, ROLLED_BACK)
    return replace(spec, previous_run_id=last)


def model_history(rows: Sequence[MessageRow]) -> list[MessageRow]:
    """The thread's messages the model reads: all but rolled-back answers."""
    return [row for row in rows if not (row.meta or {}).get(ROLLED_BACK)]


async def ended_after_arrival(store: Store, refused: ApiError, spec: RunSpec) -> str | None:
    """The run to follow when `spec` (to interrupt, roll back or queue) was refused for not
    naming the thread's last completed run, and that run ended after the request arrived
    (`REQUEST_ARRIVED_MS`): a racing request interrupted it before this one read the thread,
    so the thread looked idle to it (`arrived_behind_a_run` saw no run). Its client named
    the run before that one, as its view then was. None: the refusal stands (a view that
    was stale when the request arrived)."""
    arrived = REQUEST_ARRIVED_MS.get()
    last = refused.extra.get("lastCompletedRunId")
    if (arrived is None or refused.problem is not Problem.INVALID_PREVIOUS_RUN
            or spec.multitask_strategy not in ("interrupt", "rollback", "enqueue")
            or not isinstance(last, str)):
        return None
    run = await store.get_run(last)
    if run is None or (run.finished_ms or 0) < arrived or \
            run.previous_run_id != spec.previous_run_id:
        return None
    return last
