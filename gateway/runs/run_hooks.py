"""A run's agent-loop hooks: each model call metered and traced, its tokens counted against
the run's quota ticket (the API key's daily budget).

The loop calls these at its well-defined points (`engine.hooks`); nothing wraps the model.
"""

from __future__ import annotations

from ..engine.hooks import ModelCallHooks
from ..observability.metrics import ModelCallMeter
from .quotas import Ticket


class RunHooks:
    """`engine.hooks.LoopHooks` for one run."""

    def __init__(self, model_name: str | None, ticket: Ticket | None) -> None:
        self.model_name = model_name  # the configured model, when a call names none
        self.ticket = ticket if ticket is not None and ticket.counts_tokens else None

    def model_call(self, model: str | None) -> ModelCallHooks:
        return ModelCallMeter(model or self.model_name)

    async def tokens_used(self, input_tokens: int, output_tokens: int) -> None:
        if self.ticket is not None:
            await self.ticket.add_tokens(input_tokens + output_tokens)
