"""The part every wire dialect shares: which items of a frame log are open, and event positions.

A dialect is a deterministic translation of a run's Timbal log: the same frames always give the
same events. That is what lets an SSE `id:` be an event's position in the run and a reconnect
replay exactly what was missed. `Dialect` walks the frames and keeps the only state a translation
needs (the items that are open and what they have streamed so far); a subclass says what events
an item's start, appends and end, a whole message, and a control frame become.

`positioned` (and `Positions`, for a log read in batches) numbers the events of a log (1, 2,
...) and skips those a reader already has. A reader resuming after event `n` re-translates from
the first frame and skips the first `n`: no gaps, no duplicates, whatever process serves it.

After a crash, a reader may have seen events built from frames its process never wrote: the end
a reaper gives such a run (`RUN_LOST`) is stored past every frame the dead process can have
shown (`runs.salvage.end_dead_run`), and the frames it skips count `SKIPPED_FRAME_EVENTS` events
each here, so the end's position is past every event any reader was shown: no position names two
events, and a reader resuming after any of them gets the end. A cursor past even that (a log
from before this rule) still gets the run's `RUN_LOST` error at its own, lower, position.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from . import timbal
from .frames_schema import ControlFrame, Frame, SetValue, StartMeta
from .props_stream import PropsStream

E = TypeVar("E")

# The most events a dialect makes of one frame (a token: one; a message's end: its rest, its end
# and its value at most): the positions a gap in the log's frames stands for.
SKIPPED_FRAME_EVENTS = 4


@dataclass
class Item:
    """A streamed Timbal message between its start and its set frame."""

    i: str
    type: str  # the meta's `type`, read once
    message_id: str
    meta: StartMeta
    sent: list[str] = field(default_factory=list)  # appends so far (joined once, at the end)
    # A component's props as they stream, for a dialect that sends them as patches (Tambo).
    props: PropsStream | None = None

    def text(self) -> str:
        return "".join(self.sent)

    def rest_of(self, value: SetValue) -> str:
        """What the final value's text (its `content`) adds to the streamed text ("" if it does
        not extend it)."""
        final, sent = value.get("content", ""), self.text()
        return final[len(sent):] if isinstance(final, str) and final.startswith(sent) else ""


class Dialect(Generic[E]):
    """Frame log -> events of one wire dialect; one instance per reader of one run."""

    def __init__(self) -> None:
        self.thread_id = ""
        self.run_id = ""
        self.open: dict[str, Item] = {}
        self.finished = False

    def feed(self, frame: Frame) -> list[E]:
        """Translate one frame; returns zero or more events (without timestamps). A frame
        `timbal.kind` finds malformed gives none; of the others, the key a frame has says
        which it is (and narrows its type): `c`, `a`, `v` (set, or delete when null), else a
        start."""
        if self.finished or timbal.kind(frame) == "invalid":
            return []
        if "c" in frame:
            if frame["c"] == timbal.RUN_STARTED:
                self.thread_id, self.run_id = frame["threadId"], frame["runId"]
            elif frame["c"] in timbal.TERMINAL_CONTROLS:
                self.finished = True
            return self.on_control(frame)
        if "a" in frame:
            streaming = self.open.get(frame["i"])
            text = frame["a"]
            if streaming is None or text == "":
                return []
            streaming.sent.append(text)
            return self.on_append(streaming, text)
        if "v" in frame:
            value = frame["v"]
            if value is None:  # a deletion: only a status is ever deleted
                return self.on_delete(frame["i"])
            ending = self.open.pop(frame["i"], None)
            if ending is None:
                return self.on_whole(frame["i"], value)
            return self.on_end(ending, value)
        return self._started(frame["i"], frame.get("m"))

    def _started(self, i: str, meta: StartMeta | None) -> list[E]:
        if i in self.open or meta is None:  # a reset of an open item: no dialect can restate it
            return []
        item = Item(i, str(meta.get("type") or ""), str(meta.get("messageId") or i), meta)
        events = self.on_start(item)
        if events is None:
            return []
        self.open[i] = item
        return events

    def close_open(self) -> list[E]:
        """Close every open item (a truncated or cancelled log), in the order they opened."""
        events: list[E] = []
        for item in self.open.values():
            events.extend(self.on_close(item))
        self.open.clear()
        return events

    # -- what a dialect defines -----------------------------------------------------------------

    def on_start(self, item: Item) -> list[E] | None:
        """Events that open the item, or None for an item this dialect does not stream."""
        return None

    def on_append(self, item: Item, text: str) -> list[E]:
        return []

    def on_end(self, item: Item, value: SetValue) -> list[E]:
        """The item's set frame: its final value."""
        return []

    def on_whole(self, i: str, value: SetValue) -> list[E]:
        """A message that arrives complete (never streamed, or started before a late join)."""
        return []

    def on_close(self, item: Item) -> list[E]:
        """Close an item whose set frame never came."""
        return []

    def on_delete(self, i: str) -> list[E]:
        """A message deleted (a tool's status, when its call ends)."""
        return []

    def on_control(self, frame: ControlFrame) -> list[E]:
        return []

    def on_queued(self) -> list[E]:
        """The dialect's notice that the run waits for its thread (`enqueue`), sent after its
        `RUN_STARTED` (see `queued_prelude`); none if the dialect has no such notice."""
        return []

    def stamp(self, event: E, ts: int) -> E:
        """The event with its timestamp (epoch ms of the frame it came from)."""
        raise NotImplementedError


