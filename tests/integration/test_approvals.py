"""Server tools that ask first, over raw HTTP on both dialects: the run pauses before the tool
runs, an approval runs it exactly once (also under racing and repeated answers, on two apps
sharing PostgreSQL + Redis), a denial gives the model an error and never runs it, and the pause
survives a restart. The real clients are in tests/conformance/test_approvals_clients.py."""

from __future__ import annotations

import concurrent.futures
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from ag_ui.core import RunFinishedEvent

from tests.conftest import scripted_env
from tests.integration.test_admin_console_api import create_key
from tests.support import engines
from tests.support.approval_tools import keys_sent, times_sent
from tests.support.gateway_server import ROOT, USER
from tests.support.inprocess_app import InProcess, InProcessCluster, InProcessGateway
from tests.support.scripted_model import ScriptedModel
from tests.support.sse import run_events, text_of

TOOLS = Path(__file__).resolve().parents[1] / "support" / "approval_tools.py"


def call(index: int, call_id: str, name: str, arguments: str) -> dict:
    return {"tool_call": {"index": index, "id": call_id, "name": name, "arguments": arguments}}


def user(text: str) -> dict:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def answer(call_id: str, text: str, is_error: bool = False) -> dict:
    block: dict = {"type": "tool_result", "toolUseId": call_id,
                   "content": [{"type": "text", "text": text}]}
    if is_error:
        block["isError"] = True
    return {"role": "user", "content": [block]}


def start(env: dict[str, str], workdir: Path) -> InProcess:
    server = (InProcessCluster(workdir, env) if engines.ENGINES is not None
              else InProcessGateway(workdir, env))
    return server.start()


@pytest.fixture(scope="module")
def approvals_gateway(scripted_model: ScriptedModel, tmp_path_factory: pytest.TempPathFactory
                      ) -> Iterator[InProcess]:
    server = start(scripted_env(scripted_model, GATEWAY_TOOLS=str(TOOLS)),
                   tmp_path_factory.mktemp("approvals"))
    yield server
    server.stop()


@pytest.fixture
def http(approvals_gateway: InProcess) -> Iterator[httpx.Client]:
    with approvals_gateway.client(event_hooks=USER, timeout=30) as client:
        yield client


def recipient() -> str:
    return f"{uuid.uuid4().hex[:8]}@example.com"


def paused(http: httpx.Client, model: ScriptedModel, to: str, call_id: str) -> list:
    """A Tambo run in which the model calls `send_email` (and a tool that needs no approval)."""
    model.enqueue([{"content": "Sending. "},
                   call(0, "call_look", "lookup_contact", '{"name": "Ada"}'),
                   call(1, call_id, "send_email", json.dumps({"to": to, "subject": "Hi"}))])
    return run_events(http, "POST", "/v1/threads/runs", json={"message": user("mail Ada")})


def continue_run(http: httpx.Client, events: list, message: dict) -> httpx.Response:
    started = events[0].data
    return http.post(f"/v1/threads/{started['threadId']}/runs",
                     headers={"accept": "text/event-stream"},
                     json={"message": message, "previousRunId": started["runId"]})


