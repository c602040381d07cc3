"""The frame sink a run writes to: the live log, batched log persistence, and message values.

Completed message values (set frames) are saved as they complete, one write per message, with
one exception: a message's first value is written with the run's next write (before its next
frame is logged, or in the transaction of its end), so that a run's answer, usually the last
thing it says, costs no transaction of its own. The frames themselves are written by the process's log writer, on its timer (every
`log_writer.FLUSH_SECONDS`, with every other run's) or once `FLUSH_FRAMES` are pending. The
terminal frames are written in the transaction that commits the run's terminal state
(`finish`), so a run that reads as ended always has its whole log on disk.

Database writes here finish even if the run is cancelled meanwhile (`durably`): a cancel lands
between writes, never in the middle of one. A recorder whose run was taken over by a reaper
(its lease expired) is `fenced`: it stops writing anything.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from ...protocol import timbal
from ...protocol.clock import now_ms
from ...protocol.frames_schema import ComponentStartMeta, ComponentValue, SetValue
from ...store.queries.frames import LogBatch
from ...store.repository import FrameEntry, Store
from ...store.rows import made
from ...store.tables import ComponentRow, MessageRow
from .live import Entry, LiveLog
from .writer import FLUSH_SECONDS, LogWriter

__all__ = ["FLUSH_FRAMES", "FLUSH_SECONDS", "SHOWN_AHEAD", "RunRecorder", "durably"]

FLUSH_FRAMES = 256
# The most positions a run's live log (what its readers are shown) runs ahead of its log on
# disk: `emit` writes once `FLUSH_FRAMES` are pending and waits for it, so only what the run's
# concurrent emitters append meanwhile can go further. A run whose process died is ended this
# far past its last written frame (`salvage.end_dead_run`), never on a position a reader of it
# may have been shown.
SHOWN_AHEAD = 2 * FLUSH_FRAMES

log = logging.getLogger(__name__)

T = TypeVar("T")


async def durably(write: Awaitable[T]) -> T:
    """Await a database write to its end even if the caller is cancelled meanwhile, then let the
    cancellation through: a cancel must never cut a transaction in half."""
    task = asyncio.ensure_future(write)
    cancelled = False
    while True:
        try:
            result = await asyncio.shield(task)
            break
        except asyncio.CancelledError:
            if task.done() and task.cancelled():
                raise
            if task.done():
                result = task.result()
                break
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError
    return result


class RunRecorder:
    def __init__(self, store: Store, live: LiveLog, thread_id: str, run_id: str,
                 state_schemas: dict[str, Any] | None = None, owner: str | None = None,
                 on_fenced: Callable[[], None] | None = None,
                 writer: LogWriter | None = None) -> None:
        self.store, self.live = store, live
        # The frames go through the process's shared writer (one timer and one commit for
        # every run); a recorder on its own gets a writer of its own.
        self._own_writer = writer is None
        self.writer = writer or LogWriter(store)
        self.owner = owner  # the lease's fencing token: writes are refused once it is stale
        self.fence = (run_id, owner) if owner else None
        self._on_fenced = on_fenced  # the run is stopped at once, not at the next lease renewal
        self.thread_id, self.run_id = thread_id, run_id
        self.state_schemas = state_schemas or {}
        self._flushed = 0  # the log's position up to which it is on disk
        self._claimed = 0  # frames in the writer's commit under way (`_writing`)
        self._writing: asyncio.Future[None] | None = None
        self.fenced = False  # another process ended this run: write nothing more
        self._sealed = False  # the terminal frames are in: nothing may follow them
        self._messages: dict[str, list[dict[str, Any]]] = {}
        self.unsaved: set[str] = set()  # messages whose last write failed (database away)
        # A message whose first value is in but not written yet: written before the next frame,
        # or by the run's end (`finish`), whichever comes first.
        self._unwritten: MessageRow | None = None
        # When the first streamed token (any append frame) was logged; stored with the run's
        # end, so its time to first token can be shown (`GET /v1/threads/{id}/runs`).
        self.first_token_ms: int | None = None
        self.writer.register(self)

    async def emit(self, frame: timbal.Frame) -> None:
        """Log `frame`, one the gateway built (typed as `frames_schema` has it): the key it
        has says what it is (`timbal.kind`, which also finds malformed ones, is for readers)."""
        if self._sealed:
            log.debug("run %s has ended; frame dropped: %s", self.run_id, frame)
            return
        if "a" in frame and self.first_token_ms is None:
            self.first_token_ms = now_ms()
        if self.fenced:
            self.live.append(frame)
            return
        if self._unwritten is not None:
            await durably(self._write_unwritten())
            if self.fenced:
                self.live.append(frame)
                return
        if "m" in frame and frame["m"]["type"] == "x-component":
            # Before the start is visible: a client that reacts to `tambo.component.start` by
            # posting a state update must find the component.
            await durably(self._put_component(frame["m"], {}, None))
        self.live.append(frame)
        if "t" in frame:  # a set frame: a message's value is complete
            write = self._save_value(frame["i"], frame["v"], frame["t"])
            if write is not None:  # none for a run's answer (written with its next write)
                await durably(write)
        if self.live.last - self._flushed >= FLUSH_FRAMES:
            await self.flush()

    async def flush(self) -> None:
        """Write the frames not written yet now (in the writer's next commit)."""
        if not self.fenced and not self._sealed:
            await durably(self.writer.flush(self))

    def claim(self) -> LogBatch | None:
        """For the writer's next commit: the frames not written yet (see `log_writer.Source`).
        The first batch of the run also shows its thread as streaming."""
        if self.fenced or self._sealed or self._writing is not None:
            return None
        pending = self.live.since(self._flushed)
        if not pending:
            return None
        self._writing = asyncio.get_running_loop().create_future()
        self._claimed = len(pending)
        return LogBatch(self.run_id, _rows(pending), self.owner,
                        self.thread_id if self._flushed == 0 else None)

    def written(self, outcome: bool | BaseException) -> None:
        writing, self._writing = self._writing, None
        if outcome is True:
            self._flushed += self._claimed
            self.live.forget(self._flushed)  # on disk: memory keeps only what readers hold
        elif outcome is False:
            self._fenced_out()
        else:  # keep the run going; the next commit (or the final one) retries the batch
            # (the writer logs the outage once: `observability.outages`)
            log.debug("writing the log of run %s failed: %s", self.run_id, outcome)
        if writing is not None:
            writing.set_result(None)

    async def finish(self, frames: Sequence[timbal.Frame],
                     commit: Callable[[list[FrameEntry], list[MessageRow]], Awaitable[bool]]
                     ) -> bool:
        """End the log with `frames`: `commit` persists the unflushed rest of the log with them,
        and the message not written yet (if any), in the transaction that records the run's
        terminal state; only after it succeeds do subscribers see them. False (nothing shown)
        if the commit was refused (fenced out)."""
        self._sealed = True  # the writer claims nothing more of this run
        self.live.ending = True
        while self._writing is not None:  # a commit with our frames is under way: after it
            await asyncio.shield(self._writing)
        pending = self.live.since(self._flushed)
        terminal = [self.live.next_entry(f, k) for k, f in enumerate(frames)]
        unwritten = [self._unwritten] if self._unwritten is not None else []
        if self.fenced or not await durably(commit(_rows([*pending, *terminal]), unwritten)):
            self.fenced = True
            return False
        if unwritten:
            self._unwritten = None
            self.unsaved.discard(unwritten[0].id)
        self.live.extend(terminal)
        self._flushed = self.live.last
        self.live.forget(self._flushed)
        return True

    def adopt(self, message_id: str, parts: Sequence[dict[str, Any]]) -> None:
        """A message of an earlier run that this run adds values to (an approved call's
        result goes into the message holding the call): saved by updating it, not inserting."""
        self._messages.setdefault(message_id, [dict(p) for p in parts])

    def amend_call(self, message_id: str, tool_call_id: str, arguments: dict[str, Any]) -> None:
        """Rewrite the arguments of a call in an adopted message, saved with the message's next
        write (its result's): the thread shows the call as approved with edited arguments.
        Not a frame: the call's stream events were its model's, and stay so."""
        for part in self._messages.get(message_id, []):
            if part.get("type") == "tool_call" and part.get("toolCallId") == tool_call_id:
                part["arguments"] = arguments

    def unsaved_messages(self) -> dict[str, list[dict[str, Any]]]:
        """The parts of each message whose last write failed, as the run last had them."""
        return {m: list(self._messages.get(m, [])) for m in sorted(self.unsaved)}

    def show(self, frame: timbal.Frame) -> None:
        """Append a frame to the live log only (a fenced run's local ending)."""
        self.live.append(frame)

    async def close(self) -> None:
        """Write everything (unless fenced or ended) and close the live log."""
        try:
            if self._unwritten is not None and not self.fenced:  # it ended without `finish`
                await durably(self._write_unwritten())
            await self.flush()
        except Exception:  # the database is unreachable: subscribers must still be released
            log.exception("run %s: the last flush of its log failed", self.run_id)
        finally:
            self.writer.unregister(self)
            if self._own_writer:
                await self.writer.close()
            self.live.close()

    def _save_value(self, i: str, value: SetValue, t: str) -> Awaitable[None] | None:
        """Keep a message's value; the write it needs now, if any (None: nothing to write, or
        the message's first value, written with the run's next write). Decided before any
        await, so that the usual case costs no task (`durably`)."""
        message_id = value.get("messageId")
        if not isinstance(message_id, str) or not message_id or value.get("subagentRunId"):
            return None  # a sub-agent's work is in the run's log; the thread keeps its answer
        # The frame's time too: a Timbal `sync` answers with the parts completed since then.
        part: dict[str, Any] = {"id": i, "t": t, **value}
        parts = self._messages.get(message_id)
        cancelled = bool(value.get("cancelled"))
        self.unsaved.add(message_id)  # until the write below succeeds
        if parts is None:
            self._messages[message_id] = [part]
            row = made(MessageRow, id=message_id, thread_id=self.thread_id, run_id=self.run_id,
                       role="assistant", parts=[part], created_ms=now_ms(),
                       is_cancelled=cancelled)
            # With the next write (see the module's docstring); not a component (its row
            # needs the message), nor what a cancel cut short (a cancel's end stays as prompt).
            if not cancelled and value.get("type") != "x-component":
                self._unwritten = row
                return None
            return self._saved(message_id, value, self.store.add_message(row, fence=self.fence))
        parts[:] = [p for p in parts if p["id"] != i] + [part]
        cancelled = cancelled or any(p.get("cancelled") for p in parts)
        return self._saved(message_id, value, self.store.save_message_parts(
            message_id, list(parts), cancelled, fence=self.fence))

    async def _saved(self, message_id: str, value: SetValue, write: Awaitable[bool]) -> None:
        """`write` of a message's value (`_save_value`), then its component's props."""
        written = await write
        self.unsaved.discard(message_id)
        if not written:
            self._fenced_out()
            return
        if value["type"] == "x-component":
            await self._put_component(value, value.get("props") or {}, value.get("state"))

    async def _write_unwritten(self) -> None:
        """Write the message whose first value is not written yet (`_save_value`)."""
        row, self._unwritten = self._unwritten, None
        if row is None:
            return
        written = await self.store.add_message(row, fence=self.fence)
        self.unsaved.discard(row.id)
        if not written:
            self._fenced_out()

    async def _put_component(self, value: ComponentStartMeta | ComponentValue,
                             props: dict[str, Any], state: dict[str, Any] | None) -> None:
        """Create the component row at its start; at its set, refresh only its props (its state
        may have been updated meanwhile, through `ComponentStates`)."""
        if not await self.store.put_component(ComponentRow(
                id=value["componentId"], thread_id=self.thread_id, message_id=value["messageId"],
                name=value["name"], props=props, state=state,
                state_schema=self.state_schemas.get(value["name"]), revision=0,
                updated_ms=now_ms()), fence=self.fence):
            self._fenced_out()

    def _fenced_out(self) -> None:
        if self.fenced:
            return
        log.warning("run %s: its lease was taken over; not writing it any more", self.run_id)
        self.fenced = True
        if self._on_fenced is not None:
            self._on_fenced()


def _rows(entries: Sequence[Entry]) -> list[FrameEntry]:
    return [(e.seq, e.ts, e.frame) for e in entries]
