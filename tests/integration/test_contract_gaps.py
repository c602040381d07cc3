"""The contract details a production Tambo app hits: suggestions on the beta paths, context with
tool results, the model allow-list, tool results read back, Idempotency-Key reuse and expiry,
attachments (images and files) reaching the model, and voice input."""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import scripted_env
from tests.support.gateway_server import USER
from tests.support.inprocess_app import InProcessGateway
from tests.support.scripted_model import ScriptedModel
from tests.support.sse import run_events, text_of

TOOL = {"name": "get_weather", "description": "Weather of a city",
        "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}}}
IDEMPOTENCY_TTL = 2


def user(text: str) -> dict:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


@pytest.fixture(scope="module")
def gaps_gateway(scripted_model: ScriptedModel, tmp_path_factory: pytest.TempPathFactory
                 ) -> Iterator[InProcessGateway]:
    server = InProcessGateway(tmp_path_factory.mktemp("gaps"), scripted_env(
        scripted_model,
        GATEWAY_MODELS="openai/scripted-large,openai/scripted-small,openai/gpt-3.5-turbo",
        GATEWAY_MAX_ATTACHMENT_BYTES="2000", GATEWAY_TRANSCRIPTION_MODEL="openai/whisper-1",
        GATEWAY_IMAGE_URLS="pass",
        GATEWAY_IDEMPOTENCY_TTL_SECONDS=str(IDEMPOTENCY_TTL)))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def http(gaps_gateway: InProcessGateway) -> Iterator[httpx.Client]:
    with gaps_gateway.client(timeout=30, event_hooks=USER, headers={"x-api-key": "k"}) as client:
        yield client


def problem(response: httpx.Response, status: int, code: str) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["code"] == code, body
    return body


def paused_on_tool(http: httpx.Client, model: ScriptedModel) -> tuple[str, str]:
    model.enqueue([{"tool_call": {"index": 0, "id": "call_w", "name": "get_weather",
                                  "arguments": '{"city": "Oslo"}'}}])
    events = run_events(http, "POST", "/v1/threads/runs",
                        json={"message": user("weather?"), "tools": [TOOL]})
    assert events[-2].data["name"] == "tambo.run.awaiting_input"
    return events[0].data["threadId"], events[0].data["runId"]


def test_beta_suggestion_paths_answer_a_bare_array(http, scripted_model):
    scripted_model.enqueue([{"content": "Hello."}])
    events = run_events(http, "POST", "/v1/threads/runs", json={"message": user("hi")})
    thread_id = events[0].data["threadId"]
    message_id = next(e.data["messageId"] for e in events if e.type == "TEXT_MESSAGE_START")
    beta = f"/threads/{thread_id}/messages/{message_id}/suggestions"
    assert http.get(beta).json() == []
    scripted_model.enqueue({"steps": [{"content": json.dumps({"suggestions": [
        {"title": "More", "detailedSuggestion": "Tell me more"}]})}], "stream": False})
    created = http.post(beta, json={"maxSuggestions": 1})
    assert created.status_code == 201, created.text
    assert [s["title"] for s in created.json()] == ["More"]
    assert [s["title"] for s in http.get(beta).json()] == ["More"]
    v1 = http.get(f"/v1{beta}").json()
    assert v1["hasMore"] is False and [s["title"] for s in v1["suggestions"]] == ["More"]


def test_additional_context_with_tool_results_reaches_the_model(http, scripted_model):
    thread_id, run_id = paused_on_tool(http, scripted_model)
    scripted_model.enqueue([{"content": "Sunny in Oslo."}])
    continuation = run_events(http, "POST", f"/v1/threads/{thread_id}/runs", json={
        "message": {"role": "user", "content": [
            {"type": "tool_result", "toolUseId": "call_w",
             "content": [{"type": "text", "text": "sunny"}]}],
            "additionalContext": {"page": "/forecast", "units": "metric"}},
        "previousRunId": run_id, "tools": [TOOL]})
    assert text_of(continuation) == "Sunny in Oslo."
    sent = scripted_model.requests[-1]["messages"]
    assert sent[-2] == {"role": "tool", "tool_call_id": "call_w", "content": "sunny"}
    assert sent[-1]["role"] == "user"
    assert '"page": "/forecast"' in sent[-1]["content"]


def test_tool_results_read_back_as_the_real_server_gives_them(http, scripted_model):
    thread_id, run_id = paused_on_tool(http, scripted_model)
    scripted_model.enqueue([{"content": "Done."}])
    run_events(http, "POST", f"/v1/threads/{thread_id}/runs", json={
        "message": {"role": "user", "content": [
            {"type": "tool_result", "toolUseId": "call_w",
             "content": [{"type": "text", "text": "rain"}]}]},
        "previousRunId": run_id, "tools": [TOOL]})
    messages = http.get(f"/v1/threads/{thread_id}/messages").json()["messages"]
    result = next(m for m in messages if m["content"][0]["type"] == "tool_result")
    assert result["role"] == "assistant"
    assert result["content"] == [{"type": "tool_result", "toolUseId": "call_w",
                                  "content": [{"type": "text", "text": "rain"}]}]


def test_a_request_may_pick_only_an_allowed_model(http, scripted_model):
    scripted_model.enqueue([{"content": "From the large one."}])
    events = run_events(http, "POST", "/v1/threads/runs",
                        json={"message": user("hi"), "model": "openai/scripted-large"})
    assert text_of(events) == "From the large one."
    assert scripted_model.requests[-1]["model"] == "scripted-large"
    before = len(http.get("/v1/threads", params={"limit": 100}).json()["threads"])
    body = problem(http.post("/v1/threads/runs", json={"message": user("hi"),
                                                        "model": "openai/gpt-4o"}),
                   400, "MODEL_NOT_ALLOWED")
    assert "openai/scripted-small" in body["allowedModels"]
    assert "GATEWAY_MODELS" in body["detail"]
    # Refused before anything was created or sent to a model.
    assert len(http.get("/v1/threads", params={"limit": 100}).json()["threads"]) == before


def test_an_idempotency_key_is_bound_to_its_body_and_expires(http, scripted_model):
    key = first_key = {"idempotency-key": f"key-{time.time_ns()}"}
    scripted_model.enqueue([{"content": "Once."}])
    first = run_events(http, "POST", "/v1/threads/runs", headers=key,
                       json={"message": user("once")})
    retry = run_events(http, "POST", "/v1/threads/runs", headers=key,
                       json={"message": user("once")})
    assert retry[0].data["runId"] == first[0].data["runId"]
    problem(http.post("/v1/threads/runs", headers=key, json={"message": user("other")}),
            422, "IDEMPOTENCY_KEY_REUSED")

    # On an existing thread too (the key above is already this thread's first run's).
    thread_id, run_id = first[0].data["threadId"], first[0].data["runId"]
    problem(http.post(f"/v1/threads/{thread_id}/runs", headers=key, json={
        "message": user("next"), "previousRunId": run_id}), 422, "IDEMPOTENCY_KEY_REUSED")
    key = {"idempotency-key": f"key-{time.time_ns()}"}
    body = {"message": user("next"), "previousRunId": run_id}
    scripted_model.enqueue([{"content": "Next."}])
    second = run_events(http, "POST", f"/v1/threads/{thread_id}/runs", headers=key, json=body)
    problem(http.post(f"/v1/threads/{thread_id}/runs", headers=key,
                      json={**body, "message": user("changed")}), 422, "IDEMPOTENCY_KEY_REUSED")

    time.sleep(IDEMPOTENCY_TTL + 0.5)
    # Expired: the same key starts a new run instead of replaying the old one.
    scripted_model.enqueue([{"content": "Again."}])
    again = run_events(http, "POST", f"/v1/threads/{thread_id}/runs", headers=key, json={
        "message": user("again"), "previousRunId": second[0].data["runId"]})
    assert again[0].data["runId"] != second[0].data["runId"]
    assert text_of(again) == "Again."
    scripted_model.enqueue([{"content": "New thread."}])
    fresh = run_events(http, "POST", "/v1/threads/runs", headers=first_key,
                       json={"message": user("other")})
    assert fresh[0].data["threadId"] != thread_id and text_of(fresh) == "New thread."


# A 1x1 PNG, as React's input box would attach it.
PNG = base64.b64encode(bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082")).decode()


def test_image_urls_are_refused_unless_the_operator_passes_them(client: httpx.Client):
    """By default an image attached by URL is refused: a self-hosted model would fetch it from
    inside the operator's network (GATEWAY_IMAGE_URLS=pass hands it on, as below)."""
    response = client.post("/v1/threads/runs", json={"message": {"role": "user", "content": [
        {"type": "text", "text": "what is this?"},
        {"type": "resource", "resource": {"uri": "https://169.254.169.254/latest.jpg",
                                          "mimeType": "image/jpeg"}}]}})
    problem(response, 400, "IMAGE_URL_NOT_ALLOWED")


def test_attachments_reach_the_model_as_content_parts(http, scripted_model):
    scripted_model.enqueue([{"content": "A tiny image."}])
    events = run_events(http, "POST", "/v1/threads/runs", json={"message": {
        "role": "user", "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "resource", "resource": {"name": "dot.png", "mimeType": "image/png",
                                              "blob": PNG}},
            {"type": "resource", "resource": {"uri": "file:///notes.txt",
                                              "mimeType": "text/plain", "text": "buy milk"}},
            {"type": "resource", "resource": {"uri": "https://example.com/cat.jpg",
                                              "mimeType": "image/jpeg"}}]}})
    assert text_of(events) == "A tiny image."
    sent = scripted_model.requests[-1]["messages"][-1]
    assert sent["role"] == "user"
    assert sent["content"] == [
        {"type": "text", "text": "what is this?"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
        {"type": "text", "text": "Resource file:///notes.txt:\nbuy milk"},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}}]

    # The thread shows the attachment, and the next run's history still carries it.
    thread_id, run_id = events[0].data["threadId"], events[0].data["runId"]
    stored = http.get(f"/v1/threads/{thread_id}/messages").json()["messages"][0]
    assert stored["content"][1] == {"type": "resource", "resource": {
        "name": "dot.png", "mimeType": "image/png", "blob": PNG}}
    scripted_model.enqueue([{"content": "Still tiny."}])
    run_events(http, "POST", f"/v1/threads/{thread_id}/runs",
               json={"message": user("and now?"), "previousRunId": run_id})
    history = scripted_model.requests[-1]["messages"]
    assert any(part.get("type") == "image_url" for message in history
               if isinstance(message["content"], list) for part in message["content"])


