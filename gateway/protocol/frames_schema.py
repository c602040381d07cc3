"""Timbal frames and message values, as types: what the engine and the run manager write.

The run log is a sequence of `Frame`s (`timbal.py` builds them, `engine/loop.py` writes message
frames, `runs/manager.py` the control frames); a stored Tambo message is a list of
`MessageValue`s (the `v` of set frames, including the run's input, which `runs/manager.py`
stores and then writes as the first set frames of the run; `api/threads.py` stores seeded
messages directly). These types are the frames' static types everywhere (`timbal.Frame` is
`Frame`): the writers build them (`timbal.start`, `timbal.set_value`, control frames as
literals), so mypy checks every frame against the published shape, and the readers (the live
log, the dialects' translators, salvage) narrow them, on `frame["c"]` for a control frame and on
which key is present (`"a" in frame`) for a message frame, which is why every class is `@final`
(a final TypedDict has no subtype with extra keys). They describe, they do not validate: a frame
stays a plain dict at run time, at no cost per token. `schemas/timbal/` is generated from them
and tests check real logs against it; `tests/unit/test_frame_types.py` checks that the union and
the published kinds agree.

Closed objects (`extra="forbid"`) because they describe exactly what we write. Timbal readers
must ignore unknown fields (framing section 5), so a reader of our logs stays compatible with a
later gateway that adds one.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired, final

from pydantic import ConfigDict, Field, TypeAdapter, with_config
from typing_extensions import TypedDict

CLOSED = ConfigDict(extra="forbid")

NonEmpty = Annotated[str, Field(min_length=1)]
IsoMs = Annotated[str, Field(
    pattern=r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$",
    description="ISO-8601 UTC with exactly three decimals, e.g. 2025-01-15T14:30:00.000Z")]
ItemId = Annotated[str, Field(min_length=1, description="The Timbal message id (a ULID)")]
MessageId = Annotated[str, Field(
    min_length=1, description="The Tambo message (one per model turn) this value belongs to")]
PartId = Annotated[str, Field(
    min_length=1, description="Present on stored message parts: the Timbal item id")]
PartTime = Annotated[str, Field(
    pattern=r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$",
    description="Present on stored parts written from a set frame: that frame's `t`")]
Sender = Annotated[str, Field(
    min_length=1, description="Who wrote the message (Timbal multi-actor threads): the agent's "
                              "name, the user scope on user input, a tool's executor on its result")]
SubagentRunId = Annotated[str, Field(
    min_length=1, description="The sub-agent invocation this message belongs to (absent: the "
                              "run's own agent); such messages are in the run's log only, not "
                              "in the thread")]


# -- JSON Patch (RFC 6902), as props_delta and state_delta carry it -----------------------------


@final
@with_config(CLOSED)
class PatchValueOp(TypedDict):
    """`add`, `replace` or `test`: an operation that carries a value."""

    op: Literal["add", "replace", "test"]
    path: str
    value: Any


@final
@with_config(CLOSED)
class PatchRemoveOp(TypedDict):
    op: Literal["remove"]
    path: str


# `move` or `copy` reads `from`, a Python keyword, hence the functional form.
PatchMoveOp = TypedDict("PatchMoveOp", {"op": Literal["move", "copy"], "from": str, "path": str})
PatchMoveOp.__pydantic_config__ = CLOSED  # type: ignore[attr-defined]  # what with_config() sets

JsonPatchOp = Annotated[PatchValueOp | PatchRemoveOp | PatchMoveOp,
                        Field(description="One RFC 6902 JSON Patch operation")]


@final
@with_config(CLOSED)
class ApprovalRequest(TypedDict):
    """A server tool call waiting for a human's approval, or for the answer to a question its
    tool asked (docs/human-in-the-loop.md): the
    interrupt's id (what an AG-UI `resume` entry names), why, a prompt, the message holding the
    call, and when it lapses (then it counts as denied)."""

    interruptId: NonEmpty
    reason: NonEmpty
    message: str
    messageId: MessageId
    expiresAt: IsoMs
    # A question the tool asked (`reason: input_required`): the JSON Schema of the answer, and
    # the answers to its earlier questions.
    responseSchema: NotRequired[dict[str, Any]]
    answers: NotRequired[list[dict[str, Any]]]
    # The operator's rule on the arguments that made this call ask (an agent's
    # `approval_rules`, a tool's predicate); absent: the tool asks for every call.
    rule: NotRequired[str]


@final
@with_config(CLOSED)
class PendingToolCall(TypedDict):
    """A tool call the run waits for; `arguments` is the complete JSON text of `input`. A
    client tool's, or, with `approval`, a server tool's that must be approved first."""

    toolCallId: NonEmpty
    toolName: NonEmpty
    arguments: str
    input: dict[str, Any]
    approval: NotRequired[ApprovalRequest]


class Authorship(TypedDict, total=False):
    """The fields that say who wrote a message, which the engine puts on each it writes."""

    sender: Sender
    subagentRunId: SubagentRunId


# -- message values ---------------------------------------------------------------------------

Truncation = Annotated[Literal["length", "content_filter"], Field(
    description="Why the provider cut the answer: its output cap (`length`) or its content "
                "filter")]


@final
@with_config(CLOSED)
class AgentValue(TypedDict):
    """Assistant text. Seeded `initialMessages` have no `messageId`."""

    type: Literal["agent"]
    sender: NotRequired[Sender]
    subagentRunId: NotRequired[SubagentRunId]
    id: NotRequired[PartId]
    t: NotRequired[PartTime]
    messageId: NotRequired[MessageId]
    content: str
    cancelled: NotRequired[Literal[True]]
    # The provider cut the answer (its finish reason: `length`, `content_filter`): the text is
    # what it sent, the answer is not complete (docs/models.md, "Truncation").
    status: NotRequired[Literal["truncated"]]
    finishReason: NotRequired[Truncation]


@final
@with_config(CLOSED)
class ThinkingValue(TypedDict):
    """The model's reasoning. `signature`: the provider's signature of it (Anthropic's), which
    goes back to the provider with it; `redacted`: reasoning the provider encrypted (then
    `content` is empty)."""

    type: Literal["thinking"]
    sender: NotRequired[Sender]
    subagentRunId: NotRequired[SubagentRunId]
    id: NotRequired[PartId]
    t: NotRequired[PartTime]
    messageId: MessageId
    content: str
    signature: NotRequired[str]
    redacted: NotRequired[str]


@final
@with_config(CLOSED)
class ToolCallValue(TypedDict):
    """A client or server tool call with its parsed arguments."""

    type: Literal["tool_call"]
    sender: NotRequired[Sender]
    subagentRunId: NotRequired[SubagentRunId]
    id: NotRequired[PartId]
    t: NotRequired[PartTime]
    messageId: MessageId
    toolCallId: NonEmpty
    name: str
    arguments: dict[str, Any]
    cancelled: NotRequired[Literal[True]]


@final
@with_config(CLOSED)
class ComponentValue(TypedDict):
    """A component (`show_component_<Name>` call): final props, and state once it has some."""

    type: Literal["x-component"]
    sender: NotRequired[Sender]
    subagentRunId: NotRequired[SubagentRunId]
    id: NotRequired[PartId]
    t: NotRequired[PartTime]
    messageId: MessageId
    componentId: NonEmpty
    name: NonEmpty
    toolCallId: NonEmpty
    props: dict[str, Any]
    state: NotRequired[Any]
    cancelled: NotRequired[Literal[True]]


@final
@with_config(CLOSED)
class ServerToolResultValue(TypedDict):
    """A server tool's result, written by the engine as a whole set frame."""

    type: Literal["tool_result"]
    sender: NotRequired[Sender]
    subagentRunId: NotRequired[SubagentRunId]
    id: NotRequired[PartId]
    t: NotRequired[PartTime]
    messageId: MessageId
    toolCallId: NonEmpty
    name: str
    status: Literal["success", "error"]
    output: NotRequired[Any]
    error: NotRequired[str]


@final
@with_config(CLOSED)
class ClientToolResultValue(TypedDict):
    """A client tool's result, stored from the run request that carried it, and written as a
    set frame when the run starts (the part's `id` is then the frame's `i`)."""

    type: Literal["tool_result"]
    sender: NotRequired[Sender]
    id: NotRequired[PartId]
    origin: Literal["client"]
    toolCallId: NonEmpty
    name: str | None
    blocks: list[dict[str, Any]]
    status: Literal["success", "error"]
    output: NotRequired[str]
    error: NotRequired[str]


@final
@with_config(CLOSED)
class UserValue(TypedDict):
    """The user's input message: stored, and written as a set frame when the run starts."""

    type: Literal["user"]
    sender: NotRequired[Sender]
    id: NotRequired[PartId]
    content: str
    blocks: NotRequired[list[dict[str, Any]]]
    context: NotRequired[dict[str, Any]]
    metadata: NotRequired[dict[str, Any]]
    # The id an AG-UI client gave the message: a later input re-sending it is an edit or a
    # regeneration (`dialects/agui/branches.py`).
    clientMessageId: NotRequired[Annotated[str, Field(min_length=1, max_length=200)]]


@final
@with_config(CLOSED)
class ApprovalValue(TypedDict):
    """The decision on a call that waited for approval, stored from the run request that
    answered it (`answer`: the answer's text as sent) and written as a set frame when that run
    starts; the call's result then follows, in the message that holds the call."""

    type: Literal["x-approval"]
    id: NotRequired[PartId]
    toolCallId: NonEmpty
    name: NonEmpty
    arguments: dict[str, Any]
    callMessageId: MessageId  # the message holding the call (this part is the run's input's)
    interruptId: NonEmpty
    decision: Literal["approved", "denied", "expired", "answered"]
    reason: NotRequired[str]
    answer: NotRequired[str]
    answers: NotRequired[list[dict[str, Any]]]  # a question's: every answer so far, in order


@final
@with_config(CLOSED)
class SystemValue(TypedDict):
    """A system prompt seeded with the thread (stored, never a frame)."""

    type: Literal["x-system"]
    id: PartId
    content: str


@final
@with_config(CLOSED)
class SummaryValue(TypedDict):
    """The summary that stands in for a thread's older turns when its agent summarises
    (docs/context.md): written by the model once, into the log of the run that first needed
    it, and sent in place of the turns it covers (`covers`: how many of the history's
    messages, system messages aside, from its start). Never a message of the thread."""

    type: Literal["x-summary"]
    content: str
    covers: int


@final
@with_config(CLOSED)
class AgentCompleteValue(TypedDict):
    """A sub-agent finished (Timbal's multi-agent `agent_complete`): `agentId` is its invocation
    (`subagent.started`'s `subagentRunId`), `result` its answer, which the calling agent gets as
    its tool call's result. In the run's log only."""

    type: Literal["agent_complete"]
    agentId: NonEmpty
    result: Any
    sender: NotRequired[Sender]


@final
@with_config(CLOSED)
class ErrorValue(TypedDict):
    """A sub-agent failed (Timbal's multi-agent `error`, recoverable: the calling agent gets the
    failure as its tool call's result and goes on). In the run's log only."""

    type: Literal["error"]
    content: str
    code: NotRequired[str]
    recoverable: bool
    agentId: NotRequired[NonEmpty]
    sender: NotRequired[Sender]


@final
@with_config(CLOSED)
class StatusValue(TypedDict):
    """What a server tool is doing (Timbal's multi-agent `status`; docs/tools.md): one message
    per tool call, set again with each new status and deleted (`v: null`) when the call ends.
    `detail` is the tool's text; `progress` and `total` an MCP server's progress numbers. In
    the run's log only."""

    type: Literal["status"]
    state: Annotated[str, Field(min_length=1, max_length=64)]
    detail: Annotated[str, Field(max_length=500)]
    toolCallId: NonEmpty
    progress: NotRequired[float]
    total: NotRequired[float]
    sender: NotRequired[Sender]
    subagentRunId: NotRequired[SubagentRunId]


VALUES: dict[str, type] = {
    "agent": AgentValue,
    "thinking": ThinkingValue,
    "tool_call": ToolCallValue,
    "x-component": ComponentValue,
    "tool_result.server": ServerToolResultValue,
    "tool_result.client": ClientToolResultValue,
    "user": UserValue,
    "x-approval": ApprovalValue,
    "x-system": SystemValue,
    "x-summary": SummaryValue,
    "agent_complete": AgentCompleteValue,
    "error": ErrorValue,
    "status": StatusValue,
}

MessageValue = (AgentValue | ThinkingValue | ToolCallValue | ComponentValue
                | ServerToolResultValue | ClientToolResultValue | UserValue | ApprovalValue
                | SystemValue | SummaryValue)
"""One part of a stored Tambo message, or the `v` of a set frame."""

SubagentValue = AgentCompleteValue | ErrorValue
"""The `v` of a set frame about a sub-agent: in the run's log, never stored in the thread."""

TurnValue = AgentValue | ThinkingValue | ToolCallValue | ComponentValue | ServerToolResultValue
"""What one model turn sets (`engine/loop.py`): its text, reasoning and calls, and the results
of the server tools it called."""


# -- message frames -----------------------------------------------------------------------------


@final
@with_config(CLOSED)
class TextStartMeta(TypedDict):
    type: Literal["agent", "thinking"]
    messageId: MessageId
    sender: NotRequired[Sender]
    subagentRunId: NotRequired[SubagentRunId]


@final
@with_config(CLOSED)
class ToolCallStartMeta(TypedDict):
    type: Literal["tool_call"]
    messageId: MessageId
    sender: NotRequired[Sender]
    subagentRunId: NotRequired[SubagentRunId]
    toolCallId: NonEmpty
    name: str


@final
@with_config(CLOSED)
class ComponentStartMeta(TypedDict):
    type: Literal["x-component"]
    messageId: MessageId
    sender: NotRequired[Sender]
    subagentRunId: NotRequired[SubagentRunId]
    componentId: NonEmpty
    name: NonEmpty
    toolCallId: NonEmpty


StartMeta = TextStartMeta | ToolCallStartMeta | ComponentStartMeta
"""The `m` of a start frame: what the streamed message is and which turn it belongs to."""

SetValue = (AgentValue | ThinkingValue | ToolCallValue | ComponentValue | ServerToolResultValue
            | ClientToolResultValue | UserValue | ApprovalValue | AgentCompleteValue | ErrorValue
            | SummaryValue | StatusValue)
"""The `v` of a set frame: a message's final value (a run's log holds no `x-system`)."""


@final
@with_config(CLOSED)
class StartFrame(TypedDict):
    """A streamed message starts; its appends follow (text, or a tool call's JSON arguments)."""

    i: ItemId
    m: StartMeta


@final
@with_config(CLOSED)
class AppendFrame(TypedDict):
    i: ItemId
    a: str


@final
@with_config(CLOSED)
class SetFrame(TypedDict):
    """A message is complete: `v` is its final value (authoritative over the appends)."""

    i: ItemId
    t: IsoMs
    v: SetValue


@final
@with_config(CLOSED)
class DeleteFrame(TypedDict):
    """A message is deleted (Timbal framing 5.1.3): the gateway deletes a tool's `status` when
    the call ends."""

    i: ItemId
    v: None


# -- control frames (run lifecycle; Timbal Messages/1.0 has none) --------------------------------


@final
@with_config(CLOSED)
class UsageEntry(TypedDict):
    """What a run's calls to one model consumed. `reasoningTokens` is part of `outputTokens`,
    `cachedInputTokens` part of `inputTokens`; `costUsd` is from litellm's price map, null when
    the model is not in it."""

    model: NonEmpty
    calls: Annotated[int, Field(ge=0)]
    inputTokens: Annotated[int, Field(ge=0)]
    outputTokens: Annotated[int, Field(ge=0)]
    totalTokens: Annotated[int, Field(ge=0)]
    reasoningTokens: Annotated[int, Field(ge=0)]
    cachedInputTokens: Annotated[int, Field(ge=0)]
    costUsd: Annotated[float, Field(ge=0)] | None
    # Calls whose usage the provider did not report (cut off before it came, or a server that
    # reports none): their tokens (and cost) are the gateway's count. Absent: none.
    estimatedCalls: NotRequired[Annotated[int, Field(ge=1)]]


# The usage of a run that consumed anything rides on its terminal frame (`run.finished`,
# `run.cancelled` or `error`), one entry per model.
RunUsageEntries = Annotated[list[UsageEntry], Field(min_length=1)]


@final
@with_config(CLOSED)
class RunStartedFrame(TypedDict):
    c: Literal["run.started"]
    threadId: NonEmpty
    runId: NonEmpty


@final
@with_config(CLOSED)
class TruncatedAnswer(TypedDict):
    """The run's last answer was cut by the provider (`GATEWAY_ON_TRUNCATION=stop`)."""

    reason: Truncation
    messageId: MessageId


@final
@with_config(CLOSED)
class RunFinishedFrame(TypedDict):
    c: Literal["run.finished"]
    usage: NotRequired[RunUsageEntries]
    truncated: NotRequired[TruncatedAnswer]


@final
@with_config(CLOSED)
class RunAwaitingInputFrame(TypedDict):
    """Written after the paused state is committed, before `run.finished`."""

    c: Literal["run.awaiting_input"]
    pendingToolCalls: Annotated[list[PendingToolCall], Field(min_length=1)]


@final
@with_config(CLOSED)
class RunCancelledFrame(TypedDict):
    c: Literal["run.cancelled"]
    usage: NotRequired[RunUsageEntries]


@final
@with_config(CLOSED)
class ErrorFrame(TypedDict):
    """The run failed; terminal. `status` is the HTTP status of the cause, when it had one."""

    c: Literal["error"]
    code: NonEmpty
    message: str
    category: Literal["client_error", "server_error"]
    isRetryable: bool
    status: NotRequired[int | None]
    usage: NotRequired[RunUsageEntries]


@final
@with_config(CLOSED)
class SubagentStartedFrame(TypedDict):
    """A sub-agent starts the task its calling agent gave it (the tool call `toolCallId` of the
    turn `messageId`); the messages of `subagentRunId` follow, then its `agent_complete` or
    `error`."""

    c: Literal["subagent.started"]
    subagentRunId: NonEmpty
    name: NonEmpty
    description: NotRequired[str]
    toolCallId: NonEmpty
    messageId: NonEmpty
    parentSubagentRunId: NotRequired[NonEmpty]


@final
@with_config(CLOSED)
class ComponentStateFrame(TypedDict):
    c: Literal["component.state"]
    componentId: NonEmpty
    operations: list[JsonPatchOp]
    revision: Annotated[int, Field(ge=0)]


@final
@with_config(CLOSED)
class ThreadStateFrame(TypedDict):
    """A server tool changed the thread's shared state (`ctx.state`): the RFC 6902 operations
    that bring the state the client holds up to date."""

    c: Literal["thread.state"]
    operations: list[JsonPatchOp]


CONTROL_FRAMES: dict[str, type] = {
    "run.started": RunStartedFrame,
    "run.finished": RunFinishedFrame,
    "run.awaiting_input": RunAwaitingInputFrame,
    "run.cancelled": RunCancelledFrame,
    "error": ErrorFrame,
    "component.state": ComponentStateFrame,
    "subagent.started": SubagentStartedFrame,
    "thread.state": ThreadStateFrame,
}

FRAMES: dict[str, type] = {"start": StartFrame, "append": AppendFrame, "set": SetFrame,
                           "delete": DeleteFrame}

ControlFrame = (RunStartedFrame | RunFinishedFrame | RunAwaitingInputFrame | RunCancelledFrame
                | ErrorFrame | ComponentStateFrame | SubagentStartedFrame | ThreadStateFrame)
"""A frame about the run's lifecycle: `c` names it (and narrows it)."""

MessageFrame = StartFrame | AppendFrame | SetFrame | DeleteFrame
"""A frame about one message (`i`): Timbal Messages/1.0's own."""

# Spelled out, not `MessageFrame | ControlFrame`: mypy narrows a union of TypedDicts on a key
# (`"c" in frame`, either way) only when no member is itself an alias of a union.
Frame = (StartFrame | AppendFrame | SetFrame | DeleteFrame | RunStartedFrame | RunFinishedFrame
         | RunAwaitingInputFrame | RunCancelledFrame | ErrorFrame | ComponentStateFrame
         | SubagentStartedFrame | ThreadStateFrame)
"""One line of a run's Timbal log."""

PublishedFrame = (StartFrame | AppendFrame | SetFrame | DeleteFrame
                  | Annotated[ControlFrame, Field(discriminator="c")])
"""`Frame` as the published schema has it (`schemas/timbal/frame.json`): the control frames
told apart by their `c`."""

TerminalFrame = RunFinishedFrame | RunCancelledFrame | ErrorFrame
"""The frame that ends a run's log (`timbal.is_terminal`); nothing follows it."""

frame_adapter = TypeAdapter(PublishedFrame)
value_adapter = TypeAdapter(MessageValue)
