"""The Tambo dialect of AG-UI (what `@tambo-ai/client` 1.1.3 reads).

The dialect is AG-UI 0.0.44's event set plus `tambo.*` CUSTOM events: reasoning is
`THINKING_TEXT_MESSAGE_*` (the 1.0 `REASONING_*` events are fatal in the Tambo reducer),
components stream as JSON Patch `operations`, and a cancel is `RUN_ERROR {code: CANCELLED}`.
Where the Tambo v1 proposal names other fields (`delta`, `props`, `input`, ...) they are sent too:
clients ignore extra fields. Events are plain dicts (`ag-ui-protocol` 1.0 cannot build the
`THINKING_*` events this dialect needs, and a dict literal costs nothing per token), typed
with the TypedDicts of `events.py`, so mypy checks each one against the published
shape.
"""

from __future__ import annotations

import json

import orjson

from ...protocol import timbal
from ...protocol.frames_schema import (
    ComponentValue,
    ControlFrame,
    JsonPatchOp,
    SetValue,
    ToolCallValue,
)
from ...protocol.props_stream import PropsStream
from ...protocol.translation import Dialect, Item
from ...protocol.usage_events import run_metadata, tambo_usage
from .events import (
    ComponentEndValue,
    ContentBlockBody,
    ReplyComponent,
    ReplyMessage,
    RunErrorBody,
    RunFinishedBody,
    TamboEventBody,
    ToolCallResultBody,
)

Event = TamboEventBody