def test_attachments_the_model_cannot_take_are_refused_before_the_run(http, scripted_model):
    big = base64.b64encode(b"x" * 3000).decode()
    image = {"type": "resource", "resource": {"name": "big.png", "mimeType": "image/png",
                                              "blob": big}}
    body = problem(http.post("/v1/threads/runs", json={"message": {
        "role": "user", "content": [image]}}), 413, "ATTACHMENT_TOO_LARGE")
    assert "2000" in body["detail"]
    small = {"type": "resource", "resource": {"name": "dot.png", "mimeType": "image/png",
                                              "blob": PNG}}
    body = problem(http.post("/v1/threads/runs", json={
        "message": {"role": "user", "content": [small]}, "model": "openai/gpt-3.5-turbo"}),
        400, "UNSUPPORTED_ATTACHMENT")
    assert "images" in body["detail"]
    problem(http.post("/v1/threads/runs", json={"message": {"role": "user", "content": [
        {"type": "resource", "resource": {"name": "x.pdf", "mimeType": "application/pdf",
                                          "blob": "not base64!"}}]}}),
            400, "INVALID_ATTACHMENT")
    assert scripted_model.requests == []


def test_voice_input_is_transcribed_through_the_configured_model(http, scripted_model):
    scripted_model.enqueue_transcript("what is the weather in Oslo")
    recording = b"\x1aE\xdf\xa3" + b"\0" * 500  # a WebM header, as MediaRecorder writes
    # As useTamboVoice posts it: multipart field `file`, recording.webm, audio/webm.
    response = http.post("/audio/transcribe",
                         files={"file": ("recording.webm", recording, "audio/webm")})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    assert response.text == "what is the weather in Oslo"
    assert scripted_model.transcriptions == [{"model": "whisper-1", "size": len(recording),
                                              "filename": "recording.webm",
                                              "contentType": "audio/webm"}]
    problem(http.post("/audio/transcribe", files={"file": ("a.txt", b"hello", "text/plain")}),
            415, "UNSUPPORTED_MEDIA_TYPE")
    problem(http.post("/audio/transcribe", files={"other": ("a.webm", b"x", "audio/webm")}),
            400, "VALIDATION_ERROR")


