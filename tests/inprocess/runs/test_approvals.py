"""Approvals, the parts that need no server: how a tool is marked to ask first (decorator,
agents file, MCP server), what the model is offered, how an answer is read, and expiry. The
round trips on both dialects are in tests/integration/test_approvals.py."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import mcp_types
import pytest

from gateway import server_tool
from gateway.config import Settings
from gateway.engine.agents.agent import AgentDefaults
from gateway.engine.agents.file import load_agents_file
from gateway.engine.loop import RunInput, ServerToolSpec, model_tools
from gateway.engine.tools.elicitation import Answers, InputRequired, answer_of, ask, bind
from gateway.engine.tools.mcp import McpConnection, _specs, load_config
from gateway.engine.tools.python_tools import tool_specs
from gateway.protocol.clock import iso_ms, now_ms
from gateway.protocol.problems import ApiError
from gateway.protocol.run_spec import ClientTool, RunSpec, ToolResult, UserInput
from gateway.runs.admission.admit import validated_inputs
from gateway.services import agent_tools, asking_first
from gateway.store.tables import ThreadRow

TOOLS = Path(__file__).resolve().parents[2] / "support" / "approval_tools.py"


async def noop(arguments: dict[str, Any]) -> Any:
    return None


def spec(name: str, approval: bool = False) -> ServerToolSpec:
    return ServerToolSpec(name, name, {"type": "object", "properties": {}}, noop, approval)


def test_the_decorator_marks_a_tool() -> None:
    @server_tool(approval=True)
    def refund(order: str) -> str:
        """Refund an order."""
        return order

    [marked] = tool_specs(refund)
    assert marked.approval is True
    assert {s.name: s.approval for s in tool_specs(str(TOOLS))} == {
        "send_email": True, "lookup_contact": False, "book_table": False,
        "check_host": False}


def test_a_client_tool_named_after_a_tool_that_asks_first_is_not_offered() -> None:
    """It is how a Tambo app answers the approval, never a second tool of that name."""
    run = RunInput(history=[], client_tools=[ClientTool("send_email"), ClientTool("other")],
                   server_tools={"send_email": spec("send_email", approval=True)})
    names = [t["function"]["name"] for t in model_tools(run)]
    assert names == ["other", "send_email"]


async def test_the_agents_file_marks_tools_and_refuses_a_name_it_does_not_have(
        tmp_path: Path) -> None:
    path = tmp_path / "agents.toml"
    path.write_text(f'[agents.mail]\ntools = ["{TOOLS}"]\napproval = ["lookup_contact"]\n')
    registry = load_agents_file(path, AgentDefaults(model="openai/main"))
    assert registry.default.approval == ("lookup_contact",)
    async with contextlib.AsyncExitStack() as stack:
        tools = await agent_tools(Settings(), registry, stack)
    assert tools["mail"]["lookup_contact"].approval is True
    with pytest.raises(ValueError, match="'send_mail', which is not one of its server tools"):
        asking_first("mail", ["send_mail"], {"send_email": spec("send_email")})


def test_an_mcp_server_entry_marks_every_tool_of_the_server(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {
        "mail": {"command": "mail-server", "approval": True},
        "files": {"command": "files-server"}}}))
    mail, files = load_config(str(path))
    assert (mail.approval, files.approval) == (True, False)
    listed = [(McpConnection(config), [mcp_types.Tool(
        name=f"{config.name}_tool", input_schema={"type": "object"})]) for config in (mail, files)]
    assert {n: s.approval for n, s in _specs(listed).items()} == {"mail_tool": True,
                                                                   "files_tool": False}


def paused_thread(expires_ms: int) -> ThreadRow:
    pending = {"toolCallId": "call_1", "toolName": "send_email", "arguments": '{"to": "a"}',
               "approval": {"interruptId": "int_1", "reason": "tool_approval",
                            "message": "Allow?", "messageId": "msg_1",
                            "expiresAt": iso_ms(expires_ms)}}
    return ThreadRow(id="thr_1", project_id="p", created_ms=0, updated_ms=0,
                     last_completed_run_id="run_0", pending_tool_calls=[pending])


def answered(text: str, is_error: bool = False) -> RunSpec:
    return RunSpec(tool_results=[ToolResult("call_1", [{"type": "text", "text": text}],
                                            is_error)], previous_run_id="run_0")


async def decided(thread: ThreadRow, spec: RunSpec) -> dict[str, Any]:
    [row] = await validated_inputs(thread, spec, "run_1", now_ms())
    [part] = [p for p in row.parts if p["type"] == "x-approval"]
    return part


async def test_answers_become_decisions_stored_with_the_run_input() -> None:
    thread = paused_thread(now_ms() + 60_000)
    part = await decided(thread, answered('{"approved": true}'))
    assert (part["decision"], part["arguments"], part["callMessageId"]) == (
        "approved", {"to": "a"}, "msg_1")
    denied = await decided(thread, answered('{"approved": false, "reason": "no"}'))
    assert (denied["decision"], denied["reason"]) == ("denied", "no")
    # An error result (a client with no tool of that name, a cancelled interrupt) denies.
    assert (await decided(thread, answered("not found", is_error=True)))["decision"] == "denied"
    with pytest.raises(ApiError) as refused:
        await decided(thread, answered("yes please"))
    assert refused.value.extra["reason"] == "INVALID_APPROVAL"


async def test_an_expired_approval_is_denied_and_needs_no_answer() -> None:
    thread = paused_thread(now_ms() - 1)
    assert (await decided(thread, answered('{"approved": true}')))["decision"] == "expired"
    # The user moves on without answering: the call is denied, not MISSING_RESULTS.
    moved_on = RunSpec(user=UserInput([{"type": "text", "text": "never mind"}]),
                       previous_run_id="run_0")
    assert (await decided(thread, moved_on))["decision"] == "expired"
    with pytest.raises(ApiError, match="Missing tool results"):
        await decided(paused_thread(now_ms() + 60_000), moved_on)


def test_an_answer_to_a_question_is_the_content_or_an_action() -> None:
    assert answer_of('{"guests": 3}', False) == {"action": "accept", "content": {"guests": 3}}
    assert answer_of('{"action": "decline"}', False) == {"action": "decline"}
    assert answer_of("whatever", True) == {"action": "decline"}
    assert answer_of("three", False) is None  # refused before the run starts
    assert answer_of('{"action": "accept"}', False) is None  # accepting needs content


async def test_ask_answers_in_order_and_raises_for_the_first_unanswered_question() -> None:
    answers = Answers([{"action": "accept", "content": {"a": 1}}, {"action": "decline"}])
    bind(answers)
    assert await ask({}, "first?") == {"a": 1}
    assert await ask({}, "second?") is None
    with pytest.raises(InputRequired, match="third"):
        await ask({"type": "object"}, "third?")
