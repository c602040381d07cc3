"""Streamed component props: JSON text fragments in, RFC 6902 operations out.

The Tambo client starts a component's props at `{}` and applies each `props_delta`'s operations
with validation on, so every operation must apply to what the client already has: `add` for a new
top-level key, `replace` for a changed one, `remove` for one that vanished.

Why not re-parse the whole buffer on every fragment: that is quadratic in the props' length. A
small scanner walks each character once and cuts the object into top-level members; a finished
member is parsed exactly once with `json.loads`, and only the member still being written is
partial-parsed, and only after it has grown by a quarter (or 8 characters) since the last parse,
so the total parsing work stays linear in the props' length. The same goes for copying: fragments
are kept as a list (appending to a growing string copies it), a member's text is joined only when
it is parsed, and a fragment that neither ends a member nor triggers a parse costs no diff.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from partial_json_parser import loads as partial_loads

from .frames_schema import JsonPatchOp

# A member's streaming status as `tambo.component.props_delta` reports it (`protocol/events.py`).
Status = Literal["started", "streaming", "done"]


def pointer(key: str) -> str:
    return "/" + key.replace("~", "~0").replace("/", "~1")


def diff_top_level(old: dict[str, Any], new: dict[str, Any]) -> list[JsonPatchOp]:
    """Operations that turn `old` into `new`, touching top-level keys only."""
    ops: list[JsonPatchOp] = []
    for key in old:
        if key not in new:
            ops.append({"op": "remove", "path": pointer(key)})
    for key, value in new.items():
        if key not in old:
            ops.append({"op": "add", "path": pointer(key), "value": value})
        elif old[key] != value:
            ops.append({"op": "replace", "path": pointer(key), "value": value})
    return ops


class PropsStream:
    """Incremental partial parser for one component's props object."""

    def __init__(self) -> None:
        self._chunks: list[str] = []  # the fragments fed so far
        self._length = 0
        self.complete: dict[str, Any] = {}
        self.current: dict[str, Any] = {}  # what the client has been told so far
        self._depth = 0
        self._in_string = False
        self._escaped = False
        self._member_start: int | None = None  # offset of the member being written
        self._member_at = (0, 0)  # ... as (index in `_chunks`, offset in that chunk)
        self._partial_key: str | None = None
        self._partial_value: Any = None
        self._parsed_len = 0
        self._unsent = 0  # index in `_chunks` of the first fragment no delta has carried yet

    @property
    def buffer(self) -> str:
        """Everything fed so far."""
        return "".join(self._chunks)

    def feed(self, fragment: str) -> list[JsonPatchOp]:
        """Add a fragment; return the operations that bring the client up to date."""
        self._chunks.append(fragment)
        self._length += len(fragment)
        closed = self._advance(fragment)
        if not self._due() and not closed:
            return []  # nothing the client has can have changed
        return self._publish(self._snapshot())

    def finish(self, final_props: dict[str, Any] | None = None) -> list[JsonPatchOp]:
        """The props are complete: publish them exactly (the final value is authoritative)."""
        if final_props is None:
            buffer = self.buffer
            try:
                parsed = json.loads(buffer) if buffer.strip() else {}
            except ValueError:
                parsed = self._snapshot(force=True)
            final_props = parsed if isinstance(parsed, dict) else {}
        return self._publish(dict(final_props))

    def unsent(self) -> str:
        """The text fed since the last call, so the `delta`s of the deltas sent concatenate
        to the streamed props JSON (the Tambo v1 proposal's field) although a fragment that
        changes no prop sends no delta."""
        text = "".join(self._chunks[self._unsent:])
        self._unsent = len(self._chunks)
        return text

    def final_text(self, final_props: dict[str, Any]) -> str:
        """What completes the deltas sent to the final props' JSON: the rest of the streamed
        text when that text is those props, else (nothing sent yet) the props' JSON; when some
        other text was already sent, the rest of it is all that can be done."""
        sent_any = self._unsent > 0
        rest = self.unsent()
        if sent_any:
            return rest
        try:
            if json.loads(self.buffer) == final_props:
                return rest
        except ValueError:
            pass
        return json.dumps(final_props)

    def streaming_status(self) -> dict[str, Status]:
        status: dict[str, Status] = {key: "done" for key in self.complete}
        if self._partial_key is not None and self._partial_key not in status:
            status[self._partial_key] = "streaming"
        return status

    def _publish(self, props: dict[str, Any]) -> list[JsonPatchOp]:
        ops = diff_top_level(self.current, props)
        self.current = props
        return ops

    def _advance(self, fragment: str) -> bool:
        """Scan the new fragment; True if it ended a top-level member."""
        base, closed = self._length - len(fragment), False
        for offset, char in enumerate(fragment):
            if self._in_string:
                if self._escaped:
                    self._escaped = False
                elif char == "\\":
                    self._escaped = True
                elif char == '"':
                    self._in_string = False
                continue
            if char == '"':
                self._in_string = True
                if self._depth == 1 and self._member_start is None:
                    self._member_start = base + offset
                    self._member_at = (len(self._chunks) - 1, offset)
            elif char in "{[":
                self._depth += 1
            elif char in "}]":
                if self._depth == 1:
                    closed = self._close_member(base + offset) or closed
                self._depth -= 1
            elif char == "," and self._depth == 1:
                closed = self._close_member(base + offset) or closed
        return closed

    def _member_text(self, end: int | None = None) -> str:
        """The member being written, up to offset `end` (default: all of it so far)."""
        assert self._member_start is not None
        chunk, offset = self._member_at
        text = "".join(self._chunks[chunk:])
        return text[offset:] if end is None else text[offset : offset + end - self._member_start]

    def _close_member(self, end: int) -> bool:
        if self._member_start is None:
            return False
        member = self._member_text(end)
        self._member_start = None
        self._partial_key, self._partial_value, self._parsed_len = None, None, 0
        try:
            parsed = json.loads("{" + member + "}")
        except ValueError:
            return True
        self.complete.update(parsed)
        return True

    def _due(self) -> bool:
        """The member being written has grown enough since its last parse to parse it again."""
        if self._member_start is None:
            return False
        grown = self._length - self._member_start - self._parsed_len
        return grown >= max(8, self._parsed_len // 4)

    def _snapshot(self, force: bool = False) -> dict[str, Any]:
        props = dict(self.complete)
        if self._member_start is not None:
            if force or self._due():
                member = self._member_text()
                self._parsed_len = len(member)
                try:
                    parsed = partial_loads("{" + member)
                except Exception:  # partial input the parser cannot read yet
                    parsed = None
                if isinstance(parsed, dict) and len(parsed) == 1:
                    (self._partial_key, self._partial_value), = parsed.items()
            if self._partial_key is not None:
                props[self._partial_key] = self._partial_value
        return props
