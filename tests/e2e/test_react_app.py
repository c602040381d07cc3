"""The React example (examples/react, `@tambo-ai/react` 1.3) against a real gateway, in Chromium.

Each test is one user's session in a fresh browser context: it scripts the model's replies,
clicks and types in the page like a person, and checks three things at every step: what the page
shows, what the gateway stored (over its REST API) and what the model was sent. Every step also
checks that the browser saw no failed request (CORS included) and no console error. Screenshots
go to test-artifacts/e2e/.

The model is the scripted OpenAI-compatible server behind litellm. Turns meant for the agent
loop are marked `"stream": True` so the SDK's own non-streamed calls (thread name, suggestions)
cannot take them; those get `"stream": False` turns of their own.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.gateway_server import GatewayServer
from tests.support.scripted_model import ScriptedModel

from .conftest import USER_KEY
from .harness import Browser, clean

pytestmark = pytest.mark.timeout(240)


def stream_turn(*steps: dict[str, Any]) -> dict[str, Any]:
    return {"steps": list(steps), "stream": True}


def calls(result: dict[str, Any], method: str, suffix: str) -> list[dict[str, Any]]:
    return [r for r in result["requests"] if r["method"] == method and r["path"].endswith(suffix)]


def streaming_requests(model: ScriptedModel) -> list[dict[str, Any]]:
    """What the agent loop sent the model (the thread-name call is not streamed)."""
    return [r for r in model.requests if r.get("stream")]


def texts(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(role, text) of chat messages as the model received them."""
    out = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, list):
            content = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
        out.append((m["role"], content or ""))
    return out


def rest(gateway: GatewayServer, path: str) -> Any:
    response = httpx.get(f"{gateway.url}{path}", params={"userKey": USER_KEY},
                         headers={"x-api-key": "e2e"}, timeout=10)
    response.raise_for_status()
    return response.json()


def test_streamed_answer_then_reload_restores_and_continues_the_thread(
        browser: Browser, gateway: GatewayServer, scripted_model: ScriptedModel, shots: Path
) -> None:
    # 1. Type a message: the answer streams in (seen half-written), then completes.
    scripted_model.enqueue(stream_turn(
        {"reasoning": "A greeting; answer briefly."},
        {"content": "Hello from the "},
        {"content": "scripted model, "},
        {"delay": 2.0},
        {"content": "streamed to your browser."},
    ))
    clean(browser.step("open"))
    partial = clean(browser.step(
        "send", text="Hi gateway, are you there?",
        until={"text": "scripted model,", "absent": "streamed to your browser.", "idle": False},
        screenshot=str(shots / "01-text-streaming.png")))
    assert partial["status"].startswith("Streaming")
    assert partial["messages"][-1]["role"] == "assistant"
    done = browser.step("wait", until={"text": "streamed to your browser."},
                        screenshot=str(shots / "02-text-answer.png"))
    page = clean(done)
    assert [m["role"] for m in page["messages"]] == ["user", "assistant"]
    assert "Hello from the scripted model, streamed to your browser." in page["messages"][1]["text"]
    thread_id = page["threadId"]
    assert thread_id.startswith("thr_") and page["storedThreadId"] == thread_id

    # 2. A second message continues the thread, and React names it (POST /threads/{id}/generate-name).
    scripted_model.enqueue(stream_turn({"content": "Second answer, same thread."}),
                           {"steps": [{"content": "Greetings chat"}], "stream": False})
    second = browser.step("send", text="Tell me more.",
                          until={"text": "Second answer, same thread."})
    page = clean(second)
    assert page["threadId"] == thread_id
    model_saw = texts(streaming_requests(scripted_model)[-1]["messages"])
    assert ("user", "Hi gateway, are you there?") in model_saw
    assert ("assistant", "Hello from the scripted model, streamed to your browser.") in model_saw
    named = browser.step("wait", until={"titleNot": "New conversation"},
                         screenshot=str(shots / "03-thread-named.png"))
    page = clean(named)
    assert len(calls(second, "POST", "/generate-name") + calls(named, "POST", "/generate-name")) == 1
    assert page["title"] == rest(gateway, f"/v1/threads/{thread_id}")["name"]

    name = page["title"]

    # 3. Reload: the thread id comes back from localStorage, the history and name from the gateway.
    reloaded = browser.step("reload", until={"text": ["Second answer, same thread.", name]},
                            screenshot=str(shots / "04-reloaded.png"))
    page = clean(reloaded)
    assert page["threadId"] == thread_id and page["title"] == name
    assert calls(reloaded, "GET", f"/v1/threads/{thread_id}/messages")
    assert [m["role"] for m in page["messages"]] == ["user", "assistant", "user", "assistant"]
    assert "Hi gateway, are you there?" in page["messages"][0]["text"]
    assert "Second answer, same thread." in page["messages"][3]["text"]

    # 4. A new message after the reload goes to the same thread, with the history and the last
    #    run id (previousRunId) React read back from the gateway.
    last_run = rest(gateway, f"/v1/threads/{thread_id}")["lastCompletedRunId"]
    scripted_model.enqueue(stream_turn({"content": "Still the same thread after a reload."}))
    after = browser.step("send", text="Did you survive the reload?",
                         until={"text": "Still the same thread after a reload."},
                         screenshot=str(shots / "05-after-reload.png"))
    page = clean(after)
    assert page["threadId"] == thread_id
    (run_call,) = calls(after, "POST", f"/v1/threads/{thread_id}/runs")
    assert json.loads(run_call["body"])["previousRunId"] == last_run
    model_saw = texts(streaming_requests(scripted_model)[-1]["messages"])
    for said in ["Hi gateway, are you there?", "Tell me more.", "Did you survive the reload?"]:
        assert ("user", said) in model_saw
    assert ("assistant", "Second answer, same thread.") in model_saw
    assert len(page["messages"]) == 6
    assert page["title"] == name and not calls(after, "POST", "/generate-name")


