"""A run end to end over HTTP (the app in the test process): streaming, persistence, history, previousRunId, errors."""

from __future__ import annotations

import httpx
from sqlalchemy import update

from gateway.store.repository import Store
from gateway.store.tables import RunFrameRow
from tests.support.gateway_server import DEFAULT_USER, read_store
from tests.support.inprocess_app import InProcess
from tests.support.run_stream import wait_for
from tests.support.scripted_model import ScriptedModel
from tests.support.sse import events_of, run_events, text_of

USER = {"role": "user", "content": [{"type": "text", "text": "hello"}]}


def new_run(client: httpx.Client, text: str = "hello", **body):
    message = {"role": "user", "content": [{"type": "text", "text": text}]}
    return run_events(client, "POST", "/v1/threads/runs",
                      json={"message": message, "thread": {"userKey": DEFAULT_USER}, **body})


def test_run_streams_answer_and_persists_it(client: httpx.Client, scripted_model: ScriptedModel):
    scripted_model.enqueue([{"content": "Hi "}, {"content": "there"}, {"content": "!"}])
    events = new_run(client)

    assert events[0].type == "RUN_STARTED"
    assert events[-1].type == "RUN_FINISHED"
    assert [e.id for e in events] == list(range(1, len(events) + 1))
    assert text_of(events) == "Hi there!"
    assert all(isinstance(e.data["timestamp"], int) for e in events)
    thread_id, run_id = events[0].data["threadId"], events[0].data["runId"]
    assert events[-1].data == {**events[-1].data, "threadId": thread_id, "runId": run_id}

    start = next(e for e in events if e.type == "TEXT_MESSAGE_START")
    messages = client.get(f"/v1/threads/{thread_id}/messages").json()["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant"]
    assert messages[0]["content"] == [{"type": "text", "text": "hello"}]
    assert messages[1]["id"] == start.data["messageId"]
    assert messages[1]["content"] == [{"type": "text", "text": "Hi there!"}]

    thread = client.get(f"/v1/threads/{thread_id}", params={"userKey": DEFAULT_USER}).json()
    assert thread["runStatus"] == "idle"
    assert thread["lastCompletedRunId"] == run_id
    assert thread["userKey"] == DEFAULT_USER


def test_follow_up_sends_history_to_the_model(client: httpx.Client, scripted_model: ScriptedModel):
    scripted_model.enqueue([{"content": "First answer."}], [{"content": "Second answer."}])
    first = new_run(client, "question one")
    thread_id, run_id = first[0].data["threadId"], first[0].data["runId"]

    second = run_events(client, "POST", f"/v1/threads/{thread_id}/runs", json={
        "message": {"role": "user", "content": [{"type": "text", "text": "question two"}]},
        "previousRunId": run_id, "userKey": DEFAULT_USER})

    assert text_of(second) == "Second answer."
    sent = scripted_model.requests[-1]["messages"]
    assert [(m["role"], m.get("content")) for m in sent] == [
        ("user", "question one"), ("assistant", "First answer."), ("user", "question two")]


def test_wrong_or_missing_previous_run_is_refused_and_thread_stays_usable(
        client: httpx.Client, scripted_model: ScriptedModel):
    first = new_run(client)
    thread_id, run_id = first[0].data["threadId"], first[0].data["runId"]

    refused = client.post(f"/v1/threads/{thread_id}/runs",
                          json={"message": USER, "previousRunId": "run_wrong"})
    assert refused.status_code == 400
    assert refused.headers["content-type"].startswith("application/problem+json")
    assert refused.json()["code"] == "INVALID_PREVIOUS_RUN"

    missing = client.post(f"/v1/threads/{thread_id}/runs", json={"message": USER})
    assert missing.status_code == 400
    assert missing.json()["code"] == "INVALID_PREVIOUS_RUN"
    assert missing.json()["lastCompletedRunId"] == run_id

    again = run_events(client, "POST", f"/v1/threads/{thread_id}/runs",
                       json={"message": USER, "previousRunId": run_id})
    assert again[-1].type == "RUN_FINISHED"


def test_reasoning_streams_as_thinking_events(client: httpx.Client, scripted_model: ScriptedModel):
    scripted_model.enqueue([{"reasoning": "Let me "}, {"reasoning": "think."},
                            {"content": "Done."}])
    events = new_run(client)
    types = [e.type for e in events]

    assert not any(t.startswith("REASONING_") for t in types)
    assert types[1:4] == ["THINKING_TEXT_MESSAGE_START", "THINKING_TEXT_MESSAGE_CONTENT",
                          "THINKING_TEXT_MESSAGE_CONTENT"]
    assert types.index("THINKING_TEXT_MESSAGE_END") < types.index("TEXT_MESSAGE_START")
    reasoning = "".join(e.data["delta"] for e in events
                        if e.type == "THINKING_TEXT_MESSAGE_CONTENT")
    assert reasoning == "Let me think."
    thread_id = events[0].data["threadId"]
    assistant = client.get(f"/v1/threads/{thread_id}/messages").json()["messages"][-1]
    assert assistant["reasoning"] == ["Let me think."]


def test_provider_error_before_first_chunk_is_one_run_error(
        client: httpx.Client, scripted_model: ScriptedModel):
    scripted_model.enqueue([{"error": 503, "message": "overloaded"}])
    events = new_run(client)

    assert [e.type for e in events] == ["RUN_STARTED", "RUN_ERROR"]
    error = events[-1].data
    assert error["code"] == "LLM_SERVER_ERROR"
    assert error["category"] == "server_error" and error["isRetryable"] is True
    thread = client.get(f"/v1/threads/{events[0].data['threadId']}").json()
    assert thread["runStatus"] == "idle"
    assert thread["lastCompletedRunId"] == events[0].data["runId"]
    assert thread["lastRunError"]["code"] == "LLM_SERVER_ERROR"


