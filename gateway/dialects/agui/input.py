"""An AG-UI 1.0 `RunAgentInput` -> the neutral `RunSpec`, on the client's thread.

AG-UI clients send the whole conversation with every run; the gateway's thread is the record of
it, so only what is new is taken: the client tool results the thread is waiting for (from `tool`
messages or `resume` entries) and the closing `user` message. On a thread that does not exist
yet, the messages before that one become its history. Everything else of the input maps onto
the run: `tools` are client tools, `context` and `state` reach the model as the message's
additional context, and `forwardedProps` may carry `components` (Tambo component definitions:
`name`, `description`, `propsSchema`, `stateSchema`), `userKey`, `onDisconnect`,
`abandonPendingTools` (a new message ends the thread's pause, `runs/pauses.py`),
`multitaskStrategy` (on a busy thread, `runs/admission/multitask.py`) and `interrupts` (a client before 1.0
that reads 1.0's interrupt outcome, `opts_into_interrupts`); the whole of it is kept as the run's
metadata, with the `protocolVersion` the client declared (its stream is shaped for that version
and that opt-in, see `translate.py`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any

from ag_ui.core import (
    AssistantMessage,
    DataSource,
    DeveloperMessage,
    RunAgentInput,
    SystemMessage,
    TextInputContent,
    ToolMessage,
    UrlSource,
    UserMessage,
)
from pydantic import ConfigDict, Field, model_validator

from ...protocol.problems import ApiError, Problem
from ...protocol.run_spec import (
    Component,
    DisconnectPolicy,
    MultitaskStrategy,
    RunSpec,
    SeedMessage,
    ToolResult,
    UserInput,
)
from ...protocol.tambo import ComponentList, ToolList, WireModel, media_resource
from .translate import COMPONENTS, asks_a_human

ID_MAX = 64  # thread and run ids are the gateway's own ids


# Printable ASCII without `/`: the ids travel in URLs, in response headers (`X-Run-Id`, which
# HTTP limits to Latin-1) and in Redis keys. Clients generate UUIDs or similar, which all fit.
GatewayId = Annotated[str, Field(min_length=1, max_length=ID_MAX,
                                 pattern=r"^[\x21-\x2e\x30-\x7e]+$")]


class GatewayRunInput(RunAgentInput):
    """`RunAgentInput` whose ids fit the gateway's thread and run ids (what it validates is what
    the OpenAPI document publishes)."""

    thread_id: GatewayId
    run_id: GatewayId

    @model_validator(mode="before")
    @classmethod
    def _legacy_binary_parts(cls, data: Any) -> Any:
        """Clients before 1.0 (CopilotKit's `@ag-ui/client` 0.0.x) send a file as a `binary`
        part (`mimeType` and `data` or `url`), which 1.0 replaced by typed parts with a
        `source`; it is read as the 1.0 part it stands for."""
        for message in data.get("messages") or [] if isinstance(data, dict) else []:
            content = message.get("content") if isinstance(message, dict) else None
            if isinstance(content, list):
                message["content"] = [_from_binary(p) for p in content]
        return data


def forwarded(body: RunAgentInput, key: str) -> Any:
    props = body.forwarded_props
    return props.get(key) if isinstance(props, dict) else None


class Declared(WireModel):
    """What the input declares for the run, checked as the Tambo endpoints check it."""

    model_config = ConfigDict(title="RunRequest")

    tools: ToolList = []
    availableComponents: ComponentList = []
    onDisconnect: DisconnectPolicy | None = None
    abandonPendingTools: bool | None = None
    multitaskStrategy: MultitaskStrategy | None = None
    interrupts: bool | None = None
    webhook: str | None = Field(default=None, max_length=2048)


def opts_into_interrupts(forwarded_props: Any) -> bool:
    """Whether a client asks for AG-UI 1.0's interrupt outcome even though it declares no
    `protocolVersion` (`forwardedProps.interrupts: true`). CopilotKit 1.7x reads that outcome
    (its `useInterrupt`) and answers with `resume[]`, but its `@ag-ui/client` 0.0.x sends no
    version, so by version alone it would get the downgrade that hides interrupts."""
    return isinstance(forwarded_props, dict) and forwarded_props.get("interrupts") is True


def run_spec(body: RunAgentInput, pending: Mapping[str, str],
             previous_run_id: str | None, agent: str | None = None) -> RunSpec:
    """The run this input asks for, on a thread waiting for the `pending` tool calls (`answers`
    maps the ids a `tool` message or a `resume` entry may name to the call's id), of `agent`
    (the one the path names)."""
    results = _tool_results(body, pending)
    user = _new_user_message(body)
    if user is None and not results:
        message = ("must end with a user message, or answer the pending tool calls with tool "
                   "messages or resume entries")
        raise ApiError(Problem.NO_NEW_INPUT, f"Nothing to run: messages {message}",
                       errors={"messages": message})
    context: dict[str, Any] = {}
    if body.context:
        context["context"] = [c.model_dump(by_alias=True) for c in body.context]
    if body.state not in (None, {}, []):
        context["state"] = body.state
    declared = _declared(body)
    on_disconnect = declared.onDisconnect
    if on_disconnect is None and body.protocol_version is None:
        on_disconnect = "cancel"  # a client before 1.0 stops a run only by hanging up
    return RunSpec(
        user=UserInput(user_blocks(user.content), context or None,
                       client_id=user.id[:200] or None)
        if user is not None else None,
        tool_results=results,
        context=context or None,
        client_tools=[t.client_tool() for t in declared.tools],
        components=[Component(c.name, c.description, c.propsSchema, c.stateSchema,
                              tuple(t.client_tool() for t in c.contextTools or []))
                    for c in declared.availableComponents],
        previous_run_id=previous_run_id,
        agent=agent,
        on_disconnect=on_disconnect,
        metadata={"agui": {"forwardedProps": body.forwarded_props,
                           "parentRunId": body.parent_run_id,
                           "protocolVersion": body.protocol_version}},
        seed_messages=seed_messages(body),
        abandon_pending_tools=bool(declared.abandonPendingTools),
        multitask_strategy=declared.multitaskStrategy,
        state=shared_state(body.state),
        webhook=declared.webhook,
    )


# The members of the agent state the gateway itself fills (`snapshot.py`): not the client's.
GATEWAY_STATE = frozenset({COMPONENTS, "pendingToolCalls", "interrupts"})


def shared_state(state: Any) -> dict[str, Any] | None:
    """The client's `state` as the thread keeps it (None: none sent, the thread keeps its
    own): an object, without the members the gateway fills."""
    if not isinstance(state, dict) or not state:
        return None
    return {k: v for k, v in state.items() if k not in GATEWAY_STATE}


def _declared(body: RunAgentInput) -> Declared:
    fields: dict[str, Any] = {
        "tools": [{"name": t.name, "description": t.description,
                   **({"inputSchema": t.parameters} if isinstance(t.parameters, dict) else {})}
                  for t in body.tools or []]}
    components = forwarded(body, "components")
    if components is not None:
        fields["availableComponents"] = components
    for name in ("onDisconnect", "abandonPendingTools", "multitaskStrategy", "interrupts",
                 "webhook"):
        value = forwarded(body, name)
        if value is not None:
            fields[name] = value
    try:
        return Declared.model_validate(fields)
    except ValueError as exc:
        raise _invalid("forwardedProps", str(exc).splitlines()[0]) from None


def seed_messages(body: RunAgentInput) -> list[SeedMessage]:
    """The conversation before the new user message, for a thread the gateway does not have.
    Every `system` and `developer` message of the input is among them (only a closing `user`
    message is left out), so the operator's agent refuses them on any thread unless it takes
    client prompts (`runs/admission/agents.py`)."""
    new = _new_user_message(body)
    history = body.messages[:-1] if new is not None else body.messages
    out: list[SeedMessage] = []
    for message in history:
        if isinstance(message, (SystemMessage, DeveloperMessage)):
            out.append(SeedMessage("system", message.content))
        elif isinstance(message, UserMessage):
            media = not isinstance(message.content, str) and any(
                not isinstance(p, TextInputContent) for p in message.content or [])
            out.append(SeedMessage("user", text_of(message.content),
                                   user_blocks(message.content) if media else None))
        elif isinstance(message, AssistantMessage) and message.content:
            out.append(SeedMessage("assistant", message.content))
    return out


def _new_user_message(body: RunAgentInput) -> UserMessage | None:
    last = body.messages[-1] if body.messages else None
    return last if isinstance(last, UserMessage) else None


def answers(pending_calls: list[dict[str, Any]]) -> dict[str, str]:
    """The ids that answer a thread's pending calls, to the call's id: each call's own id (a
    `tool` message, or a `resume` entry naming it), and a call waiting for a human also by its
    interrupt's id."""
    names = {p["toolCallId"]: p["toolCallId"] for p in pending_calls}
    for call in pending_calls:
        if asks_a_human(call):
            names[call["approval"]["interruptId"]] = call["toolCallId"]
    return names


