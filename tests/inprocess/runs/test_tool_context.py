"""Server tools know who they work for (project, user scope, thread, run) so they can
authorise, and a tool's unexpected exception reaches the model and the client only as a
generic message with an error id, never its text (which may carry hosts or credentials)."""

from __future__ import annotations

import logging

import pytest

from gateway import ToolContext, ToolError, tool_context
from gateway.engine.tools.python_tools import spec_for
from gateway.store.repository import Store
from tests.inprocess.conftest import (
    PROJECT,
    ManagerFactory,
    ScriptedDeltas,
    events,
    new_thread,
    text_turn,
    tool_turn,
    user,
)

SEEN: list[tuple[ToolContext, ToolContext]] = []


async def whoami(note: str, caller: ToolContext) -> str:
    """Say who is asking."""
    SEEN.append((caller, tool_context()))
    return f"{note}: {caller.user_scope}"


def leaky() -> str:
    """Fail with a secret in the message."""
    raise RuntimeError("could not connect to postgresql://admin:hunter2@db.internal/orders")


def refusing() -> str:
    """Fail on purpose, with a message for the model."""
    raise ToolError("order o-1 belongs to someone else")


TOOLS = {spec.name: spec for spec in map(spec_for, (whoami, leaky, refusing))}


def test_the_context_parameter_is_not_an_argument_the_model_fills() -> None:
    assert set(TOOLS["whoami"].parameters["properties"]) == {"note"}


async def test_a_tool_is_given_the_runs_project_user_scope_and_thread(
        managers: ManagerFactory, store: Store, model: ScriptedDeltas) -> None:
    manager = managers(server_tools=TOOLS)
    thread = await new_thread(store, user_key="oauth:issuer:alice")
    model.enqueue(tool_turn("call_1", "whoami", '{"note": "hi"}'), text_turn("Done."))
    run = (await manager.start(thread, user("who am I?"))).run
    await events(manager, run.id)
    (given, ambient), = SEEN
    assert given is ambient
    assert (given.project_id, given.thread_id, given.run_id, given.user_scope) == (
        PROJECT, thread.id, run.id, "oauth:issuer:alice")
    assert given.signed_in
    assert given.mcp_meta()["gateway/userScope"] == "oauth:issuer:alice"
    # The call names itself: a key that stays the same whenever this call runs again.
    assert given.tool_call_id == "call_1"
    assert given.idempotency_key == f"{thread.id}:call_1"
    assert given.mcp_meta()["gateway/idempotencyKey"] == f"{thread.id}:call_1"


@pytest.mark.parametrize(("tool", "shown", "hidden"), [
    ("leaky", "Tool leaky failed (error ", "hunter2"),
    ("refusing", "order o-1 belongs to someone else", "RuntimeError"),
])
async def test_only_a_tool_error_shows_its_message(
        managers: ManagerFactory, store: Store, model: ScriptedDeltas,
        caplog: pytest.LogCaptureFixture, tool: str, shown: str, hidden: str) -> None:
    manager = managers(server_tools=TOOLS)
    thread = await new_thread(store)
    model.enqueue(tool_turn("call_1", tool, "{}"), text_turn("Sorry."))
    with caplog.at_level(logging.ERROR):
        run = (await manager.start(thread, user("go"))).run
        seen = await events(manager, run.id)
    results = [e for _, e in seen if e.get("type") == "TOOL_CALL_RESULT"]
    assert len(results) == 1 and shown in results[0]["content"]
    assert hidden not in str(seen) and hidden not in str(model.requests[1].messages)
    if tool == "leaky":  # the operator finds the details under the error id
        incident = results[0]["content"].split("(error ")[1].rstrip(")")
        assert any(incident in r.getMessage() and "hunter2" in r.exc_text
                   for r in caplog.records if r.exc_text)
