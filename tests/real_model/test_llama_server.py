"""The gateway end to end against llama.cpp's server with Gemma 3 270M, on both adapters (issue
42): what a user sees of a plain run, a conversation, a cancel, a reconnect, a forced tool call
and its round trip, a thread longer than the server's window, a strict chat template, a server
that dies mid-stream and two runs at once. Nothing may end as an empty success.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.real_model.conftest import ADAPTERS, gateway_env
from tests.real_model.llama_server import LlamaServer, strict_template
from tests.support.gateway_server import USER, GatewayServer
from tests.support.run_stream import open_stream, read_until, resume, texts
from tests.support.sse import SseEvent, run_events, text_of

# A few of these start servers of their own and run a dozen answers on 2 cores.
pytestmark = pytest.mark.timeout(900)

WEATHER = {"name": "get_weather", "description": "The weather in a city",
           "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}},
                           "required": ["city"]}}


def body(text: str, after: tuple[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    if after is not None:
        extra["previousRunId"] = after[1]
    return {"message": {"role": "user", "content": [{"type": "text", "text": text}]}, **extra}


def url(after: tuple[str, str] | None) -> str:
    return f"/v1/threads/{after[0]}/runs" if after else "/v1/threads/runs"


def ask(client: httpx.Client, text: str, after: tuple[str, str] | None = None,
        **extra: Any) -> tuple[tuple[str, str], list[SseEvent]]:
    events = run_events(client, "POST", url(after), json=body(text, after, **extra))
    return (events[0].data["threadId"], events[0].data["runId"]), events


def finished(events: list[SseEvent]) -> dict[str, Any]:
    """The run's end, which must be a success with an answer (never an empty one; this model's
    answer may be only whitespace, though)."""
    assert events[-1].type == "RUN_FINISHED", events[-1].data
    assert text_of(events) or any(e.type == "TOOL_CALL_START" for e in events)
    return events[-1].data


def run_status(client: httpx.Client, ids: tuple[str, str]) -> dict[str, Any]:
    return client.get(f"/v1/threads/{ids[0]}/runs/{ids[1]}",
                      headers={"accept": "application/json"}).json()


def test_a_plain_run_streams_an_answer_with_its_usage_counted(client: httpx.Client) -> None:
    ids, events = ask(client, "Write one sentence about the sea.", maxTokens=16)
    end = finished(events)
    [usage] = run_status(client, ids)["usage"]["models"]
    # The server reports no usage in streams: counted with its own tokenizer, marked.
    assert usage["estimatedCalls"] == 1 and 0 < usage["outputTokens"] <= 20
    assert usage["inputTokens"] > 5
    assert end["metadata"]["usageEstimated"] is True
    if "truncated" in end["metadata"]:  # the base model rarely stops by itself
        assert end["metadata"]["truncated"]["reason"] == "length"


def test_a_conversation_keeps_its_history(client: httpx.Client) -> None:
    first, events = ask(client, "My name is Ada.", maxTokens=12)
    finished(events)
    _, events = ask(client, "What is my name?", after=first, maxTokens=12)
    finished(events)


def test_a_cancel_ends_the_run_and_frees_the_server(client: httpx.Client) -> None:
    with open_stream(client, "POST", url(None), json=body("Count to a thousand.",
                                                          maxTokens=1500)) as (_, events):
        seen = read_until(events, lambda s: texts(s) >= 3)
        ids = (seen[0].data["threadId"], seen[0].data["runId"])
        client.delete(f"/v1/threads/{ids[0]}/runs/{ids[1]}")
        rest = list(events)
    assert rest[-1].type == "RUN_ERROR" and rest[-1].data["code"] == "CANCELLED"
    started = time.monotonic()
    _, events = ask(client, "Hello.", maxTokens=8)
    finished(events)
    assert time.monotonic() - started < 30  # the cancelled answer is not still generating


def test_a_reconnect_replays_what_was_missed(client: httpx.Client) -> None:
    with open_stream(client, "POST", url(None), json=body("Tell me about rivers.",
                                                          maxTokens=40)) as (_, events):
        seen = read_until(events, lambda s: texts(s) >= 3)
    ids = (seen[0].data["threadId"], seen[0].data["runId"])
    last = seen[-1].id
    rest = resume(client, ids, after=last)
    whole = resume(client, ids)
    assert [e.data for e in seen + rest] == [e.data for e in whole]
    finished(whole)


def test_a_forced_tool_call_and_its_round_trip(client: httpx.Client) -> None:
    ids, events = ask(client, "What is the weather in Paris?", tools=[WEATHER],
                      toolChoice={"name": "get_weather"}, maxTokens=60)
    [paused] = [e.data["value"] for e in events if e.data.get("name")
                == "tambo.run.awaiting_input"]
    [call] = paused["pendingToolCalls"]
    assert call["toolName"] == "get_weather" and isinstance(call["input"].get("city"), str)
    result = {"role": "user", "content": [{"type": "tool_result", "toolUseId": call["toolCallId"],
                                           "content": [{"type": "text", "text": "Sunny, 21 C"}]}]}
    events = run_events(client, "POST", url(ids), json={
        "message": result, "previousRunId": ids[1], "tools": [WEATHER], "maxTokens": 16})
    finished(events)
    # The thread is not poisoned: it answers again.
    _, events = ask(client, "Thanks.", after=(ids[0], events[0].data["runId"]), maxTokens=8)
    finished(events)


def test_two_runs_at_once_never_end_as_an_empty_success(client: httpx.Client) -> None:
    """The server serves one request at a time: a second one cuts the first with `[DONE]` and
    no finish reason, which must fail the first run, retryably, not pass for its answer."""
    first: list[SseEvent] = []
    streaming = threading.Event()

    def long_run() -> None:
        with open_stream(client, "POST", url(None), json=body(
                "Write a long story.", maxTokens=600)) as (_, events):
            for event in events:
                first.append(event)
                if texts(first) >= 3:
                    streaming.set()
        streaming.set()

    thread = threading.Thread(target=long_run)
    thread.start()
    assert streaming.wait(60)
    _, second = ask(client, "Hi.", maxTokens=8)
    thread.join(120)
    finished(second)
    end = first[-1]
    assert end.type == "RUN_ERROR", "the interrupted run passed for a complete one"
    assert end.data["code"] == "LLM_STREAM_INCOMPLETE" and end.data["isRetryable"] is True


# -- servers of their own ----------------------------------------------------------------------


@contextmanager
def gateways(server: LlamaServer, workdir: Path) -> Iterator[list[httpx.Client]]:
    """A gateway per adapter in front of `server`, and a client of each."""
    started = [GatewayServer(workdir / adapter, gateway_env(server, adapter)).start()
               for adapter in ADAPTERS]
    try:
        clients = [httpx.Client(base_url=g.url, event_hooks=USER, timeout=120,
                                headers={"x-api-key": "test-key"}) for g in started]
        yield clients
        for http in clients:
            http.close()
    finally:
        for gateway in started:
            gateway.stop()


def test_a_thread_longer_than_the_window_keeps_answering(tmp_path: Path) -> None:
    with LlamaServer(tmp_path / "llama.log", n_ctx=512) as server, \
            gateways(server, tmp_path) as clients:
        for client in clients:
            after = None
            for i in range(6):  # about 600 tokens of questions alone
                after, events = ask(client, f"Question {i}: " + "tell me more " * 30,
                                    after=after, maxTokens=12)
                finished(events)


def test_a_strict_template_gets_alternating_roles(tmp_path: Path) -> None:
    """Gemma 3's own template refuses roles that do not alternate: a run cancelled before its
    answer, and a thread seeded with two user messages, must not break the thread."""
    template = strict_template(tmp_path)
    with LlamaServer(tmp_path / "llama.log", n_ctx=1024, strict=template) as server, \
            gateways(server, tmp_path) as clients:
        for client in clients:
            first, events = ask(client, "Hello.", maxTokens=8)
            finished(events)
            with open_stream(client, "POST", url(first), json=body(
                    "Go on.", first, maxTokens=400)) as (_, stream):
                started = next(stream).data
                client.delete(f"/v1/threads/{started['threadId']}/runs/{started['runId']}")
                list(stream)
            _, events = ask(client, "Still there?", after=(first[0], started["runId"]),
                            maxTokens=8)
            finished(events)
            seeded = client.post("/v1/threads", json={"initialMessages": [
                {"role": "user", "content": [{"type": "text", "text": "one"}]},
                {"role": "user", "content": [{"type": "text", "text": "two"}]}]}).json()["id"]
            events = run_events(client, "POST", f"/v1/threads/{seeded}/runs",
                                json=body("three", maxTokens=8))
            finished(events)


def test_a_server_killed_mid_stream_fails_the_run_and_the_thread_recovers(
        tmp_path: Path) -> None:
    server = LlamaServer(tmp_path / "llama.log", n_ctx=1024).start()
    try:
        with gateways(server, tmp_path) as clients:
            for client in clients:
                first, events = ask(client, "Hello.", maxTokens=8)
                finished(events)
                with open_stream(client, "POST", url(first), json=body(
                        "Write a long story.", first, maxTokens=600)) as (_, stream):
                    seen = read_until(stream, lambda s: texts(s) >= 3)
                    server.kill()
                    rest = list(stream)
                end = rest[-1]
                assert end.type == "RUN_ERROR" and end.data["isRetryable"] is True, end.data
                server = LlamaServer(tmp_path / "llama.log", n_ctx=1024,
                                     port=server.port).start()
                _, events = ask(client, "Are you back?",
                                after=(first[0], seen[0].data["runId"]), maxTokens=8)
                finished(events)
    finally:
        server.stop()
