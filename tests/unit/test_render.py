"""The REST bodies as the clients read them, built through the response models (`api/render.py`):
which fields are left out, which are sent as null, and in what order."""

from __future__ import annotations

from gateway.api.render import message_model, run_model, thread_model
from gateway.protocol.tambo import wire
from gateway.store.tables import MessageRow, RunRow, ThreadRow

PENDING = {"toolCallId": "call_1", "toolName": "lookup", "arguments": '{"q":"x"}'}


def test_a_new_thread_sends_no_nulls() -> None:
    row = ThreadRow(id="thr_1", project_id="p", created_ms=0, updated_ms=1)
    assert wire(thread_model(row)) == {
        "id": "thr_1", "createdAt": "1970-01-01T00:00:00.000Z",
        "updatedAt": "1970-01-01T00:00:00.001Z", "runStatus": "idle", "lastRunCancelled": False,
        "pendingToolCallIds": []}


def test_a_paused_thread_names_its_pending_calls_and_error() -> None:
    row = ThreadRow(id="thr_1", project_id="p", created_ms=0, updated_ms=0, run_status="waiting",
                    pending_tool_calls=[PENDING], last_run_error={"message": "m", "code": None})
    body = wire(thread_model(row))
    assert body["pendingToolCallIds"] == ["call_1"]
    assert body["lastRunError"] == {"message": "m", "code": None}


def test_a_seeded_message_has_a_null_run_id_and_nothing_else_optional() -> None:
    row = MessageRow(id="msg_1", thread_id="thr_1", role="system", created_ms=0,
                     parts=[{"id": "p", "type": "x-system", "content": "Be brief."}])
    assert wire(message_model(row)) == {
        "id": "msg_1", "role": "system", "content": [{"type": "text", "text": "Be brief."}],
        "createdAt": "1970-01-01T00:00:00.000Z", "runId": None}


def test_an_assistant_message_keeps_the_order_the_clients_saw() -> None:
    row = MessageRow(id="msg_2", thread_id="thr_1", run_id="run_1", role="assistant",
                     created_ms=0, is_cancelled=True, meta={"k": None}, parts=[
                         {"type": "thinking", "messageId": "msg_2", "content": "hmm"},
                         {"type": "tool_call", "messageId": "msg_2", "toolCallId": "call_1",
                          "name": "lookup", "arguments": {"q": None}},
                         {"type": "tool_result", "messageId": "msg_2", "toolCallId": "call_1",
                          "name": "lookup", "status": "error", "error": "boom"}])
    body = wire(message_model(row))
    assert list(body) == ["id", "role", "content", "createdAt", "runId", "reasoning",
                          "isCancelled", "metadata"]
    assert body["content"] == [
        {"type": "tool_use", "id": "call_1", "name": "lookup", "input": {"q": None}},
        {"type": "tool_result", "toolUseId": "call_1",
         "content": [{"type": "text", "text": "boom"}], "isError": True}]
    assert body["metadata"] == {"k": None}  # the caller's nulls are data, not omissions


def test_a_run_sends_its_pending_calls_and_its_error_as_stored() -> None:
    paused = RunRow(id="run_1", thread_id="thr_1", project_id="p", status="awaiting_input",
                    created_ms=0, pending_tool_calls=[PENDING])
    assert wire(run_model(paused))["pendingToolCalls"] == [PENDING]
    failed = RunRow(id="run_2", thread_id="thr_1", project_id="p", status="failed",
                    created_ms=0, error={"code": "E", "message": "m", "status": None})
    body = wire(run_model(failed))
    assert body["error"] == {"code": "E", "message": "m", "status": None}
    assert "startedAt" not in body and "cancelRequested" not in body
