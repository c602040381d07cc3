"""A run's input budget: made once as the run starts, recorded on its thread.

The engine fits every model call to the budget (`engine/context_window.py`); this is where a
run gets one: from its agent's `max_input_tokens`, litellm's model information or
`GATEWAY_MAX_INPUT_TOKENS` (none: the run sends the whole thread, as before). The first fit is
recorded on the thread (`contextTokens`, `historyTrimmed` in its JSON, so a UI can warn), and,
for an agent with `context = "summarize"`, turns left out are replaced by a summary
(`runs/summaries.py`).
"""

from __future__ import annotations

from dataclasses import replace

from ..engine.agents import ResolvedAgent
from ..engine.context_window import ContextBudget, TokenCounter, available_tokens, input_limit
from ..engine.loop import RunInput, model_tools
from ..store.repository import Store
from .limits import RunLimits


def run_budget(run_input: RunInput, agent: ResolvedAgent | None, limits: RunLimits
               ) -> ContextBudget | None:
    """The budget a run's model calls are fitted to, or None when no limit is known."""
    limit = input_limit(run_input.model, agent.max_input_tokens if agent else None,
                        limits.max_input_tokens)
    if limit is None:
        return None
    return ContextBudget(available_tokens(limit, run_input.max_tokens,
                                          limits.output_reserve_tokens),
                         TokenCounter(run_input.model))


async def budgeted(store: Store, thread_id: str, run_input: RunInput,
                   agent: ResolvedAgent | None, limits: RunLimits) -> RunInput:
    """`run_input` with its budget, the thread told what its first model call will carry."""
    budget = run_budget(run_input, agent, limits)
    if budget is None:
        return run_input
    first = budget.fitted(run_input.history, model_tools(run_input))
    await store.update_thread(thread_id, context_tokens=first.tokens,
                              context_trimmed=first.trimmed)
    return replace(run_input, context=budget)