STOCKS = {"title": "Today's quotes",
          "stocks": [{"symbol": "ACME", "price": 12.5, "changePercent": 1.25},
                     {"symbol": "GLOBEX", "price": 98.1, "changePercent": -0.4}]}


def test_component_renders_with_props_and_its_state_is_saved_on_the_server(
        browser: Browser, gateway: GatewayServer, scripted_model: ScriptedModel, shots: Path
) -> None:
    args = json.dumps(STOCKS)
    cut = len(args) // 2
    scripted_model.enqueue(stream_turn(
        {"content": "Here are the prices."},
        {"tool_call": {"index": 0, "id": "call_table", "name": "show_component_StockTable",
                       "arguments": args[:cut]}},
        {"tool_call": {"index": 0, "arguments": args[cut:]}},
    ))
    clean(browser.step("open"))
    shown = browser.step("send", text="Show me ACME and GLOBEX",
                         until={"text": "Not watching any stock"},
                         screenshot=str(shots / "10-component.png"))
    page = clean(shown)
    offered = [t["function"]["name"] for t in streaming_requests(scripted_model)[-1]["tools"]]
    assert "show_component_StockTable" in offered
    (table,) = page["components"]
    assert table["name"] == "StockTable" and table["title"] == "Today's quotes"
    assert [r["symbol"] for r in table["rows"]] == ["ACME", "GLOBEX"]
    assert "$12.50" in table["rows"][0]["text"] and "+1.25%" in table["rows"][0]["text"]
    assert "-0.40%" in table["rows"][1]["text"]
    thread_id = page["threadId"]

    # The user picks a row: useTamboComponentState saves it on the gateway.
    picked = browser.step("click", selector='[data-symbol="GLOBEX"] button',
                          until={"text": "Watching GLOBEX", "absent": "saving",
                                 "response": "/state"},
                          screenshot=str(shots / "11-component-state.png"))
    page = clean(picked)
    (update,) = [r for r in picked["requests"] if r["path"].endswith("/state")]
    assert update["method"] == "POST" and update["path"].startswith(
        f"/v1/threads/{thread_id}/components/")
    assert json.loads(update["body"])["state"] == {"selectedSymbol": "GLOBEX"}
    stored = [block for message in rest(gateway, f"/v1/threads/{thread_id}/messages")["messages"]
              for block in message["content"] if block["type"] == "component"]
    assert len(stored) == 1
    assert stored[0]["props"] == STOCKS
    assert stored[0]["state"] == {"selectedSymbol": "GLOBEX"}

    # After a reload the table comes back from the gateway with the user's pick.
    reloaded = browser.step("reload", until={"text": "Watching GLOBEX"},
                            screenshot=str(shots / "12-component-reloaded.png"))
    page = clean(reloaded)
    (table,) = page["components"]
    assert [r["selected"] for r in table["rows"]] == [False, True]