def _tool_results(body: RunAgentInput, pending: Mapping[str, str]) -> list[ToolResult]:
    """Results for the pending calls: the latest `tool` message for each, then `resume`."""
    results: dict[str, ToolResult] = {}
    for message in body.messages:
        if isinstance(message, ToolMessage) and message.tool_call_id in pending:
            error = message.error
            call_id = pending[message.tool_call_id]
            results[call_id] = _result(call_id, error if error else text_of(message.content),
                                       bool(error))
    for entry in body.resume or []:
        call_id = pending.get(entry.interrupt_id, "")
        if call_id and call_id not in results:
            cancelled = entry.status == "cancelled"
            payload = entry.payload
            text = ("The user cancelled this tool call" if cancelled else
                    payload if isinstance(payload, str) else json.dumps(payload))
            results[call_id] = _result(call_id, text, cancelled)
    return list(results.values())


def _result(tool_call_id: str, text: str, is_error: bool) -> ToolResult:
    return ToolResult(tool_call_id, [{"type": "text", "text": text}], is_error)


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(p.text for p in content or [] if isinstance(p, TextInputContent))


def user_blocks(content: Any) -> list[dict[str, Any]]:
    """A user message's content as the Tambo dialect's blocks: its text, and each image, audio,
    video or document part as the `resource` block a Tambo client sends for an attachment (so
    it reaches the model, and is checked, exactly as that is: `engine/attachments.py`)."""
    if isinstance(content, str) or not content:
        return [{"type": "text", "text": content or " "}]
    blocks: list[dict[str, Any]] = []
    for part in content:
        if isinstance(part, TextInputContent):
            blocks.append({"type": "text", "text": part.text})
        else:
            blocks.append({"type": "resource", "resource": _resource(part)})
    if not any(b["type"] == "text" for b in blocks):
        blocks.insert(0, {"type": "text", "text": " "})
    return blocks


