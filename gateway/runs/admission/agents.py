"""Which agent a run uses, and what a client may say to it (docs/agents.md).

A thread keeps the agent its first run used (`threads.agent`); every later run on it uses that
agent. A new thread's agent is the one its request names (the AG-UI path
`/v1/agui/agents/{agent}/run`, `?agent=`, a Timbal create body: the spec's `agent`), else its
credential's (`gateway keys create --agent`, a Chorus connection's), else the default
(`GATEWAY_DEFAULT_AGENT`). A credential bound to an agent runs that agent only: another name,
or another agent's thread, is 403 `AGENT_NOT_ALLOWED`. The agent's instructions are the
operator's: a client's own `system`/`developer` message is refused (400
`SYSTEM_PROMPT_NOT_ALLOWED`) unless the agent allows client prompts, and then it comes after
them (`runs/execution.py` puts the instructions first).
"""

from __future__ import annotations

from collections.abc import Sequence

from ...auth.caller import Caller
from ...engine.agents.agent import DEFAULT_AGENT, AgentRegistry, ResolvedAgent
from ...protocol.problems import ApiError, Problem, echo
from ...protocol.run_spec import SeedMessage
from ...store.tables import ThreadRow


def choose_agent(agents: AgentRegistry, caller: Caller, thread: ThreadRow | None,
                 asked: str | None = None) -> ResolvedAgent:
    """The agent of a run on `thread` (None: a thread this run creates). `asked`: the agent the
    request names; `default` names the default agent, or a bound credential's own agent.

    A credential bound to an agent is held to it whatever the request names (the AG-UI path,
    `?agent=`, a Timbal body): the operator bound it so that the browser holding it cannot
    reach other agents' instructions and tools. Failing closed matters more here than the
    convenience of one key for several agents."""
    bound = caller.agent
    if asked == DEFAULT_AGENT and (bound is not None or agents.get(DEFAULT_AGENT) is None):
        asked = bound or agents.default_name
    if bound is not None:
        _hold_to(bound, asked, thread)
    if thread is not None and thread.agent is not None:
        if asked is not None and asked != thread.agent:
            raise ApiError(Problem.THREAD_AGENT_MISMATCH,
                           f"Thread {thread.id} runs agent {thread.agent!r}, not {echo(asked)!r}",
                           threadId=thread.id, agent=thread.agent)
        name = thread.agent
    else:
        name = asked or bound or agents.default_name
    agent = agents.get(name)
    if agent is None:
        raise ApiError(Problem.AGENT_NOT_FOUND, f"No agent {echo(name)!r} on this gateway",
                       agent=echo(name), agents=[a.name for a in agents])
    return agent


def _hold_to(bound: str, asked: str | None, thread: ThreadRow | None) -> None:
    """Refuse a bound credential another agent, by name or through another agent's thread."""
    other = asked if asked is not None and asked != bound else None
    if other is None and thread is not None and thread.agent not in (None, bound):
        other = thread.agent
    if other is not None:
        raise ApiError(Problem.AGENT_NOT_ALLOWED,
                       f"This API key runs agent {bound!r} only, not {echo(other)!r}",
                       agent=bound)


def check_client_prompt(agent: ResolvedAgent, seeds: Sequence[SeedMessage]) -> None:
    """A client's system prompt is refused unless the agent takes one (after its own)."""
    if agent.allow_client_system_prompt:
        return
    if any(seed.role == "system" for seed in seeds):
        raise ApiError(Problem.SYSTEM_PROMPT_NOT_ALLOWED,
                       f"Agent {agent.name!r} does not take a system prompt from the client: "
                       "its instructions are the operator's (send the text as a user message "
                       "or as context instead)", agent=agent.name)