def test_client_tool_runs_in_the_browser_and_its_result_reaches_the_model(
        browser: Browser, gateway: GatewayServer, scripted_model: ScriptedModel, shots: Path
) -> None:
    scripted_model.enqueue(
        stream_turn({"tool_call": {"index": 0, "id": "call_time", "name": "get_local_time",
                                   "arguments": "{}"}}),
        stream_turn({"content": "Your time zone is Asia/Tokyo."}),
    )
    clean(browser.step("open", timezoneId="Asia/Tokyo"))
    result = browser.step("send", text="What time is it for me?",
                          until={"text": "Your time zone is Asia/Tokyo."},
                          screenshot=str(shots / "20-client-tool.png"))
    page = clean(result)
    assert [t["name"] for t in page["tools"]] == ["get_local_time"]
    assert "done" in page["tools"][0]["text"]
    (shown_result,) = [m["text"] for m in page["messages"] if m["role"] == "tool-results"]
    assert "Asia/Tokyo" in shown_result

    # The browser paused on awaiting_input, ran the tool and sent the result back.
    first, continuation = calls(result, "POST", "/runs")
    thread_id = page["threadId"]
    assert first["path"] == "/v1/threads/runs"
    assert continuation["path"] == f"/v1/threads/{thread_id}/runs"
    (tool_result,) = json.loads(continuation["body"])["message"]["content"]
    assert tool_result["type"] == "tool_result" and tool_result["toolUseId"] == "call_time"

    # The model got the browser's answer: the time zone only the browser knows.
    requests = streaming_requests(scripted_model)
    assert len(requests) == 2
    assert "get_local_time" in [t["function"]["name"] for t in requests[0]["tools"]]
    (tool_message,) = [m for m in requests[1]["messages"] if m["role"] == "tool"]
    assert tool_message["tool_call_id"] == "call_time"
    assert json.loads(tool_message["content"])["timeZone"] == "Asia/Tokyo"


def test_a_tool_call_is_labelled_with_the_models_status_messages(
        browser: Browser, gateway: GatewayServer, scripted_model: ScriptedModel, shots: Path
) -> None:
    """Issue 44: every tool's schema carries Tambo's status-message parameters, as on the real
    server, and `@tambo-ai/react` labels the call with what the model wrote in them."""
    scripted_model.enqueue(
        stream_turn({"tool_call": {"index": 0, "id": "call_time", "name": "get_local_time",
                                   "arguments": json.dumps({
                                       "_tambo_statusMessage": "Checking your clock",
                                       "_tambo_completionStatusMessage": "Checked your clock"})}}),
        stream_turn({"content": "It is noon."}),
    )
    clean(browser.step("open", timezoneId="Asia/Tokyo"))
    page = clean(browser.step("send", text="What time is it?", until={"text": "It is noon."},
                              screenshot=str(shots / "21-tool-label.png")))
    assert "Checked your clock" in page["tools"][0]["text"]
    first = streaming_requests(scripted_model)[0]
    (tool,) = [t for t in first["tools"] if t["function"]["name"] == "get_local_time"]
    assert {"_tambo_statusMessage", "_tambo_completionStatusMessage"} <= set(
        tool["function"]["parameters"]["required"])