def test_tambo_run_pauses_before_the_tool_and_an_approval_runs_it_once(
        http: httpx.Client, scripted_model: ScriptedModel):
    to = recipient()
    events = paused(http, scripted_model, to, "call_mail")
    awaiting = events[-2].data
    assert awaiting["name"] == "tambo.run.awaiting_input"
    [pending] = awaiting["value"]["pendingToolCalls"]
    assert pending["toolCallId"] == "call_mail" and pending["toolName"] == "send_email"
    approval = pending["approval"]
    assert approval["reason"] == "tool_approval" and approval["expiresAt"].endswith("Z")
    results = [e.data["toolCallId"] for e in events if e.type == "TOOL_CALL_RESULT"]
    assert results == ["call_look"]  # the tool that needs no approval ran; send_email did not
    assert times_sent(to) == 0
    thread_id = events[0].data["threadId"]
    run = http.get(f"/v1/threads/{thread_id}/runs/{events[0].data['runId']}",
                   headers={"accept": "application/json"}).json()
    assert run["status"] == "awaiting_input"
    assert run["pendingToolCalls"][0]["approval"]["interruptId"] == approval["interruptId"]

    scripted_model.enqueue([{"content": "Sent."}])
    resumed = run_events(http, "POST", f"/v1/threads/{thread_id}/runs", json={
        "message": answer("call_mail", '{"approved": true}'),
        "previousRunId": events[0].data["runId"]})
    [result] = [e.data for e in resumed if e.type == "TOOL_CALL_RESULT"]
    assert result["toolCallId"] == "call_mail"
    assert json.loads(result["content"]) == {"sent": True, "to": to}
    # In the message that holds the call: the Tambo client adds it to the message it knows.
    parent = next(e.data for e in events if e.type == "TOOL_CALL_START"
                  and e.data["toolCallId"] == "call_mail")["parentMessageId"]
    assert result["messageId"] == parent
    assert text_of(resumed) == "Sent." and resumed[-1].type == "RUN_FINISHED"
    assert times_sent(to) == 1
    # The approved call, run by a later run, names itself as the model's call did.
    assert keys_sent(to) == [f"{thread_id}:call_mail"]

    # The model saw the call answered by the tool's output, right after the call.
    messages = scripted_model.requests[-1]["messages"]
    tool_messages = {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}
    assert json.loads(tool_messages["call_mail"]) == {"sent": True, "to": to}
    stored = http.get(f"/v1/threads/{thread_id}/messages").json()["messages"]
    holder = next(m for m in stored if m["id"] == parent)
    assert [b["type"] for b in holder["content"]][-2:] == ["tool_result", "tool_result"]

    # The answer is spent: answering again is refused and does not run the tool again.
    again = continue_run(http, events, answer("call_mail", '{"approved": true}'))
    assert again.status_code == 400, again.text
    assert times_sent(to) == 1


def test_a_denial_never_runs_the_tool_and_the_model_sees_why(http: httpx.Client,
                                                             scripted_model: ScriptedModel):
    to = recipient()
    events = paused(http, scripted_model, to, "call_no")
    scripted_model.enqueue([{"content": "Not sent."}])
    resumed = run_events(http, "POST", f"/v1/threads/{events[0].data['threadId']}/runs", json={
        "message": answer("call_no", '{"approved": false, "reason": "wrong person"}'),
        "previousRunId": events[0].data["runId"]})
    [result] = [e.data for e in resumed if e.type == "TOOL_CALL_RESULT"]
    assert result["content"] == "The user denied running send_email; it did not run: wrong person"
    tool_messages = {m["tool_call_id"]: m["content"]
                     for m in scripted_model.requests[-1]["messages"] if m["role"] == "tool"}
    assert "denied" in tool_messages["call_no"]
    assert times_sent(to) == 0


def test_a_tambo_client_without_the_tool_registered_denies(http: httpx.Client,
                                                           scripted_model: ScriptedModel):
    """The real client answers a call it has no tool for with an error result: fail closed."""
    to = recipient()
    events = paused(http, scripted_model, to, "call_unknown")
    scripted_model.enqueue([{"content": "OK."}])
    resumed = continue_run(http, events, answer(
        "call_unknown", 'Tool "send_email" not found in registry', is_error=True))
    assert resumed.status_code == 200
    assert times_sent(to) == 0


def test_an_answer_that_is_not_an_approval_is_refused(http: httpx.Client,
                                                      scripted_model: ScriptedModel):
    events = paused(http, scripted_model, recipient(), "call_bad")
    refused = continue_run(http, events, answer("call_bad", "sure, why not"))
    assert refused.status_code == 400
    assert refused.json()["code"] == "INVALID_TOOL_RESULT"
    assert refused.json()["reason"] == "INVALID_APPROVAL"


