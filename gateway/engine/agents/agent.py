"""The operator's agents: what each one is, by name, checked once at start-up.

An `Agent` is a declaration, from the agents file (`engine/agents/file.py`) or from Python code
that embeds the gateway (`create_app(settings, agents=[Agent(...)])`). A field left as `None`
inherits the environment's setting (`GATEWAY_MODEL` with its API base and key, `GATEWAY_TOOLS`,
`GATEWAY_MCP_SERVERS`, `GATEWAY_MAX_STEPS`), so a declaration may hold nothing but
instructions. `AgentRegistry` holds the agents resolved against those settings, after every
check an operator would otherwise discover at the first run: a model outside the allow-list, a
tool that does not import, a sub-agent that does not exist, a cycle or a chain of sub-agents
deeper than `GATEWAY_SUBAGENT_MAX_DEPTH`. Each refusal is an `AgentError`: one line naming where
the agent was declared, the agent and the field.

With no agents declared there is one agent, `default`, made of the environment's settings:
the gateway as it always was.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..loop import ServerToolSpec
from ..models.reasoning import EFFORTS, Reasoning
from ..models.routed import Deployment
from ..tools.approval_rules import ApprovalRule, RuleError, parse_rule

if TYPE_CHECKING:
    from ...config import Settings

DEFAULT_AGENT = "default"
# Agent names appear in URL paths and as the tool name a parent calls a sub-agent by.
AGENT_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

ToolSource = str | Callable[..., Any] | ServerToolSpec
CONTEXT_MODES = ("trim", "summarize")


class AgentError(ValueError):
    """An agent that cannot be used as declared; the message is one line naming where it was
    declared, the agent and the field."""

    def __init__(self, source: str, reason: str, agent: str | None = None,
                 field_name: str | None = None) -> None:
        where = f"[agents.{agent}] " if agent is not None else ""
        what = f"{field_name}: " if field_name is not None else ""
        super().__init__(f"{source}: {where}{what}{reason}")
        self.source, self.agent, self.field, self.reason = source, agent, field_name, reason


@dataclass(frozen=True)
class Agent:
    """One agent as the operator declares it; `None` inherits the environment's setting.

    `tools` are Python server tools: import paths (`"myapp.tools:search"`, or a module or file
    as `GATEWAY_TOOLS` takes), functions, or specs. `mcp_servers` is a JSON file in the
    `mcpServers` format (as `GATEWAY_MCP_SERVERS`; `""`: none). `subagents` names other agents
    this one may delegate a task to. `approval` names its server tools (Python or MCP) whose
    calls wait for a human's approval (docs/human-in-the-loop.md); `approval_rules` those that
    wait only when a rule on the call's arguments holds.
    """

    name: str
    description: str = ""
    instructions: str | None = None
    model: str | None = None
    fallbacks: Sequence[str | Deployment] | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    tools: Sequence[ToolSource] | None = None
    mcp_servers: str | None = None
    max_steps: int | None = None
    max_input_tokens: int | None = None
    subagents: Sequence[str] = ()
    allow_client_system_prompt: bool = False
    # What replaces the older turns left out to fit the input budget: nothing ("trim"), or a
    # summary the model writes of them ("summarize"; docs/context.md).
    context: str = "trim"
    approval: Sequence[str] = ()  # its server tools that ask a human before they run
    # Server tools that ask first only for the calls a rule on their arguments holds for:
    # tool name -> an expression of `engine/tools/approval_rules.py`'s language.
    approval_rules: Mapping[str, str] = field(default_factory=dict)
    # What it asks of the model's thinking (docs/models.md, Reasoning): an effort
    # ("minimal", "low", "medium", "high"; OpenAI's `reasoning_effort`, which litellm maps
    # for Anthropic and Gemini), and a budget of thinking tokens (Anthropic's `thinking`,
    # Gemini's thinking budget; an OpenAI-compatible server has none).
    reasoning_effort: str | None = None
    thinking_budget: int | None = None


@dataclass(frozen=True)
class ResolvedAgent:
    """An agent with every inherited value filled in: what a run of it uses.

    `tools` is None when the agent takes the environment's Python tools (`GATEWAY_TOOLS`, loaded
    with the server); `mcp_servers` is the MCP file it connects to, None for none.
    """

    name: str
    description: str
    instructions: str | None
    model: str
    fallbacks: tuple[Deployment, ...]
    temperature: float | None
    max_tokens: int | None
    tools: dict[str, ServerToolSpec] | None
    mcp_servers: str | None
    max_steps: int
    max_input_tokens: int | None
    subagents: tuple[str, ...]
    allow_client_system_prompt: bool
    context: str = "trim"
    approval: tuple[str, ...] = ()
    approval_rules: Mapping[str, ApprovalRule] = field(default_factory=dict)
    reasoning: Reasoning = Reasoning()


@dataclass(frozen=True)
class AgentDefaults:
    """What an agent inherits from the environment, and the bounds it is checked against."""

    model: str
    fallbacks: tuple[Deployment, ...] = ()
    allowed_models: tuple[str, ...] = ()  # GATEWAY_MODELS, besides `model`
    mcp_servers: str | None = None
    max_steps: int = 10
    max_depth: int = 3

    @classmethod
    def from_settings(cls, settings: Settings) -> AgentDefaults:
        return cls(
            model=settings.model,
            fallbacks=tuple(Deployment(f.model, f.api_base,
                                       f.api_key.get_secret_value() if f.api_key else None)
                            for f in settings.model_fallbacks),
            allowed_models=tuple(settings.models), mcp_servers=settings.mcp_servers,
            max_steps=settings.max_steps, max_depth=settings.subagent_max_depth)

    @property
    def models(self) -> tuple[str, ...]:
        return (self.model, *self.allowed_models)


@dataclass
class AgentRegistry:
    """The agents by name, and the one a run gets when nothing chooses another."""

    agents: dict[str, ResolvedAgent]
    default_name: str
    source: str = "the environment"
    max_depth: int = 3  # GATEWAY_SUBAGENT_MAX_DEPTH: how deep a run may delegate

    def get(self, name: str) -> ResolvedAgent | None:
        return self.agents.get(name)

    @property
    def default(self) -> ResolvedAgent:
        return self.agents[self.default_name]

    def __iter__(self) -> Iterator[ResolvedAgent]:
        return iter(self.agents.values())

    def __len__(self) -> int:
        return len(self.agents)

    def listing(self) -> list[dict[str, str]]:
        """Name and description of each agent, in the order they were declared."""
        return [{"name": a.name, "description": a.description} for a in self]


def environment_agent() -> Agent:
    """The one agent of a gateway without declared agents: today's gateway."""
    return Agent(name=DEFAULT_AGENT, description="The gateway's agent (GATEWAY_MODEL and "
                 "GATEWAY_TOOLS).")