class LogEntry(Protocol):
    @property
    def seq(self) -> int: ...

    @property
    def ts(self) -> int: ...

    @property
    def frame(self) -> Frame: ...


def queued_prelude(dialect: Dialect[E], thread_id: str, run_id: str, ts: int) -> list[E]:
    """What the stream of a queued run says before the run starts: the start its first frame
    will give (so its stream opens as every run's does: AG-UI verifiers want `RUN_STARTED`
    first), then the dialect's notice that it is queued. `dialect` is a reader of its own; the
    events have no position, and the log's own start is not sent again
    (`positioned(..., started_early=True)`)."""
    events = dialect.feed({"c": timbal.RUN_STARTED, "threadId": thread_id, "runId": run_id})
    return [dialect.stamp(event, ts) for event in events + dialect.on_queued()]


class Positions(Generic[E]):
    """Numbers the dialect's events of a log (1, 2, ...) entry by entry, keeping those after
    the reader's cursor: `positioned`'s work, for a caller that takes the log in batches
    (a run response sends every event of a wake-up as one chunk). `started_early`: the reader
    got the run's start already (`queued_prelude`), so the events of the log's first frame,
    if it is the run's start, are counted but not sent."""

    def __init__(self, dialect: Dialect[E], after: int = 0, started_early: bool = False) -> None:
        self.dialect, self.after, self.started_early = dialect, after, started_early
        self.position = 0
        self.seq = 0  # the log position of the last entry
        self.for_lost: tuple[int, E] | None = None

    def of(self, entry: LogEntry) -> list[tuple[int, E]]:
        """The events of `entry` the reader does not have yet, with their positions."""
        dialect, frame = self.dialect, entry.frame
        if entry.seq > self.seq + 1:  # frames a dead process may have shown, never written
            self.position += (entry.seq - self.seq - 1) * SKIPPED_FRAME_EVENTS
        self.seq = entry.seq
        skip = self.started_early and frame.get("c") == timbal.RUN_STARTED
        self.started_early = False
        shown: list[tuple[int, E]] = []
        for event in dialect.feed(frame):
            self.position += 1
            if self.position > self.after and not skip:
                shown.append((self.position, dialect.stamp(event, entry.ts)))
            elif timbal.is_lost(frame):
                self.for_lost = self.position, dialect.stamp(event, entry.ts)
        return shown

    def lost(self) -> list[tuple[int, E]]:
        """At the end of the log: the run's `RUN_LOST` error if the reader's cursor was past
        it (see the module's docstring), else nothing."""
        return [self.for_lost] if self.for_lost is not None else []


async def positioned(entries: AsyncIterator[LogEntry], dialect: Dialect[E], after: int = 0,
                     started_early: bool = False) -> AsyncIterator[tuple[int, E]]:
    """The dialect's events of a log with their positions, after the reader's cursor
    (`Positions`, entry by entry)."""
    positions = Positions(dialect, after, started_early)
    async for entry in entries:
        for shown in positions.of(entry):
            yield shown
    for shown in positions.lost():
        yield shown
