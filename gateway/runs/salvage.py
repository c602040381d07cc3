"""What a lost run had said: its unfinished messages, rebuilt from the persisted log.

A run whose process died never wrote the final values of the messages it was streaming (values
are saved when they complete), yet its log on disk holds every flushed fragment. When a reaper
ends such a run, the text and reasoning it had streamed are saved to the thread as they stood,
on a message marked as failed, so the conversation shows what the user saw instead of losing it
on reload. Unfinished tool calls are left out: their arguments are incomplete JSON.

What it had shown goes beyond its log on disk, which is written in batches: followers in other
processes read its live tail from the backend's feed (Redis keeps each run's stream), so the
reaper saves that tail into the log first (`end_dead_run`), and the end goes past every
position its own readers can have been shown, never onto one of them (issue 41).

A run ended by a database outage is the same case seen from the other side: the values it
completed while the database was away are in its log (flushed once the database was back) but
their writes failed; `save_failed_message` writes them the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from ..protocol import timbal
from ..protocol.clock import now_ms
from ..protocol.frames_schema import StartMeta
from ..protocol.run_errors import ErrorFields
from ..store.repository import FrameEntry, Store
from ..store.tables import MessageRow, RunRow
from .backend import RunFeed
from .log.live import persisted
from .log.recorder import SHOWN_AHEAD

SALVAGED_TYPES = ("agent", "thinking")


def unfinished_values(frames: list[timbal.Frame]) -> dict[str, dict[str, Any]]:
    """The text and thinking values started in `frames` but never set, by Timbal id."""
    started: dict[str, StartMeta] = {}
    texts: dict[str, list[str]] = {}
    for frame in frames:
        if timbal.kind(frame) == "invalid":
            continue
        if "m" in frame:
            if (frame["m"] or {}).get("type") in SALVAGED_TYPES:
                started[frame["i"]] = frame["m"].copy()
                texts[frame["i"]] = []
        elif "a" in frame:
            if frame["i"] in texts:
                texts[frame["i"]].append(frame["a"])
        elif "v" in frame:  # set, or deleted
            started.pop(frame["i"], None)
    return {i: {"id": i, **meta, "content": "".join(texts[i]), "failed": True}
            for i, meta in started.items() if "".join(texts[i])}


async def end_dead_run(store: Store, feed: RunFeed, run: RunRow, now: int, status: str,
                       error: ErrorFields, frame: Mapping[str, Any]) -> bool:
    """End a run whose process died (its lease expired) with `frame`, keeping everything it
    may have shown: first the live tail that followers elsewhere read (`RunFeed.salvage`) goes
    into its log, then `frame` past anything its own readers can have seen (`SHOWN_AHEAD`), so
    that no position names two events and a reader that resumes after any position it was
    shown gets the end at once; then the partial answer, from that log, into the thread. False
    if another process ended it first (or its owner renewed in time)."""
    last = await store.last_frame(run.id)
    after = last.seq if last is not None else 0
    tail = await feed.salvage(run.id, after, SHOWN_AHEAD)
    salvaged: list[FrameEntry] = []
    ahead = SHOWN_AHEAD
    for entry in tail:
        if entry.seq != after + len(salvaged) + 1:
            break  # the stream lost its head or a part: what follows cannot be placed
        if timbal.is_terminal(entry.frame):
            # Its owner showed its end without writing it (the database was away, and stayed
            # away past its lease): that end is the run's, where it was shown.
            if entry.frame.get("c") == timbal.ERROR:
                frame, status = entry.frame, "failed"
                error = cast(ErrorFields, {k: v for k, v in frame.items() if k != "c"})
                ahead = 0
            break
        salvaged.append((entry.seq, entry.ts, entry.frame))
    if not await store.end_orphaned_run(run, now, status, dict(error), frame, salvaged, ahead):
        return False
    await save_partial_answer(store, run, error)
    return True


async def save_partial_answer(store: Store, run: RunRow, error: ErrorFields) -> int:
    """Save a lost run's unfinished messages (marked failed); returns how many parts."""
    frames = [persisted(row).frame for row in await store.read_frames(run.id)]
    values = unfinished_values(frames)
    by_message: dict[str, list[dict[str, Any]]] = {}
    for value in values.values():
        if value.get("messageId"):
            by_message.setdefault(value["messageId"], []).append(value)
    for message_id, parts in by_message.items():
        await save_failed_message(store, run, message_id, parts, error)
    return sum(len(parts) for parts in by_message.values())


async def save_failed_message(store: Store, run: RunRow, message_id: str,
                              parts: list[dict[str, Any]], error: ErrorFields) -> None:
    """Write `parts` into the run's message `message_id` (created if missing), marked as the
    answer of a run that failed with `error`."""
    failure = {"runFailed": {"code": error.get("code"), "message": error.get("message")}}
    existing = await store.get_message(run.thread_id, message_id)
    if existing is None:
        await store.add(MessageRow(id=message_id, thread_id=run.thread_id, run_id=run.id,
                                   role="assistant", parts=parts, created_ms=now_ms(),
                                   meta=failure, is_cancelled=True))
    else:
        kept = [p for p in existing.parts if p["id"] not in {v["id"] for v in parts}]
        await store.save_message_parts(message_id, kept + parts, cancelled=True)
        await store.save_message_meta(message_id, {**(existing.meta or {}), **failure})
