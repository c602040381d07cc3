"""The Tambo dialect's SSE events, as types: what `translate.TamboDialect` emits, on the wire.

These types describe the translator and type-check it: each event `X` has an `XBody` (the same
without `timestamp`), and `translate.py` builds plain dict literals typed as those bodies, so
mypy checks every event it builds against the published shape at no cost per token. They also
generate `schemas/` and the OpenAPI document, and tests check every event of a real run against
them (an event the translator emits that these types do not describe fails there,
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

from ...protocol.frames_schema import JsonPatchOp, PendingToolCall
from ...protocol.usage_events import TokenCounts

CLOSED = ConfigDict(extra="forbid")

NonEmpty = Annotated[str, Field(min_length=1)]
EpochMs = Annotated[int, Field(ge=0, description="Epoch milliseconds (integer)")]


# -- run lifecycle --------------------------------------------------------------------------------


@with_config(CLOSED)
class RunStartedBody(TypedDict):
    """`RunStarted` as the dialect builds it, before the SSE view stamps it."""

    type: Literal["RUN_STARTED"]
    threadId: NonEmpty
    runId: NonEmpty


@with_config(CLOSED)
class RunStarted(RunStartedBody):
    """Always the first event of a run; written only once the run has started."""

    timestamp: EpochMs


@with_config(CLOSED)
class TokenUsage(TokenCounts):
    """One model's tokens in a run, as AG-UI 1.0's `TokenUsage` (docs/agents.md)."""


@with_config(CLOSED)
class TruncatedAnswer(TypedDict):
    """The run's last answer was cut by the provider: why, and which message."""

    reason: Literal["length", "content_filter"]
    messageId: NonEmpty


@with_config(CLOSED)
class RunMetadata(TypedDict):
    """AG-UI's `metadata` of the run's end, as the gateway fills it: the answer the provider
    cut, and whether some of `usage` was counted by the gateway (the provider reported none)."""

    truncated: NotRequired[TruncatedAnswer]
    usageEstimated: NotRequired[Literal[True]]


@with_config(CLOSED)
class ReplyText(TypedDict):
    type: Literal["text"]
    text: str


@with_config(CLOSED)
class ReplyComponent(TypedDict):
    type: Literal["component"]
    id: NonEmpty
    name: NonEmpty
    props: dict[str, Any]
    state: NotRequired[dict[str, Any]]


@with_config(CLOSED)
class ReplyToolUse(TypedDict):
    type: Literal["tool_use"]
    id: NonEmpty
    name: NonEmpty
    input: dict[str, Any]


ContentBlockBody = ReplyText | ReplyToolUse | ReplyComponent


@with_config(CLOSED)
class ReplyMessage(TypedDict):
    """The run's last assistant message, as `GET /v1/threads/{id}/messages` lists it (its text
    and components): the Tambo v1 proposal's `RUN_FINISHED.message`."""

    id: NonEmpty
    role: Literal["assistant"]
    content: list[ContentBlockBody]


class RunFinishedBody(TypedDict):
    """`RunFinished` as the dialect builds it, before the SSE view stamps it. `usage` is the
    gateway's own addition (the Tambo clients ignore fields they do not know); `metadata` is
    AG-UI's, set when the answer was cut (`truncated`)."""

    type: Literal["RUN_FINISHED"]
    threadId: NonEmpty
    runId: NonEmpty
    usage: NotRequired[list[TokenUsage]]
    metadata: NotRequired[RunMetadata]
    message: NotRequired[ReplyMessage]


@with_config(CLOSED)
class RunFinished(RunFinishedBody):
    """The run ended normally (completed, or paused for client tools after `awaiting_input`)."""

    timestamp: EpochMs


@with_config(CLOSED)
class RunErrorBody(TypedDict):
    """`RunError` as the dialect builds it, before the SSE view stamps it."""

    type: Literal["RUN_ERROR"]
    message: str
    code: NonEmpty
    category: NotRequired[Literal["client_error", "server_error"]]
    isRetryable: NotRequired[bool]
    status: NotRequired[int]


@with_config(CLOSED)
class RunError(RunErrorBody):
    """The run failed or was cancelled (`code: CANCELLED`): the last event of its stream."""

    timestamp: EpochMs


# -- text and reasoning ---------------------------------------------------------------------------


@with_config(CLOSED)
class TextMessageStartBody(TypedDict):
    """`TextMessageStart` as the dialect builds it, before the SSE view stamps it."""

    type: Literal["TEXT_MESSAGE_START"]
    messageId: NonEmpty
    role: Literal["assistant"]


@with_config(CLOSED)
class TextMessageStart(TextMessageStartBody):
    timestamp: EpochMs


@with_config(CLOSED)
class TextMessageContentBody(TypedDict):
    """`TextMessageContent` as the dialect builds it, before the SSE view stamps it."""

    type: Literal["TEXT_MESSAGE_CONTENT"]
    messageId: NonEmpty
    delta: NonEmpty


