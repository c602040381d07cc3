"""The run log is the whole transcript: the run's input is written as set frames too. Those
frames must change neither dialect's events (clients hold their own input), and a stored part
must read back as the very set frame that completed it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway.dialects.agui.translate import AguiDialect
from gateway.dialects.agui.translate import encode as agui_encode
from gateway.dialects.tambo.translate import TamboDialect
from gateway.dialects.timbal.translate import history, since_ms
from gateway.protocol import timbal

LOGS = Path(__file__).parent / "frame_logs"
NAMES = sorted(p.stem for p in LOGS.glob("*.ndjson"))
USER = {"id": "01USER", "type": "user", "content": "hi", "blocks": [{"type": "text", "text": "hi"}]}
RESULT = {"id": "01RESULT", "type": "tool_result", "origin": "client", "toolCallId": "call_x",
          "name": "x", "blocks": [], "status": "success", "output": "done"}


def frames(name: str) -> list[dict]:
    return [json.loads(line)["frame"] for line in (LOGS / f"{name}.ndjson").read_text().splitlines()]


def with_input(log: list[dict]) -> list[dict]:
    inputs = [timbal.part_frame(part, 1_700_000_000_000) for part in (RESULT, USER)]
    return [log[0], *inputs, *log[1:]]


@pytest.mark.parametrize("name", NAMES)
def test_input_frames_change_no_dialect_output(name: str):
    log = frames(name)
    tambo_golden = json.loads((LOGS / f"{name}.tambo.json").read_text())
    tambo = TamboDialect()
    assert [e for f in with_input(log) for e in tambo.feed(f)] == tambo_golden
    agui_golden = json.loads((LOGS / f"{name}.agui.json").read_text())
    agui = AguiDialect()
    assert [json.loads(agui_encode(e)) for f in with_input(log) for e in agui.feed(f)] == agui_golden


def test_a_stored_part_reads_back_as_its_set_frame():
    frame = timbal.set_value("01AGENT", {"type": "agent", "messageId": "m", "content": "x"},
                             1_700_000_000_123)
    stored = {"id": frame["i"], "t": frame["t"], **frame["v"]}

    class Row:
        run_id, created_ms, parts = "run", 1_700_000_000_000, [dict(USER), stored]

    (user, agent) = history([Row()])
    assert agent == frame
    assert user == {"i": "01USER", "t": "2023-11-14T22:13:20.000Z",
                    "v": {k: v for k, v in USER.items() if k != "id"}}
    assert list(history([Row()], since=since_ms(frame["t"]))) == [frame]
    assert list(history([Row()], skip_run="run")) == []