def test_racing_approvals_run_the_tool_once(approvals_gateway: InProcess,
                                            scripted_model: ScriptedModel):
    """Six answers at once (on two apps sharing PostgreSQL + Redis in that configuration): one
    run takes the answer, the others are refused, and the email goes once."""
    to = recipient()
    with approvals_gateway.client(event_hooks=USER, timeout=30) as http:
        events = paused(http, scripted_model, to, "call_race")
    scripted_model.enqueue([{"content": "Sent once."}])

    def approve(_: int) -> int:
        with approvals_gateway.client(event_hooks=USER, timeout=30) as client:
            response = continue_run(client, events, answer("call_race", '{"approved": true}'))
            return response.status_code

    with concurrent.futures.ThreadPoolExecutor(6) as pool:  # each reads its stream to the end
        statuses = list(pool.map(approve, range(6)))
    assert statuses.count(200) == 1, statuses
    assert all(s in (400, 409) for s in statuses if s != 200), statuses
    assert times_sent(to) == 1


def agui_input(thread_id: str, text: str | None = None, **extra: object) -> dict:
    messages = [{"id": uuid.uuid4().hex, "role": "user", "content": text}] if text else []
    return {"threadId": thread_id, "runId": uuid.uuid4().hex, "protocolVersion": "1.0.0",
            "state": {}, "messages": messages, "tools": [], "context": [],
            "forwardedProps": {}, **extra}



def agui_paused(http: httpx.Client, model: ScriptedModel, call_id: str, to: str,
                thread_id: str, version: str | None = "1.0.0") -> list:
    """An AG-UI run in which the model calls `send_email` (`version`: the client's, None for
    a client before 1.0)."""
    model.enqueue([call(0, call_id, "send_email", json.dumps({"to": to, "subject": "AG"}))])
    body = agui_input(thread_id, "mail it", protocolVersion=version)
    return run_events(http, "POST", "/v1/agui/agents/default/run",
                      json={k: v for k, v in body.items() if v is not None})


def test_agui_interrupt_and_resume(http: httpx.Client, scripted_model: ScriptedModel):
    to, thread_id = recipient(), uuid.uuid4().hex
    events = agui_paused(http, scripted_model, "call_ag", to, thread_id)
    finished = RunFinishedEvent.model_validate(events[-1].data)
    assert finished.outcome is not None and finished.outcome.type == "interrupt"
    [interrupt] = finished.outcome.interrupts
    assert interrupt.tool_call_id == "call_ag" and interrupt.reason == "tool_approval"
    assert interrupt.response_schema is not None and interrupt.expires_at is not None
    assert times_sent(to) == 0

    scripted_model.enqueue([{"content": "Done."}])
    resumed = run_events(http, "POST", "/v1/agui/agents/default/run", json=agui_input(
        thread_id, resume=[{"interruptId": interrupt.id, "status": "resolved",
                            "payload": {"approved": True}}]))
    [result] = [e.data for e in resumed if e.type == "TOOL_CALL_RESULT"]
    assert result["toolCallId"] == "call_ag"
    assert json.loads(result["content"])["sent"] is True
    done = RunFinishedEvent.model_validate(resumed[-1].data)
    assert done.outcome is not None and done.outcome.type == "success"
    assert times_sent(to) == 1


