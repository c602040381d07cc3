"""Approvals with the real clients over loopback: `@tambo-ai/client` 1.1.3 answers the pause
with the tool it registered under the server tool's name, and `@ag-ui/client` 1.0's
`HttpAgent` reads the interrupt outcome and resumes with `resume[]` (its own verifier checks
both streams). On PostgreSQL + Redis the gateway is two processes behind a balancer, so the
pause and the answer land on different processes."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from ag_ui.core import Event, RunFinishedEvent
from pydantic import TypeAdapter

from tests.conftest import scripted_env
from tests.support import engines
from tests.support.approval_tools import times_sent
from tests.support.gateway_server import GatewayCluster, GatewayServer
from tests.support.node import have_node, run_agui_agent, run_scenario
from tests.support.scripted_model import ScriptedModel

pytestmark = pytest.mark.skipif(not have_node(), reason="node and npm are needed")

TOOLS = Path(__file__).resolve().parents[1] / "support" / "approval_tools.py"
EVENT = TypeAdapter(Event)


@pytest.fixture(scope="module")
def approvals_process(scripted_model: ScriptedModel, tmp_path_factory: pytest.TempPathFactory
                      ) -> Iterator[GatewayServer]:
    workdir, env = tmp_path_factory.mktemp("approvals"), scripted_env(
        scripted_model, GATEWAY_TOOLS=str(TOOLS))
    server = (GatewayCluster(workdir, env) if engines.ENGINES is not None
              else GatewayServer(workdir, env))
    server.start()
    yield server
    server.stop()


def mail_call(call_id: str, to: str) -> list[dict]:
    return [{"tool_call": {"index": 0, "id": call_id, "name": "send_email",
                           "arguments": json.dumps({"to": to, "subject": "Hello"})}}]


def test_tambo_client_approves_and_the_tool_runs_once(approvals_process: GatewayServer,
                                                      scripted_model: ScriptedModel):
    to = f"{uuid.uuid4().hex[:8]}@example.com"
    scripted_model.enqueue(mail_call("call_tc", to), [{"content": "Sent it."}])
    result = run_scenario("approval", approvals_process.url)

    assert "crash" not in result, result
    run = result["run"]
    assert run["rejected"] is None and run["error"] is None, (run, result["_stderr"])
    assert run["status"] == "idle"
    assert result["asked"] == [{"to": to, "subject": "Hello"}]  # the prompt got the arguments
    assert times_sent(to) == 1
    holder = next(m for m in run["messages"]
                  if any(b.get("id") == "call_tc" for b in m["content"]))
    [output] = [b for b in holder["content"] if b["type"] == "tool_result"]
    assert json.loads(output["content"][0]["text"]) == {"sent": True, "to": to}
    assert run["messages"][-1]["content"] == [{"type": "text", "text": "Sent it."}]
    # The model saw the tool's output as the call's result, not the client's answer.
    tool_messages = {m["tool_call_id"]: m["content"]
                     for m in scripted_model.requests[-1]["messages"] if m["role"] == "tool"}
    assert json.loads(tool_messages["call_tc"]) == {"sent": True, "to": to}


def test_tambo_client_denies(approvals_process: GatewayServer, scripted_model: ScriptedModel):
    to = f"{uuid.uuid4().hex[:8]}@example.com"
    scripted_model.enqueue(mail_call("call_td", to), [{"content": "Not sent."}])
    result = run_scenario("approval", approvals_process.url, APPROVE="no")
    assert result["run"]["error"] is None and result["run"]["status"] == "idle", result
    assert times_sent(to) == 0


def test_tambo_client_approves_with_edited_args(approvals_process: GatewayServer,
                                                scripted_model: ScriptedModel):
    """The registered tool's return value is the answer: with `editedArgs`, the tool runs
    with them. (The client's own state keeps the call as the model streamed it; the stored
    thread shows the edited call: tests/integration/test_approvals.py.)"""
    asked, edited = (f"{uuid.uuid4().hex[:8]}@example.com" for _ in range(2))
    scripted_model.enqueue(mail_call("call_te", asked), [{"content": "Sent as edited."}])
    result = run_scenario("approval", approvals_process.url, EDITED_TO=edited)
    run = result["run"]
    assert run["error"] is None and run["status"] == "idle", (run, result.get("_stderr"))
    assert times_sent(edited) == 1 and times_sent(asked) == 0
    holder = next(m for m in run["messages"]
                  if any(b.get("id") == "call_te" for b in m["content"]))
    [output] = [b for b in holder["content"] if b["type"] == "tool_result"]
    assert json.loads(output["content"][0]["text"]) == {"sent": True, "to": edited}
    assert run["messages"][-1]["content"] == [{"type": "text", "text": "Sent as edited."}]


def test_http_agent_interrupt_and_resume(approvals_process: GatewayServer,
                                         scripted_model: ScriptedModel):
    to = f"{uuid.uuid4().hex[:8]}@example.com"
    scripted_model.enqueue(mail_call("call_ha", to), [{"content": "Approved and sent."}])
    result = run_agui_agent({
        "url": f"{approvals_process.url}/v1/agui/agents/default/run",
        "headers": {"x-api-key": "test-key"}, "threadId": f"agui-{uuid.uuid4()}",
        "steps": [{"user": "Email Ada"},
                  {"resume": {"status": "resolved", "payload": {"approved": True}}}]})
    first, second = result["runs"]
    for run in result["runs"]:
        assert run["error"] is None, (run, result["_stderr"])
        for event in run["events"]:
            EVENT.validate_python(event)
    finished = RunFinishedEvent.model_validate(first["events"][-1])
    assert finished.outcome is not None and finished.outcome.type == "interrupt"
    assert first["outcome"] == "interrupt"
    [interrupt] = first["interrupts"]
    assert interrupt["toolCallId"] == "call_ha" and interrupt["reason"] == "tool_approval"
    assert second["outcome"] == "success"
    assert times_sent(to) == 1
    [tool] = [m for m in result["messages"] if m["role"] == "tool"]
    assert tool["toolCallId"] == "call_ha" and json.loads(tool["content"])["sent"] is True
    assert result["messages"][-1]["content"] == "Approved and sent."


def test_http_agent_resumes_with_edited_args(approvals_process: GatewayServer,
                                            scripted_model: ScriptedModel):
    """The interrupt's `responseSchema` offers `editedArgs`; a resume that gives them runs the
    tool with them, and the agent's own verifier takes both streams."""
    asked, edited = (f"{uuid.uuid4().hex[:8]}@example.com" for _ in range(2))
    scripted_model.enqueue(mail_call("call_hx", asked), [{"content": "Sent as edited."}])
    result = run_agui_agent({
        "url": f"{approvals_process.url}/v1/agui/agents/default/run",
        "headers": {"x-api-key": "test-key"}, "threadId": f"agui-{uuid.uuid4()}",
        "steps": [{"user": "Email Ada"},
                  {"resume": {"status": "resolved", "payload": {
                      "approved": True, "editedArgs": {"to": edited, "subject": "Edited"}}}}]})
    first, second = result["runs"]
    for run in result["runs"]:
        assert run["error"] is None, (run, result["_stderr"])
    [interrupt] = first["interrupts"]
    assert "editedArgs" in interrupt["responseSchema"]["properties"]
    assert second["outcome"] == "success"
    assert times_sent(edited) == 1 and times_sent(asked) == 0
    [tool] = [m for m in result["messages"] if m["role"] == "tool"]
    assert json.loads(tool["content"]) == {"sent": True, "to": edited}


