"""The Tambo dialect's SSE events, as types: what `dialects.tambo.TamboDialect` emits, on the wire.

These types describe the translator; they do not drive it. They exist so that `schemas/` and the
OpenAPI document are generated from one definition, and so that tests can check every event of a
real run against it (an event the translator emits that these types do not describe fails there,
which is how a new field reaches the published schemas).

Each event is a closed object (`extra="forbid"`): the published schema lists every field the
gateway sends, including the Tambo v1 proposal's extra fields (`delta`, `props`, `input`, ...)
that the real clients ignore (contract sections 7, 8 and 19.3). `timestamp` is added by the SSE
view (integer epoch milliseconds), so it is on every event on the wire.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired

from pydantic import ConfigDict, Field, TypeAdapter, with_config
from typing_extensions import TypedDict

CLOSED = ConfigDict(extra="forbid")

NonEmpty = Annotated[str, Field(min_length=1)]
EpochMs = Annotated[int, Field(ge=0, description="Epoch milliseconds (integer)")]


# -- JSON Patch (RFC 6902), as props_delta and state_delta carry it -----------------------------


@with_config(CLOSED)
class PatchValueOp(TypedDict):
    """`add`, `replace` or `test`: an operation that carries a value."""

    op: Literal["add", "replace", "test"]
    path: str
    value: Any


@with_config(CLOSED)
class PatchRemoveOp(TypedDict):
    op: Literal["remove"]
    path: str


# `move` or `copy` reads `from`, a Python keyword, hence the functional form.
PatchMoveOp = TypedDict("PatchMoveOp", {"op": Literal["move", "copy"], "from": str, "path": str})
PatchMoveOp.__pydantic_config__ = CLOSED  # type: ignore[attr-defined]  # what with_config() sets

JsonPatchOp = Annotated[PatchValueOp | PatchRemoveOp | PatchMoveOp,
                        Field(description="One RFC 6902 JSON Patch operation")]


# -- run lifecycle --------------------------------------------------------------------------------


@with_config(CLOSED)
class RunStarted(TypedDict):
    """Always the first event of a run; written only once the run has started."""

    type: Literal["RUN_STARTED"]
    threadId: NonEmpty
    runId: NonEmpty
    timestamp: EpochMs


@with_config(CLOSED)
class RunFinished(TypedDict):
    """The run ended normally (completed, or paused for client tools after `awaiting_input`)."""

    type: Literal["RUN_FINISHED"]
    threadId: NonEmpty
    runId: NonEmpty
    timestamp: EpochMs


@with_config(CLOSED)
class RunError(TypedDict):
    """The run failed or was cancelled (`code: CANCELLED`): the last event of its stream."""

    type: Literal["RUN_ERROR"]
    message: str
    code: NonEmpty
    category: NotRequired[Literal["client_error", "server_error"]]
    isRetryable: NotRequired[bool]
    status: NotRequired[int]
    timestamp: EpochMs


# -- text and reasoning ---------------------------------------------------------------------------


@with_config(CLOSED)
class TextMessageStart(TypedDict):
    type: Literal["TEXT_MESSAGE_START"]
    messageId: NonEmpty
    role: Literal["assistant"]
    timestamp: EpochMs


@with_config(CLOSED)
class TextMessageContent(TypedDict):
    type: Literal["TEXT_MESSAGE_CONTENT"]
    messageId: NonEmpty
    delta: NonEmpty
    timestamp: EpochMs


@with_config(CLOSED)
class TextMessageEnd(TypedDict):
    type: Literal["TEXT_MESSAGE_END"]
    messageId: NonEmpty
    timestamp: EpochMs


@with_config(CLOSED)
class ThinkingTextMessageStart(TypedDict):
    """Reasoning starts. The Tambo dialect has no `messageId` here (contract 7.1)."""

    type: Literal["THINKING_TEXT_MESSAGE_START"]
    timestamp: EpochMs


@with_config(CLOSED)
class ThinkingTextMessageContent(TypedDict):
    type: Literal["THINKING_TEXT_MESSAGE_CONTENT"]
    delta: NonEmpty
    timestamp: EpochMs


@with_config(CLOSED)
class ThinkingTextMessageEnd(TypedDict):
    type: Literal["THINKING_TEXT_MESSAGE_END"]
    timestamp: EpochMs


# -- tool calls -----------------------------------------------------------------------------------


@with_config(CLOSED)
class ToolCallStart(TypedDict):
    """A client or server tool call starts (components never emit TOOL_CALL_* events)."""

    type: Literal["TOOL_CALL_START"]
    toolCallId: NonEmpty
    toolCallName: NonEmpty
    parentMessageId: NonEmpty
    timestamp: EpochMs


@with_config(CLOSED)
class ToolCallArgs(TypedDict):
    """A fragment of the call's arguments as JSON text; the fragments concatenate to the JSON."""

    type: Literal["TOOL_CALL_ARGS"]
    toolCallId: NonEmpty
    delta: str
    timestamp: EpochMs


@with_config(CLOSED)
class ToolCallEnd(TypedDict):
    type: Literal["TOOL_CALL_END"]
    toolCallId: NonEmpty
    timestamp: EpochMs


@with_config(CLOSED)
class ToolCallResult(TypedDict):
    """A server tool's result (client tool results come from the client, never as events)."""

    type: Literal["TOOL_CALL_RESULT"]
    messageId: NonEmpty
    toolCallId: NonEmpty
    content: str
    role: Literal["tool"]
    timestamp: EpochMs


