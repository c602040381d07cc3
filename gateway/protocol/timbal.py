"""Timbal/1.0 frames: the one canonical record a run writes.

A run's log is a sequence of these frames. Message frames follow Timbal Messages/1.0 (`agent`,
`thinking`, `tool_call`, `tool_result`, plus our `x-component`); every message value and start
metadata carries `messageId`, the Tambo message (one per model turn) it belongs to, because the
Tambo clients group text, tool calls and components of a turn into one assistant message.
Control frames (`c`) carry run lifecycle, which Timbal Messages/1.0 has no message for.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final, Literal, Protocol, TypeGuard, cast

from typing_extensions import TypeIs

from .clock import iso_ms
from .frames_schema import (
    AppendFrame,
    DeleteFrame,
    ErrorFrame,
    Frame,
    SetFrame,
    SetValue,
    StartFrame,
    StartMeta,
    TerminalFrame,
)

__all__ = ["Frame", "FrameKind", "FrameSink"]

FrameKind = Literal["start", "append", "set", "delete", "control", "invalid"]


class FrameSink(Protocol):
    """Where a run's frames go (the run's recorder): the agent loop and the component state
    service write to it, and know nothing of logs or databases behind it."""

    async def emit(self, frame: Frame) -> None: ...


# Control frame names (`Final`: each is its literal type, so `frame["c"] == RUN_STARTED` narrows
# a frame to `RunStartedFrame`). `error` is the one the Timbal core defines; the rest are ours.
RUN_STARTED: Final = "run.started"
RUN_FINISHED: Final = "run.finished"
RUN_AWAITING_INPUT: Final = "run.awaiting_input"
RUN_CANCELLED: Final = "run.cancelled"
ERROR: Final = "error"
COMPONENT_STATE: Final = "component.state"
SUBAGENT_STARTED: Final = "subagent.started"
THREAD_STATE: Final = "thread.state"

# The `error` code a reaper writes for a run whose process died (`is_lost`).
RUN_LOST: Final = "RUN_LOST"


# The message frame builders take their meta and value typed as `frames_schema` describes them,
# so mypy checks every message frame the engine writes against the published schema, at no cost
# per token (they stay plain dicts). Control frames are written as literals, checked the same way.
def start(i: str, meta: StartMeta) -> StartFrame:
    return {"i": i, "m": meta}


def append(i: str, text: str) -> AppendFrame:
    return {"i": i, "a": text}


def set_value(i: str, value: SetValue, t_ms: int) -> SetFrame:
    return {"i": i, "t": iso_ms(t_ms), "v": value}


def delete(i: str) -> DeleteFrame:
    return {"i": i, "v": None}


def kind(frame: Frame) -> FrameKind:
    """Classify a frame as Timbal framing §5 does; anything malformed is `invalid`."""
    if "c" in frame:
        return "invalid" if "i" in frame or not isinstance(frame["c"], str) else "control"
    if not isinstance(frame.get("i"), str):
        return "invalid"
    if "a" in frame:
        return "append" if isinstance(frame["a"], str) and "v" not in frame else "invalid"
    if "v" in frame:
        if frame["v"] is None:
            return "delete"
        return "set" if isinstance(frame["v"], dict) else "invalid"
    meta = frame.get("m")
    if meta is not None and (not isinstance(meta, dict) or "content" in meta):
        return "invalid"
    return "start"


TERMINAL_CONTROLS = frozenset({RUN_FINISHED, RUN_CANCELLED, ERROR})


def is_terminal(frame: Frame) -> TypeIs[TerminalFrame]:
    return frame.get("c") in TERMINAL_CONTROLS


def is_lost(frame: Frame) -> TypeGuard[ErrorFrame]:
    """The frame a reaper writes for a run whose process died."""
    return frame.get("c") == ERROR and frame.get("code") == RUN_LOST


def tool_result_text(value: Mapping[str, Any]) -> str:
    """A tool result value as one string: what the model, AG-UI and the Tambo reducer accept."""
    if value.get("status") == "error":
        return str(value.get("error", ""))
    output = value.get("output")
    return output if isinstance(output, str) else json.dumps(output)


def part_frame(part: Mapping[str, Any], fallback_ms: int) -> SetFrame:
    """A stored message part as the set frame that completed it.

    A part keeps its item id (`id`) and, when it came from a set frame, that frame's time (`t`);
    an input part (the user's message, a client tool result) was written at its message's
    creation, `fallback_ms`. The value is the part without those two keys, as the frame had it
    (the store keeps parts as JSON: they are the values the runs wrote).
    """
    value = cast(SetValue, {k: v for k, v in part.items() if k not in ("id", "t")})
    return {"i": part["id"], "t": part.get("t") or iso_ms(fallback_ms), "v": value}
