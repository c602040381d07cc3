"""The embedded defaults a new user starts with: the demo model answers every task offline."""

from __future__ import annotations

import base64

import pytest

from tests.support.gateway_server import USER
from tests.support.inprocess_app import InProcessGateway
from tests.support.sse import run_events, text_of

# What the demo model answers: the backend that stores it does not change it.
pytestmark = pytest.mark.sqlite_only


def test_demo_model_streams_reasoning_names_and_suggests(demo_gateway: InProcessGateway):
    with demo_gateway.client(event_hooks=USER, timeout=30) as http:
        events = run_events(http, "POST", "/v1/threads/runs", json={
            "message": {"role": "user", "content": "plan a trip to Lisbon"}})
        assert events[-1].type == "RUN_FINISHED"
        answer = text_of(events)
        assert "built-in demo model" in answer and "plan a trip to Lisbon" in answer
        assert any(e.type == "THINKING_TEXT_MESSAGE_CONTENT" for e in events)
        assert sum(e.type == "TEXT_MESSAGE_CONTENT" for e in events) > 20  # token by token

        thread_id = events[0].data["threadId"]
        named = http.post(f"/threads/{thread_id}/generate-name")
        assert named.status_code == 200, named.text
        assert named.json()["name"] == "plan a trip to Lisbon"

        message_id = http.get(f"/v1/threads/{thread_id}/messages").json()["messages"][-1]["id"]
        created = http.post(f"/v1/threads/{thread_id}/messages/{message_id}/suggestions", json={})
        assert created.status_code == 201, created.text
        assert len(created.json()["suggestions"]) == 3


def test_demo_model_calls_a_named_client_tool_and_repeats_its_result(demo_gateway: InProcessGateway):
    tools = [{"name": "get_local_time", "description": "The browser's local time",
              "inputSchema": {"type": "object", "properties": {}}}]
    with demo_gateway.client(event_hooks=USER, timeout=30) as http:
        events = run_events(http, "POST", "/v1/threads/runs", json={
            "message": {"role": "user", "content": "What time is it?"}, "tools": tools})
        awaiting = [e for e in events if e.type == "CUSTOM"][-1].data["value"]
        (pending,) = awaiting["pendingToolCalls"]
        assert pending["toolName"] == "get_local_time"

        thread_id, run_id = events[0].data["threadId"], events[0].data["runId"]
        result = {"type": "tool_result", "toolUseId": pending["toolCallId"],
                  "content": [{"type": "text", "text": "14:05 in Lisbon"}]}
        after = run_events(http, "POST", f"/v1/threads/{thread_id}/runs", json={
            "message": {"role": "user", "content": [result]}, "previousRunId": run_id,
            "tools": tools})
        assert "The tool returned: 14:05 in Lisbon" in text_of(after)


def test_demo_model_renders_a_named_component(demo_gateway: InProcessGateway):
    component = {"name": "WeatherCard", "description": "Weather for a city",
                 "propsSchema": {"type": "object", "properties": {"city": {"type": "string"},
                                                                  "tempC": {"type": "number"}}}}
    with demo_gateway.client(event_hooks=USER, timeout=30) as http:
        events = run_events(http, "POST", "/v1/threads/runs", json={
            "message": {"role": "user", "content": "show the weather card"},
            "availableComponents": [component]})
        names = [e.data["name"] for e in events if e.type == "CUSTOM"]
        assert names[0] == "tambo.component.start" and names[-1] == "tambo.component.end"
        end = [e for e in events if e.type == "CUSTOM"][-1].data["value"]
        assert end["finalProps"] == {"city": "example", "tempC": 42}
        assert events[-1].type == "RUN_FINISHED"


def test_demo_model_acknowledges_an_attachment(demo_gateway: InProcessGateway):
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 32).decode()
    with demo_gateway.client(event_hooks=USER, timeout=30) as http:
        events = run_events(http, "POST", "/v1/threads/runs", json={"message": {
            "role": "user", "content": [
                {"type": "text", "text": "look at this"},
                {"type": "resource", "resource": {"name": "shot.png", "mimeType": "image/png",
                                                  "blob": png}}]}})
    answer = text_of(events)
    assert answer.startswith("I received an image (image/png) with your message")
    assert "look at this" in answer