def build_registry(agents: Sequence[Agent], defaults: AgentDefaults, source: str,
                   default_name: str | None = None) -> AgentRegistry:
    """Resolve and check `agents` (declared in `source`); the default is `default_name`, else
    the agent named `default`, else the first one."""
    if not agents:
        raise AgentError(source, "declares no agents")
    resolved: dict[str, ResolvedAgent] = {}
    for agent in agents:
        if not isinstance(agent.name, str) or not AGENT_NAME.match(agent.name):
            raise AgentError(source, f"{agent.name!r} is not an agent name (letters, digits, "
                                     "_ and -, at most 64)")
        if agent.name in resolved:
            raise AgentError(source, "is declared twice", agent.name)
        resolved[agent.name] = resolve(agent, defaults, source)
    check_subagents(resolved, defaults.max_depth, source)
    if default_name is None:
        default_name = DEFAULT_AGENT if DEFAULT_AGENT in resolved else next(iter(resolved))
    elif default_name not in resolved:
        raise AgentError(source, f"GATEWAY_DEFAULT_AGENT names {default_name!r}, which is not "
                                 f"declared (agents: {', '.join(resolved)})")
    return AgentRegistry(resolved, default_name, source, defaults.max_depth)


def resolve(agent: Agent, defaults: AgentDefaults, source: str) -> ResolvedAgent:
    """One agent with the environment's values for what it leaves out, or an `AgentError`."""

    def error(field_name: str, reason: str) -> AgentError:
        return AgentError(source, reason, agent.name, field_name)

    model = agent.model if agent.model is not None else defaults.model
    if model not in defaults.models:
        raise error("model", f"{model!r} is not allowed on this gateway (allowed: "
                             f"{', '.join(defaults.models)}; set GATEWAY_MODELS to allow more)")
    if agent.fallbacks is not None:
        fallbacks = tuple(f if isinstance(f, Deployment) else Deployment(f)
                          for f in agent.fallbacks)
    else:  # the environment's fallbacks belong to the environment's model
        fallbacks = defaults.fallbacks if agent.model is None else ()
    if agent.context not in CONTEXT_MODES:
        raise error("context", f"must be one of {', '.join(CONTEXT_MODES)}")
    if agent.reasoning_effort is not None and agent.reasoning_effort not in EFFORTS:
        raise error("reasoning_effort", f"must be one of {', '.join(EFFORTS)}")
    budget = agent.thinking_budget
    if budget is not None and (not isinstance(budget, int) or isinstance(budget, bool)
                               or budget < 1):
        raise error("thinking_budget", "must be a whole number of tokens, 1 or more")
    tools = None if agent.tools is None else load_tools(agent.tools, error)
    mcp = agent.mcp_servers if agent.mcp_servers is not None else defaults.mcp_servers
    return ResolvedAgent(
        name=agent.name, description=agent.description, instructions=agent.instructions,
        model=model, fallbacks=fallbacks, temperature=agent.temperature,
        max_tokens=agent.max_tokens, tools=tools, mcp_servers=mcp or None,
        max_steps=agent.max_steps if agent.max_steps is not None else defaults.max_steps,
        max_input_tokens=agent.max_input_tokens, subagents=tuple(agent.subagents),
        allow_client_system_prompt=agent.allow_client_system_prompt, context=agent.context,
        approval=tuple(agent.approval), approval_rules=_rules(agent, error),
        reasoning=Reasoning(agent.reasoning_effort, agent.thinking_budget))


