"""Which agent a run uses, and what a client may say to it (docs/agents.md).

A thread keeps the agent its first run used (`threads.agent`); every later run on it uses that
agent, whatever key or path it arrives by. A new thread's agent is the one its request names
(the AG-UI path `/v1/agui/agents/{agent}/run`), else its API key's (`gateway keys create
--agent`), else the default (`GATEWAY_DEFAULT_AGENT`). The agent's instructions are the
operator's: a client's own `system`/`developer` message is refused (400
`SYSTEM_PROMPT_NOT_ALLOWED`) unless the agent allows client prompts, and then it comes after
them (`runs/execution.py` puts the instructions first).
"""

from __future__ import annotations

from collections.abc import Sequence

from starlette.requests import Request

from ..engine.agents import DEFAULT_AGENT, ResolvedAgent
from ..protocol.problems import ApiError, Problem
from ..protocol.run_spec import SeedMessage
from ..store.tables import ThreadRow
from .context import caller, services


def agent_for(request: Request, thread: ThreadRow | None, asked: str | None = None
              ) -> ResolvedAgent:
    """The agent of a run on `thread` (None: a thread this run creates). `asked`: the agent the
    request names; `default` names the default agent."""
    agents = services(request).agents
    if asked == DEFAULT_AGENT and agents.get(DEFAULT_AGENT) is None:
        asked = agents.default_name
    if thread is not None and thread.agent is not None:
        if asked is not None and asked != thread.agent:
            raise ApiError(Problem.THREAD_AGENT_MISMATCH,
                           f"Thread {thread.id} runs agent {thread.agent!r}, not {asked!r}",
                           threadId=thread.id, agent=thread.agent)
        name = thread.agent
    elif asked is not None:
        name = asked
    else:
        managed = caller(request).managed
        name = managed.agent if managed is not None and managed.agent else agents.default_name
    agent = agents.get(name)
    if agent is None:
        raise ApiError(Problem.AGENT_NOT_FOUND, f"No agent {name[:100]!r} on this gateway",
                       agent=name[:100], agents=[a.name for a in agents])
    return agent


def check_client_prompt(agent: ResolvedAgent, seeds: Sequence[SeedMessage]) -> None:
    """A client's system prompt is refused unless the agent takes one (after its own)."""
    if agent.allow_client_system_prompt:
        return
    if any(seed.role == "system" for seed in seeds):
        raise ApiError(Problem.SYSTEM_PROMPT_NOT_ALLOWED,
                       f"Agent {agent.name!r} does not take a system prompt from the client: "
                       "its instructions are the operator's (send the text as a user message "
                       "or as context instead)", agent=agent.name)
