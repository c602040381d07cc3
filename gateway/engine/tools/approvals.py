"""Server tools that ask first: the pause before an approval-gated call, and its resolution.

A server tool marked for approval (`@server_tool(approval=True)`, an agent's `approval` list,
an MCP server's `"approval": true`) is not run when the model calls it. The run ends in
`awaiting_input` with the call pending, as a client tool's call would be, and its pending entry
carries an `approval` request (`request`): the interrupt's id, why, and until when it may be
answered. The answer comes with the next run (`runs/approvals.py` reads it from either dialect
and stores it as an `x-approval` part of that run's input); before that run's first model call
the gateway resolves it (`resolve`): an approved call runs now, once, and a denied or expired
one gets an error result without running. Either result is written into the message that holds
the call, so the thread reads as if the tool had answered in its own turn.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ...protocol.approvals import REASON
from ...protocol.clock import iso_ms, new_id, now_ms
from ...protocol.frames_schema import ApprovalRequest

# "answered": a question a tool asked (`engine/tools/elicitation.py`) got its answer.
Decision = Literal["approved", "denied", "expired", "answered"]


def request(name: str, message_id: str, ttl_seconds: float, now: int | None = None
            ) -> ApprovalRequest:
    """The `approval` member of a pending call: what the client answers and by when."""
    moment = now_ms() if now is None else now
    return {"interruptId": new_id("int_"), "reason": REASON,
            "message": f"Allow the tool {name} to run?", "messageId": message_id,
            "expiresAt": iso_ms(moment + int(ttl_seconds * 1000))}


@dataclass(frozen=True)
class Answer:
    """One resolved approval, as the resuming run reads it from its input."""

    tool_call_id: str
    name: str
    arguments: dict[str, Any]
    message_id: str  # the message holding the call: its result is written there
    decision: Decision
    reason: str | None = None
    answers: list[dict[str, Any]] | None = None  # to the questions the tool asked, in order
    # An approval's arguments in place of the model's (AG-UI's `editedArgs`).
    edited: dict[str, Any] | None = None

    @classmethod
    def of(cls, part: Mapping[str, Any]) -> Answer:
        return cls(part["toolCallId"], part["name"], part.get("arguments") or {},
                   part["callMessageId"], part["decision"], part.get("reason"),
                   part.get("answers"), part.get("editedArguments"))


def edit_refused(answer: Answer, problem: str) -> str:
    """The error result of a call approved with arguments its tool's schema refuses."""
    return (f"The arguments {answer.name} was approved with do not fit the tool: {problem}; "
            "it did not run")


def denial(answer: Answer) -> str:
    """The error result the model sees for a call that did not run."""
    if answer.decision == "expired":
        return f"The request to run {answer.name} expired before it was answered; it did not run"
    text = f"The user denied running {answer.name}; it did not run"
    return f"{text}: {answer.reason}" if answer.reason else text
