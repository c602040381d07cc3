"""A thread as AG-UI 1.0 snapshots, for a client that (re)loads it (`connect` in `routes.py`).

`messages` turns the stored Timbal message values into AG-UI messages with the same ids the live
stream gives them (`translate.py`): an assistant message per model turn (`messageId`) with its
text and its tool calls (components are tool calls named after the component), a `tool`
message per tool result (a component's is the gateway's own `rendered` answer, id
`<part>:result`), a `reasoning` message per thinking part, and the user's messages. So a client
that saw a run live and then loads the thread holds each message once. System messages are left
out: they are the operator's (or were refused), and a client that sent them back would be
refused.

`state` is the agent state the live stream builds (`components`), with each component's current
state, plus what the thread waits for: `pendingToolCalls` (client tool calls to answer, as the
run that paused named them) and `interrupts` (calls waiting for a human: an approval, or a
tool's question), each in the shape of AG-UI 1.0's `Interrupt`, as the paused run's
`RUN_FINISHED` outcome gave them, so a client that reloads can answer them with `resume[]`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from ag_ui.core import (
    AssistantMessage,
    AudioInputContent,
    DataSource,
    DocumentInputContent,
    FunctionCall,
    ImageInputContent,
    InputContent,
    Interrupt,
    Message,
    ReasoningMessage,
    TextInputContent,
    ToolCall,
    ToolMessage,
    UrlSource,
    UserMessage,
    VideoInputContent,
)

from ...protocol import timbal
from ...protocol.tambo import WireModel
from .translate import COMPONENTS, asks_a_human, interrupt

PENDING = "pendingToolCalls"  # the member of the snapshot state naming the calls to answer
INTERRUPTS = "interrupts"  # the member naming the calls that wait for a human


class ThreadStatus(WireModel):
    """Whether a run is active on an AG-UI thread (`GET /v1/agui/threads/{threadId}`), and
    which, by the client's ids: what a runner reads for `isRunning` and before a `stop`."""

    threadId: str
    running: bool
    runId: str | None = None


class AguiThreadSummary(WireModel):
    """One thread of the caller's AG-UI thread list (`GET /v1/agui/threads`), by the client's
    name for it: what a thread picker (CopilotKit's `useThreads`) shows."""

    threadId: str
    agent: str | None = None
    name: str | None = None
    createdAt: str
    updatedAt: str
    running: bool


class AguiThreadList(WireModel):
    """A page of the caller's AG-UI threads, newest first; `nextCursor` reads the next."""

    threads: list[AguiThreadSummary]
    hasMore: bool
    nextCursor: str | None = None


class StoredMessage(Protocol):
    id: str
    run_id: str | None
    parts: list[dict[str, Any]]


def is_input(part: Mapping[str, Any]) -> bool:
    """A part the client itself sent: the user's message, a client tool result."""
    return part.get("type") == "user" or part.get("origin") == "client"


def messages(rows: Iterable[StoredMessage], skip_output_of: str | None = None,
             media: bool = True) -> list[Message]:
    """The thread's messages in AG-UI shape, in order; `skip_output_of`: a run whose own output
    the caller streams from its log instead (its input is kept: the log does not echo it);
    `media`: a user's images and files as 1.0's media parts (a client before 1.0 knows none of
    them, and gets the text)."""
    out: list[Message] = []
    turns: dict[str, AssistantMessage] = {}
    for row in rows:
        for part in row.parts:
            if skip_output_of is not None and row.run_id == skip_output_of and not is_input(part):
                continue
            message = _message(row.id, part, turns, media)
            if message is not None:
                out.append(message)
    return out


def user_content(part: Mapping[str, Any]) -> str | list[InputContent]:
    """A user's message as AG-UI content: its text, or, when it has images or files, its parts
    (each `resource` block as the media part it came from: by its MIME type)."""
    blocks = part.get("blocks") or []
    if not any(b.get("type") == "resource" for b in blocks):
        return str(part.get("content") or "")
    parts: list[InputContent] = []
    for block in blocks:
        if block.get("type") == "text" and str(block.get("text") or "").strip():
            parts.append(TextInputContent(text=block["text"]))
        elif block.get("type") == "resource":
            parts.append(_media(block.get("resource") or {}))
    return parts


