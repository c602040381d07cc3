"""Gateway: runs LLM agent loops and streams them over the Tambo v1 API (AG-UI over SSE).

The public door for code that extends or embeds the gateway; everything else is internal and
may move:

    from gateway import server_tool, run_components, create_app, Settings, Agent

- `server_tool`: mark a Python function as a tool the model may call (`GATEWAY_TOOLS`);
- `run_components()`: inside a server tool, the component state of the calling run's thread;
- `ComponentStateError`: what a refused component state update raises (with a stable `code`);
- `ToolContext`, `tool_context()`: who a server tool's run works for (project, user scope,
  thread), to authorise on; a tool parameter annotated `ToolContext` is given it;
- `ToolError`: raise it from a server tool to show the model its message (any other exception
  is reported as a generic failure with an error id, its details logged only);
- `create_app(settings)`: the ASGI application, to serve with any ASGI server;
- `Settings`: every setting (environment variables `GATEWAY_*`), validated.
- `Agent`: an agent the operator declares in Python (`create_app(settings, agents=[...])`),
  as an `[agents.NAME]` table of `GATEWAY_AGENTS_FILE` declares one (docs/agents.md);
- `AgentError`: what a refused agent raises (one line: where, which agent, which field).
"""


from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .app import create_app
    from .config import Settings
    from .engine.agents.agent import Agent, AgentError
    from .engine.tools.python_tools import ToolContext, ToolError, server_tool, tool_context
    from .runs.components.state import ComponentStateError, run_components

__all__ = ["Agent", "AgentError", "ComponentStateError", "Settings", "ToolContext", "ToolError",
           "create_app", "run_components", "server_tool", "tool_context"]

# Imported on first use, so `gateway config` or a failing start-up does not first load the
# whole server.
_HOMES = {"create_app": ".app", "Agent": ".engine.agents.agent",
          "AgentError": ".engine.agents.agent", "Settings": ".config",
          "server_tool": ".engine.tools.python_tools",
          "run_components": ".runs.components.state",
          "ComponentStateError": ".runs.components.state",
          "ToolContext": ".engine.tools.python_tools",
          "ToolError": ".engine.tools.python_tools", "tool_context": ".engine.tools.python_tools"}


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(importlib.import_module(_HOMES[name], __name__), name)
    raise AttributeError(f"module 'gateway' has no attribute {name!r}")
