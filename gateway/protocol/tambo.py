"""Tambo v1 REST shapes (requests and responses), as the real clients send and read them.

Unknown request fields are accepted, as the real server does (its validation pipe neither
whitelists nor forbids). Known fields are validated strictly (no `"5"` for 5, no `0` for false),
as its class-validator DTOs do, so a body the published schema calls invalid is refused. Where
the Tambo v1 proposal's shapes differ from the clients' (a plain string `content`, role `"tool"`
+ `toolCallId` tool results, `contextKey`), both are accepted.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, Union

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    WithJsonSchema,
    model_validator,
)

from . import problems
from .run_spec import ClientTool, MultitaskStrategy, SeedMessage


class WireModel(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True, strict=True)


def _integral(value: Any) -> Any:
    """JSON has one number type: 3.0 is the integer 3 (as JSON Schema says), 3.5 is not."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


# Goes last in `Annotated[int, Field(...), INTEGRAL]`, so the constraints stay in the schema.
INTEGRAL = BeforeValidator(_integral)


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


# -- content blocks -------------------------------------------------------------------------


class TextBlock(WireModel):
    type: Literal["text"]
    text: str


class Resource(WireModel):
    uri: str | None = None
    text: str | None = None
    blob: str | None = None
    mimeType: str | None = None
    name: str | None = None
    description: str | None = None


class ResourceBlock(WireModel):
    type: Literal["resource"]
    resource: Resource


class MediaSource(WireModel):
    """The Tambo v1 proposal's media source: inline base64 `data`, a `url`, or a provider's
    `fileId` (which the gateway refuses: it holds no provider files)."""

    type: Literal["base64", "url", "file_id"]
    mediaType: str | None = Field(default=None, max_length=200)
    data: str | None = None
    url: str | None = None
    fileId: str | None = None
    filename: str | None = Field(default=None, max_length=500)


class MediaBlock(WireModel):
    """The proposal's `image`, `audio` and `file` input blocks. They reach the model as the
    `resource` block a Tambo client sends for an attachment (`resource()`), so the same limits
    and URL rules apply as to those and to AG-UI's media parts."""

    type: Literal["image", "audio", "file"]
    source: MediaSource
    detail: Literal["auto", "low", "high"] | None = None

    def resource(self) -> dict[str, Any]:
        source = self.source
        if source.type == "file_id":
            return media_resource(self.type, file_id=source.fileId or "")
        if source.type == "base64":
            return media_resource(self.type, data=source.data or "", mime=source.mediaType,
                                  name=source.filename)
        return media_resource(self.type, url=source.url or "", mime=source.mediaType,
                              name=source.filename)


DATA_URL = re.compile(r"data:([^;,]+);base64,(.*)", re.DOTALL)
MEDIA_DEFAULT_TYPES = {"image": "image/*", "audio": "audio/*", "video": "video/*"}


def media_resource(kind: str, *, data: str | None = None, url: str | None = None,
                   mime: str | None = None, name: str | None = None,
                   file_id: str | None = None) -> dict[str, Any]:
    """A media part (`kind`: image, audio, video, file or document) as the Tambo (MCP)
    resource a client sends for an attachment: inline data as `blob`, a URL as `uri` (a
    `data:` URL is inline data); a provider's file id is refused (400
    `UNSUPPORTED_ATTACHMENT`). The one mapping for the Tambo and AG-UI dialects."""
    found: dict[str, Any] = {"name": name} if isinstance(name, str) and name else {}
    if file_id is None and data is not None:
        return {**found, "mimeType": mime or MEDIA_DEFAULT_TYPES.get(kind) or
                "application/octet-stream", "blob": data}
    if file_id is None and url is not None:
        inline = DATA_URL.fullmatch(url)
        if inline:
            return {**found, "mimeType": mime or inline[1], "blob": inline[2]}
        default = mime or MEDIA_DEFAULT_TYPES.get(kind)
        return {**found, "uri": url, **({"mimeType": default} if default else {})}
    raise problems.ApiError(problems.Problem.UNSUPPORTED_ATTACHMENT, f"A {kind} part's source must be inline "
                   "data or a URL: a provider's file id is not supported")


