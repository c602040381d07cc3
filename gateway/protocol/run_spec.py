"""The run's input in one neutral shape: what every dialect's request becomes.

A dialect (`gateway/dialects/<name>/input.py`) parses its own request and converts it into a
`RunSpec`; `runs/` and `engine/` read only this, never a dialect's types. Field names are the
gateway's own (snake_case), and so is the run row's copy of the spec (`to_row()`), which holds
every field and reads back equal (`from_row`): a run started here runs on the spec it was
admitted with, and one read from its row (a queued run that another process promotes, a
reconnect that needs the run's metadata) on the same spec. Older rows read too: the first
snake_case shape (which kept only what the run's task read) and, before it, the Tambo
request's camelCase keys, so a run paused before an upgrade continues after it.

Content blocks (`UserInput.blocks`, `ToolResult.blocks`) are kept as the JSON objects the stored
Timbal values carry (`{"type": "text", "text": ...}`, `{"type": "resource", "resource": ...}`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

DisconnectPolicy = Literal["cancel", "continue", "grace"]
# What a run request does on a busy thread (`runs/admission/multitask.py`).
MultitaskStrategy = Literal["reject", "interrupt", "rollback", "enqueue"]
# "auto", "required", "none", or {"name": tool} to force one tool.
ToolChoice = str | dict[str, str]
Block = dict[str, Any]

# The key `run_spec` of a row in this shape (1: the first snake_case one, which kept only what
# the run's task read; 2: every field).
ROW_VERSION = 2


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

    def to_row(self) -> dict[str, Any]:
        data = _compact({k: v for k, v in vars(self).items() if k != "context_tools"})
        if self.context_tools:
            data["context_tools"] = [_compact(vars(t)) for t in self.context_tools]
        return data

    @classmethod
    def from_row(cls, data: Mapping[str, Any]) -> Component:
        tools = tuple(ClientTool(**t) for t in data.get("context_tools", ()))
        return cls(**{**data, "context_tools": tools})


@dataclass(frozen=True)
class ToolResult:
    """The client's answer to one pending tool call."""

    tool_call_id: str
    blocks: list[Block]
    is_error: bool = False

    def to_row(self) -> dict[str, Any]:
        row = {"tool_call_id": self.tool_call_id, "blocks": self.blocks}
        return {**row, "is_error": True} if self.is_error else row

    @classmethod
    def from_row(cls, data: Mapping[str, Any]) -> ToolResult:
        return cls(data["tool_call_id"], data["blocks"], bool(data.get("is_error")))

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
    # The id an AG-UI client gave the message (kept beside the gateway's).
    client_id: str | None = None

    def to_row(self) -> dict[str, Any]:
        return _compact(vars(self))

    @classmethod
    def from_row(cls, data: Mapping[str, Any]) -> UserInput:
        return cls(data["blocks"], data.get("context"), data.get("metadata"), data.get("id"),
                   data.get("client_id"))

    @property
    def text(self) -> str:
        return "\n".join(b["text"] for b in self.blocks if b.get("type") == "text")


