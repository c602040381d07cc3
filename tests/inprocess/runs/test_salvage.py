"""What a lost run had said, rebuilt from its log: the text and reasoning it streamed but never
completed. Saving them to the thread (a reaped run, a cancelled dead run, a database outage) is
covered end to end in test_supervisor.py and test_manager.py."""

from __future__ import annotations

from typing import Any

from gateway.runs.salvage import unfinished_values


def test_only_text_and_reasoning_left_unfinished_are_salvaged() -> None:
    frames: list[dict[str, Any]] = [
        {"c": "run.started"},
        {"i": "think", "m": {"type": "thinking", "messageId": "msg_1"}},
        {"i": "think", "a": "Let me "}, {"i": "think", "a": "see."},
        {"i": "done", "m": {"type": "agent", "messageId": "msg_1"}},
        {"i": "done", "a": "Complete."},
        {"i": "done", "v": {"type": "agent", "content": "Complete."}},  # saved when it ended
        {"i": "call", "m": {"type": "tool_call", "messageId": "msg_1"}},
        {"i": "call", "a": '{"city": "Pa'},  # incomplete JSON: never salvaged
        {"i": "empty", "m": {"type": "agent", "messageId": "msg_1"}},
        {"i": "gone", "m": {"type": "agent", "messageId": "msg_1"}},
        {"i": "gone", "a": "Retracted"}, {"i": "gone", "v": None},
        {"i": "text", "m": {"type": "agent", "messageId": "msg_1"}},
        {"i": "text", "a": "Half an ans"},
    ]
    assert unfinished_values(frames) == {
        "think": {"id": "think", "type": "thinking", "messageId": "msg_1",
                  "content": "Let me see.", "failed": True},
        "text": {"id": "text", "type": "agent", "messageId": "msg_1",
                 "content": "Half an ans", "failed": True},
    }