def test_voice_input_says_how_to_enable_it(client: httpx.Client):
    body = problem(client.post("/audio/transcribe",
                               files={"file": ("recording.webm", b"x", "audio/webm")}),
                   400, "TRANSCRIPTION_DISABLED")
    assert "GATEWAY_TRANSCRIPTION_MODEL" in body["detail"]


def test_a_runs_metadata_is_stored_and_returned_with_its_status(http, scripted_model):
    """`metadata` (the Tambo v1 proposal's name) or `runMetadata` (the client's), read back
    from the run's status; an AG-UI run's own record of its input is not shown as metadata."""
    def status(body: dict) -> dict:
        scripted_model.enqueue([{"content": "ok"}])
        started = run_events(http, "POST", "/v1/threads/runs", json=body)[0].data
        return http.get(f"/v1/threads/{started['threadId']}/runs/{started['runId']}",
                        headers={"accept": "application/json"}).json()

    assert status({"message": user("a"), "metadata": {"source": "seed"}})["metadata"] == {
        "source": "seed"}
    assert status({"message": user("b"), "runMetadata": {"n": 1}})["metadata"] == {"n": 1}
    assert "metadata" not in status({"message": user("c")})


def test_create_thread_starts_a_run_on_a_thread_named_by_the_client(http, scripted_model):
    """`createThread: true` on `POST /v1/threads/{id}/runs` (the Tambo v1 proposal): the
    thread is created under that id; once it exists the flag changes nothing."""
    thread_id = f"client-{time.time_ns()}"
    scripted_model.enqueue([{"content": "first"}], [{"content": "second"}])
    first = run_events(http, "POST", f"/v1/threads/{thread_id}/runs",
                       json={"message": user("hi"), "createThread": True})
    assert first[0].data["threadId"] == thread_id and text_of(first) == "first"
    second = run_events(http, "POST", f"/v1/threads/{thread_id}/runs", json={
        "message": user("again"), "createThread": True,
        "previousRunId": first[0].data["runId"]})
    assert text_of(second) == "second"
    assert len(http.get(f"/v1/threads/{thread_id}/messages").json()["messages"]) == 4
    # Without the flag an unknown thread is still a 404, and a bad id is refused.
    assert http.post(f"/v1/threads/nope-{time.time_ns()}/runs",
                     json={"message": user("x")}).status_code == 404
    assert http.post("/v1/threads/" + "x" * 65 + "/runs",
                     json={"message": user("x"), "createThread": True}).status_code == 400