@with_config(CLOSED)
class TextMessageContent(TextMessageContentBody):
    timestamp: EpochMs


@with_config(CLOSED)
class TextMessageEndBody(TypedDict):
    """`TextMessageEnd` as the dialect builds it, before the SSE view stamps it."""

    type: Literal["TEXT_MESSAGE_END"]
    messageId: NonEmpty


@with_config(CLOSED)
class TextMessageEnd(TextMessageEndBody):
    timestamp: EpochMs


@with_config(CLOSED)
class ThinkingTextMessageStartBody(TypedDict):
    """`ThinkingTextMessageStart` as the dialect builds it, before the SSE view stamps it."""

    type: Literal["THINKING_TEXT_MESSAGE_START"]


@with_config(CLOSED)
class ThinkingTextMessageStart(ThinkingTextMessageStartBody):
    """Reasoning starts. The Tambo dialect has no `messageId` here (contract 7.1)."""

    timestamp: EpochMs


@with_config(CLOSED)
class ThinkingTextMessageContentBody(TypedDict):
    """`ThinkingTextMessageContent` as the dialect builds it, before the SSE view stamps it."""

    type: Literal["THINKING_TEXT_MESSAGE_CONTENT"]
    delta: NonEmpty


@with_config(CLOSED)
class ThinkingTextMessageContent(ThinkingTextMessageContentBody):
    timestamp: EpochMs


@with_config(CLOSED)
class ThinkingTextMessageEndBody(TypedDict):
    """`ThinkingTextMessageEnd` as the dialect builds it, before the SSE view stamps it."""

    type: Literal["THINKING_TEXT_MESSAGE_END"]


@with_config(CLOSED)
class ThinkingTextMessageEnd(ThinkingTextMessageEndBody):
    timestamp: EpochMs


# -- tool calls -----------------------------------------------------------------------------------


@with_config(CLOSED)
class ToolCallStartBody(TypedDict):
    """`ToolCallStart` as the dialect builds it, before the SSE view stamps it."""

    type: Literal["TOOL_CALL_START"]
    toolCallId: NonEmpty
    toolCallName: NonEmpty
    parentMessageId: NonEmpty


@with_config(CLOSED)
class ToolCallStart(ToolCallStartBody):
    """A client or server tool call starts (components never emit TOOL_CALL_* events)."""

    timestamp: EpochMs


@with_config(CLOSED)
class ToolCallArgsBody(TypedDict):
    """`ToolCallArgs` as the dialect builds it, before the SSE view stamps it."""

    type: Literal["TOOL_CALL_ARGS"]
    toolCallId: NonEmpty
    delta: str


@with_config(CLOSED)
class ToolCallArgs(ToolCallArgsBody):
    """A fragment of the call's arguments as JSON text; the fragments concatenate to the JSON."""

    timestamp: EpochMs


@with_config(CLOSED)
class ToolCallEndBody(TypedDict):
    """`ToolCallEnd` as the dialect builds it, before the SSE view stamps it."""

    type: Literal["TOOL_CALL_END"]
    toolCallId: NonEmpty


@with_config(CLOSED)
class ToolCallEnd(ToolCallEndBody):
    timestamp: EpochMs


@with_config(CLOSED)
class ToolCallResultBody(TypedDict):
    """`ToolCallResult` as the dialect builds it, before the SSE view stamps it."""

    type: Literal["TOOL_CALL_RESULT"]
    messageId: NonEmpty
    toolCallId: NonEmpty
    content: str
    role: Literal["tool"]
    # The tool failed (`content` is its error): the Tambo v1 proposal's flag, which the Tambo
    # client ignores (it keeps `content`).
    isError: NotRequired[Literal[True]]


@with_config(CLOSED)
class ToolCallResult(ToolCallResultBody):
    """A server tool's result (client tool results come from the client, never as events)."""

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
    """`finalProps`/`finalState` (the clients' names) and `props`/`state` (the proposal's).
    The end sent after a state delta to a component whose props were complete carries only
    `componentId` (it marks the component done again in the Tambo reducer)."""

    componentId: NonEmpty
    props: NotRequired[dict[str, Any]]
    finalProps: NotRequired[dict[str, Any]]
    state: NotRequired[Any]
    finalState: NotRequired[Any]


@with_config(CLOSED)
class AwaitingInputValue(TypedDict):
    threadId: NonEmpty
    runId: NonEmpty
    pendingToolCalls: Annotated[list[PendingToolCall], Field(min_length=1)]


@with_config(CLOSED)
class RunQueuedValue(TypedDict):
    threadId: NonEmpty
    runId: NonEmpty


@with_config(CLOSED)
class MessageParentValue(TypedDict):
    messageId: NonEmpty
    parentMessageId: NonEmpty


@with_config(CLOSED)
class ComponentStartBody(TypedDict):
    """`ComponentStart` as the dialect builds it, before the SSE view stamps it."""

    type: Literal["CUSTOM"]
    name: Literal["tambo.component.start"]
    value: ComponentStartValue


