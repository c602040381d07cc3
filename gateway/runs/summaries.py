"""Summaries of the turns left out, for agents with `context = "summarize"` (docs/context.md).

When a run's history is over its budget, the turns left out are replaced by a summary the
model writes of them. It is written once and kept: on the thread (`threads.context_summary`,
for the next runs) and in the log of the run that wrote it, as an `x-summary` value (so the
Timbal view shows it; the Tambo and AG-UI views show nothing of it). Later runs send it in place
of the turns it covers until what follows it no longer fits; then a new summary is written,
of the old one and the turns since. Each time, enough turns are summarised that the rest
fills only half the budget, so a thread grows for a while before the next summary.

The summary call is a model call of the run like any other: metered, counted in its usage
and quotas (the run's hooks). If it fails, the run goes on with the older turns simply left
out.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..engine.context_window import SUMMARY_PREFIX, ChatMessage, ContextBudget, fit
from ..engine.deltas import ModelError
from ..engine.loop import Model, RunInput, Turn, stream_turn
from ..engine.models.litellm_model import ModelRequest
from ..protocol import timbal
from ..protocol.clock import new_id, now_ms

log = logging.getLogger(__name__)

INSTRUCTIONS = (
    "You write the summary of the earlier part of a conversation between a user and an "
    "assistant, for the assistant that continues it without seeing those messages. Keep what "
    "it will need: who the user is, their goals and preferences, facts, names and numbers "
    "given, decisions made, tool results that still matter, open questions. Plain text, at "
    "most 250 words. Answer with the summary only.")
SUMMARY_MAX_TOKENS = 512
MESSAGE_CHARS = 2000  # of one message, in the transcript the model summarises


@dataclass(frozen=True)
class Summary:
    text: str
    covers: int  # the history's first `covers` messages (system messages aside)

    def stored(self) -> dict[str, Any]:
        return {"text": self.text, "covers": self.covers}

    @classmethod
    def of(cls, stored: dict[str, Any] | None) -> Summary | None:
        if not stored or not isinstance(stored.get("text"), str):
            return None
        return cls(stored["text"], int(stored.get("covers") or 0))


def summary_message(text: str) -> ChatMessage:
    return {"role": "system", "content": f"{SUMMARY_PREFIX}\n{text}"}


def applied(history: Sequence[ChatMessage], summary: Summary) -> list[ChatMessage]:
    """The history with its first `covers` non-system messages replaced by the summary."""
    out: list[ChatMessage] = []
    skipped, placed = 0, False
    for message in history:
        if message.get("role") == "system":
            out.append(message)
            continue
        if not placed:
            out.append(summary_message(summary.text))
            placed = True
        if skipped < summary.covers:
            skipped += 1
            continue
        out.append(message)
    return out


async def summarised(model: Model, run_input: RunInput, budget: ContextBudget,
                     tools: list[dict[str, Any]], stored: Summary | None,
                     sink: timbal.FrameSink) -> tuple[list[ChatMessage], Summary | None]:
    """The run's history with a summary in place of its older turns, and the summary if it
    was written now (None: the stored one still serves, or writing one failed)."""
    history = run_input.history
    if stored is not None:
        with_stored = applied(history, stored)
        if not budget.fitted(with_stored, tools).trimmed:
            return with_stored, None
    half = fit(history, budget.available // 2, budget.counter.message)
    dropped = half.dropped
    earlier = stored if stored is not None and stored.covers <= len(dropped) else None
    new = dropped[earlier.covers:] if earlier is not None else dropped
    try:
        text = await _write(model, run_input, transcript(earlier, new, budget.available * 2))
    except ModelError as error:
        log.warning("the summary of older turns failed (%s); they are left out", error.code)
        return history, None
    summary = Summary(text, len(dropped))
    await sink.emit(timbal.set_value(new_id(), {"type": "x-summary", "content": text,
                                                "covers": summary.covers}, now_ms()))
    return applied(history, summary), summary


def transcript(earlier: Summary | None, messages: Sequence[ChatMessage], max_chars: int
               ) -> str:
    """The text the model summarises: the previous summary, then the messages, each cut to
    `MESSAGE_CHARS`; the oldest messages go first when the whole is over `max_chars`."""
    lines: list[str] = []
    size = 0
    for message in reversed(messages):
        line = _line(message)[:MESSAGE_CHARS]
        if size + len(line) > max_chars and lines:
            break
        lines.append(line)
        size += len(line)
    lines.reverse()
    if earlier is not None:
        lines.insert(0, f"(Summary of what came before: {earlier.text})")
    return "\n\n".join(lines)


def _line(message: ChatMessage) -> str:
    role, content = message.get("role"), message.get("content")
    if not isinstance(content, str):
        content = " ".join(p.get("text", "") for p in content or [] if isinstance(p, dict))
    if role == "tool":
        return f"Tool result: {content}"
    calls = [f"{c['function']['name']}({c['function']['arguments']})"
             for c in message.get("tool_calls") or []]
    said = f"{'User' if role == 'user' else 'Assistant'}: {content}" if content else ""
    return " ".join(filter(None, [said, *(f"[called {c}]" for c in calls)])) or json.dumps(
        message)[:MESSAGE_CHARS]


class _Discard:
    async def emit(self, frame: timbal.Frame) -> None:
        return None


async def _write(model: Model, run_input: RunInput, text: str) -> str:
    request = ModelRequest(messages=[{"role": "system", "content": INSTRUCTIONS},
                                     {"role": "user", "content": text}],
                           max_tokens=SUMMARY_MAX_TOKENS, model=run_input.model)
    turn = Turn(_Discard(), set(), set(), set())
    await stream_turn(model, request, turn, run_input.hooks)
    return turn.text.strip()