class ToolResultBlock(WireModel):
    type: Literal["tool_result"]
    toolUseId: str = Field(min_length=1)
    content: list[Annotated[Union[TextBlock, ResourceBlock], Field(discriminator="type")]] | str = []
    isError: bool | None = None


class ToolUseBlock(WireModel):
    type: Literal["tool_use"]
    id: str
    name: str
    input: dict[str, Any] = {}


class ComponentBlock(WireModel):
    type: Literal["component"]
    id: str
    name: str
    props: dict[str, Any] = {}
    state: dict[str, Any] | None = None


InputBlock = Annotated[Union[TextBlock, ResourceBlock, MediaBlock, ToolResultBlock],
                      Field(discriminator="type")]
ContentBlock = Annotated[
    Union[TextBlock, ResourceBlock, MediaBlock, ToolUseBlock, ToolResultBlock, ComponentBlock],
    Field(discriminator="type"),
]


# -- run requests -----------------------------------------------------------------------------


class InputMessage(WireModel):
    # Published: a plain-string message with role "tool" must say which call it answers.
    model_config = ConfigDict(json_schema_extra={
        "if": {"required": ["role", "content"],
               "properties": {"role": {"const": "tool"}, "content": {"type": "string"}}},
        "then": {"required": ["toolCallId"],
                 "properties": {"toolCallId": {"type": "string", "minLength": 1}}},
    })

    role: Literal["user", "tool"] = "user"
    content: Annotated[list[InputBlock], Field(min_length=1)] | str
    additionalContext: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    toolCallId: str | None = None  # the proposal's role "tool" shape
    isError: bool | None = None  # ... and whether that result is an error

    @model_validator(mode="after")
    def _normalise(self) -> "InputMessage":
        """Fold the proposal's shapes into the clients' one: a list of blocks, role user."""
        if isinstance(self.content, str):
            text = self.content
            if self.role == "tool":
                if not self.toolCallId:
                    raise ValueError("a message with role 'tool' needs toolCallId")
                self.content = [ToolResultBlock(type="tool_result", toolUseId=self.toolCallId,
                                                content=[TextBlock(type="text", text=text)],
                                                isError=self.isError)]
            else:
                self.content = [TextBlock(type="text", text=text)]
        elif self.role == "tool" and self.toolCallId:
            # A tool's result holds text and resources (media blocks are the user's).
            blocks = [b for b in self.content if isinstance(b, (TextBlock, ResourceBlock))]
            if blocks:
                self.content = [ToolResultBlock(type="tool_result", toolUseId=self.toolCallId,
                                                content=blocks, isError=self.isError)]
        self.role = "user"
        if not self.content:
            raise ValueError("message content must not be empty")
        return self

    def tool_results(self) -> list[ToolResultBlock]:
        return [b for b in self.content if isinstance(b, ToolResultBlock)]

    def text(self) -> str:
        return "\n".join(b.text for b in self.content if isinstance(b, TextBlock))


USER_KEY_MAX = 512


def checked_user_key(value: str, name: str = "userKey") -> str:
    """The userKey rule (contract 3.3): at most 512 characters as sent, trimmed, not blank.
    `name` is the parameter's, for the message (`contextKey` is an alias)."""
    if len(value) > USER_KEY_MAX:
        raise ValueError(f"{name} is longer than {USER_KEY_MAX} characters")
    value = value.strip()
    if not value:
        raise ValueError(f"{name} cannot be an empty string")
    return value


# "Has a character that is not blank", with blank spelled out as Python's `str.strip()` sees it:
# JSON Schema's `\S` means ECMA-262's, which differs (U+001C..U+001F, U+0085, U+FEFF).
NOT_BLANK = ("[^\\u0009-\\u000d\\u001c-\\u0020\\u0085\\u00a0\\u1680\\u2000-\\u200a"
             "\\u2028\\u2029\\u202f\\u205f\\u3000]")