class TamboDialect(Dialect[Event]):
    """A sub-agent's messages (those with `subagentRunId`) are not shown: the Tambo clients see
    its calling agent's tool call and, when it answers, the call's result, as for a server
    tool."""

    def __init__(self) -> None:
        super().__init__()
        # The run's last assistant message as the REST listing shows it (`id`, `role`,
        # `content` blocks), for the proposal's `RUN_FINISHED.message`.
        self.reply: ReplyMessage | None = None

    def remember(self, message_id: str, block: ContentBlockBody) -> None:
        if not message_id:
            return
        if self.reply is None or self.reply["id"] != message_id:
            self.reply = {"id": message_id, "role": "assistant", "content": []}
        self.reply["content"].append(block)

    def on_start(self, item: Item) -> list[Event] | None:
        meta = item.meta
        if meta.get("subagentRunId"):
            return None
        if meta["type"] == "agent":
            return [{"type": "TEXT_MESSAGE_START", "messageId": item.message_id,
                     "role": "assistant"}]
        if meta["type"] == "thinking":
            return [{"type": "THINKING_TEXT_MESSAGE_START"}]
        if meta["type"] == "tool_call":
            return [_tool_call_start(meta["toolCallId"], meta["name"], item.message_id)]
        if meta["type"] == "x-component":
            item.props = PropsStream()
            return [_component_start(item.message_id, meta["componentId"], meta["name"])]
        return None

    def on_append(self, item: Item, text: str) -> list[Event]:
        if item.type == "agent":
            return [{"type": "TEXT_MESSAGE_CONTENT", "messageId": item.message_id, "delta": text}]
        if item.type == "thinking":
            return [{"type": "THINKING_TEXT_MESSAGE_CONTENT", "delta": text}]
        meta, props = item.meta, item.props
        if meta["type"] == "tool_call":
            return [{"type": "TOOL_CALL_ARGS", "toolCallId": meta["toolCallId"], "delta": text}]
        if meta["type"] == "x-component" and props is not None:
            ops = props.feed(text)
            return [_props_delta(meta["componentId"], props, ops, props.unsent())] if ops else []
        return []

    def on_end(self, item: Item, value: SetValue) -> list[Event]:
        if item.type == "agent":
            rest = item.rest_of(value)
            events: list[Event] = [
                {"type": "TEXT_MESSAGE_CONTENT", "messageId": item.message_id, "delta": rest}]
            if value["type"] == "agent":
                self.remember(item.message_id, {"type": "text", "text": value["content"]})
            return (events if rest else []) + [
                {"type": "TEXT_MESSAGE_END", "messageId": item.message_id}]
        if item.type == "thinking":
            rest = item.rest_of(value)
            thinking: list[Event] = (
                [{"type": "THINKING_TEXT_MESSAGE_CONTENT", "delta": rest}] if rest else [])
            return thinking + [{"type": "THINKING_TEXT_MESSAGE_END"}]
        meta, props = item.meta, item.props
        if meta["type"] == "tool_call":
            if value["type"] == "tool_call":
                self.remember(item.message_id, _tool_use_block(value))
            return [{"type": "TOOL_CALL_END", "toolCallId": meta["toolCallId"]}]
        if meta["type"] == "x-component" and value["type"] == "x-component" and props:
            component: list[Event] = []
            final = value.get("props") or {}
            ops = props.finish(final)
            rest = props.final_text(final)
            if ops or rest:
                component.append(_props_delta(meta["componentId"], props, ops, rest))
            self.remember(item.message_id, _component_block(value))
            return component + [_component_end(value)]
        return []

    def on_whole(self, i: str, value: SetValue) -> list[Event]:
        if value.get("subagentRunId"):
            return []
        if value["type"] == "agent":
            message_id, content = value.get("messageId", ""), value.get("content", "")
            self.remember(message_id, {"type": "text", "text": content})
            events: list[Event] = [
                {"type": "TEXT_MESSAGE_START", "messageId": message_id, "role": "assistant"}
            ]
            if content:
                events.append(
                    {"type": "TEXT_MESSAGE_CONTENT", "messageId": message_id, "delta": content}
                )
            return events + [{"type": "TEXT_MESSAGE_END", "messageId": message_id}]
        if value["type"] == "tool_call":
            call_id = value["toolCallId"]
            self.remember(value.get("messageId", ""), _tool_use_block(value))
            return [
                _tool_call_start(call_id, value["name"], value.get("messageId", "")),
                {"type": "TOOL_CALL_ARGS", "toolCallId": call_id,
                 "delta": json.dumps(value.get("arguments") or {})},
                {"type": "TOOL_CALL_END", "toolCallId": call_id},
            ]
        if value["type"] == "tool_result" and "origin" not in value:  # not a client's
            result: ToolCallResultBody = {
                "type": "TOOL_CALL_RESULT",
                "messageId": value.get("messageId", ""),
                "toolCallId": value["toolCallId"],
                "content": timbal.tool_result_text(value),
                "role": "tool",
            }
            if value.get("status") == "error":
                result["isError"] = True
            return [result]
        if value["type"] == "x-component":
            props = PropsStream()
            ops = props.finish(value.get("props") or {})
            self.remember(value.get("messageId", ""), _component_block(value))
            events = [_component_start(value.get("messageId", ""), value["componentId"],
                                       value["name"])]
            if ops:
                events.append(_props_delta(value["componentId"], props, ops,
                                           json.dumps(value.get("props") or {})))
            return events + [_component_end(value)]
        return []

    def on_close(self, item: Item) -> list[Event]:
        meta = item.meta
        if meta["type"] == "agent":
            return [{"type": "TEXT_MESSAGE_END", "messageId": item.message_id}]
        if meta["type"] == "thinking":
            return [{"type": "THINKING_TEXT_MESSAGE_END"}]
        if meta["type"] == "tool_call":
            return [{"type": "TOOL_CALL_END", "toolCallId": meta["toolCallId"]}]
        return []

    def on_control(self, frame: ControlFrame) -> list[Event]:
        if frame["c"] == timbal.RUN_STARTED:
            return [{"type": "RUN_STARTED", "threadId": self.thread_id, "runId": self.run_id}]
        if frame["c"] == timbal.RUN_AWAITING_INPUT:
            return [{
                "type": "CUSTOM",
                "name": "tambo.run.awaiting_input",
                "value": {
                    "threadId": self.thread_id,
                    "runId": self.run_id,
                    "pendingToolCalls": frame["pendingToolCalls"],
                },
            }]
        if frame["c"] == timbal.COMPONENT_STATE:
            component_id = frame["componentId"]
            events: list[Event] = [{
                "type": "CUSTOM",
                "name": "tambo.component.state_delta",
                "value": {
                    "componentId": component_id,
                    "operations": frame["operations"],
                    "delta": frame["operations"],
                    "revision": frame["revision"],
                },
            }]
            if not any(item.meta.get("componentId") == component_id
                       for item in self.open.values()):
                # The Tambo reducer marks a component "streaming" on every state delta; for one
                # whose props are complete, an end marks it "done" again.
                events.append({"type": "CUSTOM", "name": "tambo.component.end",
                               "value": {"componentId": component_id}})
            return events
        if frame["c"] == timbal.RUN_FINISHED:
            # A truncated log may have left items open: RUN_FINISHED never leaves them open.
            finished: RunFinishedBody = {"type": "RUN_FINISHED", "threadId": self.thread_id,
                                         "runId": self.run_id}
            usage = tambo_usage(frame)
            if usage:
                finished["usage"] = usage["usage"]
            if self.reply is not None:
                finished["message"] = self.reply
            metadata = run_metadata(frame)  # a cut answer, an estimated usage
            if metadata:
                finished["metadata"] = metadata  # type: ignore[typeddict-item]
            return [*self.close_open(), finished]
        if frame["c"] == timbal.RUN_CANCELLED:
            return [{"type": "RUN_ERROR", "message": "Run cancelled", "code": "CANCELLED"}]
        if frame["c"] == timbal.ERROR:
            event: RunErrorBody = {
                "type": "RUN_ERROR",
                "message": frame.get("message") or "An internal error occurred",
                "code": frame.get("code") or "INTERNAL_ERROR",
                "category": frame.get("category") or "server_error",
                "isRetryable": bool(frame.get("isRetryable", False)),
            }
            status = frame.get("status")
            if status is not None:
                event["status"] = status
            return [event]
        return []

    def on_queued(self) -> list[Event]:
        return [{"type": "CUSTOM", "name": "tambo.run.queued",
                 "value": {"threadId": self.thread_id, "runId": self.run_id}}]

    def stamp(self, event: Event, ts: int) -> Event:
        # The stamped event is the matching `events.TamboEvent`, a structural subtype of its
        # body, which mypy cannot infer from the spread of a union (and no `cast()`: not even
        # a call more per event).
        stamped: Event = {**event, "timestamp": ts}  # type: ignore[assignment]
        return stamped


