"""Caps on what a request may store: metadata, seeded messages and the number of threads.

Everything the gateway keeps for a client has a ceiling set by a `GATEWAY_MAX_*` setting, so a
client with the public API key cannot fill the database (docs/security.md, "Bounds and caps").
Each refusal is a problem+json with its own code, before anything is written.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..config import Settings
from ..protocol.problems import ApiError
from ..protocol.tambo import InitialMessage
from ..store.repository import Store


def json_size(value: Any) -> int:
    """Bytes of a value as compact JSON (UTF-8), as it is stored."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


def check_metadata(settings: Settings, *values: dict[str, Any] | None) -> None:
    """413 `METADATA_TOO_LARGE` for a thread's or run's metadata over `max_metadata_bytes`."""
    limit = settings.max_metadata_bytes
    for value in values:
        if value is not None and (size := json_size(value)) > limit:
            raise ApiError(413, "METADATA_TOO_LARGE",
                           f"The metadata takes {size} bytes; the limit is {limit}", limit=limit)


def check_initial_messages(settings: Settings, messages: Sequence[InitialMessage] | None) -> None:
    """At most `max_initial_messages`, carrying at most `max_message_chars` of text together."""
    messages = messages or ()
    if len(messages) > settings.max_initial_messages:
        raise ApiError(400, "TOO_MANY_INITIAL_MESSAGES",
                       f"The thread is seeded with {len(messages)} messages; the limit is "
                       f"{settings.max_initial_messages}", limit=settings.max_initial_messages)
    chars = sum(len(m.text()) for m in messages)
    if chars > settings.max_message_chars:
        raise ApiError(413, "MESSAGE_TOO_LARGE",
                       f"The initial messages carry {chars} characters of text; the limit is "
                       f"{settings.max_message_chars}", limit=settings.max_message_chars)


async def check_thread_room(settings: Settings, store: Store, project: str,
                            user_key: str | None) -> None:
    """403 `THREAD_LIMIT_REACHED` when the user scope (or the project) holds its most threads.

    Counted before the insert, so racing creations may overshoot by a few: a ceiling against
    filling the database, not an exact quota."""
    for scope, limit, who in ((user_key, settings.max_threads_per_user, "user"),
                              (None, settings.max_threads_per_project, "project")):
        if not limit or (who == "user" and user_key is None):
            continue
        if await store.count_threads(project, scope, at_most=limit) >= limit:
            raise ApiError(403, "THREAD_LIMIT_REACHED",
                           f"The {who} holds {limit} threads, the most it may; delete some "
                           "first", limit=limit, limitScope=who)
