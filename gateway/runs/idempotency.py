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
import hashlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..protocol.clock import now_ms
from ..protocol.problems import ApiError
from ..protocol.tambo import RunRequest
from ..store.tables import IdempotencyKeyRow, RunRow, ThreadRow

if TYPE_CHECKING:
    from .manager import RunManager

WAIT_SECONDS = 10.0
POLL_SECONDS = 0.05


def fingerprint(request: RunRequest, user_key: str | None) -> str:
    """What a retry must repeat exactly to be the same request: its body and its user."""
    body = request.model_dump(mode="json", exclude_none=True)
    canonical = json.dumps([body, user_key], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def reused(key: str) -> ApiError:
    return ApiError(422, "IDEMPOTENCY_KEY_REUSED",
                    "This Idempotency-Key was already used with a different request; use a new "
                    "key for a new request", idempotencyKey=key)


def check_same_request(run: RunRow, request_fingerprint: str, key: str) -> None:
    recorded = (run.request or {}).get("fingerprint")
    if recorded is not None and recorded != request_fingerprint:
        raise reused(key)


def expired(created_ms: int, ttl_seconds: float) -> bool:
    return now_ms() - created_ms > ttl_seconds * 1000


@dataclass(frozen=True)
class StartedRun:
    run: RunRow
    attached: bool  # an earlier request with the same Idempotency-Key started it


async def start_new_thread_once(manager: RunManager, project_id: str,
                                create_thread: Callable[[], Awaitable[ThreadRow]],
                                request: RunRequest, user_key: str | None,
                                key: str) -> StartedRun:
    store = manager.store
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_SECONDS
    while True:
        claim = await store.claim_idempotency_key(project_id, key, now_ms())
        if claim is not None and expired(claim.created_ms, manager.idempotency_ttl_seconds):
            await store.release_idempotency_key(project_id, key)
            continue
        if claim is None:  # ours: create the thread and start the run
            try:
                thread = await create_thread()
                await store.set_idempotency_key(project_id, key, thread_id=thread.id)
                started = await manager.start_on(project_id, thread, request, key)
            except BaseException:
                await store.release_idempotency_key(project_id, key)
                raise
            await store.set_idempotency_key(project_id, key, run_id=started.run.id)
            return started
        attached = await _attach(manager, project_id, claim, request, user_key, key)
        if attached is not None:
            return attached
        if loop.time() > deadline:
            raise ApiError(409, "IDEMPOTENCY_KEY_IN_USE",
                           "A request with this Idempotency-Key is still being processed; "
                           "retry later", idempotencyKey=key)
        await asyncio.sleep(POLL_SECONDS)


async def _attach(manager: RunManager, project_id: str, claim: IdempotencyKeyRow,
                  request: RunRequest, user_key: str | None, key: str) -> StartedRun | None:
    """The run an earlier request with this key started, once it exists."""
    if claim.thread_id is None:
        return None
    thread = await manager.store.get_thread(project_id, claim.thread_id)
    if thread is None:  # the thread was deleted since: the key is free again
        await manager.store.release_idempotency_key(project_id, key)
        return None
    if thread.user_key != user_key:
        raise reused(key)
    run = await manager.store.find_run_by_idempotency_key(thread.id, key)
    if run is None:
        return None
    check_same_request(run, fingerprint(request, user_key), key)
    return StartedRun(run, attached=True)
