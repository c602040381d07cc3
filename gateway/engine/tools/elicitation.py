"""A server tool that asks the user something mid-call: `await ctx.ask(schema, message)` in a
Python tool, `elicitation/create` from an MCP server.

The run cannot hold a tool call open while a person thinks (the pause must survive a reload, a
restart, another process), so a question pauses the run the way an approval does
(`engine/tools/approvals.py`): the call is pending with a request (`reason: input_required`, the
requested schema) and the tool's attempt is abandoned (an MCP server is told `cancel`). When the
answer comes, the tool is **called again from the start** with the same arguments, and this
time each question it asks is answered, in order, from the answers given so far: the way
LangGraph's `interrupt()` resumes. Code before a question must therefore be safe to repeat;
side effects belong after the questions.

An answer is `{"action": "accept", "content": {...}}`, `{"action": "decline"}` or
`{"action": "cancel"}`; `ask` returns the content of an accepted answer and None otherwise.
"""

from __future__ import annotations

import json
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

REASON = "input_required"


class InputRequired(Exception):  # noqa: N818 (a signal, not an error)
    """Raised out of a tool call that asked a question not answered yet: pauses the run."""

    def __init__(self, message: str, schema: dict[str, Any]) -> None:
        super().__init__(message)
        self.message, self.schema = message, schema


@dataclass
class Answers:
    """The answers a tool call is given, in the order its questions are asked."""

    given: list[dict[str, Any]] = field(default_factory=list)
    used: int = 0
    asked: InputRequired | None = None  # the first question with no answer yet

    def next(self, message: str, schema: dict[str, Any]) -> dict[str, Any] | None:
        """The answer to this question, or None (and the question noted) if there is none."""
        if self.used < len(self.given):
            self.used += 1
            return self.given[self.used - 1]
        if self.asked is None:
            self.asked = InputRequired(message, schema)
        return None


_answers: ContextVar[Answers | None] = ContextVar("tool_answers", default=None)


def bind(answers: Answers) -> None:
    """Give the tool call running in this task (and what it awaits) these answers."""
    _answers.set(answers)


def current() -> Answers | None:
    return _answers.get()


async def ask(schema: dict[str, Any], message: str) -> dict[str, Any] | None:
    """For a Python server tool: ask the user; the accepted content, or None if declined."""
    answers = current()
    if answers is None:
        raise RuntimeError("ask() is only available inside a server tool call of a run")
    answer = answers.next(message, schema)
    if answer is None:
        raise answers.asked or InputRequired(message, schema)
    content = answer.get("content")
    return content if answer.get("action") == "accept" and isinstance(content, dict) else None


def answer_of(text: str, is_error: bool) -> dict[str, Any] | None:
    """A client's answer as an elicitation result: an error result declines; a JSON object
    with `action` is taken as it is, any other JSON object is the accepted content. None: not
    an answer."""
    if is_error:
        return {"action": "decline"}
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    if value.get("action") in ("accept", "decline", "cancel"):
        content = value.get("content")
        if value["action"] == "accept" and not isinstance(content, dict):
            return None
        return {"action": value["action"], **({"content": content} if content else {})}
    return {"action": "accept", "content": value}