USER_KEY_SCHEMA = {"type": "string", "minLength": 1, "maxLength": USER_KEY_MAX,
                   "pattern": NOT_BLANK}
UserKey = Annotated[str, AfterValidator(checked_user_key), WithJsonSchema(USER_KEY_SCHEMA)]


def _none_is_empty(value: Any) -> Any:
    return [] if value is None else value


# What every provider takes as a function name (the Tambo v1 proposal's rule): a name with a
# dot or a space is refused before the run starts, not by the provider mid-stream.
TOOL_NAME_PATTERN = r"^[a-zA-Z0-9_-]+$"


class Tool(WireModel):
    name: str = Field(min_length=1, max_length=200, pattern=TOOL_NAME_PATTERN)
    description: str = ""
    inputSchema: dict[str, Any] | bool | None = None
    outputSchema: dict[str, Any] | bool | None = None
    strict: bool | None = None
    maxCalls: Annotated[int, Field(ge=0), INTEGRAL] | None = None

    def client_tool(self) -> ClientTool:
        """The tool as the run's neutral input holds it."""
        return ClientTool(self.name, self.description, self.inputSchema, self.outputSchema,
                          self.strict, self.maxCalls)


class AvailableComponent(WireModel):
    # The model sees a component as the tool `show_component_<name>`.
    name: str = Field(min_length=1, max_length=200, pattern=TOOL_NAME_PATTERN)
    description: str = ""
    propsSchema: dict[str, Any] | bool | None = None
    stateSchema: dict[str, Any] | None = None
    # Client tools offered to the model only while this component is shown in the thread (the
    # Tambo v1 proposal's `contextTools`), each with its own `maxCalls`.
    contextTools: list[Tool] | None = None


class ToolChoiceName(WireModel):
    name: str


ToolChoice = Union[Literal["auto", "required", "none"], ToolChoiceName]
# `null` is accepted as "none given" for these lists, as the clients sometimes send it.
ComponentList = Annotated[list[AvailableComponent], BeforeValidator(
    _none_is_empty, json_schema_input_type=list[AvailableComponent] | None)]
ToolList = Annotated[list[Tool], BeforeValidator(
    _none_is_empty, json_schema_input_type=list[Tool] | None)]


class InitialMessage(WireModel):
    """A message seeded into a new thread (React's `initialMessages`), e.g. a system prompt."""

    role: Literal["user", "assistant", "system"]
    content: list[ContentBlock] | str

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "\n".join(b.text for b in self.content if isinstance(b, TextBlock))

    def seed(self) -> SeedMessage:
        """The message as its thread is seeded with it: a user's images and files kept (as
        the `resource` blocks of a run's input), not only its text."""
        if self.role != "user" or isinstance(self.content, str) or not any(
                isinstance(b, (ResourceBlock, MediaBlock)) for b in self.content):
            return SeedMessage(self.role, self.text())
        blocks = [{"type": "resource", "resource": b.resource()} if isinstance(b, MediaBlock)
                  else b.model_dump(exclude_none=True) for b in self.content
                  if isinstance(b, (TextBlock, ResourceBlock, MediaBlock))]
        return SeedMessage(self.role, self.text(), blocks)


class ThreadInit(WireModel):
    initialMessages: list[InitialMessage] | None = None
    metadata: dict[str, Any] | None = None
    userKey: UserKey | None = None


