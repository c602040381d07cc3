"""Batch runs and bulk cancel: `POST /v1/threads/runs/batch` starts several runs in one request
(each through the one door, `runs/admission/submit.py`, as if sent alone), and
`POST /v1/threads/runs/cancel` cancels the active runs of the caller's threads named by id or
by metadata.

Both are bounded (`MAX_BATCH_RUNS` runs; `MAX_CANCEL_THREADS` threads a call) and scoped as
every thread call is: the caller's project and user scope, never another user's threads. A run
of a batch that is refused does not refuse the others: each item says how it went. The runs go
on by themselves; their callers join them by stream, status or `runs/wait`.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ...api.context import (
    admission,
    caller,
    json_body,
    may_see,
    project_of,
    required_user_scope,
    services,
    user_scope,
)
from ...api.door import mark_run_start
from ...protocol.problems import ApiError, Problem, echo
from ...protocol.tambo import (
    BatchRun,
    BatchRunRequest,
    BatchStarted,
    BatchStartedList,
    BulkCancelled,
    BulkCancelledRun,
    BulkCancelRequest,
    wire,
)
from ...runs.admission.threads import OnThread, Target
from ...store.base import ACTIVE_RUN_STATUSES
from ...store.queries.thread_search import ThreadFilter
from .input import run_spec
from .routes import _new_thread

# How many threads one bulk cancel reaches (it says `more` when others matched).
MAX_CANCEL_THREADS = 100


async def batch_runs(request: Request) -> Response:
    """Start each run of the batch, in order, inside the start gate; a refusal is that item's
    answer, not the request's."""
    body: BatchRunRequest = await json_body(request, BatchRunRequest)
    # What is the request's, not an item's, refuses the request: who calls, and the user
    # scope its query names.
    who = caller(request)
    user_scope(request)
    svc = services(request)
    answers: list[BatchStarted] = []
    async with svc.runs.start_gate.turn():
        for index, item in enumerate(body.runs):
            try:
                target = await _target(request, item)
                started = await admission(request).submit(who, target, run_spec(item))
            except ApiError as refused:
                answers.append(BatchStarted(index=index, error=_problem(refused)))
                continue
            answers.append(BatchStarted(index=index, threadId=started.run.thread_id,
                                        runId=started.run.id, status=started.run.status))
    return JSONResponse(wire(BatchStartedList(runs=answers)))


async def _target(request: Request, item: BatchRun) -> Target:
    if item.threadId is None:
        return _new_thread(request, item)
    thread = await services(request).store.get_thread(project_of(request), item.threadId)
    if thread is None or not may_see(request, thread,
                                     user_scope(request, item.userKey, item.contextKey)):
        raise ApiError(Problem.THREAD_NOT_FOUND, f"Thread {echo(item.threadId)} not found",
                       threadId=echo(item.threadId))
    return OnThread(thread)


def _problem(refused: ApiError) -> dict[str, Any]:
    """A refusal as a batch item carries it: the fields of its problem+json body."""
    return {"status": refused.status, "code": refused.code, "detail": refused.detail,
            **{k: v for k, v in refused.extra.items() if isinstance(v, (str, int, bool))}}


async def bulk_cancel(request: Request) -> Response:
    """Cancel the active runs of the caller's threads that the body names or matches."""
    body: BulkCancelRequest = await json_body(request, BulkCancelRequest)
    if not {"threadIds", "metadata"} & body.model_fields_set:
        raise ApiError(Problem.VALIDATION_ERROR, "Name the threads: threadIds, metadata or both",
                       errors={"threadIds": "threadIds or metadata is required"})
    scope = required_user_scope(request, body.userKey, body.contextKey)
    if not body.threadIds and not body.metadata:  # given, as null: nothing is named
        return JSONResponse(wire(BulkCancelled(runs=[], more=False)))
    svc = services(request)
    project = project_of(request)
    match = ThreadFilter(metadata=tuple((body.metadata or {}).items()), active=True)
    found = await svc.store.search_threads(project, scope, match, MAX_CANCEL_THREADS, None) \
        if body.metadata else None
    threads = list(found.rows) if found is not None else []
    if body.threadIds:
        named = set(body.threadIds)
        if found is not None:  # both: the named threads that also match
            threads = [t for t in threads if t.id in named]
        else:
            for thread_id in dict.fromkeys(body.threadIds):
                thread = await svc.store.get_thread(project, thread_id)
                if thread is not None and may_see(request, thread, scope):
                    threads.append(thread)
    cancelled: list[BulkCancelledRun] = []
    for thread in threads:
        if thread.current_run_id is None:
            continue
        run = await svc.store.get_run(thread.current_run_id)
        if run is None or run.status not in ACTIVE_RUN_STATUSES:
            continue
        final = await svc.runs.cancel(run.id, run) or run
        cancelled.append(BulkCancelledRun(
            threadId=thread.id, runId=run.id, status=final.status,
            cancelRequested=True if final.status in ACTIVE_RUN_STATUSES else None))
    return JSONResponse(wire(BulkCancelled(runs=cancelled,
                                           more=bool(found is not None and found.has_more))))


routes = [
    Route("/v1/threads/runs/batch", mark_run_start(batch_runs), methods=["POST"]),
    Route("/v1/threads/runs/cancel", bulk_cancel, methods=["POST"]),
]