def test_agui_connect_shows_what_the_thread_waits_for(http: httpx.Client,
                                                     scripted_model: ScriptedModel):
    """A page that reloads while a run waits for an approval and a client tool loads both with
    `connect`: the client tool call in `pendingToolCalls`, the approval as the interrupt the
    paused run ended with (in the state, and as the snapshot's outcome, which `HttpAgent`
    keeps as its pending interrupts); its `resume` then runs the tool once."""
    to, thread_id = recipient(), uuid.uuid4().hex
    scripted_model.enqueue([call(0, "call_cw", "get_weather", '{"city": "Oslo"}'),
                            call(1, "call_cm", "send_email",
                                 json.dumps({"to": to, "subject": "AG"}))])
    weather = {"name": "get_weather", "description": "The weather",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}
    paused_run = run_events(http, "POST", "/v1/agui/agents/default/run",
                            json=agui_input(thread_id, "weather, then mail it", tools=[weather]))
    [asked] = paused_run[-1].data["outcome"]["interrupts"]

    connected = run_events(http, "POST", "/v1/agui/agents/default/connect",
                           json=agui_input(thread_id))
    assert [e.type for e in connected] == ["RUN_STARTED", "MESSAGES_SNAPSHOT",
                                           "STATE_SNAPSHOT", "RUN_FINISHED"]
    state = connected[2].data["snapshot"]
    assert state["pendingToolCalls"] == [{"toolCallId": "call_cw", "toolName": "get_weather",
                                          "arguments": '{"city": "Oslo"}'}]
    assert state["interrupts"] == [asked]
    assert asked["toolCallId"] == "call_cm" and asked["reason"] == "tool_approval"
    assert {"id", "responseSchema", "expiresAt"} <= asked.keys()
    finished = RunFinishedEvent.model_validate(connected[-1].data)
    assert finished.outcome is not None and finished.outcome.type == "interrupt"
    assert connected[-1].data["outcome"]["interrupts"] == [asked]
    before_1_0 = agui_input(thread_id)
    del before_1_0["protocolVersion"]
    old = run_events(http, "POST", "/v1/agui/agents/default/connect", json=before_1_0)
    assert "outcome" not in old[-1].data and old[2].data["snapshot"] == state

    scripted_model.enqueue([{"content": "Done."}])
    body = agui_input(thread_id, tools=[weather], resume=[
        {"interruptId": asked["id"], "status": "resolved", "payload": {"approved": True}}])
    body["messages"] = [{"id": "t1", "role": "tool", "toolCallId": "call_cw", "content": "Mild"}]
    resumed = run_events(http, "POST", "/v1/agui/agents/default/run", json=body)
    assert resumed[-1].data["outcome"] == {"type": "success"}
    assert times_sent(to) == 1
    after = run_events(http, "POST", "/v1/agui/agents/default/connect",
                       json=agui_input(thread_id))
    assert after[2].data["snapshot"] == {"components": {}}
    assert after[-1].data["outcome"] == {"type": "success"}


def test_agui_cancelled_interrupt_denies(http: httpx.Client, scripted_model: ScriptedModel):
    to, thread_id = recipient(), uuid.uuid4().hex
    events = agui_paused(http, scripted_model, "call_cx", to, thread_id)
    interrupt_id = events[-1].data["outcome"]["interrupts"][0]["id"]
    scripted_model.enqueue([{"content": "Cancelled."}])
    resumed = run_events(http, "POST", "/v1/agui/agents/default/run", json=agui_input(
        thread_id, resume=[{"interruptId": interrupt_id, "status": "cancelled"}]))
    [result] = [e.data for e in resumed if e.type == "TOOL_CALL_RESULT"]
    assert "denied" in result["content"]
    assert times_sent(to) == 0


def test_a_pre_1_0_agui_client_answers_with_a_tool_message(http: httpx.Client,
                                                           scripted_model: ScriptedModel):
    """A client before 1.0 knows no outcome: it sees the call without a result and answers it
    with a `tool` message, as it answers its own tools."""
    to, thread_id = recipient(), uuid.uuid4().hex
    events = agui_paused(http, scripted_model, "call_old", to, thread_id, version=None)
    assert events[-1].data["outcome"] == {"type": "success"}  # no member it does not know
    scripted_model.enqueue([{"content": "Done."}])
    body = agui_input(thread_id)
    del body["protocolVersion"]
    body["messages"] = [{"id": "t1", "role": "tool", "toolCallId": "call_old",
                         "content": '{"approved": true}'}]
    run_events(http, "POST", "/v1/agui/agents/default/run", json=body)
    assert times_sent(to) == 1


# What `@ag-ui/client` 0.0.59 (CopilotKit 1.7x) validates an interrupt with: its schema strips
# any other member.
INTERRUPT_0_0_59 = {"id", "reason", "message", "toolCallId", "responseSchema", "expiresAt",
                    "metadata", "subagentRunId"}