class RunRequest(WireModel):
    message: InputMessage
    availableComponents: ComponentList = []
    tools: ToolList = []
    toolChoice: ToolChoice | None = None
    forceComponent: str | None = None
    previousRunId: str | None = None
    model: str | None = None
    maxTokens: Annotated[int, Field(gt=0), INTEGRAL] | None = None
    temperature: float | None = Field(default=None, ge=0, le=2)
    runMetadata: dict[str, Any] | None = None
    # The Tambo v1 proposal's name for `runMetadata` (the client's name wins when both come).
    metadata: dict[str, Any] | None = None
    userKey: UserKey | None = None
    contextKey: UserKey | None = None
    onDisconnect: Literal["cancel", "continue", "grace"] | None = None
    abandonPendingTools: bool | None = Field(
        default=None, description="On a thread paused for client tool results: answer the "
        "pending calls as cancelled by the user and run this message, instead of 400 "
        "MISSING_RESULTS.")
    multitaskStrategy: MultitaskStrategy | None = Field(
        default=None, description="When a run is already active on the thread: `reject` "
        "(409 CONCURRENT_RUN, the default), `interrupt` (cancel it, keeping its partial "
        "answer, and start this one), `rollback` (cancel it and leave its answer out of the "
        "model's history) or `enqueue` (accept now; the run starts when the thread is free, "
        "in order, its stream open meanwhile with `X-Run-Queued: true`).")
    webhook: str | None = Field(
        default=None, max_length=2048, description="An http(s) URL the gateway POSTs the "
        "run's end to (`{runId, threadId, status, error?, usage, metadata}`, signed: "
        "docs/webhooks.md); its host must be in `GATEWAY_WEBHOOK_ALLOWED_HOSTS`.")
    # POST /v1/threads/runs (and, with `createThread`, a thread created under its own id)
    thread: ThreadInit | None = None
    threadMetadata: dict[str, Any] | None = None
    # POST /v1/threads/{id}/runs: create the thread under that id if it does not exist (the
    # Tambo v1 proposal's `createThread`).
    createThread: bool | None = None
    embedResources: bool | None = Field(
        default=None, description="Read each MCP resource the message references (a "
        "`resource` block with a `uri` and no `text` or `blob`) from the agent's MCP server "
        "that lists it, and embed its contents in the message for the model (docs/resources.md).")


# -- thread requests ----------------------------------------------------------------------------


class ThreadCreateRequest(WireModel):
    initialMessages: list[InitialMessage] | None = None
    metadata: dict[str, Any] | None = None
    userKey: UserKey | None = None
    contextKey: UserKey | None = None


class ForkRequest(WireModel):
    """`POST /v1/threads/{id}/fork`: a new thread whose history is this one's up to and
    including `messageId`."""

    messageId: str = Field(min_length=1, max_length=64)
    userKey: UserKey | None = None
    contextKey: UserKey | None = None


class ThreadUpdateRequest(WireModel):
    name: str | None = Field(default=None, max_length=500)
    metadata: dict[str, Any] | None = None
    userKey: UserKey | None = None


class SuggestionsRequest(WireModel):
    availableComponents: ComponentList = []
    maxSuggestions: Annotated[int, Field(ge=1, le=10), INTEGRAL] = 3
    userKey: UserKey | None = None


PATCH_OP_SCHEMA = {"description": "An RFC 6902 operation", "oneOf": [
    {"type": "object", "required": ["op", "path", "value"],
     "properties": {"op": {"enum": ["add", "replace", "test"]}, "path": {"type": "string"}}},
    {"type": "object", "required": ["op", "path"],
     "properties": {"op": {"const": "remove"}, "path": {"type": "string"}}},
    {"type": "object", "required": ["op", "path", "from"],
     "properties": {"op": {"enum": ["move", "copy"]}, "path": {"type": "string"},
                    "from": {"type": "string"}}},
]}


class ComponentStateUpdate(WireModel):
    """`POST .../components/{componentId}/state`: exactly one of a full `state` or an RFC 6902
    `patch` (checked by the service, which also parses the ops, so a bad op is
    `INVALID_JSON_PATCH` rather than a field error). React sends `{state, userKey}`."""

    # The published schema says what the service accepts (an absent or null member is "not
    # given"); validation stays in the service.
    model_config = ConfigDict(json_schema_extra={"oneOf": [
        {"required": ["state"],
         "properties": {"state": {"type": "object"}, "patch": {"type": "null"}}},
        {"required": ["patch"],
         "properties": {"patch": {"type": "array", "minItems": 1}, "state": {"type": "null"}}},
    ]})

    state: dict[str, Any] | None = None
    patch: Annotated[list[Any], WithJsonSchema(
        {"type": "array", "items": PATCH_OP_SCHEMA})] | None = None
    userKey: UserKey | None = None
    contextKey: UserKey | None = None


