"""The frame types the code is checked with (`timbal.Frame`) agree with the published schema.

`protocol/frames_schema.py` is both: its TypedDicts generate `schemas/timbal/`, and their union
is the static type of every frame the gateway writes or reads. mypy narrows that union on the
key a frame has (`"c" in frame`, `"a" in frame`) and on a control frame's `c`, which holds only
while each kind is a final TypedDict with its own telling key, and only while the union spells
out every kind the schema publishes. These tests fail when one side moves without the other.
"""

from __future__ import annotations

import json
import types
from pathlib import Path
from typing import Annotated, Literal, NotRequired, Union, get_args, get_origin

import pytest
from typing_extensions import get_type_hints

from gateway.protocol import frames_schema, timbal

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "schemas" / "timbal" / "frames"
PUBLISHED = {**{f"{name}.json": tp for name, tp in frames_schema.FRAMES.items()},
             **{f"control.{name}.json": tp for name, tp in frames_schema.CONTROL_FRAMES.items()}}


def members(union: object) -> set[type]:
    """The TypedDicts of a union, through `Annotated` and nested unions."""
    if get_origin(union) is Annotated:
        return members(get_args(union)[0])
    if get_origin(union) in (Union, types.UnionType):
        return {m for arg in get_args(union) for m in members(arg)}
    assert isinstance(union, type), union
    return {union}


def keys(typed_dict: type) -> tuple[set[str], set[str]]:
    """(required, optional) keys, read from the annotations (`__required_keys__` cannot see
    `NotRequired` in the module's postponed annotations)."""
    hints = get_type_hints(typed_dict, include_extras=True)
    optional = {k for k, hint in hints.items() if get_origin(hint) is NotRequired}
    return set(hints) - optional, optional


def test_the_frame_union_holds_every_published_kind_and_nothing_else() -> None:
    published = set(PUBLISHED.values())
    assert members(frames_schema.Frame) == published
    assert set(get_args(frames_schema.Frame)) == published, "Frame must be spelled out flat"
    assert members(frames_schema.PublishedFrame) == published
    assert members(frames_schema.ControlFrame) == set(frames_schema.CONTROL_FRAMES.values())
    assert members(frames_schema.MessageFrame) == set(frames_schema.FRAMES.values())
    assert members(timbal.Frame) == published


def test_each_published_schema_has_its_typed_dict_with_the_same_keys() -> None:
    on_disk = {path.name for path in SCHEMAS.glob("*.json")}
    assert on_disk == set(PUBLISHED)
    for name, typed_dict in PUBLISHED.items():
        schema = json.loads((SCHEMAS / name).read_text())
        required, optional = keys(typed_dict)
        assert set(schema["required"]) == required, name
        assert set(schema["properties"]) == required | optional, name


@pytest.mark.parametrize("name", sorted(frames_schema.CONTROL_FRAMES))
def test_a_control_frame_is_tagged_with_its_name(name: str) -> None:
    typed_dict = frames_schema.CONTROL_FRAMES[name]
    tag = get_type_hints(typed_dict)["c"]
    assert get_origin(tag) is Literal and get_args(tag) == (name,)
    assert name in {timbal.RUN_STARTED, timbal.RUN_FINISHED, timbal.RUN_AWAITING_INPUT,
                    timbal.RUN_CANCELLED, timbal.ERROR, timbal.COMPONENT_STATE,
                    timbal.SUBAGENT_STARTED, timbal.THREAD_STATE}
    assert (name in timbal.TERMINAL_CONTROLS) == (typed_dict in members(
        frames_schema.TerminalFrame))


def test_each_message_frame_has_the_key_that_tells_it_apart() -> None:
    """What `Dialect.feed` and `RunRecorder.emit` narrow on: `c` only on control frames, `m`
    only on a start, `a` only on an append, `t` only on a set, `v` on a set or a delete."""
    telling = {"c": set(frames_schema.CONTROL_FRAMES.values()),
               "m": {frames_schema.StartFrame}, "a": {frames_schema.AppendFrame},
               "t": {frames_schema.SetFrame},
               "v": {frames_schema.SetFrame, frames_schema.DeleteFrame}}
    for key, kinds in telling.items():
        having = {tp for tp in PUBLISHED.values() if key in keys(tp)[0] | keys(tp)[1]}
        assert having == kinds, key
        assert all(key in keys(tp)[0] for tp in kinds), f"{key} must be required"


def test_every_type_narrowed_on_is_final() -> None:
    """A TypedDict that is not final may have subtypes with any extra key, so mypy cannot
    narrow a union of them on `"a" in frame`."""
    narrowed = (members(frames_schema.Frame) | members(frames_schema.SetValue)
                | members(frames_schema.StartMeta) | members(frames_schema.MessageValue))
    assert not {tp.__name__ for tp in narrowed if not getattr(tp, "__final__", False)}


@pytest.mark.parametrize("frame, kind", [
    (timbal.start("i", {"type": "agent", "messageId": "m"}), "start"),
    (timbal.append("i", "text"), "append"),
    (timbal.set_value("i", {"type": "agent", "messageId": "m", "content": "text"}, 0), "set"),
    (timbal.delete("i"), "delete"),
    ({"c": timbal.RUN_FINISHED}, "control"),
])
def test_the_builders_write_what_the_schema_and_kind_accept(frame: timbal.Frame,
                                                            kind: str) -> None:
    frames_schema.frame_adapter.validate_python(frame)
    assert timbal.kind(frame) == kind
