"""The CopilotKit example (examples/copilotkit) against a real gateway, in Chromium.

Three processes as a user runs them: the gateway (with the example's `get_weather` server tool),
the example's CopilotKit runtime (`node server.mjs`, `@copilotkit/runtime` with the gateway's
AG-UI 1.0 endpoint as an `HttpAgent`), and the page built with Vite (`@copilotkit/react-core`),
served from a plain static host. Each test types into CopilotChat like a person and checks what
the page shows, what the gateway stored (REST) and what the model was sent. Every step also
checks that the page saw no failed request and no console error. Screenshots go to
test-artifacts/e2e/copilotkit/.

The model is the scripted OpenAI-compatible server, so a frontend action's call is exact.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import artifacts_dir, scripted_env
from tests.support.gateway_server import GatewayServer, free_port
from tests.support.run_stream import wait_for
from tests.support.scripted_model import ScriptedModel
from tests.support.sse import run_events

from .harness import ROOT, Browser, npm_ci, require_tools, static_server, vite_build
from .harness import clean as clean_page

pytestmark = pytest.mark.timeout(240)

EXAMPLE = ROOT / "examples" / "copilotkit"
API_KEY = "copilotkit-e2e"
USER_KEY = "copilotkit-user"


@pytest.fixture(scope="module")
def shots() -> Path:
    """Its own folder under test-artifacts/e2e/ (the React test clears the PNGs of that one)."""
    path = artifacts_dir() / "e2e" / "copilotkit"
    path.mkdir(parents=True, exist_ok=True)
    for old in path.glob("*.png"):
        old.unlink()
    return path


@pytest.fixture(scope="module")
def tools_gateway(scripted_model: ScriptedModel, tmp_path_factory: pytest.TempPathFactory
                  ) -> Iterator[GatewayServer]:
    """A gateway as the example's README starts it: with its server tool module."""
    require_tools()
    server = GatewayServer(tmp_path_factory.mktemp("copilotkit-gateway"), scripted_env(
        scripted_model, GATEWAY_TOOLS=str(EXAMPLE / "gateway_tools.py")))
    server.start()
    yield server
    server.stop()


