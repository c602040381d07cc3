"""Run and wait (`POST /v1/threads/runs/wait`, `POST /v1/threads/{id}/runs/wait`): a Tambo run
request answered as one JSON body when the run ends, for callers that do not read SSE (servers,
scripts, the Python client's `run_and_wait`).

The run starts through the same door as a streamed one (`runs/admission/submit.py`), inside
the start gate; the wait itself is outside the gate, as a subscriber of the run's log (so the
run is not tied to this request: by default it continues if the caller leaves, unless the
request asks for another `onDisconnect`). A run still going after `GATEWAY_RUN_WAIT_SECONDS`
is answered 202 with its ids and `Location`: `GET /v1/threads/{id}/runs/{runId}/wait` waits
again (or the caller follows its stream or status), never starting a second run.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import replace

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ...api.context import admission, caller, json_body, project_of, services, thread_for
from ...api.door import mark_run_start
from ...api.render import message_model, usage_model
from ...api.runs import run_in_thread
from ...protocol.problems import ApiError, Problem
from ...protocol.tambo import RunRequest, RunWaitResult, wire
from ...runs.admission.threads import NewThread, OnThread, Target
from ...store.tables import RunRow
from .input import keyed, run_spec
from .routes import _new_thread, idempotency_key


async def wait_new_thread(request: Request) -> Response:
    """`POST /v1/threads/runs/wait`: a new thread and its first run, answered when it ends."""
    body: RunRequest = await json_body(request, RunRequest)
    return await _run_and_wait(request, body, _new_thread(request, body))


async def wait_thread(request: Request) -> Response:
    """`POST /v1/threads/{id}/runs/wait`: a run on the thread, answered when it ends (with
    `createThread`, on a thread created under the path's id if there is none)."""
    body: RunRequest = await json_body(request, RunRequest)
    thread_id = request.path_params["thread_id"]
    target: Target
    if body.createThread and await services(request).store.get_thread(
            project_of(request), thread_id) is None:
        target = _new_thread(request, body, thread_id)
    else:
        target = OnThread(await thread_for(request, body.userKey, body.contextKey))
    return await _run_and_wait(request, body, target)


async def _run_and_wait(request: Request, body: RunRequest, target: Target) -> Response:
    svc = services(request)
    asked = request.query_params.get("agent") if isinstance(target, NewThread) else None
    spec = keyed(run_spec(body, asked), body, idempotency_key(request))
    if spec.on_disconnect is None:
        # A caller told to come back later (202) must find its run still going.
        spec = replace(spec, on_disconnect="continue")
    async with svc.runs.start_gate.turn():
        started = await admission(request).submit(caller(request), target, spec)
    return await _answer_at_end(request, started.run)


async def join_wait(request: Request) -> Response:
    """`GET /v1/threads/{id}/runs/{runId}/wait`: wait again for a run a 202 named (or any run
    of the thread), with the same answer."""
    return await _answer_at_end(request, await run_in_thread(request))


async def _answer_at_end(request: Request, run: RunRow) -> Response:
    """The run's result once it has ended, or 202 with its ids when the wait runs out."""
    svc = services(request)
    run_id, thread_id = run.id, run.thread_id
    try:
        async with asyncio.timeout(svc.settings.run_wait_seconds):
            async with contextlib.aclosing(svc.runs.batches(run_id)) as batches:
                async for _ in batches:
                    pass
    except TimeoutError:
        now = await svc.store.get_run(run_id)
        return JSONResponse(wire(RunWaitResult(status=(now or run).status, threadId=thread_id,
                                               runId=run_id)), status_code=202,
                            headers={"Location": f"/v1/threads/{thread_id}/runs/{run_id}/wait"})
    ended, rows, components, usage = await asyncio.gather(
        svc.store.get_run(run_id), svc.store.run_messages(thread_id, run_id),
        svc.store.components_of(thread_id), svc.store.run_usage(run_id))
    if ended is None:  # the thread was deleted meanwhile, and its runs with it
        raise ApiError(Problem.RUN_NOT_FOUND, f"Run {run_id} was deleted with its thread",
                       threadId=thread_id, runId=run_id)
    error = ended.error if ended.status in ("failed", "cancelled") and ended.error else None
    return JSONResponse(wire(RunWaitResult(
        status=ended.status, threadId=thread_id, runId=run_id,
        messages=[message_model(row, components) for row in rows], usage=usage_model(usage),
        **({"error": error} if error else {}))))


routes = [
    Route("/v1/threads/runs/wait", mark_run_start(wait_new_thread), methods=["POST"]),
    Route("/v1/threads/{thread_id}/runs/wait", mark_run_start(wait_thread), methods=["POST"]),
    Route("/v1/threads/{thread_id}/runs/{run_id}/wait", join_wait, methods=["GET"]),
]