# -- responses ------------------------------------------------------------------------------------
#
# The API renders every response body through these models (`api/render.py`, `wire()`), so the
# bodies and the published OpenAPI document have one definition. A body holds the fields its
# renderer gave (`exclude_unset`), and an `omitted()` field given None is left out rather than
# sent as null, so a renderer can pass a row's nullable column as it is.


def _is_none(value: Any) -> bool:
    return value is None


def omitted() -> Any:
    """An optional response field that is absent from the body, never null, when unset."""
    return Field(default=None, exclude_if=_is_none)


def wire(model: BaseModel) -> Any:
    """A response model as the JSON body the clients receive."""
    return model.model_dump(mode="json", exclude_unset=True)


class LastRunError(StrictModel):
    message: str
    code: str | None = None


class Message(StrictModel):
    id: str
    role: Literal["user", "assistant", "system"]
    content: list[ContentBlock]
    createdAt: str
    runId: str | None = Field(default=None, description="null for a message seeded with its "
                                                        "thread (`initialMessages`) or copied "
                                                        "into a fork")
    reasoning: list[str] | None = omitted()
    isCancelled: bool | None = omitted()
    metadata: dict[str, Any] | None = omitted()
    parentMessageId: str | None = omitted()


class ForkOrigin(StrictModel):
    """Where a forked thread came from: its history is that thread's up to that message."""

    threadId: str
    messageId: str


class Thread(StrictModel):
    id: str
    createdAt: str
    updatedAt: str
    runStatus: Literal["idle", "waiting", "streaming"]
    name: str | None = omitted()
    metadata: dict[str, Any] | None = omitted()
    userKey: str | None = omitted()
    currentRunId: str | None = omitted()
    lastCompletedRunId: str | None = omitted()
    lastRunCancelled: bool | None = omitted()
    lastRunError: LastRunError | None = omitted()
    pendingToolCallIds: list[str] | None = omitted()
    statusMessage: str | None = omitted()
    forkedFrom: ForkOrigin | None = omitted()
    contextTokens: int | None = Field(default=None, exclude_if=_is_none, description=(
        "Input tokens the thread's last run sent the model, counted by the gateway; absent "
        "while no input budget applies to it (docs/context.md)."))
    historyTrimmed: bool | None = Field(default=None, exclude_if=_is_none, description=(
        "Whether older turns were left out of (or summarised for) what its last run sent "
        "the model, to fit the model's input budget."))


class ThreadWithMessages(Thread):
    messages: list[Message]
    usage: Usage | None = Field(None, exclude_if=_is_none, description=(
        "What the thread's ended runs consumed, summed; absent while none called a model."))


class NamedThread(Thread):
    """`generate-name`'s answer: the thread, plus the beta API's `projectId` and `contextKey`
    (both left out, with `userKey`, when the caller named no user scope: the clients read only
    `name`)."""

    projectId: str | None = omitted()
    contextKey: str | None = None


class ThreadList(StrictModel):
    threads: list[Thread]
    hasMore: bool
    nextCursor: str | None = omitted()
    # With `count=true`: how many threads match the filters, counted up to a bound
    # (`countCapped`: there are more than `count`).
    count: int | None = omitted()
    countCapped: bool | None = omitted()


class MessageList(StrictModel):
    messages: list[Message]
    hasMore: bool
    nextCursor: str | None = omitted()


class Suggestion(StrictModel):
    id: str
    messageId: str
    title: str
    detailedSuggestion: str
    description: str
    createdAt: str
    metadata: dict[str, Any] | None = omitted()


class SuggestionList(StrictModel):
    suggestions: list[Suggestion]
    hasMore: bool
    nextCursor: str | None = omitted()


class ComponentStateResponse(StrictModel):
    componentId: str
    state: dict[str, Any]
    revision: int


RunStatus = Literal["queued", "running", "completed", "awaiting_input", "failed", "cancelled"]


class CancelResponse(StrictModel):
    """How the run ended (200), or that its cancellation is still under way (202)."""

    runId: str
    status: RunStatus
    cancelRequested: bool | None = omitted()