def test_a_components_context_tools_are_offered_only_while_it_is_shown(http, scripted_model):
    """`contextTools` (the Tambo v1 proposal): a component's tools reach the model only once the
    component is in the thread, and each stops at its own `maxCalls`."""
    card = {"name": "StockCard", "description": "A stock", "propsSchema": {"type": "object"},
            "contextTools": [{"name": "refresh_quote", "description": "Refresh the quote",
                              "inputSchema": {"type": "object"}, "maxCalls": 1}]}

    def offered() -> set[str]:
        return {t["function"]["name"] for t in scripted_model.requests[-1].get("tools", [])}

    scripted_model.enqueue([{"tool_call": {"index": 0, "id": "call_card",
                                           "name": "show_component_StockCard",
                                           "arguments": '{"symbol": "ACME"}'}}])
    first = run_events(http, "POST", "/v1/threads/runs",
                       json={"message": user("show ACME"), "availableComponents": [card]})
    assert "refresh_quote" not in offered()  # not shown yet
    thread_id, run_id = first[0].data["threadId"], first[-1].data["runId"]
    scripted_model.enqueue([{"tool_call": {"index": 0, "id": "call_rq", "name": "refresh_quote",
                                           "arguments": "{}"}}])
    second = run_events(http, "POST", f"/v1/threads/{thread_id}/runs", json={
        "message": user("refresh"), "availableComponents": [card], "previousRunId": run_id})
    assert "refresh_quote" in offered()
    assert second[-2].data["name"] == "tambo.run.awaiting_input"  # a client tool: it pauses
    scripted_model.enqueue([{"content": "Refreshed."}])
    run_events(http, "POST", f"/v1/threads/{thread_id}/runs", json={
        "availableComponents": [card], "previousRunId": second[0].data["runId"],
        "message": {"role": "user", "content": [{"type": "tool_result", "toolUseId": "call_rq",
                                                 "content": [{"type": "text", "text": "42"}]}]}})
    assert "refresh_quote" not in offered()  # its one call is spent


