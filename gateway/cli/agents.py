"""`gateway agents check [FILE]`: check an agents file without starting the gateway.

The same checks as start-up (`engine.agents.file`), against the same settings (the model
allow-list, `GATEWAY_SUBAGENT_MAX_DEPTH`, `GATEWAY_DEFAULT_AGENT`): exit 0 with one line per
agent, or exit 2 with the one line that says what to fix. Without FILE it checks
`GATEWAY_AGENTS_FILE`, the file `gateway serve` would read.
"""

from __future__ import annotations

import argparse
import sys

from ..config import Settings
from .commands import Commands


def add_parser(commands: Commands) -> None:
    agents = commands.add_parser("agents", help="check an agents file (GATEWAY_AGENTS_FILE)")
    actions = agents.add_subparsers(dest="agents_command", required=True)
    check = actions.add_parser("check", help="validate FILE without starting; exit 2 if it "
                                             "is refused")
    check.add_argument("file", nargs="?",
                       help="the agents file (TOML; default: GATEWAY_AGENTS_FILE)")


def run(settings: Settings, args: argparse.Namespace) -> int:
    from ..engine.agents.agent import AgentDefaults, AgentError
    from ..engine.agents.file import load_agents_file

    path = args.file or settings.agents_file
    if not path:
        print("gateway: agents check: name a FILE or set GATEWAY_AGENTS_FILE", file=sys.stderr)
        return 2
    try:
        registry = load_agents_file(path, AgentDefaults.from_settings(settings),
                                    settings.default_agent)
    except AgentError as error:
        print(f"gateway: invalid agents file {error}", file=sys.stderr)
        return 2
    print(f"{path}: {len(registry)} agent{'s' if len(registry) != 1 else ''}, "
          f"default {registry.default_name}")
    for agent in registry:
        count = len(agent.tools or ())
        tools = ("GATEWAY_TOOLS" if agent.tools is None
                 else f"{count} tool{'s' if count != 1 else ''}")
        parts = [f"model {agent.model}", tools]
        if agent.instructions:
            parts.append("instructions")
        if agent.subagents:
            parts.append("sub-agents " + ", ".join(agent.subagents))
        print(f"  {agent.name}: {'; '.join(parts)}")
    return 0
