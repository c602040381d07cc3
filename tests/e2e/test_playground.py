"""The playground at `/`, in Chromium, against a real gateway with API keys configured.

One developer's session, step by step, as the issue describes it: type the API key, start a
thread, send a message and watch the answer stream in both panes (rendered and raw events), see
a component render and patch its state, pick a thread from the list, answer a client tool call
by hand, cancel a run, and reconnect from an event id. Each step checks what the page shows
against what the gateway stored (REST) and what the model was sent. Screenshots go to
test-artifacts/playground/.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import artifacts_dir, scripted_env
from tests.support.approval_tools import times_sent
from tests.support.gateway_server import GatewayServer
from tests.support.run_stream import slow_turn
from tests.support.scripted_model import ScriptedModel

from .harness import Browser, require_tools

pytestmark = pytest.mark.timeout(300)

API_KEY = "playground-key"
USER_KEY = "playground"  # the page's default userKey
OTHER_MODEL = "openai/scripted-large"  # GATEWAY_MODELS: the model picker offers it
TOOLS = Path(__file__).resolve().parents[1] / "support" / "approval_tools.py"


@pytest.fixture(scope="module")
def keyed_gateway(scripted_model: ScriptedModel, tmp_path_factory: pytest.TempPathFactory
                  ) -> Iterator[GatewayServer]:
    require_tools()
    server = GatewayServer(tmp_path_factory.mktemp("playground-gateway"),
                           scripted_env(scripted_model, GATEWAY_API_KEYS=f"{API_KEY}:pg",
                                        GATEWAY_MODELS=OTHER_MODEL, GATEWAY_TOOLS=str(TOOLS)))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def shots() -> Path:
    path = artifacts_dir() / "playground"
    path.mkdir(parents=True, exist_ok=True)
    for old in path.glob("*.png"):
        old.unlink()
    return path


@pytest.fixture
def page(keyed_gateway: GatewayServer, shots: Path) -> Iterator[Browser]:
    driver = Browser(f"{keyed_gateway.url}/", keyed_gateway.url, shots / "browser.log",
                     script="playground.mjs")
    yield driver
    driver.close()


def stream_turn(*steps: dict[str, Any]) -> dict[str, Any]:
    return {"steps": list(steps), "stream": True}


def shown(result: dict[str, Any], origin: str, expected_error: str = "") -> dict[str, Any]:
    """The page snapshot, once we know the page made no request elsewhere and logged no error
    (but the one the step expects)."""
    foreign = [r["url"] for r in result["requests"] if not r["url"].startswith(origin + "/")]
    assert not foreign, f"the playground reached outside the gateway: {foreign}"
    errors = [e for e in result["errors"] if not (expected_error and expected_error in e)]
    assert not errors, f"browser errors: {errors}"
    return result["page"]


def stepper(page: Browser, origin: str, shots: Path) -> Callable[..., dict[str, Any]]:
    """`step(action, name?, expected_error?, **args)`: one page action, its snapshot checked by
    `shown`; with `name`, a screenshot of that name."""
    def step(action: str, name: str | None = None, expected_error: str = "", **args: Any
             ) -> dict[str, Any]:
        if name:
            args["screenshot"] = str(shots / f"{name}.png")
        return shown(page.step(action, **args), origin, expected_error)
    return step


def event_types(snapshot: dict[str, Any]) -> list[tuple[str, str]]:
    """(id, type) of each event of the raw events pane, in order; a row that collapses a run
    of content fragments (ids first-last) stands for each of them."""
    found = []
    for row in snapshot["events"]:
        if row["kind"] != "event":
            continue
        words = row["text"].split(" ")
        kind = words[1] if words[1] != "CUSTOM" else " ".join(words[1:3])
        first, last = row["id"], row.get("lastId") or row["id"]
        ids = range(int(first), int(last) + 1) if first else [first]
        found += [(str(i), kind) for i in ids]
    return found


def after_note(snapshot: dict[str, Any], note: str = "reconnected after id 3"
               ) -> list[dict[str, Any]]:
    """The rows of the raw events pane from its last `note` on."""
    rows = snapshot["events"]
    notes = [n for n, row in enumerate(rows) if note in row["text"]]
    return rows[notes[-1]:]


def test_a_developers_first_session(page: Browser, keyed_gateway: GatewayServer,
                                    scripted_model: ScriptedModel, shots: Path) -> None:
    origin = keyed_gateway.url
    rest = httpx.Client(base_url=origin, headers={"x-api-key": API_KEY}, timeout=30,
                        params={"userKey": USER_KEY})

    step = stepper(page, origin, shots)

    # Without a key the gateway refuses, and the page says so in one line.
    first = step("open", "01-no-key", expected_error="status of 401", until={"selector": "#error", "text": "UNAUTHORIZED"})
    assert first["error"].startswith("401 UNAUTHORIZED")
    assert first["threads"] == []

    # With the key: an empty thread list, no error.
    keyed = step("fill", selector="#api-key", value=API_KEY)
    assert not keyed["error"]
    # Kept for this tab only: nothing a later visitor of the browser profile could read.
    assert keyed["keyStored"] == {"local": None, "session": API_KEY}

    # A new thread and a message: reasoning, then text that pauses half-way, so the page is
    # seen mid-stream, with the partial answer in both panes and no end of run yet.
    scripted_model.enqueue(stream_turn({"reasoning": "The user says hi."},
                                       {"content": "Hello"}, {"delay": 2.0},
                                       {"content": " from the playground."}))
    step("fill", selector="#message", value="hi there")
    mid = step("click", "02-streaming", selector="#send",
               until={"selector": "#conversation", "text": "Hello"})
    assert ("TEXT_MESSAGE_CONTENT" in [t for _, t in event_types(mid)])
    assert "RUN_FINISHED" not in [t for _, t in event_types(mid)], "the run ended too early"
    assert mid["status"] == "streaming"
    done = step("wait", "03-answer", until={"selector": "#events", "text": "RUN_FINISHED"})
    thread_id = done["selectedThread"]
    assert thread_id and done["threads"] == [thread_id]
    assert done["messages"][0]["role"] == "user" and done["messages"][0]["text"] == "hi there"
    assert done["messages"][1]["text"] == "Hello from the playground."
    assert done["messages"][1]["reasoning"] == "The user says hi."
    ids = [int(i) for i, _ in event_types(done)]
    assert ids == list(range(1, len(ids) + 1)), "event ids are the positions 1..n"
    types = [t for _, t in event_types(done)]
    assert types[0] == "RUN_STARTED" and types[-1] == "RUN_FINISHED"
    assert "THINKING_TEXT_MESSAGE_CONTENT" in types
    stored = rest.get(f"/v1/threads/{thread_id}").json()
    assert [m["role"] for m in stored["messages"]] == ["user", "assistant"]
    assert stored["messages"][1]["content"][0]["text"] == "Hello from the playground."

    # Another new thread: a component, streamed props, then its state patched by hand.
    step("click", selector="#new-thread", until={"selector": "#thread-title", "text": "New thread"})
    arguments = json.dumps({"city": "Paris", "temperature": 21})
    scripted_model.enqueue(stream_turn(
        {"content": "Here is the card."},
        {"tool_call": {"index": 0, "id": "call_card", "name": "show_component_WeatherCard",
                       "arguments": arguments[:12]}},
        {"tool_call": {"index": 0, "arguments": arguments[12:]}}))
    step("fill", selector="#message", value="show the weather card")
    card = step("click", "04-component", selector="#send",
                until={"selector": "#events", "text": "RUN_FINISHED"})
    second_thread = card["selectedThread"]
    assert second_thread != thread_id
    [component] = card["components"]
    assert component["title"] == "component: WeatherCard"
    assert component["props"] == {"city": "Paris", "temperature": 21}
    assert "CUSTOM tambo.component.props_delta" in [t for _, t in event_types(card)]
    step("fill", selector=".component textarea",
         value=json.dumps([{"op": "add", "path": "/pinned", "value": True}]))
    patched = step("click", "05-state-patched", selector=".component button",
                   until={"selector": ".component .state", "text": '"pinned": true'})
    assert patched["components"][0]["state"] == {"pinned": True}
    state = rest.get(f"/v1/threads/{second_thread}/components/{component['id']}/state").json()
    assert state == {"componentId": component["id"], "state": {"pinned": True}, "revision": 1}

    # Pick the first thread again from the list: its conversation comes back.
    back = step("click", "06-picked", selector=f'#threads li[data-thread-id="{thread_id}"]',
                until={"selector": "#conversation", "text": "Hello from the playground."})
    assert back["selectedThread"] == thread_id
    assert [m["text"] for m in back["messages"]] == ["hi there", "Hello from the playground."]

    # A client tool call, answered by hand: the run pauses, the result continues it.
    scripted_model.enqueue(
        stream_turn({"tool_call": {"index": 0, "id": "call_time", "name": "get_local_time",
                                   "arguments": '{"timezone": "UTC"}'}}),
        stream_turn({"content": "It is noon where you are."}))
    step("fill", selector="#message", value="what is the local time?")
    paused = step("click", "07-tool-pending", selector="#send",
                  until={"selector": "#pending-calls textarea", "count": 1})
    assert paused["pending"] == ["call_time"]
    assert "CUSTOM tambo.run.awaiting_input" in [t for _, t in event_types(paused)]
    step("fill", selector="#pending-calls textarea", value=json.dumps({"time": "12:00"}))
    answered = step("click", "08-tool-answered", selector="#pending button",
                    until={"selector": "#conversation", "text": "It is noon where you are."})
    assert answered["pending"] == []
    sent = [r for r in scripted_model.requests if r.get("stream")][-1]["messages"]
    result = next(m for m in sent if m.get("tool_call_id") == "call_time")
    assert "12:00" in json.dumps(result["content"])

    # Cancel a long run from the page, streaming at 100 tokens a second (real models send
    # 50-150): the page keeps up, so the click is handled while the run still streams.
    scripted_model.enqueue(stream_turn(*slow_turn(400, 0.01)))
    step("fill", selector="#message", value="count slowly")
    step("click", selector="#send", until={"selector": "#conversation", "text": "t5 "})
    cancelled = step("click", "09-cancelled", selector="#cancel",
                     until={"selector": "#events", "text": "CANCELLED"})
    run_id = cancelled["runId"]
    run = rest.get(f"/v1/threads/{thread_id}/runs/{run_id}",
                   headers={"accept": "application/json"}).json()
    assert run["status"] == "cancelled"
    assert any(note["text"].endswith("cancelled") or "DELETE run" in note["text"]
               for note in cancelled["events"] if note["kind"] == "note")
    all_ids = [int(i) for i, _ in event_types(cancelled)]
    last = all_ids[-1]

    # Reconnect from an id: the events after it, exactly, and nothing before.
    step("fill", selector="#after-id", value="3")
    replay = step("click", "10-reconnected", selector="#reconnect",
                  until={"selector": "#events", "text": "reconnected after id 3"})
    # The pane still shows the first stream's end: wait for this stream's own.
    deadline = time.monotonic() + 30
    while not any("stream closed" in row["text"] for row in after_note(replay)):
        assert time.monotonic() < deadline, "the reconnected stream did not end"
        replay = step("wait", until={"selector": "#events", "text": "stream closed"})
    replayed = event_types({"events": after_note(replay)})
    assert [int(i) for i, _ in replayed] == list(range(4, last + 1))
    assert replayed[-1][1] == "RUN_ERROR"
    assert replay["runId"] == run_id
    rest.close()


def test_thread_names_the_model_picker_the_run_list_and_copy_as_curl(
        page: Browser, keyed_gateway: GatewayServer, scripted_model: ScriptedModel,
        shots: Path) -> None:
    origin = keyed_gateway.url
    user = "namer"
    rest = httpx.Client(base_url=origin, headers={"x-api-key": API_KEY}, timeout=30,
                        params={"userKey": user})

    step = stepper(page, origin, shots)

    step("open", expected_error="status of 401", until={"selector": "#error", "text": "UNAUTHORIZED"})
    step("fill", selector="#api-key", value=API_KEY)
    keyed = step("fill", selector="#user-key", value=user,
                 until={"selector": "#model option", "count": 3})
    assert keyed["modelShown"] and keyed["models"] == ["", "openai/scripted", OTHER_MODEL]

    # A run on the picked model; the thread is named after its first answer.
    step("select", selector="#model", value=OTHER_MODEL)
    scripted_model.enqueue(
        stream_turn({"content": "It is sunny in Paris."},
                    {"usage": {"prompt_tokens": 42, "completion_tokens": 7}}),
        {"steps": [{"content": "Weather in Paris"}], "stream": False})
    step("fill", selector="#message", value="how is the weather in Paris?")
    named = step("click", "14-named", selector="#send",
                 until={"selector": "#threads li .name", "text": "Weather in Paris"})
    thread_id = named["selectedThread"]
    assert named["threadNames"] == ["Weather in Paris"]
    assert "thr_" not in " ".join(named["threadNames"])
    sent = [r for r in scripted_model.requests if r.get("stream")][-1]
    assert sent["model"] == "scripted-large"  # litellm's provider prefix is not sent upstream

    # The run list: the run with its status, model, timings and usage, as stored.
    listed = step("wait", "15-run-list", until={"selector": "#runs tr", "text": "completed"})
    [run] = rest.get(f"/v1/threads/{thread_id}/runs").json()["runs"]
    [row] = listed["runs"]
    assert row["id"] == run["id"] and row["cells"]["status"] == "completed"
    assert row["cells"]["model"] == OTHER_MODEL == run["model"]
    assert row["cells"]["tokens"] == "42 in · 7 out"
    assert row["cells"]["first token"].endswith(("ms", " s"))
    assert row["cells"]["duration"].endswith(("ms", " s"))

    # Renamed inline.
    step("click", selector="#rename-thread", until={"selector": "#thread-name"})
    step("fill", selector="#thread-name", value="Paris trip")
    renamed = step("click", selector="#rename button",
                   until={"selector": "#threads li .name", "text": "Paris trip"})
    assert renamed["title"] == "Paris trip"
    assert rest.get(f"/v1/threads/{thread_id}").json()["name"] == "Paris trip"

    # Copy as curl: the key is a shell variable, and the command, run with it, streams a run.
    step("fill", selector="#message", value="again from a shell")
    copied = step("click", "16-curl", selector="#copy-curl",
                  until={"selector": "#curl", "text": "curl -N"})
    command = copied["clipboard"]
    assert command == copied["curl"]
    assert "$GATEWAY_API_KEY" in command and API_KEY not in command
    result = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=60,
                            env={**os.environ, "GATEWAY_API_KEY": API_KEY})
    assert result.returncode == 0, result.stderr
    assert '"type":"RUN_FINISHED"' in result.stdout.replace(" ", "")
    assert "You said: again from a shell" in "".join(
        json.loads(line[5:]).get("delta", "") for line in result.stdout.splitlines()
        if line.startswith("data:"))
    assert [r for r in scripted_model.requests if r.get("stream")][-1]["model"] == \
        "scripted-large"
    runs = rest.get(f"/v1/threads/{thread_id}/runs").json()["runs"]
    assert len(runs) == 2 and runs[0]["status"] == "completed"
    rest.close()


def test_api_reference_renders_offline_with_examples_and_tries_a_call(
        page: Browser, keyed_gateway: GatewayServer, shots: Path) -> None:
    origin = keyed_gateway.url
    document = httpx.get(f"{origin}/openapi.json").json()
    operations = sum(len(methods) for methods in document["paths"].values())

    step = stepper(page, origin, shots)

    # Reached from the playground's link (no key typed: the playground's thread list is
    # refused, the docs need none); every operation listed, the markdown rendered.
    step("open", expected_error="status of 401",
         until={"selector": "#error", "text": "UNAUTHORIZED"})
    docs = step("click", "11-docs", selector='a[href="/docs"]',
                until={"selector": ".opblock", "count": operations})
    assert docs["url"] == "/docs"
    rendered = step("wait", until={"selector": ".info table code",
                                   "text": "CONCURRENT_RUN"})
    assert "`" not in rendered["text"], "markdown shown literally"

    # An operation shows its request and response examples.
    step("click", selector="#operations-runs-runThread .opblock-summary",
         until={"selector": "#operations-runs-runThread", "text": "Show me the weather in Paris"})
    example = step("click", "12-docs-example",
                   selector="#operations-threads-getThread .opblock-summary",
                   until={"selector": "#operations-threads-getThread",
                          "text": ["Here is the weather in Paris.", "THREAD_NOT_FOUND"]})
    assert "WeatherCard" in example["text"]

    # Try a call from the page: the health check, answered by this gateway.
    step("click", selector="#operations-meta-health .opblock-summary",
         until={"selector": "#operations-meta-health .try-out__btn"})
    step("click", selector="#operations-meta-health .try-out__btn",
         until={"selector": "#operations-meta-health .execute"})
    tried = step("click", "13-docs-try", selector="#operations-meta-health .execute",
                 until={"selector": "#operations-meta-health .live-responses-table",
                        "text": '"status": "ok"'})
    assert "200" in tried["text"]


def fits(snapshot: dict[str, Any]) -> dict[str, Any]:
    """The snapshot, once we know the page is no wider than its window and every control
    (Send, Cancel, Approve...) lies inside it."""
    layout = snapshot["layout"]
    assert not layout["overflowX"], f"the page is wider than {layout['width']} px"
    assert not layout["offscreen"], f"controls outside the window: {layout['offscreen']}"
    return snapshot


def last_model_request(scripted_model: ScriptedModel) -> str:
    return json.dumps([r for r in scripted_model.requests if r.get("stream")][-1]["messages"])


@pytest.mark.parametrize("width", [1024, 390])
def test_approvals_and_questions_answered_in_the_playground_at_two_widths(
        keyed_gateway: GatewayServer, scripted_model: ScriptedModel, shots: Path,
        width: int) -> None:
    origin, user = keyed_gateway.url, f"approver-{width}"
    to = f"ada-{width}-{time.monotonic_ns()}@example.com"
    page = Browser(f"{origin}/", origin, shots / f"browser-{width}.log", script="playground.mjs")
    plain = stepper(page, origin, shots)

    def step(action: str, name: str | None = None, **args: Any) -> dict[str, Any]:
        return fits(plain(action, f"{width}-{name}" if name else None, **args))

    def mail(call_id: str) -> dict[str, Any]:
        return stream_turn({"tool_call": {"index": 0, "id": call_id, "name": "send_email",
                                          "arguments": json.dumps({"to": to,
                                                                   "subject": "Invoice"})}})
    try:
        plain("open", expected_error="status of 401", width=width,
              height=844 if width < 500 else 768,
              until={"selector": "#error", "text": "UNAUTHORIZED"})
        step("fill", selector="#api-key", value=API_KEY)
        step("fill", selector="#user-key", value=user)

        # A call that needs approval pauses the run: Approve / Deny, and the thread waits.
        scripted_model.enqueue(mail("call_deny"))
        step("fill", selector="#message", value="email Ada the invoice")
        paused = step("click", "20-approval", selector="#send",
                      until={"selector": "#pending-calls .approve"})
        [call] = paused["pendingCalls"]
        assert (call["id"], call["kind"]) == ("call_deny", "approval")
        assert "send_email" in call["text"] and to in call["text"]
        assert paused["pendingTitle"] == "The run waits for your approval"
        thread_id = paused["selectedThread"]
        listed = step("click", selector="#refresh-threads",
                      until={"selector": "#threads li.waiting", "text": "waiting for you"})
        assert listed["waitingThreads"] == [thread_id]

        # A reload: the waiting thread, picked from the list, shows its approval again.
        step("reload", until={"selector": "#threads li.waiting"})
        again = step("click", "21-reloaded", selector=f'#threads li[data-thread-id="{thread_id}"]',
                     until={"selector": "#pending-calls .approve"})
        assert [c["id"] for c in again["pendingCalls"]] == ["call_deny"]

        # Deny, with a reason the model reads; the tool never runs.
        scripted_model.enqueue(stream_turn({"content": "I did not send it."}))
        step("fill", selector="#pending-calls .reason", value="wrong amount")
        denied = step("click", "22-denied", selector="#pending-calls .deny",
                      until={"selector": "#conversation", "text": "I did not send it."})
        assert denied["pending"] == [] and denied["pendingCalls"] == []
        assert times_sent(to) == 0
        assert "wrong amount" in last_model_request(scripted_model)

        # Approve: the tool runs, once, and the model reads its result.
        scripted_model.enqueue(mail("call_ok"), stream_turn({"content": "Sent it."}))
        step("fill", selector="#message", value="send it now")
        step("click", selector="#send", until={"selector": "#pending-calls .approve"})
        step("click", "23-approved", selector="#pending-calls .approve",
             until={"selector": "#conversation", "text": "Sent it."})
        assert times_sent(to) == 1
        assert '\\"sent\\": true' in last_model_request(scripted_model).replace(" ", " ")

        # A tool's question: its schema shown, the answer sent as JSON.
        scripted_model.enqueue(
            stream_turn({"tool_call": {"index": 0, "id": "call_book", "name": "book_table",
                                       "arguments": json.dumps({"city": "Paris"})}}),
            stream_turn({"content": "Your table is booked."}))
        step("fill", selector="#message", value="book a table in Paris")
        asked = step("click", "24-question", selector="#send",
                     until={"selector": "#pending-calls .schema", "text": "guests"})
        [question] = asked["pendingCalls"]
        assert question["kind"] == "question" and "How many guests in Paris?" in question["text"]
        assert question["schema"]["properties"]["guests"] == {"type": "integer"}
        step("fill", selector="#pending-calls textarea", value=json.dumps({"guests": 4}))
        booked = step("click", "25-answered", selector="#pending-calls .answer-send",
                      until={"selector": "#conversation", "text": "Your table is booked."})
        assert "booked for 4 in Paris" in json.dumps(booked["tools"])
    finally:
        page.close()