class ApprovalInfo(StrictModel):
    """A server tool call waiting for approval: answer it with a tool result whose text is
    `{"approved": true}` or `{"approved": false, "reason": "..."}` (docs/human-in-the-loop.md)."""

    interruptId: str
    reason: str
    message: str
    messageId: str
    expiresAt: str
    responseSchema: dict[str, Any] | None = omitted()
    answers: list[dict[str, Any]] | None = omitted()


class PendingToolCallInfo(StrictModel):
    toolCallId: str
    toolName: str
    arguments: str
    approval: ApprovalInfo | None = omitted()


class RunErrorInfo(StrictModel):
    code: str
    message: str
    category: str | None = None
    isRetryable: bool | None = None
    status: int | None = None


class ModelUsage(StrictModel):
    """What the calls to one model consumed. `reasoningTokens` is part of `outputTokens`,
    `cachedInputTokens` part of `inputTokens`."""

    model: str
    calls: int = Field(ge=0)
    inputTokens: int = Field(ge=0)
    outputTokens: int = Field(ge=0)
    totalTokens: int = Field(ge=0)
    reasoningTokens: int = Field(ge=0)
    cachedInputTokens: int = Field(ge=0)
    costUsd: float | None = Field(description="US dollars, from litellm's price map; null "
                                              "when the model is not in it")
    estimatedCalls: int | None = Field(None, ge=1, description="Of `calls`, those whose usage "
                                       "the provider did not report (cut off before it came, "
                                       "or a server that reports none): their tokens and cost "
                                       "are the gateway's count (docs/models.md). Absent: "
                                       "none.")


class Usage(StrictModel):
    """Tokens and cost, summed over the models (each in `models`), as the providers reported
    them. `costUsd` is null when any model's price is unknown."""

    inputTokens: int = Field(ge=0)
    outputTokens: int = Field(ge=0)
    totalTokens: int = Field(ge=0)
    reasoningTokens: int = Field(ge=0)
    cachedInputTokens: int = Field(ge=0)
    costUsd: float | None
    models: list[ModelUsage]


class Run(StrictModel):
    """A run's status (`GET .../runs/{runId}` with `Accept: application/json`)."""

    id: str
    threadId: str
    status: RunStatus
    createdAt: str
    startedAt: str | None = omitted()
    finishedAt: str | None = omitted()
    firstTokenAt: str | None = Field(None, exclude_if=_is_none, description=(
        "When the run's model streamed its first token (text, reasoning, tool arguments or "
        "component props); `firstTokenAt - startedAt` is its time to first token. Absent "
        "until the run has ended, and for a run that streamed none."))
    previousRunId: str | None = omitted()
    pendingToolCalls: list[PendingToolCallInfo] | None = omitted()
    error: RunErrorInfo | None = omitted()
    onDisconnect: Literal["cancel", "continue", "grace"] | None = omitted()
    model: str | None = Field(None, exclude_if=_is_none, description=(
        "The model that answered the run (the litellm model string; with "
        "`GATEWAY_MODEL_FALLBACKS`, the one that served it). Absent until the run has started."))
    cancelRequested: bool | None = omitted()
    usage: Usage | None = Field(None, exclude_if=_is_none, description=(
        "What the run's model calls consumed, once it has ended (a cancelled or failed run "
        "too); absent before, and for a run that called no model."))
    metadata: dict[str, Any] | None = Field(None, exclude_if=_is_none, description=(
        "The metadata the run was started with (`runMetadata`, or `metadata` as the Tambo v1 "
        "proposal names it), stored with the run; absent when it had none."))


class BatchRun(RunRequest):
    """One run of a batch: a run request, on the thread `threadId` names, else on a new one."""

    threadId: str | None = Field(default=None, min_length=1, max_length=64)


MAX_BATCH_RUNS = 20


class BatchRunRequest(WireModel):
    """`POST /v1/threads/runs/batch`: several runs started at once, each on its own."""

    runs: list[BatchRun] = Field(min_length=1, max_length=MAX_BATCH_RUNS)