def test_http_agent_reloads_a_waiting_thread_and_approves(approvals_process: GatewayServer,
                                                         scripted_model: ScriptedModel):
    """A page reloads while the run waits for an approval: `connectAgent()` loads the
    interrupt (the agent's `pendingInterrupts`, and the state's `interrupts`), and the reloaded
    agent's `resume` runs the tool once."""
    to = f"{uuid.uuid4().hex[:8]}@example.com"
    scripted_model.enqueue(mail_call("call_hr", to), [{"content": "Sent after reload."}])
    result = run_agui_agent({
        "url": f"{approvals_process.url}/v1/agui/agents/default/run",
        "headers": {"x-api-key": "test-key"}, "threadId": f"agui-{uuid.uuid4()}",
        "steps": [{"user": "Email Ada"}], "connect": True,
        "afterConnect": [{"resume": {"status": "resolved", "payload": {"approved": True}}}]})
    [first] = result["runs"]
    connected = result["connected"]
    assert first["error"] is None and connected["error"] is None, (result, result["_stderr"])
    for event in connected["events"]:
        EVENT.validate_python(event)
    [asked] = first["interrupts"]
    assert connected["pendingInterrupts"] == [asked]
    assert connected["state"]["interrupts"] == [asked]
    assert asked["toolCallId"] == "call_hr" and asked["reason"] == "tool_approval"
    assert first["outcome"] == "interrupt"  # the first run paused; the reloaded agent resumed
    [resumed] = connected["runs"]
    assert resumed["error"] is None and resumed["outcome"] == "success", resumed
    assert times_sent(to) == 1
    assert connected["messagesAfter"][-1]["content"] == "Sent after reload."


def test_tambo_client_takes_a_failed_tools_result_with_its_error_flag(
        approvals_process: GatewayServer, scripted_model: ScriptedModel):
    """`TOOL_CALL_RESULT {isError: true}` (the proposal's flag): the real client ignores the
    field and keeps the result, and the run ends clean."""
    scripted_model.enqueue(
        [{"tool_call": {"index": 0, "id": "call_err", "name": "check_host",
                        "arguments": '{"host": "db1"}'}}],
        [{"content": "The host is down."}], [{"content": "Still down."}])
    result = run_scenario("basic", approvals_process.url)
    assert "crash" not in result, result
    first = result["firstRun"]
    assert first["rejected"] is None and first["error"] is None, (first, result["_stderr"])
    holder = next(m for m in first["messages"]
                  if any(b.get("id") == "call_err" for b in m["content"]))
    [error] = [b for b in holder["content"] if b["type"] == "tool_result"]
    assert error["content"][0]["text"] == "db1 is unreachable"