def _rules(agent: Agent, error: Callable[[str, str], AgentError]) -> dict[str, ApprovalRule]:
    """The agent's approval rules, parsed now: a rule outside the language stops start-up."""
    rules = {}
    for tool, text in agent.approval_rules.items():
        if tool in agent.approval:
            raise error("approval_rules", f"{tool!r} is also in `approval` (which asks for "
                                          "every call): name it in one of them")
        try:
            rules[tool] = parse_rule(text)
        except RuleError as exc:
            raise error("approval_rules", f"the rule of {tool!r} {exc}") from None
    return rules


def load_tools(sources: Sequence[ToolSource],
               error: Callable[[str, str], AgentError]) -> dict[str, ServerToolSpec]:
    """Each tool source as a spec: an import path is imported now, so a typo stops start-up
    rather than the first run that needs the tool."""
    from ..tools.python_tools import tool_specs

    specs: dict[str, ServerToolSpec] = {}
    for source in sources:
        try:
            found = tool_specs(source)
        except Exception as exc:
            reason = " ".join(str(exc).split()) or type(exc).__name__
            raise error("tools", f"cannot load {_shown(source)}: {type(exc).__name__}: "
                                 f"{reason}"[:500]) from None
        for spec in found:
            if spec.name in specs:
                raise error("tools", f"two tools are named {spec.name!r}")
            specs[spec.name] = spec
    return specs


def _shown(source: ToolSource) -> str:
    if isinstance(source, str):
        return repr(source)
    return repr(getattr(source, "name", None) or getattr(source, "__name__", source))


def check_subagents(agents: Mapping[str, ResolvedAgent], max_depth: int, source: str) -> None:
    """Every sub-agent exists, none delegates back to itself, and no chain of delegation is
    deeper than `max_depth` (an agent whose sub-agents have none is one level)."""
    for agent in agents.values():
        for name in agent.subagents:
            if name not in agents:
                raise AgentError(source, f"{name!r} is not a declared agent", agent.name,
                                 "subagents")
    depths: dict[str, int] = {}

    def depth(name: str, path: tuple[str, ...]) -> int:
        if name in path:
            cycle = " -> ".join((*path[path.index(name):], name))
            raise AgentError(source, f"delegation cycle {cycle}", path[0], "subagents")
        if name not in depths:
            depths[name] = max((1 + depth(s, (*path, name)) for s in agents[name].subagents),
                               default=0)
        return depths[name]

    for name in agents:
        if depth(name, ()) > max_depth:
            raise AgentError(source, f"sub-agents nest {depths[name]} levels deep; the limit "
                                     f"is {max_depth} (GATEWAY_SUBAGENT_MAX_DEPTH)", name,
                             "subagents")
