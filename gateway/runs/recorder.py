"""The frame sink a run writes to: the live log, batched log persistence, and message values.

Completed message values (set frames) are saved as they complete, one write per message; the
frames themselves are flushed every `FLUSH_SECONDS` or `FLUSH_FRAMES`, whichever comes first.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from ..protocol import timbal
from ..protocol.clock import now_ms
from ..store.repository import Store
from ..store.tables import ComponentRow, MessageRow
from .log import LiveLog

FLUSH_SECONDS = 0.1
FLUSH_FRAMES = 256

log = logging.getLogger(__name__)


class RunRecorder:
    def __init__(self, store: Store, live: LiveLog, thread_id: str, run_id: str,
                 state_schemas: dict[str, Any] | None = None) -> None:
        self.store, self.live = store, live
        self.thread_id, self.run_id = thread_id, run_id
        self.state_schemas = state_schemas or {}
        self._flushed = 0
        self._messages: dict[str, list[dict[str, Any]]] = {}
        self._lock = asyncio.Lock()
        self._flusher = asyncio.create_task(self._flush_periodically())

    async def emit(self, frame: timbal.Frame) -> None:
        self.live.append(frame)
        if timbal.kind(frame) == "set":
            await self._save_value(frame["i"], frame["v"])
        if len(self.live.entries) - self._flushed >= FLUSH_FRAMES:
            await self.flush()

    async def flush(self) -> None:
        async with self._lock:
            pending = self.live.entries[self._flushed:]
            if not pending:
                return
            await self.store.append_frames(
                self.run_id, [(e.seq, e.ts, e.frame) for e in pending])
            self._flushed += len(pending)

    async def close(self) -> None:
        """Flush everything; after this the log is complete on disk."""
        self._flusher.cancel()
        try:
            await self._flusher
        except asyncio.CancelledError:
            pass
        await self.flush()
        self.live.close()

    async def _flush_periodically(self) -> None:
        while True:
            await asyncio.sleep(FLUSH_SECONDS)
            try:
                await self.flush()
            except Exception:  # keep the run going; the final flush will retry the batch
                log.exception("flushing the log of run %s failed", self.run_id)

    async def _save_value(self, i: str, value: dict[str, Any]) -> None:
        message_id = value.get("messageId")
        if not message_id:
            return
        part = {"id": i, **value}
        parts = self._messages.get(message_id)
        cancelled = bool(value.get("cancelled"))
        if parts is None:
            self._messages[message_id] = [part]
            await self.store.add(MessageRow(
                id=message_id, thread_id=self.thread_id, run_id=self.run_id, role="assistant",
                parts=[part], created_ms=now_ms(), is_cancelled=cancelled))
        else:
            parts[:] = [p for p in parts if p["id"] != i] + [part]
            cancelled = cancelled or any(p.get("cancelled") for p in parts)
            await self.store.save_message_parts(message_id, list(parts), cancelled)
        if value.get("type") == "x-component":
            await self.store.upsert_component(ComponentRow(
                id=value["componentId"], thread_id=self.thread_id, message_id=message_id,
                name=value["name"], props=value.get("props") or {}, state=value.get("state"),
                state_schema=self.state_schemas.get(value["name"]), revision=0,
                updated_ms=now_ms()))