@dataclass(frozen=True)
class SeedMessage:
    """A message a new thread starts with (a system prompt, an earlier exchange)."""

    role: Literal["user", "assistant", "system"]
    text: str
    # A user message's blocks when it has more than text (images, files), as a run's user
    # input keeps them; None: its text is all of it.
    blocks: list[Block] | None = None


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
    # Read the MCP resources the message references and embed them before the run starts
    # (`runs/admission/embedding.py`; Tambo's `embedResources`).
    embed_resources: bool = False
    # The thread's shared state as the client sends it (AG-UI `state`): stored with the
    # thread when the run starts (`runs/components/thread_state.py`); None: keep the thread's.
    state: dict[str, Any] | None = None
    # Tambo's status messages in every tool's schema (`engine/tools/status_messages.py`): the
    # Tambo endpoints' runs, whose React client shows them.
    status_messages: bool = False
    # Where to POST the run's end (`runs/automation/webhooks.py`): an http(s) URL the door
    # checked against `GATEWAY_WEBHOOK_ALLOWED_HOSTS`.
    webhook: str | None = None

    def to_row(self) -> SpecRow:
        """The spec as its run row keeps it (JSON, snake_case): every field, the unset ones
        left out. `from_row` reads it back equal (tests/unit/test_run_spec.py holds every
        field of the spec, and of the types inside it, to that)."""
        row: SpecRow = {"run_spec": ROW_VERSION}
        if self.user is not None:
            row["user"] = self.user.to_row()
        if self.tool_results:
            row["tool_results"] = [r.to_row() for r in self.tool_results]
        if self.client_tools:
            row["client_tools"] = [_compact(vars(t)) for t in self.client_tools]
        if self.components:
            row["components"] = [c.to_row() for c in self.components]
        if self.seed_messages:
            row["seed_messages"] = [_compact(vars(m)) for m in self.seed_messages]
        if self.idempotency is not None:
            row["idempotency"] = {"key": self.idempotency.key,
                                  "request": self.idempotency.request}
        if self.abandon_pending_tools:
            row["abandon_pending_tools"] = True
        if self.embed_resources:
            row["embed_resources"] = True
        if self.status_messages:
            row["status_messages"] = True
        for name in _PLAIN:
            value = getattr(self, name)
            if value is not None:
                row[name] = value  # type: ignore[literal-required]
        return row

    @classmethod
    def from_row(cls, data: Mapping[str, Any] | None) -> RunSpec:
        """The spec as `to_row` kept it, or as a row of an older version kept it: the first
        snake_case snapshot (what the run's task needed), or, before `RunSpec`, the Tambo
        request's own camelCase keys."""
        data = data or {}
        if "run_spec" not in data:
            data = _from_tambo_snapshot(data)
        user, key = data.get("user"), data.get("idempotency")
        return cls(
            user=UserInput.from_row(user) if user is not None else None,
            tool_results=[ToolResult.from_row(r) for r in data.get("tool_results", ())],
            client_tools=[ClientTool(**t) for t in data.get("client_tools", ())],
            components=[Component.from_row(c) for c in data.get("components", ())],
            seed_messages=[SeedMessage(m["role"], m["text"], m.get("blocks"))
                           for m in data.get("seed_messages", ())],
            idempotency=Idempotency(key["key"], key["request"]) if key is not None else None,
            abandon_pending_tools=bool(data.get("abandon_pending_tools")),
            embed_resources=bool(data.get("embed_resources")),
            status_messages=bool(data.get("status_messages")),
            **{name: data.get(name) for name in _PLAIN},
        )


# The fields kept on the row as they are (JSON values, or None).
_PLAIN = ("context", "tool_choice", "force_component", "max_tokens", "temperature", "model",
          "agent", "previous_run_id", "on_disconnect", "metadata", "multitask_strategy",
          "state", "webhook")


class SpecRow(TypedDict, total=False):
    """`RunSpec.to_row()`: the `request` column of the run's row. The run's start adds what
    only the row needs: `fingerprint` (what a retry with the spec's idempotency key must
    match) and, for a queued run, `queued_input` (`runs/admission/multitask.py`)."""

    run_spec: int
    user: dict[str, Any]
    tool_results: list[dict[str, Any]]
    context: dict[str, Any]
    client_tools: list[dict[str, Any]]
    components: list[dict[str, Any]]
    tool_choice: ToolChoice
    force_component: str
    max_tokens: int
    temperature: float
    model: str
    agent: str
    previous_run_id: str
    on_disconnect: DisconnectPolicy
    metadata: dict[str, Any]
    seed_messages: list[dict[str, Any]]
    idempotency: dict[str, Any]
    abandon_pending_tools: bool
    multitask_strategy: MultitaskStrategy
    embed_resources: bool
    status_messages: bool
    state: dict[str, Any]
    webhook: str
    fingerprint: str | None
    queued_input: list[dict[str, Any]]


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


def _renamed(values: Mapping[str, Any], names: dict[str, str]) -> dict[str, Any]:
    return {names[k]: v for k, v in values.items() if k in names}


def _from_tambo_snapshot(data: Mapping[str, Any]) -> dict[str, Any]:
    new = _renamed(data, _OLD_KEYS)
    new["client_tools"] = [_renamed(t, _OLD_TOOL) for t in new.get("client_tools", [])]
    new["components"] = [_renamed(c, _OLD_COMPONENT) for c in new.get("components", [])]
    return new
