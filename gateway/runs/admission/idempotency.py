"""`Idempotency-Key` on `POST /v1/threads/runs`: a retry must not create a second thread.

On an existing thread the key is unique per thread (`uq_runs_thread_idempotency`), so
`RunManager.start` can attach a retry to the run the key started. A new-thread run has no thread
yet to scope the key by, so the key is first *claimed* for the project (one insert; its primary
key decides which of two racing requests goes on); the claimant creates the thread, records it
on the claim, and starts the run with the key. Any other request with the key waits for the
claim to name its thread and attaches to the run on it. A claim whose request failed before its
run started is released, so a retry then behaves like a first attempt.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from ...protocol.clock import now_ms
from ...protocol.problems import ApiError, Problem
from ...protocol.run_spec import RunSpec
from ...store.repository import Store
from ...store.tables import IdempotencyKeyRow, ThreadRow
from ..timings import Timings
from .admit import StartedRun, check_same_request, expired, reused

StartOn = Callable[[str, ThreadRow, RunSpec], Awaitable[StartedRun]]


async def start_new_thread_once(store: Store, start_on: StartOn, ttl_seconds: float,
                                timings: Timings, project_id: str,
                                create_thread: Callable[[], Awaitable[ThreadRow]],
                                spec: RunSpec, user_key: str | None) -> StartedRun:
    """Start `spec` (which carries its idempotency key) on a thread `create_thread` makes, once
    per key: a retry attaches to the run the first request started."""
    assert spec.idempotency is not None
    key = spec.idempotency.key
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timings.idempotency_wait_seconds
    while True:
        claim = await store.claim_idempotency_key(project_id, key, now_ms())
        if claim is not None and expired(claim.created_ms, ttl_seconds):
            await store.release_idempotency_key(project_id, key)
            continue
        if claim is None:  # ours: create the thread and start the run
            try:
                thread = await create_thread()
                await store.set_idempotency_key(project_id, key, thread_id=thread.id)
                started = await start_on(project_id, thread, spec)
            except BaseException:
                await store.release_idempotency_key(project_id, key)
                raise
            await store.set_idempotency_key(project_id, key, run_id=started.run.id)
            return started
        attached = await _attach(store, project_id, claim, spec, user_key, key)
        if attached is not None:
            return attached
        if loop.time() > deadline:
            raise ApiError(Problem.IDEMPOTENCY_KEY_IN_USE,
                           "A request with this Idempotency-Key is still being processed; "
                           "retry later", idempotencyKey=key)
        await asyncio.sleep(timings.idempotency_poll_seconds)


async def _attach(store: Store, project_id: str, claim: IdempotencyKeyRow,
                  spec: RunSpec, user_key: str | None, key: str) -> StartedRun | None:
    """The run an earlier request with this key started, once it exists."""
    if claim.thread_id is None:
        return None
    thread = await store.get_thread(project_id, claim.thread_id)
    if thread is None:  # the thread was deleted since: the key is free again
        await store.release_idempotency_key(project_id, key)
        return None
    if thread.user_key != user_key:
        raise reused(key)
    run = await store.find_run_by_idempotency_key(thread.id, key)
    if run is None:
        return None
    check_same_request(run, spec, user_key, key)
    return StartedRun(run, attached=True)
