"""Completion webhooks (docs/webhooks.md): a run that names a `webhook` has its end POSTed to a
real receiver on loopback (allowed explicitly), signed with `GATEWAY_WEBHOOK_SECRET`; a receiver
that fails is tried again, and a URL the gateway may not call is refused before the run starts.

The app in the test process (two on PostgreSQL + Redis, requests alternating between them, so
two senders look at every delivery).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import scripted_env
from tests.support import engines
from tests.support.gateway_server import USER
from tests.support.inprocess_app import InProcess, InProcessCluster, InProcessGateway
from tests.support.receiver import PostReceiver
from tests.support.run_stream import message, started_ids, wait_for
from tests.support.scripted_model import ScriptedModel
from tests.support.sse import run_events

SECRET = "whsec-test-0123456789-0123456789-abc"


class Receiver(PostReceiver):
    @property
    def url(self) -> str:
        return self.base + "/hooks/done?token=t0ps3cret"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver()
    yield found
    found.close()


@pytest.fixture(scope="module")
def hooked(scripted_model: ScriptedModel, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[InProcess]:
    env = scripted_env(scripted_model, GATEWAY_WEBHOOK_SECRET=SECRET,
                       GATEWAY_WEBHOOK_ALLOWED_HOSTS="127.0.0.1",
                       GATEWAY_WEBHOOK_BACKOFF_SECONDS="0.2", GATEWAY_CRON_POLL_SECONDS="0.2",
                       GATEWAY_WEBHOOK_MAX_ATTEMPTS="3")
    workdir = tmp_path_factory.mktemp("webhooks")
    server = (InProcessCluster(workdir, env) if engines.ENGINES is not None
              else InProcessGateway(workdir, env)).start()
    yield server
    server.stop()


@pytest.fixture
def http(hooked: InProcess) -> Iterator[httpx.Client]:
    with hooked.client(event_hooks=USER, timeout=30, headers={"x-api-key": "test-key"}) as c:
        yield c


def verify(headers: dict[str, str], body: bytes) -> bool:
    """What a receiver does (docs/webhooks.md): HMAC-SHA256 of `<timestamp>.<body>`."""
    timestamp = headers["x-gateway-timestamp"]
    expected = hmac.new(SECRET.encode(), timestamp.encode() + b"." + body,
                        hashlib.sha256).hexdigest()
    return hmac.compare_digest(headers["x-gateway-signature"], "v1=" + expected)


def run_with_webhook(http: httpx.Client, url: str) -> tuple[str, str]:
    events = run_events(http, "POST", "/v1/threads/runs", json={
        "message": message("ping"), "webhook": url, "runMetadata": {"job": "nightly"}})
    return started_ids(events)


def test_a_run_end_is_posted_once_signed(http: httpx.Client, receiver: Receiver) -> None:
    thread_id, run_id = run_with_webhook(http, receiver.url)
    wait_for(receiver.delivered, what="the webhook")
    [post] = receiver.received
    headers, body = post.headers, post.body
    assert verify(headers, body)
    assert not verify(headers, body + b" ")  # the signature covers the body
    sent = json.loads(body)
    assert sent["runId"] == run_id and sent["threadId"] == thread_id
    assert sent["status"] == "completed" and "error" not in sent
    assert sent["metadata"] == {"job": "nightly"}
    assert sent["usage"] and sent["usage"][0]["totalTokens"] > 0
    assert headers["x-gateway-delivery"] == run_id


def test_a_failing_receiver_gets_the_third_try(http: httpx.Client, receiver: Receiver
                                               ) -> None:
    receiver.fail_first = 2
    _, run_id = run_with_webhook(http, receiver.url)
    wait_for(receiver.delivered, what="the third try")
    assert [post.status for post in receiver.received] == [503, 503, 200]
    assert all(json.loads(post.body)["runId"] == run_id for post in receiver.received)


@pytest.mark.parametrize("url", ["http://example.com/hook", "ftp://127.0.0.1/x",
                                 "http://user:pw@127.0.0.1/x"])
def test_a_webhook_the_gateway_may_not_call_is_refused(http: httpx.Client, url: str) -> None:
    response = http.post("/v1/threads/runs", json={"message": message("x"), "webhook": url},
                         headers={"accept": "text/event-stream"})
    assert response.status_code == 400
    assert response.json()["code"] == "WEBHOOK_NOT_ALLOWED"
    assert "t0ps3cret" not in response.text


def test_an_agui_run_takes_a_webhook(http: httpx.Client, receiver: Receiver) -> None:
    events = run_events(http, "POST", "/v1/agui/agents/default/run", json={
        "threadId": "t-hook-1", "runId": "r-hook-1", "messages": [
            {"id": "m1", "role": "user", "content": "hi"}],
        "tools": [], "context": [], "state": None,
        "forwardedProps": {"webhook": receiver.url}})
    assert events
    wait_for(receiver.delivered, what="the AG-UI run's webhook")
    assert json.loads(receiver.received[0].body)["status"] == "completed"


def test_the_console_lists_deliveries_with_their_outcome(http: httpx.Client,
                                                         receiver: Receiver) -> None:
    """`GET /v1/admin/webhooks` (development mode answers it without an admin key): the
    receiver's host, never the URL's token; attempts and the last status."""
    receiver.fail_first = 1
    _, run_id = run_with_webhook(http, receiver.url)
    wait_for(receiver.delivered, what="the second try")

    def recorded() -> httpx.Response | None:
        # The receiver answers before the sender records the outcome.
        response = http.get("/v1/admin/webhooks")
        assert response.status_code == 200, response.text
        states = [d["state"] for d in response.json()["deliveries"] if d["runId"] == run_id]
        return response if states == ["delivered"] else None
    response = wait_for(recorded, what="the delivery to be recorded")
    assert "t0ps3cret" not in response.text and "/hooks/done" not in response.text
    [mine] = [d for d in response.json()["deliveries"] if d["runId"] == run_id]
    assert mine["host"] == "127.0.0.1"
    assert mine["attempts"] == 2 and mine["lastStatus"] == 200 and mine["doneAt"]


def test_a_receiver_that_never_answers_well_is_given_up(http: httpx.Client, hooked: InProcess,
                                                        receiver: Receiver) -> None:
    """Bounded: at most `GATEWAY_WEBHOOK_MAX_ATTEMPTS` tries (3 here), then `failed`."""
    receiver.fail_first = 1000
    _, run_id = run_with_webhook(http, receiver.url)

    def failed() -> dict[str, Any] | None:
        found = [d for d in http.get("/v1/admin/webhooks").json()["deliveries"]
                 if d["runId"] == run_id and d["state"] == "failed"]
        return found[0] if found else None
    delivery = wait_for(failed, what="the webhook to be given up")
    assert delivery["attempts"] == 3 and delivery["lastStatus"] == 503
    assert len(receiver.received) == 3


def test_a_pause_for_a_client_tool_notifies_the_same_way(
        http: httpx.Client, receiver: Receiver, scripted_model: ScriptedModel) -> None:
    scripted_model.enqueue([{"tool_call": {"index": 0, "id": "call_w", "name": "get_weather",
                                           "arguments": '{"city":"Oslo"}'}}])
    events = run_events(http, "POST", "/v1/threads/runs", json={
        "message": message("Weather in Oslo?"), "webhook": receiver.url,
        "tools": [{"name": "get_weather", "description": "Get weather",
                   "inputSchema": {"type": "object",
                                   "properties": {"city": {"type": "string"}}}}]})
    _, run_id = started_ids(events)
    wait_for(receiver.delivered, what="the pause's webhook")
    [post] = receiver.received
    assert verify(post.headers, post.body)
    sent = json.loads(post.body)
    assert sent["runId"] == run_id and sent["status"] == "awaiting_input"
    assert sent["pendingToolCalls"] == [{"toolCallId": "call_w", "name": "get_weather"}]


def test_a_timbal_message_takes_a_webhook(http: httpx.Client, receiver: Receiver) -> None:
    thread_id = str(uuid.uuid4())
    user = {"userKey": "timbal-hooks"}
    assert http.post(f"/v1/timbal/threads/{thread_id}", json=user).status_code in (200, 201)
    sent = http.post(f"/v1/timbal/threads/{thread_id}/messages", params=user,
                     json={"content": "hi", "webhook": receiver.url})
    assert sent.status_code == 202, sent.text
    wait_for(receiver.delivered, what="the Timbal run's webhook")
    body = json.loads(receiver.received[0].body)
    assert body["threadId"] == thread_id and body["status"] == "completed"