def test_agui_media_parts_reach_the_model_as_tambo_resources_do(http, scripted_model):
    """AG-UI parity: image, audio and document parts of an AG-UI user message (and the
    `binary` part of a client before 1.0) reach the model exactly as the Tambo `resource`
    blocks of the same files, and are checked the same way."""
    audio = base64.b64encode(b"ID3" + b"\0" * 40).decode()
    tambo = [{"type": "text", "text": "what is this?"},
             {"type": "resource", "resource": {"mimeType": "image/png", "blob": PNG}},
             {"type": "resource", "resource": {"uri": "https://example.com/cat.jpg",
                                               "mimeType": "image/jpeg"}},
             {"type": "resource", "resource": {"name": "a.mp3", "mimeType": "audio/mpeg",
                                               "blob": audio}}]
    agui = [{"type": "text", "text": "what is this?"},
            {"type": "image", "source": {"type": "data", "value": PNG, "mimeType": "image/png"}},
            {"type": "image", "source": {"type": "url", "value": "https://example.com/cat.jpg",
                                         "mimeType": "image/jpeg"}},
            {"type": "audio", "source": {"type": "data", "value": audio,
                                         "mimeType": "audio/mpeg"},
             "metadata": {"filename": "a.mp3"}}]
    legacy = [*agui[:1], {"type": "binary", "mimeType": "image/png", "data": PNG}]

    def agui_run(content: list, version: str | None = "1.0") -> httpx.Response:
        body = {"threadId": f"t-{uuid.uuid4()}", "runId": f"r-{uuid.uuid4()}", "tools": [],
                "context": [], "state": {}, "forwardedProps": {},
                "messages": [{"id": "m1", "role": "user", "content": content}]}
        return http.post("/v1/agui/agents/default/run", json={
            **body, **({"protocolVersion": version} if version else {})})

    scripted_model.enqueue(*[[{"content": "Seen."}]] * 3)
    run_events(http, "POST", "/v1/threads/runs", json={"message": {"role": "user",
                                                                    "content": tambo}})
    assert agui_run(agui).status_code == 200
    assert agui_run(legacy, version=None).status_code == 200
    from_tambo, from_agui, from_legacy = (r["messages"][-1]["content"]
                                          for r in scripted_model.requests[-3:])
    assert from_agui == from_tambo and from_legacy == from_tambo[:2]
    assert [p["type"] for p in from_agui] == ["text", "image_url", "image_url", "file"]

    big = base64.b64encode(b"x" * 3000).decode()
    problem(agui_run([{"type": "document", "source": {
        "type": "data", "value": big, "mimeType": "application/pdf"}}]), 413,
        "ATTACHMENT_TOO_LARGE")
    problem(agui_run([{"type": "image", "source": {"type": "file", "value": "file-123"}}]),
            400, "UNSUPPORTED_ATTACHMENT")
    assert len(scripted_model.requests) == 3


def test_a_tool_message_with_is_error_is_stored_as_an_error(http, scripted_model):
    """The proposal's `role: "tool"` input message with `isError`: the model and the listing
    see an error, not a success."""
    thread_id, run_id = paused_on_tool(http, scripted_model)
    scripted_model.enqueue([{"content": "No such city."}])
    run_events(http, "POST", f"/v1/threads/{thread_id}/runs", json={
        "message": {"role": "tool", "toolCallId": "call_w", "content": "City not found",
                    "isError": True},
        "previousRunId": run_id, "tools": [TOOL]})
    messages = http.get(f"/v1/threads/{thread_id}/messages").json()["messages"]
    result = next(m for m in messages if m["content"][0]["type"] == "tool_result")
    assert result["content"][0]["isError"] is True
    frames = [json.loads(line) for line in
              http.get(f"/v1/timbal/threads/{thread_id}").text.splitlines() if line]
    stored = next(f["v"] for f in frames if f.get("v", {}).get("type") == "tool_result")
    assert stored["status"] == "error" and stored["error"] == "City not found"