def test_a_pre_1_0_client_that_opts_in_gets_the_interrupt_and_resumes_it_under_the_same_run_id(
        http: httpx.Client, scripted_model: ScriptedModel):
    """CopilotKit: no `protocolVersion`, `forwardedProps.interrupts: true` (its runner sets it),
    and `useInterrupt` answers with `resume[]` under the interrupted run's `runId`. That
    answer continues the thread (the tool runs once); the same answer again is a retry, which
    replays the interrupted run and runs nothing."""
    to, thread_id = recipient(), uuid.uuid4().hex
    scripted_model.enqueue([call(0, "call_ck", "send_email", json.dumps({"to": to, "subject": "CK"}))])
    body = agui_input(thread_id, "mail it", forwardedProps={"interrupts": True})
    del body["protocolVersion"]
    events = run_events(http, "POST", "/v1/agui/agents/default/run", json=body)
    outcome = events[-1].data["outcome"]
    assert outcome["type"] == "interrupt" and outcome.keys() == {"type", "interrupts"}
    [asked] = outcome["interrupts"]
    assert asked["toolCallId"] == "call_ck" and asked.keys() <= INTERRUPT_0_0_59
    assert times_sent(to) == 0

    # A reloaded page's connect (the runner opts in there too) ends with the same interrupt.
    connect = {**agui_input(thread_id, forwardedProps={"interrupts": True})}
    del connect["protocolVersion"]
    connected = run_events(http, "POST", "/v1/agui/agents/default/connect", json=connect)
    assert connected[-1].data["outcome"] == outcome

    scripted_model.enqueue([{"content": "Sent."}])
    answer = {**body, "resume": [{"interruptId": asked["id"], "status": "resolved",
                                  "payload": {"approved": True}}]}
    resumed = run_events(http, "POST", "/v1/agui/agents/default/run", json=answer)
    assert resumed[0].data["runId"] != body["runId"]  # a new run: the client's name is taken
    [result] = [e.data for e in resumed if e.type == "TOOL_CALL_RESULT"]
    assert result["toolCallId"] == "call_ck" and json.loads(result["content"])["sent"] is True
    assert text_of(resumed) == "Sent."
    assert resumed[-1].data["outcome"] == {"type": "success"}
    assert times_sent(to) == 1

    again = run_events(http, "POST", "/v1/agui/agents/default/run", json=answer)
    assert again[0].data["runId"] == body["runId"] and again[-1].data["outcome"] == outcome
    assert times_sent(to) == 1


def test_a_paused_approval_survives_a_restart(scripted_model: ScriptedModel, tmp_path: Path):
    """The pause is the thread's state in the database: a gateway started afresh on it takes
    the answer and runs the tool."""
    env, to = scripted_env(scripted_model, GATEWAY_TOOLS=str(TOOLS)), recipient()
    first = start(env, tmp_path)
    try:
        with first.client(event_hooks=USER, timeout=30) as http:
            events = paused(http, scripted_model, to, "call_restart")
    finally:
        first.stop()
    second = start(env, tmp_path)
    try:
        scripted_model.enqueue([{"content": "Sent after the restart."}])
        with second.client(event_hooks=USER, timeout=30) as http:
            resumed = continue_run(http, events, answer("call_restart", '{"approved": true}'))
            assert resumed.status_code == 200, resumed.text
            resumed.read()
    finally:
        second.stop()
    assert times_sent(to) == 1


# -- questions a tool asks (elicitation) ---------------------------------------------------------


def test_a_python_tool_asks_and_is_called_again_with_the_answer(http: httpx.Client,
                                                                scripted_model: ScriptedModel):
    scripted_model.enqueue([call(0, "call_book", "book_table", '{"city": "Oslo"}')])
    events = run_events(http, "POST", "/v1/threads/runs", json={"message": user("book")})
    [pending] = events[-2].data["value"]["pendingToolCalls"]
    question = pending["approval"]
    assert question["reason"] == "input_required"
    assert question["message"] == "How many guests in Oslo?"
    assert question["responseSchema"]["required"] == ["guests"]

    scripted_model.enqueue([{"content": "Booked."}])
    resumed = run_events(http, "POST", f"/v1/threads/{events[0].data['threadId']}/runs", json={
        "message": answer("call_book", '{"guests": 4}'),
        "previousRunId": events[0].data["runId"]})
    [result] = [e.data for e in resumed if e.type == "TOOL_CALL_RESULT"]
    assert result["content"] == "booked for 4 in Oslo"
    assert text_of(resumed) == "Booked."