def _media(resource: Mapping[str, Any]) -> InputContent:
    mime = str(resource.get("mimeType") or "")
    if resource.get("text") is not None and not resource.get("blob"):
        return TextInputContent(text=str(resource["text"]))
    source: DataSource | UrlSource = (
        DataSource(value=str(resource["blob"]), mime_type=mime or "application/octet-stream")
        if resource.get("blob") else UrlSource(value=str(resource.get("uri") or ""),
                                               mime_type=mime or None))
    name = resource.get("name")
    meta = {"filename": name} if isinstance(name, str) else None
    kind = mime.split("/")[0]
    if kind == "image":
        return ImageInputContent(source=source, metadata=meta)
    if kind == "audio":
        return AudioInputContent(source=source, metadata=meta)
    if kind == "video":
        return VideoInputContent(source=source, metadata=meta)
    return DocumentInputContent(source=source, metadata=meta)


def _message(row_id: str, part: dict[str, Any], turns: dict[str, AssistantMessage],
             media: bool = True) -> Message | None:
    """The AG-UI message `part` adds (None when it joins an assistant turn already listed)."""
    kind, i = part.get("type"), str(part.get("id") or row_id)
    if kind == "user":
        # The client's own id for a message it sent, so a reloaded client holds it once.
        return UserMessage(id=str(part.get("clientMessageId") or row_id), role="user",
                           content=user_content(part) if media
                           else str(part.get("content") or ""))
    if kind == "thinking":
        return ReasoningMessage(id=i, role="reasoning", content=part.get("content") or "")
    if kind == "tool_result":
        return ToolMessage(id=i, role="tool", tool_call_id=part["toolCallId"],
                           content=timbal.tool_result_text(part))
    if kind not in ("agent", "tool_call", "x-component"):
        return None
    turn_id = str(part.get("messageId") or row_id)
    turn = turns.get(turn_id)
    added = turn is None
    if turn is None:
        turn = turns[turn_id] = AssistantMessage(id=turn_id, role="assistant")
    if kind == "agent":
        turn.content = (turn.content or "") + (part.get("content") or "")
        return turn if added else None
    call_id = part.get("toolCallId") or part.get("componentId") or i
    arguments = part.get("props") if kind == "x-component" else part.get("arguments")
    call = ToolCall(id=call_id, type="function", function=FunctionCall(
        name=part["name"], arguments=json.dumps(arguments or {})))
    turn.tool_calls = [*(turn.tool_calls or []), call]
    return turn if added else None


def rendered(rows: Iterable[StoredMessage], skip_output_of: str | None = None
             ) -> list[dict[str, Any]]:
    """The component values of the thread, in order."""
    return [part for row in rows for part in row.parts
            if part.get("type") == "x-component"
            and not (skip_output_of is not None and row.run_id == skip_output_of)]


def with_component_answers(listed: list[Message], components: list[dict[str, Any]]
                           ) -> list[Message]:
    """`listed` with the gateway's answer to each component call after its turn, as the live
    stream sends it (`TOOL_CALL_RESULT` of id `<part>:result`): a client must not answer it."""
    answers: dict[str, list[Message]] = {}
    for value in components:
        call_id = value.get("toolCallId") or value["componentId"]
        answers.setdefault(str(value.get("messageId")), []).append(ToolMessage(
            id=f"{value.get('id')}:result", role="tool", tool_call_id=call_id,
            content=json.dumps({"rendered": value["name"], "componentId": value["componentId"]})))
    out: list[Message] = []
    for message in listed:
        out.append(message)
        if isinstance(message, AssistantMessage):
            out.extend(answers.get(message.id, []))
    return out


def state(components: list[dict[str, Any]], current: Mapping[str, Any],
          pending: list[dict[str, Any]] | None) -> dict[str, Any]:
    """The agent state a client loading the thread starts from: its components (with their
    current state, `current`: component id -> state), the client tool calls it must answer
    and the interrupts (approvals, questions) a human must answer."""
    entries = {}
    for value in components:
        component_id = value["componentId"]
        entries[component_id] = {
            "componentId": component_id, "name": value["name"],
            "messageId": value.get("messageId"),
            "toolCallId": value.get("toolCallId") or component_id,
            "props": value.get("props") or {},
            "state": current.get(component_id, value.get("state") or {})}
    snapshot: dict[str, Any] = {COMPONENTS: entries}
    calls = [p for p in pending or [] if not asks_a_human(p)]
    if calls:
        snapshot[PENDING] = [{"toolCallId": p["toolCallId"], "toolName": p.get("toolName"),
                              "arguments": p.get("arguments")} for p in calls]
    asked = interrupts(pending or [])
    if asked:
        snapshot[INTERRUPTS] = [i.model_dump(mode="json", by_alias=True, exclude_none=True)
                                for i in asked]
    return snapshot


def interrupts(pending: list[dict[str, Any]]) -> list[Interrupt]:
    """The pending calls that wait for a human, as AG-UI 1.0 interrupts."""
    return [interrupt(p) for p in pending if asks_a_human(p)]