def test_a_client_tool_output_that_is_json_is_stored_as_json(http, scripted_model):
    thread_id, run_id = paused_on_tool(http, scripted_model)
    scripted_model.enqueue([{"content": "21 degrees."}])
    run_events(http, "POST", f"/v1/threads/{thread_id}/runs", json={
        "message": {"role": "user", "content": [
            {"type": "tool_result", "toolUseId": "call_w",
             "content": [{"type": "text", "text": '{"city": "Oslo", "tempC": 21}'}]}]},
        "previousRunId": run_id, "tools": [TOOL]})
    frames = [json.loads(line) for line in
              http.get(f"/v1/timbal/threads/{thread_id}").text.splitlines() if line]
    stored = next(f["v"] for f in frames if f.get("v", {}).get("type") == "tool_result")
    assert stored["output"] == {"city": "Oslo", "tempC": 21}
    sent = scripted_model.requests[-1]["messages"]
    assert json.loads(sent[-1]["content"]) == {"city": "Oslo", "tempC": 21}


@pytest.mark.parametrize("name", ["get.weather", "get weather", "météo"])
def test_a_tool_name_a_provider_refuses_is_refused_before_the_run(http, name):
    response = http.post("/v1/threads/runs", json={
        "message": user("hi"), "tools": [{**TOOL, "name": name}]})
    body = problem(response, 400, "VALIDATION_ERROR")
    assert "name" in json.dumps(body)


def test_the_proposals_image_block_reaches_the_model(http, scripted_model):
    """The Tambo v1 proposal's `image` block (issue 44): 200, and the image reaches the model
    as a React attachment does."""
    scripted_model.enqueue([{"content": "A dot."}])
    events = run_events(http, "POST", "/v1/threads/runs", json={"message": {
        "role": "user", "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image", "source": {"type": "base64", "mediaType": "image/png",
                                         "data": PNG}},
            {"type": "image", "source": {"type": "url",
                                         "url": "https://example.com/cat.jpg"}}]}})
    assert text_of(events) == "A dot."
    assert scripted_model.requests[-1]["messages"][-1]["content"] == [
        {"type": "text", "text": "what is this?"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}}]


def test_the_proposals_media_blocks_meet_the_attachment_rules(http, client, scripted_model):
    big = base64.b64encode(b"x" * 3000).decode()
    problem(http.post("/v1/threads/runs", json={"message": {"role": "user", "content": [
        {"type": "audio", "source": {"type": "base64", "mediaType": "audio/wav",
                                     "data": big}}]}}), 413, "ATTACHMENT_TOO_LARGE")
    problem(http.post("/v1/threads/runs", json={"message": {"role": "user", "content": [
        {"type": "file", "source": {"type": "file_id", "fileId": "file-abc"}}]}}),
        400, "UNSUPPORTED_ATTACHMENT")
    # Without GATEWAY_IMAGE_URLS=pass (the default gateway), an image URL is refused.
    problem(client.post("/v1/threads/runs", json={"message": {"role": "user", "content": [
        {"type": "image", "source": {"type": "url",
                                     "url": "https://169.254.169.254/latest.jpg"}}]}}),
        400, "IMAGE_URL_NOT_ALLOWED")
    assert scripted_model.requests == []


def test_initial_messages_keep_their_images(http, scripted_model):
    """A thread seeded with an image (React's `initialMessages`): the image stays in the
    thread, and the model sees it."""
    scripted_model.enqueue([{"content": "Still a dot."}])
    events = run_events(http, "POST", "/v1/threads/runs", json={
        "message": user("and this one?"),
        "thread": {"initialMessages": [{"role": "user", "content": [
            {"type": "text", "text": "look"},
            {"type": "image", "source": {"type": "base64", "mediaType": "image/png",
                                         "data": PNG}}]}]}})
    assert text_of(events) == "Still a dot."
    first = scripted_model.requests[-1]["messages"][0]
    assert first["role"] == "user" and {"type": "image_url", "image_url": {
        "url": f"data:image/png;base64,{PNG}"}} in first["content"]
    stored = http.get(f"/v1/threads/{events[0].data['threadId']}/messages").json()["messages"]
    assert stored[0]["content"][1]["resource"]["blob"] == PNG


def test_initial_messages_meet_the_attachment_rules(http):
    big = base64.b64encode(b"x" * 3000).decode()
    problem(http.post("/v1/threads", json={"initialMessages": [{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "mediaType": "image/png",
                                     "data": big}}]}]}), 413, "ATTACHMENT_TOO_LARGE")