def encode(event: Event) -> str:
    """An event as the compact JSON of one SSE `data:` line, once per event per reader, by
    orjson (docs/decisions/0033; the same text as `json.dumps`, except floats in exponent form:
    `1e-5`, not `1e-05`). What orjson refuses (integers beyond 64 bits, a lone surrogate) goes
    the old way."""
    try:
        return orjson.dumps(event).decode()
    except TypeError:
        return json.dumps(event, separators=(",", ":"), ensure_ascii=False)


def _tool_call_start(call_id: str, name: str, message_id: str) -> Event:
    return {"type": "TOOL_CALL_START", "toolCallId": call_id, "toolCallName": name,
            "parentMessageId": message_id}


def _component_start(message_id: str, component_id: str, name: str) -> Event:
    return {"type": "CUSTOM", "name": "tambo.component.start",
            "value": {"messageId": message_id, "componentId": component_id,
                      "componentName": name}}


def _props_delta(component_id: str, props: PropsStream, ops: list[JsonPatchOp],
                 delta: str) -> Event:
    return {"type": "CUSTOM", "name": "tambo.component.props_delta",
            "value": {"componentId": component_id, "operations": ops, "delta": delta,
                      "streamingStatus": props.streaming_status()}}


def _tool_use_block(value: ToolCallValue) -> ContentBlockBody:
    return {"type": "tool_use", "id": value["toolCallId"], "name": value["name"],
            "input": value.get("arguments") or {}}


def _component_block(value: ComponentValue) -> ContentBlockBody:
    block: ReplyComponent = {"type": "component", "id": value["componentId"],
                               "name": value["name"], "props": value.get("props") or {}}
    state = value.get("state")
    if state is not None:
        block["state"] = state
    return block


def _component_end(value: ComponentValue) -> Event:
    props, state = value.get("props") or {}, value.get("state")
    end: ComponentEndValue = {"componentId": value["componentId"], "props": props,
                              "finalProps": props}
    if state is not None:
        end["state"] = state
        end["finalState"] = state
    return {"type": "CUSTOM", "name": "tambo.component.end", "value": end}
