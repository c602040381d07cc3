"""Tambo v1 REST shapes (requests and responses), as the real clients send and read them.

Unknown request fields are accepted, as the real server does (its validation pipe neither
whitelists nor forbids). Where the Tambo v1 proposal's shapes differ from the clients' (a plain
string `content`, role `"tool"` + `toolCallId` tool results, `contextKey`), both are accepted.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class WireModel(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


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


InputBlock = Annotated[Union[TextBlock, ResourceBlock, ToolResultBlock], Field(discriminator="type")]
ContentBlock = Annotated[
    Union[TextBlock, ResourceBlock, ToolUseBlock, ToolResultBlock, ComponentBlock],
    Field(discriminator="type"),
]


# -- run requests -----------------------------------------------------------------------------


class InputMessage(WireModel):
    role: Literal["user", "tool"] = "user"
    content: list[InputBlock] | str
    additionalContext: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    toolCallId: str | None = None  # the proposal's role "tool" shape

    @model_validator(mode="after")
    def _normalise(self) -> "InputMessage":
        """Fold the proposal's shapes into the clients' one: a list of blocks, role user."""
        if isinstance(self.content, str):
            text = self.content
            if self.role == "tool":
                if not self.toolCallId:
                    raise ValueError("a message with role 'tool' needs toolCallId")
                self.content = [ToolResultBlock(type="tool_result", toolUseId=self.toolCallId,
                                                content=[TextBlock(type="text", text=text)])]
            else:
                self.content = [TextBlock(type="text", text=text)]
        elif self.role == "tool" and self.toolCallId:
            blocks = [b for b in self.content if not isinstance(b, ToolResultBlock)]
            if blocks:
                self.content = [ToolResultBlock(type="tool_result", toolUseId=self.toolCallId,
                                                content=blocks)]
        self.role = "user"
        if not self.content:
            raise ValueError("message content must not be empty")
        return self

    def tool_results(self) -> list[ToolResultBlock]:
        return [b for b in self.content if isinstance(b, ToolResultBlock)]

    def text(self) -> str:
        return "\n".join(b.text for b in self.content if isinstance(b, TextBlock))


class AvailableComponent(WireModel):
    name: str = Field(min_length=1, max_length=200)
    description: str = ""
    propsSchema: dict[str, Any] | bool | None = None
    stateSchema: dict[str, Any] | None = None


class Tool(WireModel):
    name: str = Field(min_length=1, max_length=200)
    description: str = ""
    inputSchema: dict[str, Any] | bool | None = None
    outputSchema: dict[str, Any] | bool | None = None
    strict: bool | None = None
    maxCalls: int | None = Field(default=None, ge=0)


class ToolChoiceName(WireModel):
    name: str


ToolChoice = Union[Literal["auto", "required", "none"], ToolChoiceName]


class InitialMessage(WireModel):
    """A message seeded into a new thread (React's `initialMessages`), e.g. a system prompt."""

    role: Literal["user", "assistant", "system"]
    content: list[ContentBlock] | str

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "\n".join(b.text for b in self.content if isinstance(b, TextBlock))


class ThreadInit(WireModel):
    initialMessages: list[InitialMessage] | None = None
    metadata: dict[str, Any] | None = None
    userKey: str | None = None


class RunRequest(WireModel):
    message: InputMessage
    availableComponents: list[AvailableComponent] = []
    tools: list[Tool] = []
    toolChoice: ToolChoice | None = None
    forceComponent: str | None = None
    previousRunId: str | None = None
    model: str | None = None
    maxTokens: int | None = Field(default=None, gt=0)
    temperature: float | None = Field(default=None, ge=0, le=2)
    runMetadata: dict[str, Any] | None = None
    userKey: str | None = None
    contextKey: str | None = None
    onDisconnect: Literal["cancel", "continue", "grace"] | None = None
    # POST /v1/threads/runs only
    thread: ThreadInit | None = None
    threadMetadata: dict[str, Any] | None = None
    createThread: bool | None = None

    @field_validator("availableComponents", "tools", mode="before")
    @classmethod
    def _none_is_empty(cls, value: Any) -> Any:
        return [] if value is None else value


# -- thread requests ----------------------------------------------------------------------------


class ThreadCreateRequest(WireModel):
    initialMessages: list[InitialMessage] | None = None
    metadata: dict[str, Any] | None = None
    userKey: str | None = None
    contextKey: str | None = None


class ThreadUpdateRequest(WireModel):
    name: str | None = Field(default=None, max_length=500)
    metadata: dict[str, Any] | None = None
    userKey: str | None = None


class SuggestionsRequest(WireModel):
    availableComponents: list[AvailableComponent] = []
    maxSuggestions: int = Field(default=3, ge=1, le=10)
    userKey: str | None = None

    @field_validator("availableComponents", mode="before")
    @classmethod
    def _none_is_empty(cls, value: Any) -> Any:
        return [] if value is None else value


class ComponentStateUpdate(WireModel):
    """`POST .../components/{componentId}/state`: exactly one of a full `state` or an RFC 6902
    `patch` (checked by the service, which also parses the ops, so a bad op is
    `INVALID_JSON_PATCH` rather than a field error). React sends `{state, userKey}`."""

    state: dict[str, Any] | None = None
    patch: list[Any] | None = None
    userKey: str | None = None
    contextKey: str | None = None


# -- responses ------------------------------------------------------------------------------------


class LastRunError(StrictModel):
    message: str
    code: str | None = None


class Message(StrictModel):
    id: str
    role: Literal["user", "assistant", "system"]
    content: list[ContentBlock]
    createdAt: str
    isCancelled: bool | None = None
    metadata: dict[str, Any] | None = None
    parentMessageId: str | None = None
    runId: str | None = None


class Thread(StrictModel):
    id: str
    createdAt: str
    updatedAt: str
    runStatus: Literal["idle", "waiting", "streaming"]
    name: str | None = None
    metadata: dict[str, Any] | None = None
    userKey: str | None = None
    currentRunId: str | None = None
    lastCompletedRunId: str | None = None
    lastRunCancelled: bool | None = None
    lastRunError: LastRunError | None = None
    pendingToolCallIds: list[str] | None = None
    statusMessage: str | None = None


class ThreadWithMessages(Thread):
    messages: list[Message]


class ThreadList(StrictModel):
    threads: list[Thread]
    hasMore: bool
    nextCursor: str | None = None


class MessageList(StrictModel):
    messages: list[Message]
    hasMore: bool
    nextCursor: str | None = None


class ComponentStateResponse(StrictModel):
    componentId: str
    state: dict[str, Any]
    revision: int


class CancelResponse(StrictModel):
    runId: str
    status: Literal["cancelled", "completed", "awaiting_input", "failed"]


class Problem(WireModel):
    """RFC 9457 problem details, as the real v1 server sends them, plus a stable `code`."""

    type: str
    title: str
    status: int
    detail: str
    code: str
    instance: str | None = None