class Runtime:
    """`npm run server`: the CopilotKit runtime, configured by its documented variables, on a
    port of its own that a restart keeps (the page's built-in runtime URL)."""

    def __init__(self, gateway: GatewayServer, log_path: Path) -> None:
        self.port, self.log_path = free_port(), log_path
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {**os.environ, "GATEWAY_URL": gateway.url, "GATEWAY_API_KEY": API_KEY,
                    "GATEWAY_USER_KEY": USER_KEY, "PORT": str(self.port),
                    "COPILOTKIT_TELEMETRY_DISABLED": "true"}  # the test machine has no network
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with open(self.log_path, "a") as log:
            self.process = subprocess.Popen(["node", "server.mjs"], cwd=EXAMPLE, env=self.env,
                                            stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the CopilotKit runtime did not start:\n"
                                   f"{self.log_path.read_text()}")
            try:
                if httpx.get(f"{self.url}/api/copilotkit/info", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.2)

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@pytest.fixture(scope="module")
def runtime(tools_gateway: GatewayServer, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[Runtime]:
    npm_ci(EXAMPLE)
    process = Runtime(tools_gateway, tmp_path_factory.mktemp("copilotkit-runtime") / "runtime.log")
    process.start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def runtime_url(runtime: Runtime) -> str:
    return runtime.url


@pytest.fixture(scope="module")
def app_url(runtime_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    dist = vite_build(EXAMPLE, tmp_path_factory.mktemp("copilotkit-dist"),
                      {"VITE_RUNTIME_URL": f"{runtime_url}/api/copilotkit"})
    with static_server(dist) as url:
        yield url


@pytest.fixture(scope="module")
def browser(app_url: str, runtime_url: str, shots: Path) -> Iterator[Browser]:
    driver = Browser(app_url, runtime_url, shots / "browser.log",
                     script="copilotkit.mjs")
    yield driver
    driver.close()


def stream_turn(*steps: dict[str, Any]) -> dict[str, Any]:
    return {"steps": list(steps), "stream": True}


def runs(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The RunAgentInput bodies the page posted to the runtime in this step."""
    return [json.loads(r["body"]) for r in result["requests"]
            if r["method"] == "POST" and r["path"] == "/api/copilotkit/agent/default/run"]


def chat(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(role, text) of what the model was sent, without the system prompt."""
    return [(m["role"], m.get("content") or "") for m in messages if m["role"] != "system"]


def stored(gateway: GatewayServer, thread_id: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The thread CopilotKit calls `thread_id` and its messages as the gateway keeps them (the
    user key the runtime sent): its gateway id is the `X-Thread-Id` of an AG-UI connect."""
    return stored_as(gateway, thread_id, USER_KEY)


def stored_as(gateway: GatewayServer, thread_id: str, user_key: str
              ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """`stored`, for the user `user_key`."""
    with httpx.Client(base_url=gateway.url, params={"userKey": user_key}, timeout=10,
                      headers={"x-api-key": API_KEY}) as http:
        with http.stream("POST", "/v1/agui/agents/default/connect", json={
                "threadId": thread_id, "runId": "probe", "messages": [], "tools": [],
                "context": [], "state": {}, "forwardedProps": {}}) as connected:
            thread_id = connected.headers["x-thread-id"]
        thread = http.get(f"/v1/threads/{thread_id}")
        messages = http.get(f"/v1/threads/{thread_id}/messages")
    assert thread.status_code == 200, thread.text
    return thread.json(), messages.json()["messages"]


def test_answer_streams_in_and_the_thread_continues(
        browser: Browser, tools_gateway: GatewayServer, scripted_model: ScriptedModel,
        shots: Path) -> None:
    scripted_model.enqueue(stream_turn(
        {"content": "Hello from the "},
        {"content": "scripted model, "},
        {"delay": 2.0},
        {"content": "streamed through CopilotKit."},
    ))
    clean(browser.step("open"))
    sent = browser.step(
        "send", text="Hi gateway, are you there?",
        until={"text": "scripted model,", "absent": "streamed through CopilotKit.", "idle": False},
        screenshot=str(shots / "01-streaming.png"))
    assert clean(sent)["status"] == "Running…"
    done = browser.step("wait", until={"text": "streamed through CopilotKit."},
                        screenshot=str(shots / "02-answer.png"))
    page = clean(done)
    assert [m["role"] for m in page["messages"]] == ["user", "assistant"]
    assert page["messages"][1]["text"] == ("Hello from the scripted model, "
                                           "streamed through CopilotKit.")
    thread_id = page["threadId"]
    (first_run,) = runs(sent)
    assert first_run["threadId"] == thread_id

    # The thread CopilotKit named is an ordinary gateway thread, under the runtime's user key.
    _, messages = stored(tools_gateway, thread_id)
    assert [m["role"] for m in messages] == ["user", "assistant"]

    # CopilotKit posts the whole conversation again; the model still sees each turn once.
    scripted_model.enqueue(stream_turn({"content": "Second answer, same thread."}))
    page = clean(browser.step("send", text="Tell me more.",
                              until={"text": "Second answer, same thread."},
                              screenshot=str(shots / "03-follow-up.png")))
    assert page["threadId"] == thread_id and len(page["messages"]) == 4
    assert chat(scripted_model.requests[-1]["messages"]) == [
        ("user", "Hi gateway, are you there?"),
        ("assistant", "Hello from the scripted model, streamed through CopilotKit."),
        ("user", "Tell me more.")]


def test_frontend_action_renders_runs_in_the_browser_and_reaches_the_model(
        browser: Browser, tools_gateway: GatewayServer, scripted_model: ScriptedModel,
        shots: Path) -> None:
    scripted_model.enqueue(
        stream_turn({"content": "Changing it now."},
                    {"tool_call": {"index": 0, "id": "call_theme", "name": "set_theme_color",
                                   "arguments": '{"color": '}},
                    {"tool_call": {"index": 0, "arguments": '"#0ea5e9"}'}}),
        stream_turn({"content": "Done: the page is sky blue now."}),
    )
    clean(browser.step("open"))
    result = browser.step("send", text="Make the page sky blue.",
                          until={"text": "Done: the page is sky blue now."},
                          screenshot=str(shots / "10-frontend-action.png"))
    page = clean(result)
    assert page["themeCards"] == [{"status": "complete",
                                   "text": "The accent colour is now #0ea5e9."}]
    assert page["accent"] == "#0ea5e9" and page["accentStyle"] == "#0ea5e9"

    # The first run offered the action and paused on its call; the browser ran the handler and
    # posted its result as a `tool` message on the same thread.
    first, continuation = runs(result)
    assert [t["name"] for t in first["tools"]] == ["set_theme_color"]
    assert continuation["threadId"] == first["threadId"] == page["threadId"]
    (answer,) = [m for m in continuation["messages"] if m["role"] == "tool"]
    assert answer["toolCallId"] == "call_theme"

    offered, resumed = scripted_model.requests[-2:]
    action = next(t["function"] for t in offered["tools"]
                  if t["function"]["name"] == "set_theme_color")
    assert action["parameters"]["properties"]["color"]["type"] == "string"
    (tool_message,) = [m for m in resumed["messages"] if m["role"] == "tool"]
    assert tool_message["tool_call_id"] == "call_theme"
    assert tool_message["content"] == "The accent colour is now #0ea5e9."
    thread, _ = stored(tools_gateway, page["threadId"])
    assert thread["pendingToolCallIds"] == []


def test_a_tool_the_gateway_runs_is_shown_with_its_result(
        browser: Browser, tools_gateway: GatewayServer, scripted_model: ScriptedModel,
        shots: Path) -> None:
    scripted_model.enqueue(
        stream_turn({"tool_call": {"index": 0, "id": "call_weather", "name": "get_weather",
                                   "arguments": '{"city": "Paris"}'}}),
        stream_turn({"content": "Windy in Paris today."}),
    )
    clean(browser.step("open"))
    result = browser.step("send", text="What is the weather in Paris?",
                          until={"text": "Windy in Paris today."},
                          screenshot=str(shots / "20-server-tool.png"))
    page = clean(result)
    (card,) = page["weatherCards"]
    assert card["status"] == "complete"
    assert "Paris" in card["text"] and "windy, 11 °C" in card["text"]
    assert page["messages"][-1]["text"].endswith("Windy in Paris today.")

    # One run: the gateway answered its own tool, the browser had nothing to send back.
    (only,) = runs(result)
    assert [t["name"] for t in only["tools"]] == ["set_theme_color"]
    offered, answered = scripted_model.requests[-2:]
    assert "get_weather" in [t["function"]["name"] for t in offered["tools"]]
    (tool_message,) = [m for m in answered["messages"] if m["role"] == "tool"]
    assert json.loads(tool_message["content"]) == {"city": "Paris", "sky": "windy", "celsius": 11}


def test_an_approval_card_the_user_clicks_runs_the_tool_once(
        browser: Browser, tools_gateway: GatewayServer, scripted_model: ScriptedModel,
        shots: Path) -> None:
    """`send_invoice` needs approval: the gateway stops the run before it, CopilotKit's
    `useInterrupt` shows the example's card (the runner opted into interrupts), Approve resumes
    the thread, and the gateway runs the tool exactly once before the model answers; a card
    shown again after a reload, denied, never runs it."""
    scripted_model.enqueue(
        stream_turn({"content": "I will send it once you approve. "},
                    {"tool_call": {"index": 0, "id": "call_invoice", "name": "send_invoice",
                                   "arguments": '{"customer": "Ada", "amount_eur": 120}'}}),
        stream_turn({"content": "Invoice INV-0001 is on its way to Ada."}),
    )
    clean(browser.step("open"))
    asked = browser.step("send", text="Send Ada an invoice for 120 euros.",
                         until={"text": "needs your approval"},
                         screenshot=str(shots / "40-approval-card.png"))
    page = clean(asked)
    assert [one_line(card) for card in page["approvalCards"]] == [
        'send_invoice needs your approval: {"customer":"Ada","amount_eur":120} Approve Deny']
    assert [one_line(card["text"]) for card in page["invoiceCards"]] == [
        "send_invoice Ada, 120 €: waiting for approval"]
    thread, _ = stored(tools_gateway, page["threadId"])
    assert thread["pendingToolCallIds"] == ["call_invoice"]  # paused before the tool ran

    approved = browser.step("click", selector='[data-testid="approve"]',
                            until={"text": "Invoice INV-0001 is on its way to Ada."},
                            screenshot=str(shots / "41-approved.png"))
    done = clean(approved)
    assert done["approvalCards"] == []
    assert [(card["status"], one_line(card["text"])) for card in done["invoiceCards"]] == [
        ("complete", "send_invoice Ada, 120 €: sent as INV-0001")]
    assert done["messages"][-1]["text"].endswith("Invoice INV-0001 is on its way to Ada.")
    (first,) = runs(asked)
    (approval,) = runs(approved)  # one answer, under the interrupted run's id (useInterrupt's way)
    assert approval["runId"] == first["runId"]
    (resume,) = approval["resume"]
    assert resume["status"] == "resolved" and resume["payload"] == {"approved": True}

    # Exactly once: the thread holds one result of the tool, which the model saw.
    thread, messages = stored(tools_gateway, page["threadId"])
    assert thread["pendingToolCallIds"] == [] and thread["runStatus"] == "idle"
    results = [json.loads(block["content"][0]["text"]) for m in messages
               for block in m["content"] if block["type"] == "tool_result"
               and block.get("toolUseId") == "call_invoice"]
    ran = [r for r in results if r.get("sent")]
    assert ran == [{"sent": True, "number": "INV-0001", "customer": "Ada", "amountEur": 120}]
    tool_messages = [m for m in scripted_model.requests[-1]["messages"] if m["role"] == "tool"]
    assert [json.loads(m["content"]) for m in tool_messages
            if m["tool_call_id"] == "call_invoice"] == ran

    # A card still waiting after a reload is shown again (the runner's connect opts in too);
    # Deny: the tool never runs, and the model is told the user said no.
    scripted_model.enqueue(
        stream_turn({"tool_call": {"index": 0, "id": "call_again", "name": "send_invoice",
                                   "arguments": '{"customer": "Ada", "amount_eur": 120}'}}),
        stream_turn({"content": "Understood, no second invoice."}),
    )
    clean(browser.step("send", text="Send her the same invoice again.",
                       until={"text": "needs your approval"}))
    again = clean(reloaded(browser.step("reload", until={"text": "needs your approval"})))
    assert len(again["approvalCards"]) == 1
    denied = clean(browser.step("click", selector='[data-testid="deny"]',
                                until={"text": "Understood, no second invoice."},
                                screenshot=str(shots / "42-denied.png")))
    assert denied["approvalCards"] == []
    (refusal,) = [m["content"] for m in scripted_model.requests[-1]["messages"]
                  if m.get("tool_call_id") == "call_again"]
    assert refusal.startswith("The user denied running send_invoice; it did not run")
    assert [one_line(card["text"]) for card in denied["invoiceCards"]] == [
        "send_invoice Ada, 120 €: sent as INV-0001",
        f"send_invoice Ada, 120 €: not sent ({refusal})"]


def one_line(text: str) -> str:
    """A card's text as one line (its parts are laid out on several)."""
    return " ".join(text.split())


def clean(result: dict[str, Any]) -> dict[str, Any]:
    """`harness.clean` of a step, less the `connect` requests a page (re)load cuts short (see
    `reloaded`): every step of this app may load the page, and CopilotChat connects on load."""
    return clean_page(reloaded(result))


def reloaded(result: dict[str, Any]) -> dict[str, Any]:
    """A step that (re)loads the page, less the `connect` requests cut short on the way: the
    unloaded page's open stream, or the one CopilotChat aborts itself when its effect re-runs
    while the page settles on its thread id; and the unloaded page's thread list read, if it
    was still on its way (the browser reports them as ERR_ABORTED)."""
    cut = [e for e in result["errors"]
           if (e.startswith("request failed: POST ") and "/connect " in e
               or e.startswith("request failed: GET ") and "/api/copilotkit/threads?" in e)
           and e.endswith(" net::ERR_ABORTED")]
    return {**result, "errors": [e for e in result["errors"] if e not in cut]}


def test_a_reloaded_page_shows_the_conversation_after_a_runtime_restart_and_stop_cancels(
        browser: Browser, runtime: Runtime, tools_gateway: GatewayServer,
        scripted_model: ScriptedModel, shots: Path) -> None:
    """The runtime keeps nothing (examples/copilotkit/gateway-runner.mjs): after it restarts,
    a reloaded page loads its thread from the gateway (connect). Stop cancels the gateway's
    run: the model's stream is closed and nothing more is written."""
    scripted_model.enqueue(stream_turn({"content": "Kept by the gateway, not the runtime."}))
    clean(reloaded(browser.step("open")))
    # The page reads its thread list again when a run ends: that read is over (its thread
    # listed) before the runtime goes away, as a person would have seen it before a restart.
    before = clean(browser.step("send", text="Remember this conversation.",
                                until={"text": "Kept by the gateway, not the runtime.",
                                       "listed": True}))
    runtime.stop()
    runtime.start()
    after = clean(reloaded(browser.step(
        "reload", until={"text": ["Remember this conversation.",
                                  "Kept by the gateway, not the runtime."]},
        screenshot=str(shots / "30-reloaded.png"))))
    assert after["threadId"] == before["threadId"]
    assert after["messages"] == before["messages"]

    counting = [{"content": "Counting: "}]
    for i in range(1, 80):
        counting += [{"delay": 0.15}, {"content": f"{i}, "}]
    scripted_model.enqueue(stream_turn(*counting))
    clean(browser.step("send", text="Count slowly.", until={"text": "Counting: 1, 2, 3,", "idle": False}))
    stopped = clean(browser.step("stop", until={"text": "Counting: 1, 2, 3,"},
                                 screenshot=str(shots / "31-stopped.png")))
    assert stopped["status"] == "Ready"

    def cancelled() -> list[dict[str, Any]] | None:
        thread, messages = stored(tools_gateway, before["threadId"])
        if thread["runStatus"] != "idle":
            return None
        with httpx.Client(base_url=tools_gateway.url, params={"userKey": USER_KEY}, timeout=10,
                          headers={"x-api-key": API_KEY}) as http:
            last = http.get(f"/v1/threads/{thread['id']}/runs/{thread['lastCompletedRunId']}",
                            headers={"accept": "application/json"}).json()
        assert last["status"] == "cancelled", last
        return messages

    messages = wait_for(cancelled, what="the stopped run to be cancelled")
    written = messages[-1]["content"][0]["text"]
    assert written.startswith("Counting: ") and "79," not in written
    # Once the run is over, what the gateway holds is final: a reload shows the same text.
    again = clean(reloaded(browser.step("reload", until={"text": ["Count slowly.",
                                                                  written.strip()]})))
    assert again["messages"][-1]["text"] == written.strip()


# -- one runtime, many users ------------------------------------------------------------------


@pytest.fixture
def second_browser(app_url: str, runtime_url: str, shots: Path) -> Iterator[Browser]:
    """A second Chromium, for a second user of the same runtime at the same time."""
    driver = Browser(app_url, runtime_url, shots / "browser-2.log", script="copilotkit.mjs")
    yield driver
    driver.close()


def as_user(runtime: Runtime, user: str) -> httpx.Client:
    """The runtime's HTTP API as the page of `user` calls it (the example's `x-demo-user`)."""
    return httpx.Client(base_url=f"{runtime.url}/api/copilotkit", timeout=30,
                        headers={"x-demo-user": user})


def agui_body(thread_id: str, text: str = "") -> dict[str, Any]:
    messages = [{"id": f"m-{time.monotonic_ns()}", "role": "user", "content": text}] if text else []
    return {"threadId": thread_id, "runId": f"r-{time.monotonic_ns()}", "messages": messages,
            "tools": [], "context": [], "state": {}, "forwardedProps": {}}


def test_two_users_of_one_runtime_each_see_only_their_own_threads(
        browser: Browser, second_browser: Browser, runtime: Runtime,
        tools_gateway: GatewayServer, scripted_model: ScriptedModel, shots: Path) -> None:
    """The runtime takes the user from each request (the page's `x-demo-user`, server.mjs's
    `userOf`), so the gateway files each user's threads under their own key; CopilotKit's
    `useThreads` lists them (GatewayRunner's `listThreads`, from `GET /v1/agui/threads`), and a
    thread of another user is refused through the runtime. `/info` carries the gateway agent's
    capabilities (GatewayRunner's agent, from `GET /v1/agui/agents/default/capabilities`)."""
    alice, bob = browser, second_browser
    scripted_model.enqueue(stream_turn({"content": "Hello Alice."}),
                           stream_turn({"content": "Hello Bob."}),
                           stream_turn({"content": "A second thread, Alice."}))
    opened = clean(alice.step("open", user="alice"))
    assert opened["user"] == "alice" and opened["threads"] == []
    clean(bob.step("open", user="bob"))
    first = clean(alice.step("send", text="I am Alice.", until={"text": "Hello Alice."}))
    alices = first["threadId"]
    seen = clean(alice.step("wait", until={"threads": [alices]},
                            screenshot=str(shots / "50-alice-threads.png")))
    assert seen["threads"] == [{"threadId": alices, "current": True}]
    bobs = clean(bob.step("send", text="I am Bob.", until={"text": "Hello Bob."}))["threadId"]
    assert clean(bob.step("wait", until={"threads": [bobs]},
                          screenshot=str(shots / "51-bob-threads.png")))["threads"] == [
        {"threadId": bobs, "current": True}]
    # Alice's page, loaded again, lists hers only; a new thread joins it, and picking the first
    # loads that conversation back from the gateway.
    assert clean(reloaded(alice.step("reload", until={"threads": [alices]})))["threads"] == [
        {"threadId": alices, "current": True}]
    clean(alice.step("click", selector='[data-testid="new-thread"]'))
    second = clean(alice.step("send", text="Another topic.",
                              until={"text": "A second thread, Alice."}))
    assert second["threadId"] not in (alices, bobs)
    both = clean(alice.step("wait", until={"threads": [alices, second["threadId"]]}))
    assert [t["threadId"] for t in both["threads"]] == [second["threadId"], alices]
    back = clean(reloaded(alice.step(
        "click", selector=f'[data-thread-id="{alices}"]',
        until={"text": "Hello Alice.", "absent": "A second thread, Alice."},
        screenshot=str(shots / "52-alice-picks-her-first-thread.png"))))
    assert back["threadId"] == alices
    assert [m["text"] for m in back["messages"]] == ["I am Alice.", "Hello Alice."]

    # Through the runtime, Bob gets nothing of Alice's thread: an empty thread on connect and
    # in the runtime's thread endpoints, and his run on her thread id is refused by the gateway
    # (404) before the model runs.
    asked = len(scripted_model.requests)
    with as_user(runtime, "bob") as as_bob, as_user(runtime, "alice") as as_alice:
        connected = run_events(as_bob, "POST", "/agent/default/connect", json=agui_body(alices))
        (snapshot,) = [e.data for e in connected if e.type == "MESSAGES_SNAPSHOT"]
        assert snapshot["messages"] == []
        assert as_bob.get(f"/threads/{alices}/messages").json() == {"messages": []}
        assert [m["content"] for m in as_alice.get(f"/threads/{alices}/messages")
                .json()["messages"]] == ["I am Alice.", "Hello Alice."]
        ran = run_events(as_bob, "POST", "/agent/default/run",
                         json=agui_body(alices, "Show me Alice's thread."))
        assert not [e for e in ran if e.type.startswith("TEXT_MESSAGE")]
        listed = {user: [t["id"] for t in client.get("/threads", params={
            "agentId": "default"}).json()["threads"]]
            for user, client in (("alice", as_alice), ("bob", as_bob))}
        # A page at a time, as `fetchMoreThreads` reads it: the gateway's cursor passes through.
        one = as_alice.get("/threads", params={"agentId": "default", "limit": 1}).json()
        more = as_alice.get("/threads", params={"agentId": "default", "limit": 1,
                                                "cursor": one["nextCursor"]}).json()
        info = as_alice.get("/info").json()
    assert len(scripted_model.requests) == asked
    assert listed == {"alice": [second["threadId"], alices], "bob": [bobs]}
    assert [t["id"] for t in one["threads"] + more["threads"]] == listed["alice"]
    assert more["nextCursor"] is None

    # The gateway filed each thread under its user's key; Alice's holds only her turn.
    with httpx.Client(base_url=tools_gateway.url, timeout=10,
                      headers={"x-api-key": API_KEY}) as http:
        owners = {user: len(http.get("/v1/threads", params={"userKey": user})
                            .json()["threads"]) for user in ("alice", "bob")}
        names = {user: [t["threadId"] for t in http.get("/v1/agui/threads", params={
            "userKey": user}).json()["threads"]] for user in ("alice", "bob", USER_KEY)}
    assert owners == {"alice": 2, "bob": 1}
    assert names["alice"] == [second["threadId"], alices] and names["bob"] == [bobs]
    assert alices not in names[USER_KEY] and bobs not in names[USER_KEY]
    _, messages = stored_as(tools_gateway, alices, "alice")
    assert [m["content"][0]["text"] for m in messages] == ["I am Alice.", "Hello Alice."]

    # What the agent can do, as the gateway declares it, reaches the page (`useCapabilities`).
    assert info["threadEndpoints"]["list"] is True
    human = info["agents"]["default"]["capabilities"]["humanInTheLoop"]
    assert human == {"supported": True, "interrupts": True, "approvals": True,
                     "approveWithEdits": True}
    assert back["capabilities"] == "interrupts, approvals with edits, kept state, branches"
