"""Where a run starts (`OnThread`, `NewThread`), and the rules every new thread is made under:
whatever creates one (a run's start, `POST /v1/threads`, a fork, the Timbal create) makes it
here, within the caps on what it may store.

Everything the gateway keeps for a client has a ceiling set by a `GATEWAY_MAX_*` setting, so a
client with the public API key cannot fill the database (docs/security.md, "Bounds and caps"):
a thread's metadata, its seeded messages, and the number of threads of a user scope and of a
project. Each refusal is a problem+json with its own code, before anything is written.

A client may choose a new thread's id: Tambo's `createThread` (the thread's own id, in the
path) and the Timbal create (a UUID) choose the id itself; an AG-UI `threadId` is a name within
the project (`client_id`), beside an id of the gateway's. Both are checked here, once: one that
starts like an id the gateway mints (`RESERVED_ID_PREFIXES`: `thr_`, `run_`, a Chorus channel's
`chorus_`, ...) is refused, so a client can never take, or probe for, an id the gateway will
make.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ...config import Settings
from ...protocol.clock import new_id, now_ms
from ...protocol.problems import ApiError, Problem, echo
from ...protocol.run_spec import SeedMessage
from ...store.repository import Store
from ...store.rows import made
from ...store.tables import MessageRow, ThreadRow

# A thread id or name a client may choose: it travels in URLs, headers and Redis keys.
CLIENT_THREAD_ID = re.compile(r"^[\x21-\x2e\x30-\x7e]{1,64}$")
# The prefixes of every id the gateway mints (`new_id(prefix)`, a Chorus channel's thread, a
# run of a Chorus message, a key, a connection): a client's chosen id never starts with one.
RESERVED_ID_PREFIXES = ("chorus_", "thr_", "run_", "comp_", "call_", "chc_", "chd_", "chs_",
                        "sug_", "sub_", "int_", "key_", "gwk_", "at_", "q_", "env-")


@dataclass(frozen=True)
class OnThread:
    """A run on a thread that exists, found by the entry's own rules (the caller may see it)."""

    thread: ThreadRow


@dataclass(frozen=True)
class NewThread:
    """A thread the start creates, for user scope `user_key` (None: the project's).

    `thread_id` is an id the client chose for it (Tambo's `createThread`, the Timbal create);
    `client_id` a name the client gave it within the project (AG-UI's `threadId`), kept beside
    an id of the gateway's. A run's new thread is seeded with the spec's `seed_messages`."""

    user_key: str | None
    metadata: dict[str, Any] | None = None
    thread_id: str | None = None
    client_id: str | None = None
    # Other metadata the request carried, checked against the cap but not kept (Tambo sends
    # a thread's metadata in two places; the first that is set is kept).
    unkept_metadata: tuple[dict[str, Any] | None, ...] = field(default=())
    # `thread_id` is one the gateway derived (a Chorus channel's), not a client's choice.
    minted: bool = False

    @property
    def chosen(self) -> str | None:
        """The id or name the client chose, if any."""
        return self.thread_id or self.client_id


Target = OnThread | NewThread


@dataclass(frozen=True)
class ThreadRows:
    """A thread to create, with its initial messages, not written yet."""

    row: ThreadRow
    messages: list[MessageRow]


def check_chosen_id(target: NewThread) -> None:
    """400 for a thread id (or name) a client chose that cannot travel where ids go, and
    400 `RESERVED_THREAD_ID` for one that starts like an id the gateway mints."""
    chosen = target.chosen
    if chosen is None or target.minted:
        return
    if not CLIENT_THREAD_ID.match(chosen):
        raise ApiError(Problem.VALIDATION_ERROR, "A thread id to create must be 1 to 64 "
                       "printable ASCII characters without '/'", threadId=echo(chosen))
    if chosen.lower().startswith(RESERVED_ID_PREFIXES):
        raise ApiError(Problem.RESERVED_THREAD_ID, "A thread id a client chooses may not start "
                       "with a prefix of the gateway's own ids ("
                       + ", ".join(RESERVED_ID_PREFIXES) + ")", threadId=echo(chosen))


def thread_rows(project: str, target: NewThread, seeds: Sequence[SeedMessage],
                agent: str | None, **extra: Any) -> ThreadRows:
    """The rows of `target` in `project`, running `agent`, seeded with `seeds`; `extra` are
    other columns of the thread (a Timbal create's fingerprint)."""
    now = now_ms()
    thread = made(ThreadRow, id=target.thread_id or new_id("thr_"), client_id=target.client_id,
                  project_id=project, user_key=target.user_key, meta=target.metadata,
                  created_ms=now, updated_ms=now, agent=agent, **extra)
    return ThreadRows(thread, [initial_message_row(thread.id, seed, now, target.user_key, agent)
                               for seed in seeds])


def initial_message_row(thread_id: str, message: SeedMessage, now: int,
                        user_key: str | None = None, agent: str | None = None) -> MessageRow:
    """A seeded message as stored; `sender` (Timbal's) is the user scope on the user's, the
    thread's agent on the assistant's, when known."""
    part: dict[str, Any]
    if message.role == "assistant":
        part = {"id": new_id(), "type": "agent", "content": message.text}
        sender = agent
    elif message.role == "system":
        part = {"id": new_id(), "type": "x-system", "content": message.text}
        sender = None
    else:
        part = {"id": new_id(), "type": "user", "content": message.text}
        if message.blocks:
            part["blocks"] = message.blocks  # its images and files, as a run's input keeps them
        sender = user_key
    if sender:
        part["sender"] = sender
    return made(MessageRow, id=new_id(), thread_id=thread_id, role=message.role, parts=[part],
                created_ms=now)


def json_size(value: Any) -> int:
    """Bytes of a value as compact JSON (UTF-8), as it is stored."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


def check_metadata(settings: Settings, *values: dict[str, Any] | None) -> None:
    """413 `METADATA_TOO_LARGE` for metadata (a thread's, a run's or a message's) over
    `max_metadata_bytes`."""
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
    filling the database, not an exact quota. Each count is kept for `RECOUNT_SECONDS` per
    process with the creations admitted since added, and taken afresh each time once past half
    the cap (so processes that do not see each other's creations cannot pass it by much):
    counting on every new thread would add a query to every new thread's run start."""
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
# key -> the count under way: the requests that need it meanwhile share it, so a burst of new
# threads sends one count, not one each, to the connection every start also waits for.
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
