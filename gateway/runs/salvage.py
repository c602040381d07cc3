"""What a lost run had said: its unfinished messages, rebuilt from the persisted log.

A run whose process died never wrote the final values of the messages it was streaming (values
are saved when they complete), yet its log on disk holds every flushed fragment. When a reaper
ends such a run, the text and reasoning it had streamed are saved to the thread as they stood,
on a message marked as failed, so the conversation shows what the user saw instead of losing it
on reload. Unfinished tool calls are left out: their arguments are incomplete JSON.

A run ended by a database outage is the same case seen from the other side: the values it
completed while the database was away are in its log (flushed once the database was back) but
their writes failed; `save_failed_message` writes them the same way.
"""

from __future__ import annotations

from typing import Any

from ..protocol import timbal
from ..protocol.clock import now_ms
from ..protocol.frames_schema import StartMeta
from ..protocol.run_errors import ErrorFields
from ..store.repository import Store
from ..store.tables import MessageRow, RunRow
from .log.live import persisted

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