def test_provider_auth_error_leaks_no_secret(client: httpx.Client, scripted_model: ScriptedModel):
    scripted_model.enqueue([{"error": 401,
                             "message": "Incorrect API key provided: sk-test-secret-key-1234"}])
    with client.stream("POST", "/v1/threads/runs", headers={"accept": "text/event-stream"},
                       json={"message": USER}) as response:
        body = response.read().decode()
    assert "sk-test-secret" not in body
    assert "Traceback" not in body
    assert '"code":"LLM_AUTHENTICATION_ERROR"' in body
    assert body.count('"type":"RUN_ERROR"') == 1


def test_provider_drop_mid_stream_keeps_partial_text(
        client: httpx.Client, scripted_model: ScriptedModel):
    scripted_model.enqueue([{"content": "Partial "}, {"content": "answer"}, {"error": 500}])
    events = new_run(client)

    assert events[-1].type == "RUN_ERROR"
    assert sum(e.type == "RUN_ERROR" for e in events) == 1
    assert text_of(events) == "Partial answer"
    messages = client.get(f"/v1/threads/{events[0].data['threadId']}/messages").json()["messages"]
    assert messages[-1]["content"] == [{"type": "text", "text": "Partial answer"}]


def test_sse_framing_is_lf_only_with_ids(client: httpx.Client, scripted_model: ScriptedModel):
    scripted_model.enqueue([{"content": "framing"}])
    with client.stream("POST", "/v1/threads/runs", headers={"accept": "text/event-stream"},
                       json={"message": USER}) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["x-run-id"].startswith("run_")
        assert response.headers["x-accel-buffering"] == "no"
        raw = response.read()
    assert b"\r" not in raw
    frames = [f for f in raw.decode().split("\n\n") if f and not f.startswith(":")]
    for position, frame in enumerate(frames, start=1):
        lines = frame.split("\n")
        assert lines[0] == f"id: {position}"
        assert lines[1].startswith("data: {")
        assert len(lines) == 2


def test_heartbeat_comment_while_model_is_silent(
        client: httpx.Client, scripted_model: ScriptedModel):
    scripted_model.enqueue([{"delay": 3.0}, {"content": "late"}])  # heartbeat every 2 s here
    with client.stream("POST", "/v1/threads/runs", headers={"accept": "text/event-stream"},
                       json={"message": USER}) as response:
        raw = response.read().decode()
    assert "\n: ping" in raw or raw.startswith(": ping")
    assert '"delta":"late"' in raw


def test_a_stream_that_fails_on_the_server_ends_with_one_retryable_run_error(
        client: httpx.Client, scripted_model: ScriptedModel, gateway: InProcess) -> None:
    scripted_model.enqueue([{"content": "one "}, {"content": "two "}, {"content": "three"}])
    whole = new_run(client)
    thread_id, run_id = whole[0].data["threadId"], whole[0].data["runId"]

    async def corrupt_third_frame(store: Store) -> None:  # a row the reader cannot take
        async with store.engine.begin() as connection:
            await connection.execute(update(RunFrameRow).where(
                RunFrameRow.run_id == run_id, RunFrameRow.seq == 3).values(frame=42))

    read_store(gateway, corrupt_third_frame)
    response = client.get(f"/v1/threads/{thread_id}/runs/{run_id}",
                          headers={"accept": "text/event-stream"})
    assert response.status_code == 200
    replay = events_of(response.text)

    # what the log held up to the bad row, then its end: one RUN_ERROR, nothing after it
    assert [e.type for e in replay[:-1]] == [e.type for e in whole[:len(replay) - 1]]
    assert [e.id for e in replay[:-1]] == [e.id for e in whole[:len(replay) - 1]]
    error = replay[-1]
    assert error.type == "RUN_ERROR" and [e.type for e in replay].count("RUN_ERROR") == 1
    assert error.data["code"] == "STREAM_FAILED" and error.data["isRetryable"] is True
    assert error.id is None  # the client's cursor stays on the last real event
    assert "Traceback" not in response.text and "TypeError" not in response.text
    # the operator sees why, with the run's id
    assert wait_for(lambda: run_id in gateway.log() and "event stream failed" in gateway.log())


def test_a_new_threads_seeded_messages_keep_their_order(
        client: httpx.Client, scripted_model: ScriptedModel):
    """The thread, its seed, the run and its input are written together (on PostgreSQL one
    statement, its rows from arrays): the history reads back, and reaches the model, in the
    order sent."""
    seed = [{"role": "user" if i % 2 == 0 else "assistant",
             "content": [{"type": "text", "text": f"seed {i}"}]} for i in range(7)]
    scripted_model.enqueue([{"content": "Answer."}])
    events = new_run(client, "last", thread={"userKey": DEFAULT_USER, "initialMessages": seed})

    thread_id = events[0].data["threadId"]
    messages = client.get(f"/v1/threads/{thread_id}/messages").json()["messages"]
    texts = [m["content"][0]["text"] for m in messages]
    assert texts == [f"seed {i}" for i in range(7)] + ["last", "Answer."]
    sent = scripted_model.requests[-1]["messages"]
    # The seed ends with a user message: the run's follows it as one (the roles alternate).
    assert [m.get("content") for m in sent] == [f"seed {i}" for i in range(6)] + [
        "seed 6\n\nlast"]
