"""Timbal frames -> the Tambo dialect of AG-UI (what `@tambo-ai/client` 1.1.3 reads).

The dialect is AG-UI 0.0.44's event set plus `tambo.*` CUSTOM events: reasoning is
`THINKING_TEXT_MESSAGE_*` (the 1.0 `REASONING_*` events are fatal in the Tambo reducer),
components stream as JSON Patch `operations`, and a cancel is `RUN_ERROR {code: CANCELLED}`.
Where the Tambo v1 proposal names other fields (`delta`, `props`, `input`, ...) they are sent too:
clients ignore extra fields.

The translator is deterministic: the same frames always give the same events, which is what
lets an SSE `id:` be an event's position in the run and a reconnect replay exactly what was
missed. It keeps only per-subscriber bookkeeping (which items are open).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from . import timbal
from .props_stream import PropsStream

Event = dict[str, Any]


@dataclass
class _Open:
    type: str
    message_id: str
    sent: list[str] = field(default_factory=list)  # text deltas sent (joined once, at the end)
    tool_call_id: str = ""
    component_id: str = ""
    props: PropsStream | None = None


@dataclass
class TamboTranslator:
    thread_id: str = ""
    run_id: str = ""
    _open: dict[str, _Open] = field(default_factory=dict)
    _finished: bool = False

    def feed(self, frame: timbal.Frame) -> list[Event]:
        """Translate one frame; returns zero or more events (without timestamps)."""
        if self._finished:
            return []
        kind = timbal.kind(frame)
        if kind == "control":
            return self._control(frame)
        if kind == "start":
            return self._start(frame["i"], frame.get("m") or {})
        if kind == "append":
            return self._append(frame["i"], frame["a"])
        if kind == "set":
            return self._set(frame["i"], frame["v"])
        return []

    # -- message frames -------------------------------------------------------------------

    def _start(self, i: str, meta: dict[str, Any]) -> list[Event]:
        if i in self._open:  # a reset of an open item: the dialect cannot restate it
            return []
        mtype, message_id = str(meta.get("type") or ""), meta.get("messageId", i)
        item = _Open(type=mtype, message_id=message_id)
        if mtype == "agent":
            self._open[i] = item
            return [{"type": "TEXT_MESSAGE_START", "messageId": message_id, "role": "assistant"}]
        if mtype == "thinking":
            self._open[i] = item
            return [{"type": "THINKING_TEXT_MESSAGE_START"}]
        if mtype == "tool_call":
            item.tool_call_id = meta["toolCallId"]
            self._open[i] = item
            return [_tool_call_start(meta["toolCallId"], meta["name"], message_id)]
        if mtype == "x-component":
            item.component_id, item.props = meta["componentId"], PropsStream()
            self._open[i] = item
            return [_component_start(message_id, meta["componentId"], meta["name"])]
        return []

    def _append(self, i: str, text: str) -> list[Event]:
        item = self._open.get(i)
        if item is None or text == "":
            return []
        if item.type == "agent":
            item.sent.append(text)
            return [{"type": "TEXT_MESSAGE_CONTENT", "messageId": item.message_id, "delta": text}]
        if item.type == "thinking":
            item.sent.append(text)
            return [{"type": "THINKING_TEXT_MESSAGE_CONTENT", "delta": text}]
        if item.type == "tool_call":
            return [{"type": "TOOL_CALL_ARGS", "toolCallId": item.tool_call_id, "delta": text}]
        if item.type == "x-component" and item.props is not None:
            ops = item.props.feed(text)
            return [_props_delta(item, ops, text)] if ops else []
        return []

    def _set(self, i: str, value: dict[str, Any]) -> list[Event]:
        item = self._open.pop(i, None)
        vtype = value.get("type")
        if item is None:
            return self._whole(value)
        if item.type == "agent":
            rest = _remaining("".join(item.sent), value.get("content", ""))
            events = [{"type": "TEXT_MESSAGE_CONTENT", "messageId": item.message_id, "delta": rest}]
            return (events if rest else []) + [
                {"type": "TEXT_MESSAGE_END", "messageId": item.message_id}
            ]
        if item.type == "thinking":
            rest = _remaining("".join(item.sent), value.get("content", ""))
            events = [{"type": "THINKING_TEXT_MESSAGE_CONTENT", "delta": rest}] if rest else []
            return events + [{"type": "THINKING_TEXT_MESSAGE_END"}]
        if item.type == "tool_call":
            return [{"type": "TOOL_CALL_END", "toolCallId": item.tool_call_id}]
        if item.type == "x-component" and vtype == "x-component" and item.props is not None:
            events = []
            ops = item.props.finish(value.get("props") or {})
            if ops:
                events.append(_props_delta(item, ops, ""))
            return events + [_component_end(value)]
        return []

    def _whole(self, value: dict[str, Any]) -> list[Event]:
        """A message that arrives complete (not streamed): emit its whole item at once."""
        vtype, message_id = value.get("type"), value.get("messageId", "")
        if vtype == "agent":
            content = value.get("content", "")
            events: list[Event] = [
                {"type": "TEXT_MESSAGE_START", "messageId": message_id, "role": "assistant"}
            ]
            if content:
                events.append(
                    {"type": "TEXT_MESSAGE_CONTENT", "messageId": message_id, "delta": content}
                )
            return events + [{"type": "TEXT_MESSAGE_END", "messageId": message_id}]
        if vtype == "tool_call":
            call_id = value["toolCallId"]
            return [
                _tool_call_start(call_id, value["name"], message_id),
                {"type": "TOOL_CALL_ARGS", "toolCallId": call_id,
                 "delta": json.dumps(value.get("arguments") or {})},
                {"type": "TOOL_CALL_END", "toolCallId": call_id},
            ]
        if vtype == "tool_result" and value.get("origin") != "client":
            return [{
                "type": "TOOL_CALL_RESULT",
                "messageId": message_id,
                "toolCallId": value["toolCallId"],
                "content": tool_result_text(value),
                "role": "tool",
            }]
        if vtype == "x-component":
            item = _Open(type="x-component", message_id=message_id,
                         component_id=value["componentId"], props=PropsStream())
            ops = item.props.finish(value.get("props") or {}) if item.props else []
            events = [_component_start(message_id, value["componentId"], value["name"])]
            if ops:
                events.append(_props_delta(item, ops, json.dumps(value.get("props") or {})))
            return events + [_component_end(value)]
        return []

    # -- control frames -------------------------------------------------------------------

    def _control(self, frame: timbal.Frame) -> list[Event]:
        name = frame["c"]
        if name == timbal.RUN_STARTED:
            self.thread_id, self.run_id = frame["threadId"], frame["runId"]
            return [{"type": "RUN_STARTED", "threadId": self.thread_id, "runId": self.run_id}]
        if name == timbal.RUN_AWAITING_INPUT:
            return [{
                "type": "CUSTOM",
                "name": "tambo.run.awaiting_input",
                "value": {
                    "threadId": self.thread_id,
                    "runId": self.run_id,
                    "pendingToolCalls": frame["pendingToolCalls"],
                },
            }]
        if name == timbal.COMPONENT_STATE:
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
            if not any(item.component_id == component_id for item in self._open.values()):
                # The Tambo reducer marks a component "streaming" on every state delta; for one
                # whose props are complete, an end marks it "done" again.
                events.append({"type": "CUSTOM", "name": "tambo.component.end",
                               "value": {"componentId": component_id}})
            return events
        if name == timbal.RUN_FINISHED:
            self._finished = True
            return self._close_all() + [
                {"type": "RUN_FINISHED", "threadId": self.thread_id, "runId": self.run_id}
            ]
        if name == timbal.RUN_CANCELLED:
            self._finished = True
            return [{"type": "RUN_ERROR", "message": "Run cancelled", "code": "CANCELLED"}]
        if name == timbal.ERROR:
            self._finished = True
            event = {
                "type": "RUN_ERROR",
                "message": frame.get("message") or "An internal error occurred",
                "code": frame.get("code") or "INTERNAL_ERROR",
                "category": frame.get("category") or "server_error",
                "isRetryable": bool(frame.get("isRetryable", False)),
            }
            if frame.get("status") is not None:
                event["status"] = frame["status"]
            return [event]
        return []

    def _close_all(self) -> list[Event]:
        """Close anything a truncated log left open, so RUN_FINISHED never leaves items open."""
        events: list[Event] = []
        for item in self._open.values():
            if item.type == "agent":
                events.append({"type": "TEXT_MESSAGE_END", "messageId": item.message_id})
            elif item.type == "thinking":
                events.append({"type": "THINKING_TEXT_MESSAGE_END"})
            elif item.type == "tool_call":
                events.append({"type": "TOOL_CALL_END", "toolCallId": item.tool_call_id})
        self._open.clear()
        return events


def tool_result_text(value: dict[str, Any]) -> str:
    """A tool result as the string both AG-UI and the Tambo reducer accept."""
    if value.get("status") == "error":
        return str(value.get("error", ""))
    output = value.get("output")
    return output if isinstance(output, str) else json.dumps(output)


def _remaining(sent: str, final: str) -> str:
    return final[len(sent):] if final.startswith(sent) else ""


def _tool_call_start(call_id: str, name: str, message_id: str) -> Event:
    return {"type": "TOOL_CALL_START", "toolCallId": call_id, "toolCallName": name,
            "parentMessageId": message_id}


def _component_start(message_id: str, component_id: str, name: str) -> Event:
    return {"type": "CUSTOM", "name": "tambo.component.start",
            "value": {"messageId": message_id, "componentId": component_id,
                      "componentName": name}}


def _props_delta(item: _Open, ops: list[dict[str, Any]], delta: str) -> Event:
    status = item.props.streaming_status() if item.props else {}
    return {"type": "CUSTOM", "name": "tambo.component.props_delta",
            "value": {"componentId": item.component_id, "operations": ops, "delta": delta,
                      "streamingStatus": status}}


def _component_end(value: dict[str, Any]) -> Event:
    props, state = value.get("props") or {}, value.get("state")
    end: dict[str, Any] = {"componentId": value["componentId"], "props": props,
                           "finalProps": props}
    if state is not None:
        end["state"] = state
        end["finalState"] = state
    return {"type": "CUSTOM", "name": "tambo.component.end", "value": end}
