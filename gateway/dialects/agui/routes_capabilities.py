"""What an agent can do, as AG-UI 1.0's `AgentCapabilities` (`getCapabilities()`), read from
its definition (`GET /v1/agui/agents/{agent}/capabilities`): a client shows an image picker, a
branch switcher or an approval dialog only for an agent that takes them.

Each member says what the gateway does for every agent (streaming, resuming, kept state,
client tools, interrupts, reasoning, branches) or what this agent's definition says (its
server tools, sub-agents, step limit, the tools that wait for approval, and the input its model
is known to read: litellm's model information; unknown is left out, as AG-UI reads an omitted
field as "not declared")."""

from __future__ import annotations

from collections.abc import Mapping

from ag_ui.core import (
    AgentCapabilities,
    ExecutionCapabilities,
    HumanInTheLoopCapabilities,
    IdentityCapabilities,
    MultiAgentCapabilities,
    MultimodalCapabilities,
    MultimodalInputCapabilities,
    ReasoningCapabilities,
    StateCapabilities,
    SubagentInfo,
    Tool,
    ToolsCapabilities,
    TransportCapabilities,
)
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ...api.agents import gateway_version
from ...api.context import admission, caller, user_scope
from ...engine import attachments
from ...engine.agents.agent import ResolvedAgent
from ...engine.loop import ServerToolSpec


def capabilities(agent: ResolvedAgent, tools: Mapping[str, ServerToolSpec],
                 subagents: Mapping[str, str], version: str) -> AgentCapabilities:
    """`agent`'s capabilities; `tools`: its server tools; `subagents`: the agents it may
    delegate to, with their descriptions; `version`: the gateway's."""
    model = attachments.capabilities(agent.model)
    asks_first = bool(agent.approval) or any(t.approval for t in tools.values())
    return AgentCapabilities(
        identity=IdentityCapabilities(name=agent.name, type="gateway",
                                      description=agent.description or None,
                                      version=version, provider="gateway"),
        transport=TransportCapabilities(streaming=True, resumable=True, websocket=False,
                                        http_binary=False, push_notifications=False),
        tools=ToolsCapabilities(
            supported=True, client_provided=True, parallel_calls=True,
            items=[Tool(name=t.name, description=t.description, parameters=t.parameters)
                   for t in tools.values() if t.name not in subagents]),
        state=StateCapabilities(snapshots=True, deltas=True, memory=True,
                                persistent_state=True),
        multi_agent=MultiAgentCapabilities(
            supported=bool(subagents), delegation=bool(subagents), handoffs=False,
            subagents=[SubagentInfo(name=name, description=description or None)
                       for name, description in subagents.items()] or None),
        reasoning=ReasoningCapabilities(supported=True, streaming=True, encrypted=False),
        multimodal=MultimodalCapabilities(input=MultimodalInputCapabilities(
            image=model.images, pdf=model.files, file=model.files)),
        execution=ExecutionCapabilities(code_execution=False, max_iterations=agent.max_steps),
        human_in_the_loop=HumanInTheLoopCapabilities(
            supported=True, interrupts=True, approvals=asks_first, approve_with_edits=True),
        custom={"branches": True, "activity": ["tool_status"]},
    )


async def agent_capabilities(request: Request) -> Response:
    """The agent's AG-UI capabilities (`capabilities` above), for `getCapabilities()`."""
    door, who = admission(request), caller(request)
    user_scope(request)  # a userKey given is checked as on every call (the answer is the same)
    agent = door.agent(who, None, request.path_params["agent"])
    registry = door.agents
    subagents = {name: sub.description for name in agent.subagents
                 if (sub := registry.get(name)) is not None}
    declared = capabilities(agent, door.runs.setup.tools_of(agent), subagents,
                            gateway_version())
    return JSONResponse(declared.model_dump(mode="json", by_alias=True, exclude_none=True))
