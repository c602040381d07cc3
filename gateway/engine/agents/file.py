"""The agents file (`GATEWAY_AGENTS_FILE`): TOML, one `[agents.NAME]` table per agent.

    [agents.support]
    description = "Answers questions about orders"
    instructions = "You are the support agent of Example Shop. ..."
    model = "openai/gpt-4o-mini"          # GATEWAY_MODEL, or one of GATEWAY_MODELS
    tools = ["shop.tools"]                # Python server tools, by import path
    approval = ["refund_order"]           # server tools that ask a human first
    approval_rules = {send_email = 'to not in ["ops@example.com"]'}  # ... when this holds
    subagents = ["billing"]
    reasoning_effort = "medium"           # or thinking_budget = 4000 (Anthropic, Gemini)

Every field is optional (docs/agents.md lists them); what a table leaves out is the
environment's setting. The file is read with the standard library (`tomllib`) and checked
whole before the gateway starts: a field it does not know, a value of the wrong type, and
everything `engine.agents.agent.build_registry` refuses, each as one line naming the file, the agent
and the field.
"""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..models.reasoning import EFFORTS
from ..models.routed import Deployment
from .agent import (
    Agent,
    AgentDefaults,
    AgentError,
    AgentRegistry,
    build_registry,
    environment_agent,
)

if TYPE_CHECKING:
    from ...config import Settings

MAX_FILE_BYTES = 1024 * 1024
MAX_TEXT = {"description": 1000, "instructions": 100_000}

# field: (what the TOML value must be, as the error says it, and a check)
_FIELDS: dict[str, tuple[str, Any]] = {
    "description": ("a string", lambda v: isinstance(v, str)),
    "instructions": ("a string", lambda v: isinstance(v, str)),
    "model": ("a non-empty string", lambda v: isinstance(v, str) and bool(v.strip())),
    "fallbacks": ("a list of model strings or {model, api_base, api_key} tables",
                  lambda v: isinstance(v, list)),
    "temperature": ("a number from 0 to 2", lambda v: _number(v) and 0 <= v <= 2),
    "max_tokens": ("a whole number, 1 or more", lambda v: _whole(v) and v >= 1),
    "tools": ("a list of import paths (strings)",
              lambda v: isinstance(v, list) and all(isinstance(t, str) and t for t in v)),
    "mcp_servers": ("a path (string) to an MCP servers JSON file", lambda v: isinstance(v, str)),
    "max_steps": ("a whole number from 1 to 1000", lambda v: _whole(v) and 1 <= v <= 1000),
    "max_input_tokens": ("a whole number, 1 or more", lambda v: _whole(v) and v >= 1),
    "subagents": ("a list of agent names (strings)",
                  lambda v: isinstance(v, list) and all(isinstance(s, str) for s in v)),
    "allow_client_system_prompt": ("true or false", lambda v: isinstance(v, bool)),
    "context": ('"trim" or "summarize"', lambda v: v in ("trim", "summarize")),
    "approval": ("a list of server tool names (strings)",
                 lambda v: isinstance(v, list) and all(isinstance(t, str) and t for t in v)),
    "approval_rules": ("a table of server tool name = rule (a string)",
                       lambda v: isinstance(v, dict) and all(isinstance(r, str)
                                                             for r in v.values())),
    "reasoning_effort": ('"minimal", "low", "medium" or "high"', lambda v: v in EFFORTS),
    "thinking_budget": ("a whole number of tokens, 1 or more", lambda v: _whole(v) and v >= 1),
}


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def load_agents_file(path: str | Path, defaults: AgentDefaults,
                     default_name: str | None = None) -> AgentRegistry:
    """The agents of the file at `path`, resolved and checked, or an `AgentError`."""
    source = str(path)
    tables = read_tables(Path(path), source)
    agents = [agent_of(name, table, Path(path).parent, source) for name, table in tables.items()]
    return build_registry(agents, defaults, source, default_name)


def read_tables(path: Path, source: str) -> dict[str, Any]:
    """The file's `[agents.NAME]` tables, in the file's order."""
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise AgentError(source, f"is larger than {MAX_FILE_BYTES // 1024} KiB")
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise AgentError(source, f"cannot be read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise AgentError(source, "is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise AgentError(source, f"is not valid TOML: {exc}") from None
    unknown = [key for key in document if key != "agents"]
    if unknown:
        raise AgentError(source, f"unknown top-level key {unknown[0]!r} (agents are "
                                 "[agents.NAME] tables)")
    tables = document.get("agents")
    if not isinstance(tables, dict) or not tables:
        raise AgentError(source, "declares no agents (add an [agents.NAME] table)")
    for name, table in tables.items():
        if not isinstance(table, dict):
            raise AgentError(source, "must be a table ([agents.NAME])", name)
    return tables


def agent_of(name: str, table: dict[str, Any], base: Path, source: str) -> Agent:
    """One table as an `Agent`, each value's type checked; paths are relative to the file."""
    for key, value in table.items():
        if key not in _FIELDS:
            raise AgentError(source, f"unknown field (known: {', '.join(_FIELDS)})", name, key)
        expected, check = _FIELDS[key]
        if not check(value):
            raise AgentError(source, f"must be {expected}", name, key)
        if key in MAX_TEXT and len(value) > MAX_TEXT[key]:
            raise AgentError(source, f"is longer than {MAX_TEXT[key]} characters", name, key)
    values = dict(table)
    if "fallbacks" in values:
        values["fallbacks"] = _fallbacks(values["fallbacks"], name, source)
    if values.get("mcp_servers"):
        values["mcp_servers"] = _mcp_file(values["mcp_servers"], base, name, source)
    if "temperature" in values:
        values["temperature"] = float(values["temperature"])
    return Agent(name=name, **values)


def _fallbacks(items: list[Any], agent: str, source: str) -> list[Deployment]:
    found = []
    for item in items:
        if isinstance(item, str) and item.strip():
            found.append(Deployment(item.strip()))
        elif (isinstance(item, dict) and isinstance(item.get("model"), str)
              and set(item) <= {"model", "api_base", "api_key"}
              and all(isinstance(v, str) for v in item.values())):
            found.append(Deployment(item["model"], item.get("api_base"), item.get("api_key")))
        else:
            raise AgentError(source, "each entry must be a model string or a {model, api_base, "
                                     "api_key} table of strings", agent, "fallbacks")
    return found


def _mcp_file(value: str, base: Path, agent: str, source: str) -> str:
    """The MCP servers file, relative to the agents file, parsed now (connected at start-up)."""
    from ..tools.mcp import McpStartupError, load_config

    path = Path(value) if Path(value).is_absolute() else base / value
    try:
        load_config(str(path))
    except McpStartupError as exc:
        raise AgentError(source, " ".join(str(exc).split()), agent, "mcp_servers") from None
    return str(path)


def registry_for(settings: Settings, agents: Sequence[Agent] | None = None) -> AgentRegistry:
    """The gateway's agents: those given in Python (embedding), else the agents file's, else
    the environment's one `default` agent."""
    defaults = AgentDefaults.from_settings(settings)
    if agents is not None:
        if settings.agents_file:
            raise AgentError("create_app(agents=...)", "agents are given both here and in "
                                                      "GATEWAY_AGENTS_FILE; give them once")
        return build_registry(list(agents), defaults, "create_app(agents=...)",
                              settings.default_agent)
    if settings.agents_file:
        return load_agents_file(settings.agents_file, defaults, settings.default_agent)
    return build_registry([environment_agent()], defaults, "the environment",
                          settings.default_agent)
