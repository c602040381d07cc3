"""The run's log as Chorus callback events (`spec/chorus.md` §3), in the log's order.

Pure. Each completed message becomes one event (`message`, `tool_call`, `tool_result`,
`status`, `error`); appends are not sent (a channel shows whole messages), nor is a
deletion (a tool's status ends with its result). A sub-agent's failure (a recoverable `error`
message) is not an `error` event: the calling agent gets it as its tool's result, which is
sent, and goes on. The run's end is `lifecycle idle`, after an `error` event if it failed or
was cancelled. `lifecycle processing` is sent before the first frame.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypedDict

from ...protocol import timbal
from ...protocol.frames_schema import SetValue


class Lifecycle(TypedDict):
    type: Literal["lifecycle"]
    status: Literal["processing", "idle"]


class MessageEvent(TypedDict):
    type: Literal["message"]
    content: str


class ToolCallEvent(TypedDict):
    type: Literal["tool_call"]
    name: str
    args: dict[str, Any]
    id: str


class ToolResultEvent(TypedDict):
    type: Literal["tool_result"]
    id: str
    content: str


class StatusEvent(TypedDict):
    type: Literal["status"]
    status: str


class ErrorEvent(TypedDict):
    """The run failed or was cancelled (as its `error` frame, or its row, says)."""

    type: Literal["error"]
    message: str | None
    code: str | None


Event = Lifecycle | MessageEvent | ToolCallEvent | ToolResultEvent | StatusEvent | ErrorEvent
"""One callback event, POSTed as JSON."""

PROCESSING: Lifecycle = {"type": "lifecycle", "status": "processing"}
IDLE: Lifecycle = {"type": "lifecycle", "status": "idle"}


def _from_value(value: SetValue) -> list[Event]:
    if value["type"] == "agent":
        return [{"type": "message", "content": value["content"]}] if value["content"] else []
    if value["type"] == "tool_call":
        return [{"type": "tool_call", "name": value.get("name"),
                 "args": value.get("arguments", {}), "id": value.get("toolCallId")}]
    if value["type"] == "tool_result":
        return [{"type": "tool_result", "id": value.get("toolCallId"),
                 "content": timbal.tool_result_text(value)}]
    if value["type"] == "status":
        return [{"type": "status", "status": value.get("detail") or value.get("state")}]
    if value["type"] == "error" and not value.get("recoverable"):
        return [{"type": "error", "message": value.get("content"), "code": value.get("code")}]
    return []


def ended(status: str, error: Mapping[str, Any] | None) -> list[Event]:
    """The events of a run's end as its row has it (its terminal frame's, without reading
    the log): what is reported for a run whose process died."""
    if status == "cancelled":
        return events({"c": timbal.RUN_CANCELLED})
    if status == "failed":
        error = error or {}
        return [{"type": "error", "message": error.get("message"), "code": error.get("code")}]
    return []


def events(frame: timbal.Frame) -> list[Event]:
    """The callback events of one frame of the log (most frames have none)."""
    if "c" in frame:
        if frame["c"] == timbal.ERROR:
            return [{"type": "error", "message": frame.get("message"), "code": frame.get("code")}]
        if frame["c"] == timbal.RUN_CANCELLED:
            return [{"type": "error", "message": "The run was cancelled", "code": "CANCELLED"}]
        return []
    if timbal.kind(frame) != "set" or "t" not in frame:
        return []
    return _from_value(frame["v"])