class BatchStarted(StrictModel):
    """One run of a batch: started (its ids and status), or refused (`error`, the problem the
    same request alone would have been answered with)."""

    index: int
    threadId: str | None = omitted()
    runId: str | None = omitted()
    status: RunStatus | None = omitted()
    error: dict[str, Any] | None = omitted()


class BatchStartedList(StrictModel):
    runs: list[BatchStarted]


class BulkCancelRequest(WireModel):
    """`POST /v1/threads/runs/cancel`: cancel the active runs of the caller's threads that
    `threadIds` names, or whose metadata has every value `metadata` gives (at least one of
    the two)."""

    model_config = ConfigDict(**WireModel.model_config, json_schema_extra={
        "anyOf": [{"required": ["threadIds"]}, {"required": ["metadata"]}]})

    threadIds: list[Annotated[str, Field(min_length=1, max_length=64)]] | None = Field(
        default=None, min_length=1, max_length=100)
    metadata: dict[Annotated[str, Field(pattern="^[A-Za-z0-9_-]{1,64}$")],
                   Annotated[str, Field(max_length=256)]] | None = Field(
        default=None, min_length=1, max_length=8)
    userKey: UserKey | None = None
    contextKey: UserKey | None = None


class BulkCancelledRun(CancelResponse):
    threadId: str


class BulkCancelled(StrictModel):
    """The runs a bulk cancel reached, each as a single cancel answers it (`cancelRequested`:
    running in another process, its cancellation under way); `more`: more threads matched than
    one call cancels (call again)."""

    runs: list[BulkCancelledRun]
    more: bool


class RunWaitResult(StrictModel):
    """`POST /v1/threads[/{id}]/runs/wait`: the run, ended (200), or still going when the wait
    ran out (202: only the ids and status, to join it by its stream or status)."""

    status: RunStatus
    threadId: str
    runId: str
    messages: list[Message] | None = Field(None, exclude_if=_is_none, description=(
        "The messages the run added to the thread, in order: its input, then its answer "
        "(tool calls and results included). Absent on a 202."))
    usage: Usage | None = Field(None, exclude_if=_is_none, description=(
        "What the run's model calls consumed; absent on a 202 and for a run that called no "
        "model."))
    error: RunErrorInfo | None = omitted()


class RunList(StrictModel):
    """A thread's runs, newest first (`GET /v1/threads/{id}/runs`), each with its usage."""

    runs: list[Run]
    hasMore: bool
    nextCursor: str | None = omitted()


class TokenExchangeRequest(WireModel):
    """RFC 8693 token exchange (form-encoded), as `TamboProvider userToken=...` sends it."""

    grant_type: Literal["urn:ietf:params:oauth:grant-type:token-exchange"]
    # Not blank as `str.strip()` sees it: the gateway strips the token before reading it.
    subject_token: str = Field(min_length=1, pattern=NOT_BLANK,
                               description="The identity provider's token (JWT)")
    subject_token_type: Literal["urn:ietf:params:oauth:token-type:access_token",
                                "urn:ietf:params:oauth:token-type:id_token",
                                "urn:ietf:params:oauth:token-type:jwt"]


class TranscribeRequest(WireModel):
    """Voice input, as `useTamboVoice` posts it (multipart)."""

    file: bytes = Field(description="The recording (webm, mp3, wav, m4a, mp4, ...; at most "
                                    "25 MiB)")


class TokenResponse(StrictModel):
    access_token: str = Field(description="Send as `Authorization: Bearer`; it acts as the "
                                          "user's scope (userKey) on every call")
    token_type: Literal["Bearer"]
    expires_in: int
    issued_token_type: Literal["urn:ietf:params:oauth:token-type:access_token"]


class Problem(WireModel):
    """RFC 9457 problem details, as the real v1 server sends them, plus a stable `code`."""

    type: str
    title: str
    status: int
    detail: str
    code: str
    message: str
    instance: str | None = None
    errors: dict[str, str] | None = Field(
        default=None, description="VALIDATION_ERROR: the first message per invalid field")
