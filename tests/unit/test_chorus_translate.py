"""The run's log as Chorus callback events (gateway/dialects/chorus/translate.py): the
multi-agent messages (a tool's status, a sub-agent's end) and a run's end as its row has it."""

from __future__ import annotations

from gateway.dialects.chorus import translate
from gateway.protocol import timbal
from gateway.protocol.timbal import RUN_LOST


def set_frame(value: dict) -> timbal.Frame:
    return {"i": "01J0", "t": "2026-11-26T20:00:00.000Z", "v": value}


def test_a_tools_status_is_a_status_event_and_its_deletion_none() -> None:
    status = {"type": "status", "state": "searching", "detail": "Source 1 of 2",
              "toolCallId": "call_s", "sender": "default"}
    assert translate.events(set_frame(status)) == [{"type": "status",
                                                    "status": "Source 1 of 2"}]
    assert translate.events(set_frame({**status, "detail": ""})) == [
        {"type": "status", "status": "searching"}]
    assert translate.events(timbal.delete("01J0")) == []


def test_a_sub_agents_end_is_no_event_its_callers_result_is() -> None:
    """The run goes on after a sub-agent fails: the channel sees the caller's tool result,
    not an `error` (which says the run failed)."""
    failed = {"type": "error", "content": "bad", "code": "LLM_BAD_REQUEST", "recoverable": True,
              "agentId": "sub_1", "sender": "helper"}
    done = {"type": "agent_complete", "agentId": "sub_1", "result": "ok", "sender": "helper"}
    assert translate.events(set_frame(failed)) == []
    assert translate.events(set_frame(done)) == []
    run_failed = {"c": timbal.ERROR, "code": "LLM_SERVER_ERROR", "message": "overloaded"}
    assert translate.events(run_failed) == [{"type": "error", "message": "overloaded",
                                             "code": "LLM_SERVER_ERROR"}]


def test_a_runs_end_from_its_row() -> None:
    lost = {"code": RUN_LOST, "message": "The process stopped"}
    assert translate.ended("failed", lost) == [{"type": "error", "message": "The process stopped",
                                                "code": RUN_LOST}]
    assert translate.ended("cancelled", None) == [{"type": "error",
                                                   "message": "The run was cancelled",
                                                   "code": "CANCELLED"}]
    assert translate.ended("completed", None) == []
