"""The Timbal/1.0 view: the run log itself, and a thread's history as set frames.

The log is already Timbal: message frames as the engine wrote them (values keep the gateway's
extra fields, which Timbal readers ignore) and control frames for the run's lifecycle (`c` names
Timbal does not define, which readers must ignore; `error` is Timbal's own). So a run's view is
its frames unchanged, one JSON object per line.

A thread's history follows the sync extension: one set frame per completed message, optionally
only those with `t >= since`. Stored parts carry the `t` of the frame that completed them, so a
message reads the same in the history as it did live.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any, Final, Literal, NotRequired, Protocol, TypedDict, cast

from ...protocol import timbal
from ...protocol.clock import iso_ms
from ...protocol.frames_schema import SetFrame
from ...protocol.translation import Dialect

SYNCED: Final = "synced"  # our control frame closing a sync answer (the extension names no marker)


class SyncedFrame(TypedDict):
    """Closes a sync answer on the socket: how many set frames it held, since when."""

    c: Literal["synced"]
    count: int
    since: NotRequired[str]


class RequestErrorFrame(TypedDict):
    """Timbal's `error` frame answering a malformed request on the socket (no run failed)."""

    c: Literal["error"]
    code: str
    message: str


Line = timbal.Frame | SyncedFrame | RequestErrorFrame
"""What a Timbal view sends: the log's frames, and the socket's own answers."""


class TimbalDialect(Dialect[timbal.Frame]):
    """Frames as they are: the identity view, with the positions every view shares."""

    def feed(self, frame: timbal.Frame) -> list[timbal.Frame]:
        if self.finished:
            return []
        if timbal.is_terminal(frame):
            self.finished = True
        return [frame]

    def stamp(self, event: timbal.Frame, ts: int) -> timbal.Frame:
        return event


def encode(frame: Line) -> str:
    """A frame as one compact JSON line (without its newline)."""
    return json.dumps(frame, separators=(",", ":"), ensure_ascii=False)


RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")


def since_ms(value: str | None) -> int | None:
    """`since` (an RFC 3339 date-time, as Timbal's `t`) as epoch ms; None when absent;
    ValueError for anything else, the empty string included."""
    if value is None:
        return None
    if not isinstance(value, str) or not RFC3339.fullmatch(value):
        raise ValueError("since must be an RFC 3339 time, e.g. 2025-01-15T14:30:00.000Z")
    parsed = datetime.fromisoformat(value[:-1] + "+00:00" if value[-1] in "Zz" else value)
    return int(parsed.timestamp() * 1000)


def frame_ms(frame: SetFrame) -> int:
    return since_ms(frame["t"]) or 0  # the gateway writes every `t` in this format


class StoredMessage(Protocol):
    run_id: str | None
    created_ms: int
    parts: list[dict[str, Any]]


def history(rows: Iterable[StoredMessage], since: int | None = None,
            skip_run: str | None = None) -> Iterator[SetFrame]:
    """Set frames of the stored messages' parts (completed at or after `since`), in order;
    the parts of `skip_run` are left out (its log is read instead)."""
    for row in rows:
        if skip_run is not None and row.run_id == skip_run:
            continue
        for part in row.parts:
            if "id" not in part:
                continue
            frame = timbal.part_frame(part, row.created_ms)
            if since is None or frame_ms(frame) >= since:
                yield frame


def live_since(frame: timbal.Frame, ts: int, since: int | None) -> bool:
    """Whether a frame of the running run's log belongs in an answer to `sync since`: a set
    frame if it completed at or after `since`, anything else if it was written then or later
    (an append whose start came earlier is an orphan, which readers ignore)."""
    if since is None:
        return True
    if timbal.kind(frame) == "set" and "t" in frame:
        return frame_ms(frame) >= since
    return ts >= since


def without_owner(frame: Line, owner: str | None) -> Line:
    """`frame` without the `sender` that names `owner` (a thread's user scope: the user's
    messages carry it), for a caller that holds only the thread's id and so is shown nothing
    that leads to whose thread it is. None: nothing to hide."""
    value = frame.get("v")
    if owner is None or not isinstance(value, dict) or value.get("sender") != owner:
        return frame
    hidden = {k: v for k, v in value.items() if k != "sender"}
    return cast(Line, {**frame, "v": hidden})


def synced(count: int, since: int | None) -> SyncedFrame:
    frame: SyncedFrame = {"c": SYNCED, "count": count}
    if since is not None:
        frame["since"] = iso_ms(since)
    return frame