def test_an_agui_client_answers_a_question_through_resume(http: httpx.Client,
                                                          scripted_model: ScriptedModel):
    thread_id = uuid.uuid4().hex
    scripted_model.enqueue([call(0, "call_q", "book_table", '{"city": "Lima"}')])
    events = run_events(http, "POST", "/v1/agui/agents/default/run",
                        json=agui_input(thread_id, "book"))
    finished = RunFinishedEvent.model_validate(events[-1].data)
    assert finished.outcome is not None and finished.outcome.type == "interrupt"
    [interrupt] = finished.outcome.interrupts
    assert interrupt.reason == "input_required" and interrupt.response_schema is not None
    assert interrupt.response_schema["properties"] == {"guests": {"type": "integer"}}

    scripted_model.enqueue([{"content": "Done."}])
    resumed = run_events(http, "POST", "/v1/agui/agents/default/run", json=agui_input(
        thread_id, resume=[{"interruptId": interrupt.id, "status": "resolved",
                            "payload": {"guests": 2}}]))
    [result] = [e.data for e in resumed if e.type == "TOOL_CALL_RESULT"]
    assert result["content"] == "booked for 2 in Lima"


def test_a_declined_question_reaches_the_tool(http: httpx.Client, scripted_model: ScriptedModel):
    scripted_model.enqueue([call(0, "call_dq", "book_table", '{"city": "Rome"}')])
    events = run_events(http, "POST", "/v1/threads/runs", json={"message": user("book")})
    scripted_model.enqueue([{"content": "OK."}])
    resumed = run_events(http, "POST", f"/v1/threads/{events[0].data['threadId']}/runs", json={
        "message": answer("call_dq", '{"action": "decline"}'),
        "previousRunId": events[0].data["runId"]})
    [result] = [e.data for e in resumed if e.type == "TOOL_CALL_RESULT"]
    assert result["content"] == "not booked"


def test_an_mcp_servers_elicitation_pauses_the_run_and_the_answer_goes_back(
        scripted_model: ScriptedModel, tmp_path: Path):
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"local": {
        "command": sys.executable, "args": ["-m", "tests.support.mcp_server"],
        "cwd": str(ROOT)}}}))
    server = InProcessGateway(tmp_path, scripted_env(scripted_model,
                                                     GATEWAY_MCP_SERVERS=str(config))).start()
    try:
        with server.client(event_hooks=USER, timeout=30) as http:
            scripted_model.enqueue([call(0, "call_greet", "greet", "{}")])
            events = run_events(http, "POST", "/v1/threads/runs", json={"message": user("hi")})
            [pending] = events[-2].data["value"]["pendingToolCalls"]
            assert pending["approval"]["message"] == "What is your name?"
            assert "name" in pending["approval"]["responseSchema"]["properties"]
            scripted_model.enqueue([{"content": "Greeted."}])
            resumed = run_events(http, "POST", f"/v1/threads/{events[0].data['threadId']}/runs",
                                 json={"message": answer("call_greet", '{"name": "Ada"}'),
                                       "previousRunId": events[0].data["runId"]})
            [result] = [e.data for e in resumed if e.type == "TOOL_CALL_RESULT"]
            assert result["content"] == "Hello, Ada!"
    finally:
        server.stop()


# -- approving with edited arguments (AG-UI's `editedArgs`; a Tambo tool result's text) ----

def _stored_call(http: httpx.Client, thread_id: str, call_id: str) -> dict:
    messages = http.get(f"/v1/threads/{thread_id}/messages").json()["messages"]
    return next(block for m in messages for block in m["content"]
                if block["type"] == "tool_use" and block["id"] == call_id)


def test_tambo_approval_with_edited_arguments_runs_the_tool_with_them(
        http: httpx.Client, scripted_model: ScriptedModel):
    asked, edited_to = recipient(), recipient()
    events = paused(http, scripted_model, asked, "call_edit")
    thread_id = events[0].data["threadId"]
    edited = {"to": edited_to, "subject": "Edited"}
    scripted_model.enqueue([{"content": "Sent to the edited address."}])
    resumed = run_events(http, "POST", f"/v1/threads/{thread_id}/runs", json={
        "message": answer("call_edit", json.dumps({"approved": True, "editedArgs": edited})),
        "previousRunId": events[0].data["runId"]})
    [result] = [e.data for e in resumed if e.type == "TOOL_CALL_RESULT"]
    assert json.loads(result["content"]) == {"sent": True, "to": edited_to}
    assert times_sent(edited_to) == 1 and times_sent(asked) == 0

    assert _stored_call(http, thread_id, "call_edit")["input"] == edited
    # The model's next call reads the call as it ran.
    [sent] = [c for m in scripted_model.requests[-1]["messages"] if m["role"] == "assistant"
              for c in m.get("tool_calls") or [] if c["id"] == "call_edit"]
    assert json.loads(sent["function"]["arguments"]) == edited


