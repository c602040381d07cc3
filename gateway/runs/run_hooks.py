"""A run's agent-loop hooks: each model call metered and traced, its usage recorded for the run
and counted against the run's quota ticket (the API key's daily budget), through the run's
`UsageMeter`.

The loop calls these at its well-defined points (`engine.hooks`); nothing wraps the model.
"""

from __future__ import annotations

from ..engine.deltas import Usage
from ..engine.hooks import ModelCallHooks
from ..observability.metrics import ModelCallMeter
from .usage import UsageMeter


class RunHooks:
    """`engine.hooks.LoopHooks` for one run."""

    def __init__(self, model_name: str | None, meter: UsageMeter | None) -> None:
        self.model_name = model_name  # the configured model, when a call names none
        self.meter = meter

    def model_call(self, model: str | None) -> ModelCallHooks:
        return ModelCallMeter(model or self.model_name)

    async def tokens_used(self, usage: Usage) -> None:
        if self.meter is not None:
            await self.meter.add(usage)
