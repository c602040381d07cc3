"""`gateway.client` against the real app (in process, over httpx): a backend's view of a run.

Each test does what a backend using the client would: stream a run and read its typed events,
follow it again from an event id, live through a dropped connection, cancel, answer a client
tool, list what it made, and see a refusal as a `GatewayError` with the gateway's code.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from gateway.client import AsyncClient, Client, GatewayError, text_of
from tests.support.inprocess_app import InProcess
from tests.support.scripted_model import ScriptedModel

WEATHER_TOOL = {"name": "get_weather", "description": "Get weather",
                "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}}}


class CutOnce(httpx.BaseTransport):
    """The first run stream is cut (as a proxy or a network drops it) after `events` events;
    every request is recorded, to see what the client sent when it came back."""

    def __init__(self, inner: httpx.BaseTransport, events: int) -> None:
        self.inner, self.events, self.cut = inner, events, False
        self.requests: list[httpx.Request] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        response = self.inner.handle_request(request)
        if self.cut or "text/event-stream" not in request.headers.get("accept", ""):
            return response
        self.cut = True
        return httpx.Response(response.status_code, headers=response.headers,
                              stream=_Cut(response, self.events))


class _Cut(httpx.SyncByteStream):
    def __init__(self, response: httpx.Response, events: int) -> None:
        self.response, self.events = response, events

    def __iter__(self) -> Iterator[bytes]:
        sent = b""
        for chunk in self.response.iter_raw():
            sent += chunk
            if sent.count(b"\nid:") + sent.startswith(b"id:") > self.events:
                yield sent[:_end_of_event(sent, self.events)]
                raise httpx.RemoteProtocolError("peer closed connection")
        yield sent

    def close(self) -> None:
        self.response.close()


def _end_of_event(body: bytes, count: int) -> int:
    """The offset just after the `count`-th event with an id."""
    offset = 0
    for _ in range(count):
        offset = body.index(b"\n\n", body.index(b"id:", offset)) + 2
    return offset


def test_a_run_streams_typed_events_with_ids(python_client: Client,
                                             scripted_model: ScriptedModel) -> None:
    scripted_model.enqueue([{"content": "Hello "}, {"content": "from the client."}])
    stream = python_client.run("Hi")
    events = stream.collect()
    assert [e.type for e in events][0] == "RUN_STARTED"
    assert events[-1].type == "RUN_FINISHED"
    assert text_of(events) == "Hello from the client."
    ids = [e.id for e in events]
    assert all(isinstance(i, int) for i in ids) and ids == sorted(set(ids))  # type: ignore[type-var]
    assert (stream.thread_id, stream.run_id) == (events[0].data["threadId"],
                                                 events[0].data["runId"])
    assert stream.last_event_id == ids[-1]

    # The same run followed again from an event id: the events after it, the same ones.
    assert stream.thread_id and stream.run_id
    middle = events[2].id
    again = python_client.join(stream.thread_id, stream.run_id, after=middle).collect()
    assert [(e.id, e.type, e.data) for e in again] == [(e.id, e.type, e.data)
                                                       for e in events[3:]]

    # What the run made, listed for the same user.
    listed = python_client.threads()
    assert stream.thread_id in [t["id"] for t in listed["threads"]]
    messages = python_client.messages(stream.thread_id)["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant"]
    [run] = python_client.runs(stream.thread_id)["runs"]
    assert run["id"] == stream.run_id
    assert python_client.run_status(stream.thread_id, stream.run_id)["status"] == "completed"


def test_a_dropped_stream_goes_on_from_its_last_event(gateway: InProcess,
                                                      scripted_model: ScriptedModel) -> None:
    scripted_model.enqueue([{"content": f"w{i} "} for i in range(12)])
    cut = CutOnce(gateway.sync_transport(), events=4)
    with Client(gateway.url, api_key="test-key", user_key="client-user",
                transport=cut) as client:
        events = client.run("count").collect()
    ids = [e.id for e in events]
    assert len(ids) == len(set(ids)) and ids == sorted(ids)  # type: ignore[type-var]
    assert events[-1].type == "RUN_FINISHED"
    assert text_of(events) == "".join(f"w{i} " for i in range(12))
    reconnect = cut.requests[1]
    assert reconnect.method == "GET"
    assert reconnect.headers["last-event-id"] == str(events[3].id)


@pytest.mark.sqlite_only  # a refusal's shape, before any store access
def test_a_refused_request_is_a_gateway_error_with_its_code(python_client: Client) -> None:
    with pytest.raises(GatewayError) as refused:
        python_client.join("thr_missing", "run_missing").collect()
    assert (refused.value.status, refused.value.code) == (404, "THREAD_NOT_FOUND")
    with pytest.raises(GatewayError) as invalid:
        python_client.run("Hi", maxTokens=0).collect()
    assert invalid.value.status == 400 and invalid.value.code == "VALIDATION_ERROR"


def test_a_client_tool_is_answered_and_a_run_cancelled(python_client: Client,
                                                        scripted_model: ScriptedModel) -> None:
    scripted_model.enqueue(
        [{"tool_call": {"index": 0, "id": "call_w", "name": "get_weather",
                        "arguments": '{"city":"Oslo"}'}}],
        [{"content": "Oslo is sunny."}])
    paused = python_client.run("Weather in Oslo?", tools=[WEATHER_TOOL])
    paused.collect()
    [pending] = paused.pending_tool_calls
    assert (pending["toolCallId"], json.loads(pending["arguments"])) == ("call_w",
                                                                         {"city": "Oslo"})
    assert paused.thread_id and paused.run_id
    answered = python_client.submit_tool_results(
        paused.thread_id, paused.run_id, {"call_w": {"temp": 21}}, tools=[WEATHER_TOOL])
    assert text_of(answered.collect()) == "Oslo is sunny."
    sent = [m for m in scripted_model.requests[-1]["messages"] if m["role"] == "tool"]
    assert sent == [{"role": "tool", "tool_call_id": "call_w", "content": '{"temp": 21}'}]

    scripted_model.enqueue([{"slow": {"count": 400, "interval": 0.02}}])
    slow = python_client.run("Count slowly", thread_id=paused.thread_id,
                             previous_run_id=answered.run_id)
    seen = []
    for event in slow:
        seen.append(event)
        if event.type == "TEXT_MESSAGE_CONTENT" and len(seen) == 5:
            assert slow.run_id is not None
            python_client.cancel(paused.thread_id, slow.run_id)
    assert (seen[-1].type, seen[-1].data["code"]) == ("RUN_ERROR", "CANCELLED")


async def test_the_async_client_streams_and_joins(gateway: InProcess,
                                                  scripted_model: ScriptedModel) -> None:
    scripted_model.enqueue([{"content": "Async "}, {"content": "hello."}])
    async with AsyncClient(gateway.url, api_key="test-key", user_key="client-user",
                           transport=gateway.async_transport()) as client:
        stream = client.run("Hi")
        events = [event async for event in stream]
        assert text_of(events) == "Async hello."
        assert stream.thread_id and stream.run_id
        tail = await client.join(stream.thread_id, stream.run_id, after=events[-2].id).collect()
        assert [e.type for e in tail] == ["RUN_FINISHED"]
        assert (await client.thread(stream.thread_id))["id"] == stream.thread_id