def _resource(part: Any) -> dict[str, Any]:
    """An AG-UI media part as a Tambo (MCP) resource (`tambo.media_resource`: the same
    mapping as the Tambo dialect's media blocks)."""
    source, meta = part.source, part.metadata if isinstance(part.metadata, dict) else {}
    name = meta.get("filename") or meta.get("name")
    name = name if isinstance(name, str) else None
    if isinstance(source, DataSource):
        return media_resource(part.type, data=source.value, mime=source.mime_type, name=name)
    if isinstance(source, UrlSource):
        return media_resource(part.type, url=source.value, mime=source.mime_type, name=name)
    return media_resource(part.type, file_id=str(getattr(source, "value", "")))


MEDIA = {"image": "image", "audio": "audio", "video": "video"}


def _from_binary(part: Any) -> Any:
    """A 0.0.x `binary` part as the 1.0 part of its kind (by its MIME type)."""
    if not isinstance(part, dict) or part.get("type") != "binary":
        return part
    mime = str(part.get("mimeType") or "")
    kind = MEDIA.get(mime.split("/")[0], "document")
    if part.get("data"):
        source = {"type": "data", "value": part["data"], "mimeType": mime}
    elif part.get("url"):
        source = {"type": "url", "value": part["url"], "mimeType": mime}
    else:  # a provider's file id: refused with the others (`_resource`)
        source = {"type": "file", "value": part.get("id") or "", "mimeType": mime}
    filename = part.get("filename")
    return {"type": kind, "source": source,
            **({"metadata": {"filename": filename}} if filename else {})}


def _invalid(field: str, message: str) -> ApiError:
    return ApiError(Problem.VALIDATION_ERROR, f"Invalid request: {field}: {message}",
                    errors={field: message})
