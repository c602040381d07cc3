"""Edit and regenerate on the AG-UI endpoint: where a client's history leaves the thread's.

AG-UI clients send the whole conversation with every run. When a user edits an earlier message
or regenerates an answer, the client drops what followed and sends a history that is shorter
than the thread's, or that differs from it, ending with the (edited or repeated) user message.
Taking only that last message as new would put it after the old answer, so the thread would
hold both turns and the model would see the answer being replaced. Instead the run goes on a
branch: a fork of the thread just before the first user turn where the two histories part
(`Admission.branch`), which takes the client's `threadId`; the old branch stays, under the
gateway's id for it.

How a parting is told: `parentRunId` (AG-UI's "the run this one follows") naming a run of the
thread that is not its latest one puts the branch after that run's last message; a closing user
message whose id the thread already holds (the gateway keeps each AG-UI message's id) was
re-sent, so the branch goes just before it; otherwise, for an input that carries earlier user
messages, they are compared in order with the thread's user turns by their text, and the
branch goes before the first turn that differs or that the input no longer has. An input with
no earlier user message goes on from the thread's end: some clients send only what is new.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ag_ui.core import RunAgentInput, UserMessage

from .input import text_of


class StoredMessage(Protocol):
    id: str
    run_id: str | None
    parts: list[dict[str, Any]]


@dataclass(frozen=True)
class Branch:
    """Fork the thread after `message_id` (None: before its first message)."""

    message_id: str | None


def branch_point(body: RunAgentInput, rows: Sequence[StoredMessage],
                 parent_run: str | None = None) -> Branch | None:
    """Where the run must branch off the thread whose messages are `rows`, or None when the
    input goes on from the thread's end. `parent_run`: the gateway's id of the run the input's
    `parentRunId` names on this thread (None: none, or not one of the thread's)."""
    if parent_run is not None:
        ran = [index for index, row in enumerate(rows) if row.run_id == parent_run]
        if ran and ran[-1] < len(rows) - 1:
            return Branch(rows[ran[-1]].id)
    if not body.messages or not isinstance(body.messages[-1], UserMessage):
        return None  # tool results or resume answers: they go on where the thread waits
    again = body.messages[-1].id[:200]
    for index, row in enumerate(rows):
        if any(p.get("type") == "user" and p.get("clientMessageId") == again for p in row.parts):
            return Branch(rows[index - 1].id if index > 0 else None)  # re-sent: edit, retry
    sent = [text_of(m.content) for m in body.messages[:-1] if isinstance(m, UserMessage)]
    if not sent:
        return None  # a client that sends only what is new (its message, its tool results)
    turns = [(index, text) for index, row in enumerate(rows)
             for text in [_user_text(row)] if text is not None]
    for position, (index, text) in enumerate(turns):
        if position >= len(sent) or sent[position].strip() != text.strip():
            return Branch(rows[index - 1].id if index > 0 else None)
    return None


def _user_text(row: StoredMessage) -> str | None:
    texts = [str(p.get("content") or "") for p in row.parts if p.get("type") == "user"]
    return "\n".join(texts) if texts else None
