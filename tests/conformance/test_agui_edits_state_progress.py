"""Issue 44 with the real `HttpAgent` (@ag-ui/client 1.0, Node 20): regenerate branches the
thread, shared state survives a reload and takes a server tool's change, a tool's status is an
activity message, and `getCapabilities()` parses with @ag-ui/core's schema. Every run passes
HttpAgent's own verifier and validates against the Python `ag_ui` 1.0 models (`run_plan`)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.conformance.conftest import wire_env
from tests.conformance.test_agui_client import SERVER_TOOLS, call, run_plan
from tests.support.gateway_server import GatewayServer
from tests.support.node import have_node, run_agui_agent
from tests.support.scripted_model import ScriptedModel

pytestmark = pytest.mark.skipif(not have_node(), reason="node and npm are needed")


@pytest.fixture(scope="module")
def gateway(scripted_model: ScriptedModel, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[GatewayServer]:
    server = GatewayServer(tmp_path_factory.mktemp("agui-issue44"),
                           wire_env(scripted_model, "openai", GATEWAY_TOOLS=str(SERVER_TOOLS)))
    server.start()
    yield server
    server.stop()


def roles(messages: list[dict]) -> list[tuple[str, object]]:
    return [(m["role"], m.get("content")) for m in messages]


def test_regenerate_leaves_one_question_and_the_new_answer(gateway, scripted_model):
    scripted_model.enqueue([{"content": "First."}], [{"content": "Second."}])
    result = run_plan(gateway, {"user": "look"}, {"regenerate": True}, connect=True)
    assert roles(result["messages"]) == [("user", "look"), ("assistant", "Second.")]
    assert [m["role"] for m in scripted_model.requests[-1]["messages"]] == ["user"]
    assert roles(result["connected"]["messages"]) == roles(result["messages"])
    assert result["connected"]["messages"][0]["id"] == result["messages"][0]["id"]


def test_shared_state_survives_a_reload_and_takes_a_tools_change(gateway, scripted_model):
    scripted_model.enqueue([call(0, "call_l", "set_language", '{"language": "nb"}')],
                           [{"content": "Byttet."}])
    result = run_plan(gateway, {"user": "norsk", "state": {"city": "Oslo"}}, connect=True)
    assert result["state"] == {"city": "Oslo", "language": "nb"}  # HttpAgent applied the delta
    assert result["connected"]["error"] is None
    state = result["connected"]["state"]
    assert (state["city"], state["language"], state["components"]) == ("Oslo", "nb", {})


def test_a_tools_status_is_an_activity_message(gateway, scripted_model):
    scripted_model.enqueue([call(0, "call_s", "survey", '{"sources": 2}')],
                           [{"content": "Searched."}], [{"content": "More."}])
    result = run_plan(gateway, {"user": "survey"}, {"user": "more"})
    (activity,) = [m for m in result["messages"] if m["role"] == "activity"]
    assert activity["activityType"] == "tool_status"
    assert activity["content"] == {"toolCallId": "call_s", "state": "searching",
                                   "detail": "Searching source 2 of 2", "done": True}


def test_capabilities_parse_with_the_clients_schema(gateway):
    result = run_agui_agent({"url": f"{gateway.url}/v1/agui/agents/default/run",
                             "headers": {"x-api-key": "test-key"}, "capabilities": True,
                             "threadId": f"agui-{uuid.uuid4()}", "steps": []})
    found = result["capabilities"]
    assert "error" not in found, found
    assert found["identity"]["name"] == "default"
    assert found["state"]["persistentState"] is True
    assert found["humanInTheLoop"]["interrupts"] is True
    names = {t["name"] for t in found["tools"]["items"]}
    assert {"survey", "set_language"} <= names
