"""Approvals, from the run's side: reading the answer a run brings, and settling it.

A call waiting for approval is a pending call of its thread (`engine/tools/approvals.py` makes its
entry), so the run that answers it is admitted as any continuation: under the thread's lock, on
the condition that the thread is still paused where the client saw it. Only one run can take
the answer; a repeated or racing answer finds the thread moved on (409 or 400), so an approved
call runs at most once whatever the clients do, on any number of processes.

`input_part` turns the answer (a tool result in the Tambo dialect, a `resume` entry in AG-UI,
both already a `ToolResult`) into the run's `x-approval` input part: the decision, made and
stored at admission, so the run's task, on whichever process, reads the same decision. A
call past its `expiresAt` is denied whatever the answer, and needs none. `settle` resolves the
parts before the run's first model call (`engine.loop.resolve_approvals`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..engine.loop import RunInput, resolve_approvals
from ..engine.tools import approvals, elicitation
from ..protocol.clock import new_id, parse_iso_ms
from ..protocol.frames_schema import PendingToolCall
from ..protocol.problems import ApiError, Problem
from ..protocol.run_spec import ToolResult
from ..store.tables import MessageRow
from .log.recorder import RunRecorder

PART = "x-approval"
MAX_REASON = 2000


def is_approval(entry: Mapping[str, Any]) -> bool:
    return isinstance(entry.get("approval"), dict)


def expired(entry: Mapping[str, Any], now: int) -> bool:
    """Whether a pending call's approval can no longer be given."""
    if not is_approval(entry):
        return False
    return parse_iso_ms(entry["approval"]["expiresAt"]) < now


def input_part(entry: Mapping[str, Any], result: ToolResult | None, now: int) -> dict[str, Any]:
    """The stored decision on one call waiting for approval."""
    request = entry["approval"]
    part: dict[str, Any] = {"id": new_id(), "type": PART, "toolCallId": entry["toolCallId"],
                            "name": entry["toolName"],
                            "arguments": json.loads(entry.get("arguments") or "{}"),
                            "callMessageId": request["messageId"],
                            "interruptId": request["interruptId"]}
    if result is not None:
        part["answer"] = result.text[:MAX_REASON]
    if expired(entry, now):
        part["decision"] = "expired"
        return part
    assert result is not None  # only an expired call may go unanswered (admission's check)
    if request.get("reason") == elicitation.REASON:
        part.update(decision="answered",
                    answers=[*request.get("answers", []), elicited(result)])
        return part
    approved, reason, edited, always = decision(result)
    part["decision"] = "approved" if approved else "denied"
    if reason:
        part["reason"] = reason[:MAX_REASON]
    if approved and edited is not None:
        part["editedArguments"] = edited
    if approved and always:
        part["alwaysAllow"] = True
    return part


def decision(result: ToolResult) -> tuple[bool, str | None, dict[str, Any] | None, bool]:
    """An answer as (approved, reason, edited arguments, always allow): an error result (the
    Tambo client's answer when no tool of that name is registered, a cancelled AG-UI
    interrupt) denies; otherwise the text must be the JSON object `{"approved": true|false,
    "reason"?: "...", "editedArgs"?: {...}, "alwaysAllow"?: true}` (AG-UI's payload; a Tambo
    client's tool result text). Edited arguments are checked against the tool's schema when
    the call runs (`engine.loop.resolve_approvals`)."""
    if result.is_error:
        return False, result.text or None, None, False
    try:
        answer = json.loads(result.text)
    except ValueError:
        answer = None
    if not isinstance(answer, dict) or not isinstance(answer.get("approved"), bool):
        raise ApiError(Problem.INVALID_TOOL_RESULT,
                       f"The answer to tool call {result.tool_call_id} must be an approval: "
                       '{"approved": true} or {"approved": false, "reason": "..."}',
                       reason="INVALID_APPROVAL", toolCallId=result.tool_call_id)
    reason = answer.get("reason")
    edited = answer.get("editedArgs")
    if edited is not None and not isinstance(edited, dict):
        raise ApiError(Problem.INVALID_TOOL_RESULT,
                       f"The editedArgs of the answer to tool call {result.tool_call_id} must "
                       "be a JSON object: the tool's arguments",
                       reason="INVALID_APPROVAL", toolCallId=result.tool_call_id)
    return (answer["approved"], reason if isinstance(reason, str) and reason else None,
            edited, answer.get("alwaysAllow") is True)


def elicited(result: ToolResult) -> dict[str, Any]:
    """An answer to a tool's question: `{"action": "accept", "content": {...}}`, `decline` or
    `cancel`, or the content object alone; an error result declines."""
    answer = elicitation.answer_of(result.text, result.is_error)
    if answer is None:
        raise ApiError(Problem.INVALID_TOOL_RESULT,
                       f"The answer to tool call {result.tool_call_id} must be a JSON object: "
                       'the requested content, or {"action": "decline"}',
                       reason="INVALID_ANSWER", toolCallId=result.tool_call_id)
    return answer


def allowed_tools(rows: Sequence[MessageRow]) -> frozenset[str]:
    """The tools a human allowed on this thread for good (an approval with `alwaysAllow`): its
    history is where that is stored, so it lasts as long as the thread (and its forks) and
    needs no table of its own."""
    return frozenset(part["name"] for row in rows if row.role == "user"
                     for part in row.parts if part.get("type") == PART
                     and part.get("decision") == "approved" and part.get("alwaysAllow"))


def answers_of(rows: Sequence[MessageRow], run_id: str) -> list[approvals.Answer]:
    """The approvals the run `run_id` brought (its input's `x-approval` parts)."""
    return [approvals.Answer.of(part) for row in rows
            if row.run_id == run_id and row.role == "user"
            for part in row.parts if part.get("type") == PART]


async def settle(run: RunInput, answers: list[approvals.Answer], rows: Sequence[MessageRow],
                 recorder: RunRecorder) -> list[PendingToolCall]:
    """Resolve the approvals: each result is written into the (earlier) message holding its
    call, which the recorder therefore updates instead of creating."""
    holders = {a.message_id for a in answers}
    for row in rows:
        if row.id in holders:
            recorder.adopt(row.id, row.parts)

    def edited(answer: approvals.Answer) -> None:
        if answer.edited is not None:
            recorder.amend_call(answer.message_id, answer.tool_call_id, answer.edited)

    return await resolve_approvals(run, answers, recorder, edited)
