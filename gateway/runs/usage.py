"""Usage metering: every model call of a run counted once, for the run's record and quotas.

The agent loop hands each call's `Usage` (reported once, at the end of its stream) to its
`tokens_used` hook (`runs/run_hooks.py`): `UsageMeter.add` adds it to the run's `RunUsage`
under the model that answered (the requested one, or the one a fallback list says served it)
and to the run's quota ticket
(the API key's daily token budget), so what a user is shown and what a quota counts are the
same numbers. No wrapper around the model: nothing more per streamed token. The run's end
writes the sums (`execution.RunExecutor._end`).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..auth.subjects import Subject
from ..engine.deltas import Usage
from ..engine.usage import RunUsage
from ..protocol import timbal
from ..protocol.frames_schema import UsageEntry
from .admission.quotas import Ticket


class UsageMeter:
    """Counts each model call's reported usage (the agent loop's `tokens_used` hook) under the
    model that answered it: the run's, or the one a fallback list says served it (`served`)."""

    def __init__(self, usage: RunUsage, model: str, ticket: Ticket | None = None) -> None:
        self.usage, self.model = usage, model
        self.ticket = ticket if ticket is not None and ticket.counts_tokens else None

    def served(self, model: str) -> None:
        self.model = model

    async def add(self, usage: Usage) -> None:
        self.usage.add(self.model, usage)
        if self.ticket is not None:
            await self.ticket.add_tokens(usage.input_tokens + usage.output_tokens)


def with_usage(frames: list[timbal.Frame], entries: list[UsageEntry]) -> list[timbal.Frame]:
    """The run's terminal frames with its usage on the last one (`run.finished`,
    `run.cancelled` or `error`), when it used any model."""
    end = frames[-1] if frames else None
    if not entries or end is None or not timbal.is_terminal(end):
        return frames
    ended = end.copy()
    ended["usage"] = entries
    return [*frames[:-1], ended]


def api_key_id(ticket: Ticket | None) -> str | None:
    """The id of the credential a run was admitted under: its API key's, or the Chorus
    connection string's (`chc_...`); none in development mode."""
    subjects: Sequence[Subject] = ticket.subjects if ticket is not None else ()
    for subject in subjects:
        if subject.kind in ("apiKey", "chorus"):
            return str(subject.name).split(":", 1)[1]
    return None
