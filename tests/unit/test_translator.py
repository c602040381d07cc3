"""The Tambo-dialect translator on frame logs recorded from real runs (`frame_logs/`).

Each log has a reviewed golden file of the events it must produce (`*.tambo.json`); set
`UPDATE_GOLDEN=1` to rewrite them after an intended change, then review the diff. The other tests
check properties every translation must have, whatever the log.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import jsonpatch
import pytest

from gateway.dialects.tambo.translate import TamboDialect as TamboTranslator
from gateway.protocol import timbal

LOGS = Path(__file__).parent / "frame_logs"
NAMES = sorted(p.stem for p in LOGS.glob("*.ndjson"))
TAMBO_TYPES = {
    "RUN_STARTED", "RUN_FINISHED", "RUN_ERROR", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT",
    "TEXT_MESSAGE_END", "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT",
    "CUSTOM", "THINKING_TEXT_MESSAGE_START", "THINKING_TEXT_MESSAGE_CONTENT",
    "THINKING_TEXT_MESSAGE_END",
}


def frames(name: str) -> list[dict]:
    return [json.loads(line)["frame"] for line in (LOGS / f"{name}.ndjson").read_text().splitlines()]


def translate(log: list[dict]) -> list[dict]:
    translator = TamboTranslator()
    return [event for frame in log for event in translator.feed(frame)]


@pytest.mark.parametrize("name", NAMES)
def test_matches_golden(name: str):
    events = translate(frames(name))
    golden = LOGS / f"{name}.tambo.json"
    if os.environ.get("UPDATE_GOLDEN"):
        golden.write_text(json.dumps(events, indent=1) + "\n")
    assert events == json.loads(golden.read_text())


@pytest.mark.parametrize("name", NAMES)
def test_translation_is_deterministic_and_well_formed(name: str):
    log = frames(name)
    events = translate(log)
    assert events == translate(log)
    assert events[0]["type"] == "RUN_STARTED"
    assert events[-1]["type"] in ("RUN_FINISHED", "RUN_ERROR")
    assert sum(e["type"] in ("RUN_FINISHED", "RUN_ERROR") for e in events) == 1
    assert {e["type"] for e in events} <= TAMBO_TYPES

    open_text, open_calls = set(), set()
    for event in events:
        kind = event["type"]
        if kind == "TEXT_MESSAGE_START":
            assert not open_text, "Tambo clients forbid interleaved text messages"
            open_text.add(event["messageId"])
        elif kind in ("TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END"):
            assert event["messageId"] in open_text
            if kind == "TEXT_MESSAGE_END":
                open_text.discard(event["messageId"])
        elif kind == "TOOL_CALL_START":
            open_calls.add(event["toolCallId"])
        elif kind == "TOOL_CALL_END":
            open_calls.remove(event["toolCallId"])
        elif kind == "RUN_FINISHED":
            assert not open_text and not open_calls


@pytest.mark.parametrize("name", NAMES)
def test_text_and_arguments_equal_the_final_values(name: str):
    log = frames(name)
    events = translate(log)
    finals = [f["v"] for f in log if timbal.kind(f) == "set"]
    for value in finals:
        if value["type"] == "agent":
            text = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT"
                           and e["messageId"] == value["messageId"])
            assert value["content"] in text
        if value["type"] == "tool_call":
            args = "".join(e["delta"] for e in events if e["type"] == "TOOL_CALL_ARGS"
                           and e["toolCallId"] == value["toolCallId"])
            assert json.loads(args) == value["arguments"]
        if value["type"] == "x-component":
            props: dict = {}
            deltas = ""
            for e in events:
                if e["type"] == "CUSTOM" and e["name"] == "tambo.component.props_delta" \
                        and e["value"]["componentId"] == value["componentId"]:
                    props = jsonpatch.apply_patch(props, e["value"]["operations"])
                    deltas += e["value"]["delta"]
            assert props == value["props"]
            # The proposal's `delta` fragments concatenate to the props' JSON.
            assert json.loads(deltas) == value["props"]


@pytest.mark.parametrize("name", NAMES)
def test_run_finished_carries_the_last_assistant_message(name: str):
    log = frames(name)
    events = translate(log)
    finished = [e for e in events if e["type"] == "RUN_FINISHED"]
    replies = [f["v"] for f in log if timbal.kind(f) == "set"
               and f["v"]["type"] in ("agent", "x-component") and f["v"].get("messageId")]
    if not finished or not replies:
        return
    message = finished[-1]["message"]
    assert message["role"] == "assistant" and message["id"] == replies[-1]["messageId"]
    last = replies[-1]
    if last["type"] == "agent":
        assert {"type": "text", "text": last["content"]} in message["content"]
    else:
        assert any(b["type"] == "component" and b["props"] == last.get("props", {})
                   for b in message["content"])


def test_cancel_and_awaiting_input_shapes():
    translator = TamboTranslator()
    translator.feed({"c": timbal.RUN_STARTED, "threadId": "t", "runId": "r"})
    pending = [{"toolCallId": "c1", "toolName": "x", "arguments": "{}", "input": {}}]
    (awaiting,) = translator.feed({"c": timbal.RUN_AWAITING_INPUT, "pendingToolCalls": pending})
    assert awaiting == {"type": "CUSTOM", "name": "tambo.run.awaiting_input",
                        "value": {"threadId": "t", "runId": "r", "pendingToolCalls": pending}}
    cancelled = TamboTranslator()
    cancelled.feed({"c": timbal.RUN_STARTED, "threadId": "t", "runId": "r"})
    assert cancelled.feed({"c": timbal.RUN_CANCELLED}) == [
        {"type": "RUN_ERROR", "message": "Run cancelled", "code": "CANCELLED"}]
    assert cancelled.feed({"c": timbal.RUN_FINISHED}) == []


def test_truncated_log_closes_open_items_before_run_finished():
    translator = TamboTranslator()
    translator.feed({"c": timbal.RUN_STARTED, "threadId": "t", "runId": "r"})
    translator.feed(timbal.start("a", {"type": "agent", "messageId": "m"}))
    translator.feed(timbal.start("b", {"type": "tool_call", "messageId": "m",
                                       "toolCallId": "c", "name": "n"}))
    tail = translator.feed({"c": timbal.RUN_FINISHED})
    assert [e["type"] for e in tail] == ["TEXT_MESSAGE_END", "TOOL_CALL_END", "RUN_FINISHED"]


def test_state_delta_marks_a_finished_component_done_again():
    translator = TamboTranslator()
    translator.feed({"c": timbal.RUN_STARTED, "threadId": "t", "runId": "r"})
    translator.feed(timbal.start("x", {"type": "x-component", "messageId": "m",
                                       "componentId": "c1", "name": "Table"}))
    ops = [{"op": "add", "path": "/rows", "value": []}]
    while_streaming = translator.feed({"c": timbal.COMPONENT_STATE, "componentId": "c1",
                                       "operations": ops, "revision": 1})
    assert [e["name"] for e in while_streaming] == ["tambo.component.state_delta"]
    translator.feed(timbal.set_value("x", {"type": "x-component", "messageId": "m",
                                           "componentId": "c1", "name": "Table", "props": {}}, 0))
    after_end = translator.feed({"c": timbal.COMPONENT_STATE, "componentId": "c1",
                                 "operations": ops, "revision": 2})
    assert [e["name"] for e in after_end] == ["tambo.component.state_delta",
                                              "tambo.component.end"]
    assert after_end[1]["value"] == {"componentId": "c1"}


def test_props_delta_fragments_concatenate_to_the_props_json_when_some_change_nothing():
    """Fragments too small to change a prop send no delta; their text rides on the next one."""
    log = frames("component")
    item = log[5]["i"]
    fine = [{"i": item, "a": c} for c in '{"city": "Paris", "tempC": 21}']
    events = translate(log[:5] + fine + log[8:])
    deltas = [e["value"] for e in events if e["type"] == "CUSTOM"
              and e["name"] == "tambo.component.props_delta"]
    assert len(deltas) < len(fine)  # some fragments changed no prop
    assert json.loads("".join(d["delta"] for d in deltas)) == {"city": "Paris", "tempC": 21}