def test_agui_resume_with_edited_args(http: httpx.Client, scripted_model: ScriptedModel):
    asked, edited_to, thread_id = recipient(), recipient(), uuid.uuid4().hex
    events = agui_paused(http, scripted_model, "call_ag_edit", asked, thread_id)
    [interrupt] = RunFinishedEvent.model_validate(events[-1].data).outcome.interrupts
    assert "editedArgs" in interrupt.response_schema["properties"]
    scripted_model.enqueue([{"content": "Done."}])
    resumed = run_events(http, "POST", "/v1/agui/agents/default/run", json=agui_input(
        thread_id, resume=[{"interruptId": interrupt.id, "status": "resolved",
                            "payload": {"approved": True,
                                        "editedArgs": {"to": edited_to, "subject": "AG"}}}]))
    [result] = [e.data for e in resumed if e.type == "TOOL_CALL_RESULT"]
    assert json.loads(result["content"])["to"] == edited_to
    assert times_sent(edited_to) == 1 and times_sent(asked) == 0


def test_edited_arguments_the_schema_refuses_never_run(http: httpx.Client,
                                                       scripted_model: ScriptedModel):
    asked = recipient()
    events = paused(http, scripted_model, asked, "call_bad_edit")
    thread_id = events[0].data["threadId"]
    scripted_model.enqueue([{"content": "Could not send."}])
    resumed = run_events(http, "POST", f"/v1/threads/{thread_id}/runs", json={
        "message": answer("call_bad_edit", json.dumps({"approved": True,
                                                       "editedArgs": {"to": 5}})),
        "previousRunId": events[0].data["runId"]})
    [result] = [e.data for e in resumed if e.type == "TOOL_CALL_RESULT"]
    assert "did not run" in result["content"]
    assert times_sent(asked) == 0
    # The stored call is the model's: nothing ran with other arguments.
    assert _stored_call(http, thread_id, "call_bad_edit")["input"]["to"] == asked


def test_edited_args_that_are_not_an_object_are_refused(http: httpx.Client,
                                                        scripted_model: ScriptedModel):
    events = paused(http, scripted_model, recipient(), "call_list_edit")
    refused = continue_run(http, events, answer(
        "call_list_edit", json.dumps({"approved": True, "editedArgs": ["x"]})))
    assert refused.status_code == 400
    assert refused.json()["code"] == "INVALID_TOOL_RESULT"


# -- approval rules: the agents file's `approval_rules` ---------------------------------------

RULED_AGENTS = """
[agents.default]
tools = ["{tools}"]
approval_rules = {{send_email = 'to not in ["team@example.com"] and subject != "ping"'}}
"""


@pytest.fixture(scope="module")
def ruled_gateway(scripted_model: ScriptedModel, tmp_path_factory: pytest.TempPathFactory
                  ) -> Iterator[tuple[InProcess, dict[str, str]]]:
    """A gateway whose agent has an approval rule, with a client key and an admin key."""
    workdir = tmp_path_factory.mktemp("approval-rules")
    (workdir / "agents.toml").write_text(RULED_AGENTS.format(tools=TOOLS))
    env = scripted_env(scripted_model, GATEWAY_AGENTS_FILE=str(workdir / "agents.toml"))
    server = (InProcessCluster(workdir, env) if engines.ENGINES is not None
              else InProcessGateway(workdir, env))
    keys = {"client": create_key(server, "rules")}  # before the start: no development mode
    server.start()
    keys["admin"] = create_key(server, "rules", "--admin")
    yield server, keys
    server.stop()


@pytest.fixture
def ruled_http(ruled_gateway: tuple[InProcess, dict[str, str]]) -> Iterator[httpx.Client]:
    server, keys = ruled_gateway
    with server.client(event_hooks=USER, timeout=30,
                       headers={"x-api-key": keys["client"]}) as client:
        yield client


