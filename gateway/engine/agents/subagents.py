"""Sub-agents: the agents an agent may delegate to, offered to its model as tools.

An agent that lists `subagents` gets one `loop.SubagentTool` per sub-agent, named after it,
described by its `description`, taking one `task` string. Calling it runs the sub-agent's own
loop inside the same run (`loop._run_subagent`): the sub-agent's instructions first, then the
task as the user's message (it does not see the conversation), its model, its server tools and
its own sub-agents, one level deeper, up to `GATEWAY_SUBAGENT_MAX_DEPTH`. A sub-agent gets no
client tools and no components: it cannot pause the run for the browser.

The run decides how a sub-agent's calls are metered and which model object streams an agent
(its fallbacks): `Delegation` takes both as functions, so this module knows nothing of runs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from functools import partial

from ..hooks import LoopHooks
from ..loop import Model, RunInput, ServerToolSpec, SubagentTool
from .agent import ResolvedAgent

# What a run gives a sub-agent's calls to a model: its hooks, and who to tell which model
# answered (a fallback list).
CallHooks = Callable[[str], tuple[LoopHooks, Callable[[str], Awaitable[None]] | None]]


@dataclass(frozen=True)
class Delegation:
    """How one run's agents delegate: the agents by name, each agent's server tools and model,
    the run's hooks for a model's calls, and how deep delegation may go."""

    agents: Mapping[str, ResolvedAgent]
    tools: Callable[[ResolvedAgent], dict[str, ServerToolSpec]]
    model: Callable[[ResolvedAgent], Model]
    hooks: CallHooks
    max_depth: int = 3

    def tools_of(self, agent: ResolvedAgent, depth: int = 1) -> dict[str, SubagentTool]:
        """The sub-agents `agent` may call, as tools; none beyond the depth limit (the agents
        file is checked for it at start-up: this is the run's own guard)."""
        if depth > self.max_depth:
            return {}
        found: dict[str, SubagentTool] = {}
        for name in agent.subagents:
            sub = self.agents.get(name)
            if sub is not None:
                found[name] = SubagentTool(name, sub.description, self.model(sub),
                                           partial(self._prepare, sub, depth))
        return found

    def _prepare(self, agent: ResolvedAgent, depth: int, task: str, invocation: str
                 ) -> RunInput:
        history = [{"role": "system", "content": agent.instructions}] if agent.instructions \
            else []
        history.append({"role": "user", "content": task})
        hooks, on_model = self.hooks(agent.model)
        return RunInput(history=history, server_tools=self.tools(agent),
                        max_tokens=agent.max_tokens, temperature=agent.temperature,
                        reasoning=agent.reasoning or None,
                        model=agent.model, max_steps=agent.max_steps, hooks=hooks,
                        on_model=on_model, sender=agent.name, subagent_run_id=invocation,
                        subagents=self.tools_of(agent, depth + 1))