# -- tambo.* CUSTOM events (contract section 8) ---------------------------------------------------


@with_config(CLOSED)
class ComponentStartValue(TypedDict):
    messageId: NonEmpty
    componentId: NonEmpty
    componentName: NonEmpty


@with_config(CLOSED)
class ComponentPropsDeltaValue(TypedDict):
    """`operations` bring the client's props up to date; `delta` is the proposal's raw JSON text."""

    componentId: NonEmpty
    operations: list[JsonPatchOp]
    delta: str
    streamingStatus: dict[str, Literal["started", "streaming", "done"]]


@with_config(CLOSED)
class ComponentStateDeltaValue(TypedDict):
    """A component state change; `delta` repeats `operations` under the proposal's name."""

    componentId: NonEmpty
    operations: list[JsonPatchOp]
    delta: list[JsonPatchOp]
    revision: Annotated[int, Field(ge=0)]


@with_config(CLOSED)
class ComponentEndValue(TypedDict):
    """`finalProps`/`finalState` (the clients' names) and `props`/`state` (the proposal's)."""

    componentId: NonEmpty
    props: dict[str, Any]
    finalProps: dict[str, Any]
    state: NotRequired[Any]
    finalState: NotRequired[Any]


@with_config(CLOSED)
class PendingToolCall(TypedDict):
    """A client tool call the run waits for; `arguments` is the complete JSON text of `input`."""

    toolCallId: NonEmpty
    toolName: NonEmpty
    arguments: str
    input: dict[str, Any]


@with_config(CLOSED)
class AwaitingInputValue(TypedDict):
    threadId: NonEmpty
    runId: NonEmpty
    pendingToolCalls: Annotated[list[PendingToolCall], Field(min_length=1)]


@with_config(CLOSED)
class MessageParentValue(TypedDict):
    messageId: NonEmpty
    parentMessageId: NonEmpty


@with_config(CLOSED)
class ComponentStart(TypedDict):
    """A component (a `show_component_<Name>` call) starts; its props start at `{}`."""

    type: Literal["CUSTOM"]
    name: Literal["tambo.component.start"]
    value: ComponentStartValue
    timestamp: EpochMs


@with_config(CLOSED)
class ComponentPropsDelta(TypedDict):
    type: Literal["CUSTOM"]
    name: Literal["tambo.component.props_delta"]
    value: ComponentPropsDeltaValue
    timestamp: EpochMs


@with_config(CLOSED)
class ComponentStateDelta(TypedDict):
    type: Literal["CUSTOM"]
    name: Literal["tambo.component.state_delta"]
    value: ComponentStateDeltaValue
    timestamp: EpochMs


@with_config(CLOSED)
class ComponentEnd(TypedDict):
    type: Literal["CUSTOM"]
    name: Literal["tambo.component.end"]
    value: ComponentEndValue
    timestamp: EpochMs


@with_config(CLOSED)
class RunAwaitingInput(TypedDict):
    """Client tools must run: written after the run's paused state is committed, before
    RUN_FINISHED."""

    type: Literal["CUSTOM"]
    name: Literal["tambo.run.awaiting_input"]
    value: AwaitingInputValue
    timestamp: EpochMs


@with_config(CLOSED)
class MessageParent(TypedDict):
    """Links a child message to its parent (reserved by the dialect; not emitted yet)."""

    type: Literal["CUSTOM"]
    name: Literal["tambo.message.parent"]
    value: MessageParentValue
    timestamp: EpochMs


CUSTOM_EVENTS: dict[str, type] = {
    "tambo.component.start": ComponentStart,
    "tambo.component.props_delta": ComponentPropsDelta,
    "tambo.component.state_delta": ComponentStateDelta,
    "tambo.component.end": ComponentEnd,
    "tambo.run.awaiting_input": RunAwaitingInput,
    "tambo.message.parent": MessageParent,
}

EVENTS: dict[str, type] = {
    "RUN_STARTED": RunStarted,
    "RUN_FINISHED": RunFinished,
    "RUN_ERROR": RunError,
    "TEXT_MESSAGE_START": TextMessageStart,
    "TEXT_MESSAGE_CONTENT": TextMessageContent,
    "TEXT_MESSAGE_END": TextMessageEnd,
    "THINKING_TEXT_MESSAGE_START": ThinkingTextMessageStart,
    "THINKING_TEXT_MESSAGE_CONTENT": ThinkingTextMessageContent,
    "THINKING_TEXT_MESSAGE_END": ThinkingTextMessageEnd,
    "TOOL_CALL_START": ToolCallStart,
    "TOOL_CALL_ARGS": ToolCallArgs,
    "TOOL_CALL_END": ToolCallEnd,
    "TOOL_CALL_RESULT": ToolCallResult,
}

CustomEvent = Annotated[
    ComponentStart | ComponentPropsDelta | ComponentStateDelta | ComponentEnd | RunAwaitingInput | MessageParent,
    Field(discriminator="name"),
]

TamboEvent = Annotated[
    RunStarted | RunFinished | RunError | TextMessageStart | TextMessageContent | TextMessageEnd | ThinkingTextMessageStart | ThinkingTextMessageContent | ThinkingTextMessageEnd | ToolCallStart | ToolCallArgs | ToolCallEnd | ToolCallResult | CustomEvent,
    Field(discriminator="type"),
]
"""Any event of a Tambo-dialect run stream (the `data:` of one SSE message)."""

tambo_event = TypeAdapter(TamboEvent)