def test_an_approval_rule_asks_only_for_the_calls_it_holds_for(
        ruled_http: httpx.Client, ruled_gateway: tuple[InProcess, dict[str, str]],
        scripted_model: ScriptedModel):
    # The rule does not hold: the call runs without asking.
    scripted_model.enqueue([call(0, "call_team", "send_email",
                                 json.dumps({"to": "team@example.com", "subject": "Hi"}))],
                           [{"content": "Sent to the team."}])
    before = times_sent("team@example.com")
    ran = run_events(ruled_http, "POST", "/v1/threads/runs", json={"message": user("team")},
                     headers={"x-api-key": ruled_http.headers["x-api-key"]})
    assert ran[-1].type == "RUN_FINISHED"
    assert [e.data["toolCallId"] for e in ran if e.type == "TOOL_CALL_RESULT"] == ["call_team"]
    assert times_sent("team@example.com") == before + 1

    # It holds: the run pauses, and the pending approval names the rule that asked.
    outsider = recipient()
    scripted_model.enqueue([call(0, "call_out", "send_email",
                                 json.dumps({"to": outsider, "subject": "Hi"}))])
    asked = run_events(ruled_http, "POST", "/v1/threads/runs", json={"message": user("out")},
                       headers={"x-api-key": ruled_http.headers["x-api-key"]})
    [pending] = asked[-2].data["value"]["pendingToolCalls"]
    rule = 'to not in ["team@example.com"] and subject != "ping"'
    assert pending["approval"]["rule"] == rule
    assert times_sent(outsider) == 0

    # The console lists the pending approval with its arguments and the rule that asked.
    server, keys = ruled_gateway
    with server.client(timeout=30, headers={"x-api-key": keys["admin"]}) as admin:
        waiting = admin.get("/v1/admin/waiting").json()["threads"]
    [listed] = [c for t in waiting for c in t["calls"] if c["toolCallId"] == "call_out"]
    assert listed["kind"] == "approval" and listed["rule"] == rule
    assert json.loads(listed["arguments"]) == {"to": outsider, "subject": "Hi"}


def test_an_approval_rule_outside_the_language_stops_start_up(tmp_path: Path,
                                                             scripted_model: ScriptedModel):
    (tmp_path / "agents.toml").write_text(
        RULED_AGENTS.format(tools=TOOLS).replace("subject != \"ping\"", "__import__(\"os\")"))
    result = subprocess.run(
        [sys.executable, "-m", "gateway", "agents", "check", str(tmp_path / "agents.toml")],
        env={**os.environ, **scripted_env(scripted_model)},
        capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert result.returncode != 0
    assert "approval_rules" in result.stderr + result.stdout


def test_always_allow_lets_the_tool_run_unasked_on_that_thread_only(
        http: httpx.Client, scripted_model: ScriptedModel):
    first, second, elsewhere = recipient(), recipient(), recipient()
    events = paused(http, scripted_model, first, "call_always")
    thread_id = events[0].data["threadId"]
    scripted_model.enqueue([{"content": "Sent."}])
    resumed = run_events(http, "POST", f"/v1/threads/{thread_id}/runs", json={
        "message": answer("call_always", json.dumps({"approved": True, "alwaysAllow": True})),
        "previousRunId": events[0].data["runId"]})
    assert times_sent(first) == 1

    # The next call on the thread runs without asking.
    scripted_model.enqueue([call(0, "call_again", "send_email",
                                 json.dumps({"to": second, "subject": "Again"}))],
                           [{"content": "Sent again."}])
    again = run_events(http, "POST", f"/v1/threads/{thread_id}/runs", json={
        "message": user("once more"), "previousRunId": resumed[0].data["runId"]})
    assert again[-1].type == "RUN_FINISHED"
    assert [e.data["toolCallId"] for e in again if e.type == "TOOL_CALL_RESULT"] == ["call_again"]
    assert times_sent(second) == 1

    # Another thread still asks.
    other = paused(http, scripted_model, elsewhere, "call_elsewhere")
    assert other[-2].data["name"] == "tambo.run.awaiting_input"
    assert times_sent(elsewhere) == 0