def test_follow_up_suggestions_fill_the_input_and_are_sent(
        browser: Browser, gateway: GatewayServer, scripted_model: ScriptedModel, shots: Path
) -> None:
    scripted_model.enqueue(stream_turn({"content": "ACME is up 1.25% today."}))
    clean(browser.step("open"))
    page = clean(browser.step("send", text="How is ACME doing?",
                              until={"text": "ACME is up 1.25% today."}))
    thread_id = page["threadId"]

    # The button asks the gateway for suggestions on the latest answer (a non-streamed model call).
    ideas = [{"title": "Compare with GLOBEX", "detailedSuggestion": "Compare ACME with GLOBEX"},
             {"title": "Show a table", "detailedSuggestion": "Show ACME and GLOBEX in a table"}]
    scripted_model.enqueue({"steps": [{"content": json.dumps(ideas)}], "stream": False})
    suggested = browser.step("click", selector='[data-testid="suggestions"] button.link',
                             until={"text": ["Compare with GLOBEX", "Show a table"]},
                             screenshot=str(shots / "30-suggestions.png"))
    page = clean(suggested)
    (create,) = calls(suggested, "POST", "/suggestions")
    answer_id = rest(gateway, f"/v1/threads/{thread_id}/messages")["messages"][-1]["id"]
    assert create["path"] == f"/v1/threads/{thread_id}/messages/{answer_id}/suggestions"
    assert [s["title"] for s in page["suggestions"]] == ["Compare with GLOBEX", "Show a table"]

    # Picking one fills the input; sending it is an ordinary message on the same thread.
    picked = clean(browser.step("click", selector='[data-testid="suggestion"] >> nth=0',
                                until={"input": "Compare ACME with GLOBEX"}))
    scripted_model.enqueue(stream_turn({"content": "GLOBEX is down 0.4%."}))
    page = clean(browser.step("send", text=picked["input"],
                              until={"text": "GLOBEX is down 0.4%."},
                              screenshot=str(shots / "31-suggestion-sent.png")))
    assert page["threadId"] == thread_id
    assert ("user", "Compare ACME with GLOBEX") in texts(
        streaming_requests(scripted_model)[-1]["messages"])


def test_stop_cancels_the_run_and_the_thread_goes_on(
        browser: Browser, gateway: GatewayServer, scripted_model: ScriptedModel, shots: Path
) -> None:
    # A long answer (400 tokens, 20 s): the user stops it after the first few tokens.
    scripted_model.enqueue(stream_turn({"slow": {"count": 400, "interval": 0.05}}))
    clean(browser.step("open"))
    clean(browser.step("send", text="Write me a very long story.",
                       until={"text": "t3 ", "idle": False}))
    stopped = browser.step("click", selector='[data-testid="stop"]',
                           until={"text": "stopped", "response": "/runs/"},
                           screenshot=str(shots / "40-stopped.png"))
    page = clean(stopped)
    thread_id = page["threadId"]
    (cancel,) = calls(stopped, "DELETE", "")
    assert cancel["path"].startswith(f"/v1/threads/{thread_id}/runs/") and cancel["status"] == 200
    assert "t400" not in page["messages"][-1]["text"]
    assert scripted_model.disconnects, "the gateway kept reading the model after the cancel"
    stored = rest(gateway, f"/v1/threads/{thread_id}/messages")["messages"]
    partial = " ".join(b["text"] for b in stored[-1]["content"] if b["type"] == "text")
    assert stored[-1]["role"] == "assistant" and partial.startswith("t1 t2 t3 ")

    # The thread is free again: the next message runs normally.
    scripted_model.enqueue(stream_turn({"content": "A short one, then."}))
    page = clean(browser.step("send", text="OK, a short one.", until={"text": "A short one, then."},
                              screenshot=str(shots / "41-after-stop.png")))
    assert page["threadId"] == thread_id and "stopped" not in page["status"]
