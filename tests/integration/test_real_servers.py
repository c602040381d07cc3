"""The gateway against an upstream that behaves like a real OpenAI-compatible server (issue 42),
on both adapters: the scripted model's real-server modes (`ScriptedModel.behave`, `{"cut": true}`,
`{"finish": ""}`) stand for what llama.cpp's server does (tests/real_model runs the server
itself).

Nothing fails silently: a stream that ends before the provider said it was complete is a
retryable `LLM_STREAM_INCOMPLETE`, never an empty success; a cut answer says so; usage the server
does not report is counted and marked; a client tool's round trip goes through a server that
refuses `content: null`; a thread whose run failed keeps working on a server whose template wants
alternating roles; arguments cut off are never run; a thread longer than the window is trimmed.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import scripted_env
from tests.support.gateway_server import USER
from tests.support.inprocess_app import InProcess, InProcessGateway
from tests.support.scripted_model import ScriptedModel
from tests.support.sse import SseEvent, run_events, text_of

WEATHER = {"name": "get_weather", "description": "The weather in a city",
           "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}},
                           "required": ["city"]}}


@pytest.fixture(params=["direct", "litellm"])
def http(request: pytest.FixtureRequest) -> Iterator[httpx.Client]:
    """A client of the in-process gateway streaming through the direct adapter, then of the
    one streaming through litellm."""
    app: InProcess = request.getfixturevalue(
        "gateway" if request.param == "direct" else "litellm_gateway")
    with app.client(event_hooks=USER, timeout=60, headers={"x-api-key": "test-key"}) as client:
        yield client


def streamed(*steps: dict[str, Any]) -> dict[str, Any]:
    """A turn only a streamed request takes (the gateway may ask a failed call again, not
    streamed, to hear the server's words: that request must not take the next turn)."""
    return {"steps": list(steps), "stream": True}


def run(client: httpx.Client, text: str, after: tuple[str, str] | None = None,
        **body: Any) -> tuple[tuple[str, str], list[SseEvent]]:
    """One run of `text` (on the thread of run `after`, else a new thread): its ids, events."""
    url = f"/v1/threads/{after[0]}/runs" if after else "/v1/threads/runs"
    if after:
        body["previousRunId"] = after[1]
    events = run_events(client, "POST", url, json={
        "message": {"role": "user", "content": [{"type": "text", "text": text}]}, **body})
    started = events[0].data
    return (started["threadId"], started["runId"]), events


def ending(events: list[SseEvent]) -> dict[str, Any]:
    assert events[-1].type in ("RUN_FINISHED", "RUN_ERROR"), [e.type for e in events]
    return events[-1].data


def status(client: httpx.Client, ids: tuple[str, str]) -> dict[str, Any]:
    return client.get(f"/v1/threads/{ids[0]}/runs/{ids[1]}",
                      headers={"accept": "application/json"}).json()


# -- a model call's outcome is never guessed -------------------------------------------------


@pytest.mark.parametrize("steps", [
    [{"content": "Half an ans"}, {"cut": True}],  # 200, then the body just ends
    [{"content": "Half an ans"}, {"finish": ""}],  # [DONE] without a finish reason
    [{"stream_error": {"message": "the formatter crashed"}}],  # 200, then an error event
], ids=["no-done", "no-finish", "error-event"])
def test_a_stream_the_provider_did_not_complete_is_a_retryable_error(
        http: httpx.Client, scripted_model: ScriptedModel, steps: list[dict[str, Any]]) -> None:
    scripted_model.enqueue(streamed(*steps))
    ids, events = run(http, "hello")
    end = ending(events)
    assert events[-1].type == "RUN_ERROR", "an incomplete answer passed for a complete one"
    assert end["code"] in ("LLM_STREAM_INCOMPLETE", "LLM_SERVER_ERROR")
    assert end["isRetryable"] is True
    assert status(http, ids)["status"] == "failed"


def test_an_empty_200_is_asked_again_to_hear_the_servers_words(
        http: httpx.Client, scripted_model: ScriptedModel,
        caplog: pytest.LogCaptureFixture) -> None:
    """llama-cpp-python answers a request its template cannot format with 200 and an empty
    body: the gateway asks once more, not streamed, and the run fails with what the server
    says then (in the log: the client's message stays generic)."""
    scripted_model.enqueue(streamed({"cut": True}),
                           {"steps": [{"error": 500, "message": "Template error: boom"}],
                            "stream": False})
    _, events = run(http, "hello")
    assert events[-1].type == "RUN_ERROR" and events[-1].data["isRetryable"] is True
    asked = [r for r in scripted_model.requests if not r.get("stream")]
    assert len(asked) == 1 and asked[0]["max_tokens"] == 1
    assert "Template error: boom" in caplog.text
    assert "boom" not in events[-1].data["message"]


def test_seeded_messages_are_sent_alternating(http: httpx.Client,
                                              scripted_model: ScriptedModel) -> None:
    scripted_model.behave(strict_roles=True)
    scripted_model.enqueue(streamed({"content": "Taken."}))
    thread = http.post("/v1/threads", json={"initialMessages": [
        {"role": "user", "content": [{"type": "text", "text": "one"}]},
        {"role": "user", "content": [{"type": "text", "text": "two"}]}]}).json()["id"]
    events = run_events(http, "POST", f"/v1/threads/{thread}/runs", json={
        "message": {"role": "user", "content": [{"type": "text", "text": "three"}]}})
    assert events[-1].type == "RUN_FINISHED" and text_of(events) == "Taken."
    assert scripted_model.refusals == 0
    assert [m["content"] for m in scripted_model.requests[-1]["messages"]] == [
        "one\n\ntwo\n\nthree"]


def test_one_request_at_a_time_fails_the_interrupted_run_not_silently(
        http: httpx.Client, scripted_model: ScriptedModel) -> None:
    """A server that serves one request at a time ends the stream in progress with `[DONE]`
    and no finish reason when another comes: that run failed, it did not complete."""
    import threading

    scripted_model.behave(serial=True)
    scripted_model.enqueue_for("first", streamed({"slow": {"count": 200, "interval": 0.01}}))
    scripted_model.enqueue_for("second", streamed({"content": "Second."}))
    first: dict[str, Any] = {}

    def start_first() -> None:
        first["ids"], first["events"] = run(http, "first")

    thread = threading.Thread(target=start_first)
    thread.start()
    wait_until(lambda: len(scripted_model.requests) >= 1)
    _, second = run(http, "second")
    thread.join(60)
    assert ending(second) and second[-1].type == "RUN_FINISHED"
    assert first["events"][-1].type == "RUN_ERROR"
    assert first["events"][-1].data["code"] == "LLM_STREAM_INCOMPLETE"


def wait_until(probe: Any, timeout: float = 30.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not probe():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


# -- truncation is visible ----------------------------------------------------------------------


def test_a_cut_answer_is_marked_on_the_run_end_and_on_the_stored_message(
        http: httpx.Client, scripted_model: ScriptedModel) -> None:
    scripted_model.enqueue(streamed({"content": "The longest answer ev"}, {"finish": "length"}))
    ids, events = run(http, "tell me everything")
    end = ending(events)
    assert events[-1].type == "RUN_FINISHED"
    message_id = next(e.data["messageId"] for e in events if e.type == "TEXT_MESSAGE_START")
    assert end["metadata"] == {"truncated": {"reason": "length", "messageId": message_id}}
    frames = http.get(f"/v1/timbal/threads/{ids[0]}/runs/{ids[1]}").text
    assert '"status":"truncated"' in frames.replace(" ", "")
    assert '"finishReason":"length"' in frames.replace(" ", "")


def test_every_call_has_an_output_cap_a_client_may_lower_but_not_raise(
        http: httpx.Client, scripted_model: ScriptedModel) -> None:
    run(http, "no cap asked")
    run(http, "a lower cap", maxTokens=100)
    run(http, "a higher cap", maxTokens=100_000)
    caps = [r.get("max_tokens") for r in scripted_model.requests if r.get("stream")]
    assert caps == [4096, 100, 4096]


# -- usage is measured ---------------------------------------------------------------------------


def test_usage_a_server_does_not_report_is_counted_and_marked_estimated(
        http: httpx.Client, scripted_model: ScriptedModel) -> None:
    scripted_model.behave(usage=False)
    scripted_model.enqueue(streamed({"content": "Four words of answer."}))
    ids, events = run(http, "count me")
    end = ending(events)
    [usage] = end["usage"]
    assert usage["outputTokens"] > 0 and usage["inputTokens"] > 0
    assert end["metadata"] == {"usageEstimated": True}
    [recorded] = status(http, ids)["usage"]["models"]
    assert recorded["estimatedCalls"] == 1 and recorded["outputTokens"] > 0


@pytest.mark.parametrize("small", ["direct", "litellm"], indirect=True)
def test_usage_is_counted_with_the_servers_own_tokenizer_when_it_has_one(
        small: httpx.Client, scripted_model: ScriptedModel) -> None:
    scripted_model.behave(usage=False, tokenize=True)
    scripted_model.enqueue(streamed({"content": "x" * 40}))
    ids, _ = run(small, "count me")
    assert "x" * 40 in scripted_model.tokenized  # the answer, counted by the server: 11 tokens
    [usage] = status(small, ids)["usage"]["models"]
    assert (usage["outputTokens"], usage["estimatedCalls"]) == (11, 1)


def test_usage_a_server_reports_is_not_marked(http: httpx.Client,
                                              scripted_model: ScriptedModel) -> None:
    scripted_model.enqueue(streamed({"content": "Hi."}, {"usage": {"prompt_tokens": 7,
                                                                   "completion_tokens": 2}}))
    ids, events = run(http, "count me")
    [usage] = ending(events)["usage"]
    assert (usage["inputTokens"], usage["outputTokens"]) == (7, 2)
    assert "metadata" not in ending(events)
    assert "estimatedCalls" not in status(http, ids)["usage"]["models"][0]


# -- messages every real server accepts ----------------------------------------------------------


def test_a_client_tool_round_trip_completes_on_a_server_that_refuses_null_content(
        http: httpx.Client, scripted_model: ScriptedModel) -> None:
    scripted_model.behave(refuse_null_content=True)
    scripted_model.enqueue(streamed({"tool_call": {"index": 0, "id": "call_w",
                                                   "name": "get_weather",
                                                   "arguments": '{"city": "Paris"}'}}),
                           streamed({"content": "Sunny in Paris."}))
    ids, events = run(http, "weather?", tools=[WEATHER])
    assert any(e.data.get("name") == "tambo.run.awaiting_input" for e in events)
    result = {"role": "user", "content": [{"type": "tool_result", "toolUseId": "call_w",
                                           "content": [{"type": "text", "text": "sunny"}]}]}
    second = run_events(http, "POST", f"/v1/threads/{ids[0]}/runs", json={
        "message": result, "previousRunId": ids[1], "tools": [WEATHER]})
    assert second[-1].type == "RUN_FINISHED" and text_of(second) == "Sunny in Paris."
    assert scripted_model.refusals == 0
    sent = [m for m in scripted_model.requests[-1]["messages"] if m.get("tool_calls")]
    assert sent[0]["content"] == ""


def test_a_thread_whose_run_failed_keeps_working_with_a_strict_template(
        http: httpx.Client, scripted_model: ScriptedModel) -> None:
    """A failed run leaves its user message without an answer; the next run's message would
    follow it, and a template that wants alternating roles would refuse the thread for good."""
    scripted_model.behave(strict_roles=True)
    scripted_model.enqueue(streamed({"content": "Hello!"}),
                           streamed({"cut": True}),  # the second run fails, saying nothing
                           {"steps": [{"error": 503, "message": "busy"}], "stream": False},
                           streamed({"content": "Still here."}))
    first, _ = run(http, "hi")
    failed, events = run(http, "and then?", after=first)
    assert events[-1].type == "RUN_ERROR" and events[-1].data["isRetryable"] is True
    _, events = run(http, "are you there?", after=failed)
    assert events[-1].type == "RUN_FINISHED" and text_of(events) == "Still here."
    assert scripted_model.refusals == 0
    roles = [m["role"] for m in scripted_model.requests[-1]["messages"]]
    assert roles == ["user", "assistant", "user"]


# -- tool arguments are checked before anything runs ---------------------------------------------


def test_arguments_cut_off_are_reported_to_the_model_once_never_run(
        http: httpx.Client, scripted_model: ScriptedModel) -> None:
    cut = streamed({"tool_call": {"index": 0, "id": "call_cut", "name": "get_weather",
                                  "arguments": '{"ci'}}, {"finish": "length"})
    scripted_model.enqueue(cut, streamed({"tool_call": {"index": 0, "id": "call_ok",
                                                        "name": "get_weather",
                                                        "arguments": '{"city": "Oslo"}'}}))
    ids, events = run(http, "weather?", tools=[WEATHER])
    [pending] = [e.data["value"]["pendingToolCalls"] for e in events
                 if e.data.get("name") == "tambo.run.awaiting_input"]
    assert [(p["toolCallId"], p["arguments"]) for p in pending] == [
        ("call_ok", '{"city": "Oslo"}')]
    results = [e.data for e in events if e.type == "TOOL_CALL_RESULT"]
    assert [r["toolCallId"] for r in results] == ["call_cut"]
    assert "Invalid arguments" in results[0]["content"]
    told = scripted_model.requests[-1]["messages"][-1]
    assert told["role"] == "tool" and "cut off" in told["content"]


def test_arguments_invalid_twice_end_the_run(http: httpx.Client,
                                             scripted_model: ScriptedModel) -> None:
    bad = {"tool_call": {"index": 0, "id": "call_{}", "name": "get_weather", "arguments": "{}"}}
    scripted_model.enqueue(streamed(bad), streamed(bad))
    _, events = run(http, "weather?", tools=[WEATHER])
    assert events[-1].type == "RUN_ERROR"
    assert events[-1].data["code"] == "TOOL_ARGUMENTS_INVALID"
    assert not any(e.data.get("name") == "tambo.run.awaiting_input" for e in events)


# -- the context window --------------------------------------------------------------------------


@pytest.fixture
def small(scripted_model: ScriptedModel, tmp_path_factory: pytest.TempPathFactory,
          request: pytest.FixtureRequest) -> Iterator[httpx.Client]:
    """A gateway for a model nobody knows the window of (its own name: windows learned are
    kept per model and process), on the adapter of `request.param`."""
    adapter = getattr(request, "param", "direct")
    env = scripted_env(scripted_model, GATEWAY_MODEL=f"openai/small-{uuid.uuid4().hex[:8]}",
                       GATEWAY_MODEL_ADAPTER=adapter)
    app = InProcessGateway(tmp_path_factory.mktemp("small"), env).start()
    try:
        with app.client(event_hooks=USER, timeout=60, headers={"x-api-key": "test-key"}) as c:
            yield c
    finally:
        app.stop()


def long_thread(client: httpx.Client, scripted_model: ScriptedModel) -> tuple[str, str]:
    after = None
    for i in range(6):
        scripted_model.enqueue(streamed({"content": f"Answer {i}: " + "words " * 40}))
        after, _ = run(client, f"Question {i}: " + "more " * 40, after=after)
    assert after is not None
    return after


@pytest.mark.parametrize("small", ["direct", "litellm"], indirect=True)
@pytest.mark.parametrize("overflow", ["400", "after_200", "silent"])
def test_a_thread_longer_than_the_window_is_retried_once_shorter(
        small: httpx.Client, scripted_model: ScriptedModel, overflow: str) -> None:
    after = long_thread(small, scripted_model)
    scripted_model.context_window, scripted_model.overflows = 400, 0
    scripted_model.behave(overflow=overflow)
    scripted_model.enqueue(streamed({"content": "Fits now."}))
    last, events = run(small, "last question", after=after)
    assert events[-1].type == "RUN_FINISHED" and text_of(events) == "Fits now."
    # Refused once (a silent refusal is asked again, not streamed, to hear why: twice), then
    # sent shorter.
    refused = 2 if overflow == "silent" else 1
    assert scripted_model.overflows == refused
    # The next run starts from the window learned, without a refusal.
    scripted_model.enqueue(streamed({"content": "Again."}))
    _, events = run(small, "one more", after=last)
    assert events[-1].type == "RUN_FINISHED" and scripted_model.overflows == refused


@pytest.mark.parametrize("window_on", ["props", "models"])
def test_the_window_a_server_says_is_used_before_any_refusal(
        small: httpx.Client, scripted_model: ScriptedModel, window_on: str) -> None:
    scripted_model.context_window = 400
    scripted_model.behave(window_on=window_on)
    after = long_thread(small, scripted_model)
    scripted_model.enqueue(streamed({"content": "Fits."}))
    _, events = run(small, "last question", after=after)
    assert events[-1].type == "RUN_FINISHED"
    assert scripted_model.overflows == 0
