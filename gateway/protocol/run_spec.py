"""The run's input in one neutral shape: what every dialect's request becomes.

A dialect (`gateway/dialects/<name>/input.py`) parses its own request and converts it into a
`RunSpec`; `runs/` and `engine/` read only this, never a dialect's types. Field names are the
gateway's own (snake_case), and so is the snapshot a run keeps on its row (`snapshot()`), which
the run's task reads back (`from_snapshot`). Rows written before this shape existed hold the
Tambo request's camelCase keys; `from_snapshot` reads those too, so a run paused before an
upgrade continues after it.

Content blocks (`UserInput.blocks`, `ToolResult.blocks`) are kept as the JSON objects the stored
Timbal values carry (`{"type": "text", "text": ...}`, `{"type": "resource", "resource": ...}`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

DisconnectPolicy = Literal["cancel", "continue", "grace"]
# What a run request does on a busy thread (`runs/admission/multitask.py`).
MultitaskStrategy = Literal["reject", "interrupt", "rollback", "enqueue"]
# "auto", "required", "none", or {"name": tool} to force one tool.
ToolChoice = str | dict[str, str]
Block = dict[str, Any]

SNAPSHOT_VERSION = 1  # the key `run_spec` of a snapshot in this shape


@dataclass(frozen=True)
class ClientTool:
    """A tool the client runs: a call to it pauses the run (`awaiting_input`)."""

    name: str
    description: str = ""
    input_schema: dict[str, Any] | bool | None = None
    output_schema: dict[str, Any] | bool | None = None
    strict: bool | None = None
    max_calls: int | None = None  # calls allowed per thread (None: no limit)


@dataclass(frozen=True)
class Component:
    """A UI component the model may show: offered to it as a tool whose arguments are props."""

    name: str
    description: str = ""
    props_schema: dict[str, Any] | bool | None = None
    state_schema: dict[str, Any] | None = None
    # Client tools offered only while the component is shown in the thread (`contextTools`).
    context_tools: tuple[ClientTool, ...] = ()

    def snapshot(self) -> dict[str, Any]:
        data = _compact({k: v for k, v in vars(self).items() if k != "context_tools"})
        if self.context_tools:
            data["context_tools"] = [_compact(vars(t)) for t in self.context_tools]
        return data

    @classmethod
    def of(cls, data: dict[str, Any]) -> Component:
        tools = tuple(ClientTool(**t) for t in data.get("context_tools", []))
        return cls(**{**data, "context_tools": tools})


@dataclass(frozen=True)
class ToolResult:
    """The client's answer to one pending tool call."""

    tool_call_id: str
    blocks: list[Block]
    is_error: bool = False

    @property
    def text(self) -> str:
        return "\n".join(b["text"] for b in self.blocks if b.get("type") == "text")


@dataclass(frozen=True)
class UserInput:
    """The user's new message: its text and resource blocks, and what came with it."""

    blocks: list[Block]
    context: dict[str, Any] | None = None  # the page's context (Tambo `additionalContext`)
    metadata: dict[str, Any] | None = None
    # The user message's id (its Timbal `i`) when the dialect promised one to its client (the
    # Timbal write path answers with it); None: the run makes one.
    id: str | None = None

    @property
    def text(self) -> str:
        return "\n".join(b["text"] for b in self.blocks if b.get("type") == "text")


@dataclass(frozen=True)
class SeedMessage:
    """A message a new thread starts with (a system prompt, an earlier exchange)."""

    role: Literal["user", "assistant", "system"]
    text: str


@dataclass(frozen=True)
class Idempotency:
    """A request that may be retried: its key, and the request as sent (JSON), which a retry
    must repeat exactly to attach to the run the first one started."""

    key: str
    request: dict[str, Any]


@dataclass(frozen=True)
class RunSpec:
    """One run's input, whatever the dialect that asked for it."""

    user: UserInput | None = None
    tool_results: list[ToolResult] = field(default_factory=list)
    # Context sent with tool results alone (no user message): kept as its own input part.
    context: dict[str, Any] | None = None
    client_tools: list[ClientTool] = field(default_factory=list)
    components: list[Component] = field(default_factory=list)
    tool_choice: ToolChoice | None = None
    force_component: str | None = None
    max_tokens: int | None = None  # per model call
    temperature: float | None = None
    model: str | None = None  # a model picked from the allow-list; None: the configured one
    agent: str | None = None
    previous_run_id: str | None = None
    on_disconnect: DisconnectPolicy | None = None
    metadata: dict[str, Any] | None = None  # the run's metadata, as the dialect keeps it
    seed_messages: list[SeedMessage] = field(default_factory=list)  # a new thread's history
    idempotency: Idempotency | None = None
    # A new user message may end the thread's pause (`runs/pauses.py`) instead of a 400.
    abandon_pending_tools: bool = False
    # On a busy thread: `reject`, `interrupt`, `rollback` or `enqueue` (`runs/admission/multitask.py`;
    # None: reject).
    multitask_strategy: MultitaskStrategy | None = None

    def snapshot(self) -> dict[str, Any]:
        """What the run's task needs, as kept on the run row (JSON, snake_case)."""
        data: dict[str, Any] = {
            "run_spec": SNAPSHOT_VERSION,
            "client_tools": [_compact(vars(t)) for t in self.client_tools],
            "components": [c.snapshot() for c in self.components],
        }
        for name in ("tool_choice", "force_component", "max_tokens", "temperature", "model",
                     "agent", "metadata"):
            value = getattr(self, name)
            if value is not None:
                data[name] = value
        return data

    @classmethod
    def from_snapshot(cls, data: dict[str, Any] | None) -> RunSpec:
        """The run's spec as `snapshot()` kept it (or as the Tambo request's camelCase keys
        were kept before this shape existed)."""
        data = data or {}
        if "run_spec" not in data:
            data = _from_tambo_snapshot(data)
        return cls(
            client_tools=[ClientTool(**t) for t in data.get("client_tools", [])],
            components=[Component.of(c) for c in data.get("components", [])],
            tool_choice=data.get("tool_choice"),
            force_component=data.get("force_component"),
            max_tokens=data.get("max_tokens"),
            temperature=data.get("temperature"),
            model=data.get("model"),
            agent=data.get("agent"),
            metadata=data.get("metadata"),
        )


def _compact(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


# The keys of snapshots written before `RunSpec` (the Tambo request's own), and what they became.
_OLD_KEYS = {"tools": "client_tools", "availableComponents": "components",
             "toolChoice": "tool_choice", "forceComponent": "force_component",
             "maxTokens": "max_tokens", "temperature": "temperature", "model": "model",
             "runMetadata": "metadata"}
_OLD_TOOL = {"name": "name", "description": "description", "inputSchema": "input_schema",
             "outputSchema": "output_schema", "strict": "strict", "maxCalls": "max_calls"}
_OLD_COMPONENT = {"name": "name", "description": "description", "propsSchema": "props_schema",
                  "stateSchema": "state_schema"}


def _renamed(values: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    return {names[k]: v for k, v in values.items() if k in names}


def _from_tambo_snapshot(data: dict[str, Any]) -> dict[str, Any]:
    new = _renamed(data, _OLD_KEYS)
    new["client_tools"] = [_renamed(t, _OLD_TOOL) for t in new.get("client_tools", [])]
    new["components"] = [_renamed(c, _OLD_COMPONENT) for c in new.get("components", [])]
    return new
