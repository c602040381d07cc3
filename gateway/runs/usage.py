"""Usage metering: every model call of a run counted once, for the run's record and quotas.

`UsageMeter` wraps the model a run calls: each call's `Usage` (reported once, at the end of its
stream) is added to the run's `RunUsage` under the model that answered it (the requested one,
or the one a fallback list says served it) and to the run's quota ticket (the API key's daily
token budget), so what a user is shown and what a quota counts are the same numbers. The
run's end writes the sums (`execution.RunExecutor._end`).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Sequence
from typing import Any

from ..engine.deltas import Delta, Served, Usage
from ..engine.loop import Model
from ..engine.model import ModelRequest
from ..engine.usage import RunUsage
from ..protocol import timbal
from .quotas import Ticket


class UsageMeter:
    def __init__(self, model: Model, usage: RunUsage, default_model: str,
                 ticket: Ticket | None = None) -> None:
        self.model, self.usage, self.default_model = model, usage, default_model
        self.ticket = ticket if ticket is not None and ticket.counts_tokens else None

    async def stream(self, request: ModelRequest) -> AsyncGenerator[Delta, None]:
        served = request.model or self.default_model
        async with contextlib.aclosing(self.model.stream(request)) as deltas:
            async for delta in deltas:
                if isinstance(delta, Served):
                    served = delta.model
                elif isinstance(delta, Usage):
                    self.usage.add(served, delta)
                    if self.ticket is not None:
                        await self.ticket.add_tokens(delta.input_tokens + delta.output_tokens)
                yield delta


def with_usage(frames: list[timbal.Frame], entries: list[dict[str, Any]]
               ) -> list[timbal.Frame]:
    """The run's terminal frames with its usage on the last one (`run.finished`,
    `run.cancelled` or `error`), when it used any model."""
    if not entries or not frames:
        return frames
    return [*frames[:-1], {**frames[-1], "usage": entries}]


def api_key_id(ticket: Ticket | None) -> str | None:
    """The id of the API key a run was admitted under (none in development mode)."""
    subjects: Sequence[Any] = ticket.subjects if ticket is not None else ()
    for subject in subjects:
        if subject.kind == "apiKey":
            return str(subject.name).removeprefix("key:")
    return None
