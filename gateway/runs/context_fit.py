"""A run's input budget: made once as the run starts, recorded on its thread.

The engine fits every model call to the budget (`engine/context_window.py`); this is where a
run gets one: from its agent's `max_input_tokens`, the window the model's server says it has
(`engine/models/server_window.py`, or a context-length error's words), litellm's model
information or `GATEWAY_MAX_INPUT_TOKENS` (none: the run sends the whole thread). The first fit is
recorded on the thread (`contextTokens`, `historyTrimmed` in its JSON, so a UI can warn), and,
for an agent with `context = "summarize"`, turns left out are replaced by a summary
(`runs/summaries.py`).
"""

from __future__ import annotations

from dataclasses import replace

from ..engine.agents.agent import ResolvedAgent
from ..engine.context_window import (
    ContextBudget,
    TokenCounter,
    available_tokens,
    input_limit,
    learned_window,
    model_input_limit,
)
from ..engine.loop import Model, RunInput, model_tools
from ..protocol.timbal import FrameSink
from ..store.repository import Store
from ..store.tables import RunRow
from .limits import RunLimits
from .summaries import Summary, summarised


def run_budget(run_input: RunInput, agent: ResolvedAgent | None, limits: RunLimits,
               server: int | None = None) -> ContextBudget | None:
    """The budget a run's model calls are fitted to, or None when no limit is known
    (`server`: the window the model's server says it has)."""
    limit = input_limit(run_input.model, agent.max_input_tokens if agent else None,
                        limits.max_input_tokens, server)
    if limit is None:
        return None
    return ContextBudget(available_tokens(limit, run_input.max_tokens,
                                          limits.output_reserve_tokens, limits.context_margin),
                         TokenCounter(run_input.model))


async def server_says(run_input: RunInput, agent: ResolvedAgent | None, model: Model
                      ) -> int | None:
    """The window the model's own server says it has, asked only when nothing closer says
    (the agent, a window learned before, litellm's map of hosted models)."""
    name = run_input.model
    if (agent is not None and agent.max_input_tokens is not None) or learned_window(name) \
            or (name and model_input_limit(name)):
        return None
    ask = getattr(model, "context_window", None)
    return await ask() if ask is not None else None


async def budgeted(store: Store, run: RunRow, run_input: RunInput,
                   agent: ResolvedAgent | None, limits: RunLimits, model: Model,
                   sink: FrameSink) -> RunInput:
    """`run_input` with its budget (and its summary), the thread told what its first model
    call will carry."""
    budget = run_budget(run_input, agent, limits, await server_says(run_input, agent, model))
    if budget is None:
        return run_input
    tools = model_tools(run_input)
    first = budget.fitted(run_input.history, tools)
    trimmed = first.trimmed
    if trimmed and agent is not None and agent.context == "summarize":
        thread = await store.get_thread(run.project_id, run.thread_id)
        stored = Summary.of(thread.context_summary if thread else None)
        history, written = await summarised(model, run_input, budget, tools, stored, sink)
        if written is not None:
            await store.update_thread(run.thread_id, context_summary=written.stored())
        run_input = replace(run_input, history=history)
        first = budget.fitted(history, tools)
    await store.update_thread(run.thread_id, context_tokens=first.tokens,
                              context_trimmed=trimmed)
    return replace(run_input, context=budget)
