"""The AG-UI 1.0 dialect on the frame logs recorded from real runs (`frame_logs/`).

Each log has a reviewed golden file of the events it must produce (`*.agui.json`); set
`UPDATE_GOLDEN=1` to rewrite them after an intended change, then review the diff. Every event
must validate against the Python `ag_ui` 1.0 models, and items must be closed before a run ends.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import jsonpatch
import pytest
from ag_ui.core import Event
from pydantic import TypeAdapter

from gateway.dialects.agui.translate import AguiDialect, encode
from gateway.protocol import timbal

LOGS = Path(__file__).parent / "frame_logs"
NAMES = sorted(p.stem for p in LOGS.glob("*.ndjson"))
EVENT = TypeAdapter(Event)


def frames(name: str) -> list[dict]:
    return [json.loads(line)["frame"] for line in (LOGS / f"{name}.ndjson").read_text().splitlines()]


def translate(log: list[dict]) -> list[dict]:
    dialect = AguiDialect()
    return [json.loads(encode(event)) for frame in log for event in dialect.feed(frame)]


@pytest.mark.parametrize("name", NAMES)
def test_matches_golden(name: str):
    events = translate(frames(name))
    golden = LOGS / f"{name}.agui.json"
    if os.environ.get("UPDATE_GOLDEN"):
        golden.write_text(json.dumps(events, indent=1) + "\n")
    assert events == json.loads(golden.read_text())


@pytest.mark.parametrize("name", NAMES)
def test_every_event_is_ag_ui_1_0_and_items_close(name: str):
    events = translate(frames(name))
    for event in events:
        EVENT.validate_python(event)
    assert "THINKING_" not in json.dumps(events)
    assert events[0]["type"] == "RUN_STARTED" and events[0]["protocolVersion"] == "1.0"
    assert events[-1]["type"] in ("RUN_FINISHED", "RUN_ERROR")
    open_items: set[str] = set()
    for event in events:
        kind = event["type"]
        key = event.get("messageId") or event.get("toolCallId")
        if kind.endswith("_START") and kind != "RUN_STARTED":
            open_items.add(f"{kind[:-6]}:{key}")
        elif kind.endswith("_END"):
            open_items.remove(f"{kind[:-4]}:{key}")
        elif kind == "RUN_FINISHED":
            assert not open_items


def test_client_tools_are_pending_in_the_outcome():
    events = translate(frames("client_tool_pause"))
    assert events[-1]["outcome"] == {"type": "success", "pendingToolCallIds": ["call_w1"]}
    assert not any(e["type"] == "TOOL_CALL_RESULT" for e in events)


def test_cancel_closes_open_items_then_finishes_cancelled():
    dialect = AguiDialect()
    dialect.feed({"c": timbal.RUN_STARTED, "threadId": "t", "runId": "r"})
    dialect.feed(timbal.start("a", {"type": "agent", "messageId": "m"}))
    dialect.feed(timbal.start("b", {"type": "thinking", "messageId": "m"}))
    tail = [json.loads(encode(e)) for e in dialect.feed({"c": timbal.RUN_CANCELLED})]
    assert [e["type"] for e in tail] == ["TEXT_MESSAGE_END", "REASONING_MESSAGE_END",
                                         "REASONING_END", "RUN_FINISHED"]
    assert tail[-1]["outcome"] == {"type": "cancelled"}
    assert dialect.feed({"c": timbal.RUN_FINISHED}) == []


def test_a_client_from_before_1_0_gets_only_the_outcomes_it_knows():
    """No `protocolVersion` in the input: `@ag-ui/client` 0.0.x (CopilotKit 1.7x), whose strict
    schema rejects `pendingToolCallIds` and the `cancelled` outcome. The rest is unchanged."""
    log = frames("client_tool_pause")
    older = AguiDialect(client_version=None)
    events = [json.loads(encode(e)) for frame in log for e in older.feed(frame)]
    assert events[-1]["outcome"] == {"type": "success"}
    assert events[:-1] == translate(log)[:-1]

    older = AguiDialect(client_version=None)
    older.feed({"c": timbal.RUN_STARTED, "threadId": "t", "runId": "r"})
    (finished,) = older.feed({"c": timbal.RUN_CANCELLED})
    assert json.loads(encode(finished)) == {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}


def test_component_state_changes_are_state_deltas_under_its_path():
    dialect = AguiDialect()
    dialect.feed({"c": timbal.RUN_STARTED, "threadId": "t", "runId": "r"})
    (start, first) = dialect.feed(timbal.start("x", {
        "type": "x-component", "messageId": "m", "componentId": "c/1", "name": "Table",
        "toolCallId": "call_1"}))
    # A delta that adds the components, so the client's own keys (shared state) stay.
    delta = json.loads(encode(first))["delta"]
    (add,) = delta
    assert add["op"] == "add" and add["path"] == "/components"
    assert jsonpatch.apply_patch({"city": "Oslo"}, delta)["city"] == "Oslo"
    assert add["value"]["c/1"]["state"] == {}
    ops = [{"op": "add", "path": "/rows", "value": [1]}]
    (delta,) = dialect.feed({"c": timbal.COMPONENT_STATE, "componentId": "c/1",
                             "operations": ops, "revision": 1})
    assert json.loads(encode(delta))["delta"] == [
        {"op": "add", "path": "/components/c~11/state/rows", "value": [1]}]
    (other,) = dialect.feed({"c": timbal.COMPONENT_STATE, "componentId": "old",
                             "operations": ops, "revision": 3})
    assert json.loads(encode(other))["name"] == "gateway.component.state"


def test_a_tools_status_is_an_activity_message_on_ag_ui_only() -> None:
    """A tool's `status` (docs/protocol.md): on AG-UI 1.0 an activity message (a snapshot,
    then deltas, then `done` when the call ends); a client before 1.0 (whose schema may not
    know the events) and the Tambo stream see nothing of it."""
    from gateway.dialects.tambo.translate import TamboDialect

    def status(detail: str) -> dict:
        return {"i": "01JS", "t": "2026-11-26T20:00:00.000Z", "v": {
            "type": "status", "state": "working", "detail": detail, "toolCallId": "call_1",
            "sender": "default"}}

    for dialect in (AguiDialect(None), TamboDialect()):
        assert dialect.feed(status("Searching")) == []
        assert dialect.feed(timbal.delete("01JS")) == []
    agui = AguiDialect()
    events = [json.loads(encode(e)) for frame in (status("Searching 1"), status("Searching 2"),
                                                  timbal.delete("01JS"))
              for e in agui.feed(frame)]
    for event in events:
        EVENT.validate_python(event)
    assert [e["type"] for e in events] == ["ACTIVITY_SNAPSHOT", "ACTIVITY_DELTA",
                                           "ACTIVITY_DELTA"]
    assert events[0]["content"] == {"toolCallId": "call_1", "state": "working",
                                    "detail": "Searching 1"}
    content = jsonpatch.apply_patch(events[0]["content"], events[1]["patch"])
    content = jsonpatch.apply_patch(content, events[2]["patch"])
    assert content["detail"] == "Searching 2" and content["done"] is True
    assert {e["messageId"] for e in events} == {"01JS"}