@with_config(CLOSED)
class ComponentStart(ComponentStartBody):
    """A component (a `show_component_<Name>` call) starts; its props start at `{}`."""

    timestamp: EpochMs


@with_config(CLOSED)
class ComponentPropsDeltaBody(TypedDict):
    """`ComponentPropsDelta` as the dialect builds it, before the SSE view stamps it."""

    type: Literal["CUSTOM"]
    name: Literal["tambo.component.props_delta"]
    value: ComponentPropsDeltaValue


@with_config(CLOSED)
class ComponentPropsDelta(ComponentPropsDeltaBody):
    timestamp: EpochMs


@with_config(CLOSED)
class ComponentStateDeltaBody(TypedDict):
    """`ComponentStateDelta` as the dialect builds it, before the SSE view stamps it."""

    type: Literal["CUSTOM"]
    name: Literal["tambo.component.state_delta"]
    value: ComponentStateDeltaValue


@with_config(CLOSED)
class ComponentStateDelta(ComponentStateDeltaBody):
    timestamp: EpochMs


@with_config(CLOSED)
class ComponentEndBody(TypedDict):
    """`ComponentEnd` as the dialect builds it, before the SSE view stamps it."""

    type: Literal["CUSTOM"]
    name: Literal["tambo.component.end"]
    value: ComponentEndValue


@with_config(CLOSED)
class ComponentEnd(ComponentEndBody):
    timestamp: EpochMs


@with_config(CLOSED)
class RunAwaitingInputBody(TypedDict):
    """`RunAwaitingInput` as the dialect builds it, before the SSE view stamps it."""

    type: Literal["CUSTOM"]
    name: Literal["tambo.run.awaiting_input"]
    value: AwaitingInputValue


@with_config(CLOSED)
class RunAwaitingInput(RunAwaitingInputBody):
    """Client tools must run: written after the run's paused state is committed, before
    RUN_FINISHED."""

    timestamp: EpochMs


@with_config(CLOSED)
class RunQueuedBody(TypedDict):
    """`RunQueued` as the dialect builds it, before the SSE view stamps it."""

    type: Literal["CUSTOM"]
    name: Literal["tambo.run.queued"]
    value: RunQueuedValue


@with_config(CLOSED)
class RunQueued(RunQueuedBody):
    """The run waits for its thread (`multitaskStrategy: "enqueue"`): sent right after the
    stream's `RUN_STARTED`, while the run is queued; the run's events follow when it starts.
    The gateway's own event (real Tambo has no queue): the Tambo clients ignore a CUSTOM name
    they do not know."""

    timestamp: EpochMs


@with_config(CLOSED)
class MessageParentBody(TypedDict):
    """`MessageParent` as the dialect builds it, before the SSE view stamps it."""

    type: Literal["CUSTOM"]
    name: Literal["tambo.message.parent"]
    value: MessageParentValue


@with_config(CLOSED)
class MessageParent(MessageParentBody):
    """Links a child message to its parent (reserved by the dialect; not emitted yet)."""

    timestamp: EpochMs


CUSTOM_EVENTS: dict[str, type] = {
    "tambo.component.start": ComponentStart,
    "tambo.component.props_delta": ComponentPropsDelta,
    "tambo.component.state_delta": ComponentStateDelta,
    "tambo.component.end": ComponentEnd,
    "tambo.run.awaiting_input": RunAwaitingInput,
    "tambo.message.parent": MessageParent,
    "tambo.run.queued": RunQueued,
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
    ComponentStart | ComponentPropsDelta | ComponentStateDelta | ComponentEnd | RunAwaitingInput | MessageParent | RunQueued,
    Field(discriminator="name"),
]

TamboEvent = Annotated[
    RunStarted | RunFinished | RunError | TextMessageStart | TextMessageContent | TextMessageEnd | ThinkingTextMessageStart | ThinkingTextMessageContent | ThinkingTextMessageEnd | ToolCallStart | ToolCallArgs | ToolCallEnd | ToolCallResult | CustomEvent,
    Field(discriminator="type"),
]
"""Any event of a Tambo-dialect run stream (the `data:` of one SSE message)."""

tambo_event = TypeAdapter(TamboEvent)

TamboEventBody = RunStartedBody | RunFinishedBody | RunErrorBody | TextMessageStartBody | TextMessageContentBody | TextMessageEndBody | ThinkingTextMessageStartBody | ThinkingTextMessageContentBody | ThinkingTextMessageEndBody | ToolCallStartBody | ToolCallArgsBody | ToolCallEndBody | ToolCallResultBody | ComponentStartBody | ComponentPropsDeltaBody | ComponentStateDeltaBody | ComponentEndBody | RunAwaitingInputBody | MessageParentBody | RunQueuedBody
"""An event as `translate.TamboDialect` builds it: `stamp` adds its `timestamp`."""
