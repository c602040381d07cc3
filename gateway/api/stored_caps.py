"""Caps on what a request may store: metadata, seeded messages and the number of threads.

Everything the gateway keeps for a client has a ceiling set by a `GATEWAY_MAX_*` setting, so a
client with the public API key cannot fill the database (docs/security.md, "Bounds and caps").
Each refusal is a problem+json with its own code, before anything is written.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from typing import Any

from ..config import Settings
from ..protocol.problems import ApiError, Problem
from ..store.repository import Store


def json_size(value: Any) -> int:
    """Bytes of a value as compact JSON (UTF-8), as it is stored."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


def check_metadata(settings: Settings, *values: dict[str, Any] | None) -> None:
    """413 `METADATA_TOO_LARGE` for a thread's or run's metadata over `max_metadata_bytes`."""
    limit = settings.max_metadata_bytes
    for value in values:
        if value is not None and (size := json_size(value)) > limit:
            raise ApiError(Problem.METADATA_TOO_LARGE,
                           f"The metadata takes {size} bytes; the limit is {limit}", limit=limit)


def check_initial_messages(settings: Settings, messages: Sequence[str]) -> None:
    """At most `max_initial_messages` (their texts), with `max_message_chars` of text together."""
    if len(messages) > settings.max_initial_messages:
        raise ApiError(Problem.TOO_MANY_INITIAL_MESSAGES,
                       f"The thread is seeded with {len(messages)} messages; the limit is "
                       f"{settings.max_initial_messages}", limit=settings.max_initial_messages)
    chars = sum(len(text) for text in messages)
    if chars > settings.max_message_chars:
        raise ApiError(Problem.MESSAGE_TOO_LARGE,
                       f"The initial messages carry {chars} characters of text; the limit is "
                       f"{settings.max_message_chars}", limit=settings.max_message_chars)


async def check_thread_room(settings: Settings, store: Store, project: str,
                            user_key: str | None) -> None:
    """403 `THREAD_LIMIT_REACHED` when the user scope (or the project) holds its most threads.

    Counted before the insert, so racing creations may overshoot by a few: a ceiling against
    filling the database, not an exact quota. Each is counted every `RECOUNT_SECONDS` per
    process with the creations admitted since added, and each time once past half the cap (so
    processes that do not see each other's creations cannot pass it by much): a count was a
    query of its own on every new thread's run start, about a tenth of the start's CPU."""
    user_limit, project_limit = settings.max_threads_per_user, settings.max_threads_per_project
    if user_limit and user_key is not None and await _threads(
            store, project, user_key, user_limit) >= user_limit:
        raise _limit_reached("user", user_limit)
    if project_limit and await _threads(store, project, None, project_limit) >= project_limit:
        raise _limit_reached("project", project_limit)


RECOUNT_SECONDS = 10.0
COUNTS_KEPT = 10_000  # user scopes whose count a process remembers (the least recent go)
Key = tuple[int, str, str | None]  # (store, project, user scope or None)
# key -> (when counted, threads counted then plus those admitted since)
_counts: dict[Key, tuple[float, int]] = {}
# key -> the count under way: the requests that need it meanwhile share it. A burst of new
# threads (100 runs started at once) otherwise sent a count each, before any had come back:
# each a scan of the scope's threads on the process's one SQLite connection, where every start
# and log commit queues (bench/README.md, "Where a start waits").
_counting: dict[Key, asyncio.Future[tuple[float, int]]] = {}


async def _threads(store: Store, project: str, user_key: str | None, limit: int) -> int:
    key, now = (id(store), project, user_key), time.monotonic()
    counted = _counts.pop(key, None)
    if counted is None or now - counted[0] > RECOUNT_SECONDS or counted[1] * 2 >= limit:
        fresh = await _count(store, project, user_key, limit, key)
        # The first sharer to wake keeps the count; the others add to what it kept.
        counted = _counts.pop(key, None)
        if counted is None or counted[0] < fresh[0]:
            counted = fresh
    _counts[key] = (counted[0], counted[1] + 1)  # this creation, if it is admitted
    if len(_counts) > COUNTS_KEPT:
        del _counts[next(iter(_counts))]
    return counted[1]


async def _count(store: Store, project: str, user_key: str | None, limit: int,
                 key: Key) -> tuple[float, int]:
    """(when, threads): the count under way for `key`, or a new one; a sharer that leaves
    (its client gone) does not cancel it for the others."""
    pending = _counting.get(key)
    if pending is None:
        async def count() -> tuple[float, int]:
            try:
                return time.monotonic(), await store.count_threads(project, user_key,
                                                                   at_most=limit)
            finally:
                del _counting[key]

        pending = _counting[key] = asyncio.ensure_future(count())
    return await asyncio.shield(pending)


def _limit_reached(who: str, limit: int) -> ApiError:
    return ApiError(Problem.THREAD_LIMIT_REACHED,
                    f"The {who} holds {limit} threads, the most it may; delete some first",
                    limit=limit, limitScope=who)
