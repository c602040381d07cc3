"""The Timbal HTTP/1.0 write path (spec/http.md) over HTTP: client-chosen thread ids, idempotent
and conflicting creates, messages that start runs, cancel, and errors in the spec's shape.

The app in the test process (`client`); the WebSocket side is in test_timbal_views.py (it needs
a port). A keyed app checks authentication and quotas.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import scripted_env
from tests.integration.test_limits import within_one_minute
from tests.support.inprocess_app import InProcessGateway
from tests.support.run_stream import slow_turn, wait_for, wait_for_status
from tests.support.scripted_model import ScriptedModel

USER = {"userKey": "timbal-user"}


def thread_path(thread_id: str, tail: str = "") -> str:
    return f"/v1/timbal/threads/{thread_id}{tail}"


def create(client: httpx.Client, thread_id: str, body: dict[str, Any] | None = None,
           **kwargs: Any) -> httpx.Response:
    return client.post(thread_path(thread_id), json={**USER, **(body or {})}, **kwargs)


def send(client: httpx.Client, thread_id: str, text: str) -> httpx.Response:
    return client.post(thread_path(thread_id, "/messages"), params=USER,
                       json={"content": text, "metadata": {"role": "user"}})


def test_create_is_idempotent_for_the_same_request_and_refuses_another(client: httpx.Client,
                                                                       caplog):
    thread_id = str(uuid.uuid4())
    secret = "sk-never-log-me-0123456789"
    body = {"agent": "default", "capabilities": {"tools": ["web_search"]},
            "credentials": {"apiKey": secret}}
    caplog.set_level(logging.DEBUG)

    first = create(client, thread_id, body)
    assert first.status_code == 201, first.text
    created = first.json()
    assert created["threadId"] == thread_id and created["status"] == "created"
    assert created["streamUrl"].startswith("ws") and created["streamUrl"].endswith(
        f"/v1/timbal/threads/{thread_id}/stream")
    # The same request again (keys in another order, the id in capitals): the same thread.
    again = create(client, thread_id.upper(), dict(reversed(list(body.items()))))
    assert again.status_code == 200, again.text
    assert again.json() == {**created, "status": "exists"}

    other = create(client, thread_id, {**body, "agent": None})
    assert other.status_code == 409
    assert other.json()["error"] == "conflict"
    assert other.json()["details"]["code"] == "THREAD_EXISTS"
    # Another user's create on the same id is a conflict too, and shows nothing of the first.
    theirs = client.post(thread_path(thread_id), json={**body, "userKey": "someone-else"})
    assert theirs.status_code == 409 and "timbal-user" not in theirs.text

    # The thread is an ordinary thread of its user, with the agent the body chose.
    tambo = client.get(f"/v1/threads/{thread_id}", params=USER)
    assert tambo.status_code == 200 and tambo.json()["id"] == thread_id
    assert secret not in caplog.text
    assert all(secret not in r.text for r in (first, again, other, theirs, tambo))


def test_create_refuses_what_is_not_a_uuid_in_the_spec_shape(client: httpx.Client):
    response = create(client, "not-a-uuid")
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "invalid_request" and "UUID" in body["message"]
    assert body["details"]["errors"] == {"threadId": "must be a valid UUID"}
    assert response.headers["content-type"].startswith("application/json")
    assert response.headers["x-request-id"]

    no_scope = client.post(thread_path(str(uuid.uuid4())), json={})
    assert no_scope.status_code == 400
    assert no_scope.json()["details"]["code"] == "USER_SCOPE_REQUIRED"
    unknown_agent = create(client, str(uuid.uuid4()), {"agent": "nobody"})
    assert unknown_agent.status_code == 404
    assert unknown_agent.json()["error"] == "not_found"


def test_a_message_starts_a_run_and_a_busy_thread_refuses_the_next(
        client: httpx.Client, scripted_model: ScriptedModel):
    thread_id = str(uuid.uuid4())
    assert create(client, thread_id).status_code == 201
    scripted_model.enqueue(slow_turn(200, 0.05), [{"content": "Second answer."}])

    accepted = send(client, thread_id, "count slowly")
    assert accepted.status_code == 202, accepted.text
    answer = accepted.json()
    assert answer["threadId"] == thread_id and answer["status"] == "processing"
    assert answer["receivedAt"].endswith("Z") and len(answer["messageId"]) == 26

    busy = send(client, thread_id, "are you there?")
    assert busy.status_code == 409
    assert busy.json()["error"] == "conflict"
    assert busy.json()["details"]["code"] == "CONCURRENT_RUN"

    cancel = client.post(thread_path(thread_id, "/cancel"), params=USER,
                         json={"reason": "user_requested"})
    assert cancel.status_code == 200, cancel.text
    run_id = cancel.json()["runId"]
    assert cancel.json()["status"] == "cancelling" and run_id
    wait_for_status(client, thread_id, run_id, "cancelled")
    log = client.get(thread_path(thread_id, f"/runs/{run_id}"), params=USER).text
    assert '"c":"run.cancelled"' in log
    # The user message's frame carries the id the 202 promised.
    assert f'"i":"{answer["messageId"]}"' in log

    # Idle again: the next message continues the thread (its history has the first exchange).
    assert client.post(thread_path(thread_id, "/cancel"), params=USER).json()["status"] == "idle"
    again = send(client, thread_id, "second")
    assert again.status_code == 202, again.text
    wait_for(lambda: client.get(f"/v1/threads/{thread_id}", params=USER).json()[
        "runStatus"] == "idle", what="the second run to end")
    said = [m["content"] for m in scripted_model.requests[-1]["messages"] if m["role"] == "user"]
    # The cancelled message is in it: as its own turn when the run had begun its answer, or,
    # cancelled before its first token, joined to the next (roles alternate, engine/history.py).
    assert "\n\n".join(said) == "count slowly\n\nsecond"


def test_messages_and_cancel_on_an_unknown_thread_are_404(client: httpx.Client):
    missing = str(uuid.uuid4())
    for path in ("/messages", "/cancel"):
        response = client.post(thread_path(missing, path), params=USER, json={"content": "hi"})
        assert response.status_code == 404, response.text
        assert response.json()["error"] == "thread_not_found"
    thread_id = str(uuid.uuid4())
    create(client, thread_id)
    bad = client.post(thread_path(thread_id, "/messages"), params=USER, json={"text": "hi"})
    assert bad.status_code == 400 and bad.json()["error"] == "invalid_request"
    # Another user's thread is not there.
    theirs = client.post(thread_path(thread_id, "/messages"), params={"userKey": "mallory"},
                         json={"content": "hi"})
    assert theirs.status_code == 404


# -- with keys --------------------------------------------------------------------------------

KEY = "timbal-key"


@pytest.fixture(scope="module")
def keyed(scripted_model: ScriptedModel, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[InProcessGateway]:
    server = InProcessGateway(tmp_path_factory.mktemp("timbal-keyed"), scripted_env(
        scripted_model, GATEWAY_API_KEYS=KEY, GATEWAY_KEY_RUNS_PER_MINUTE="2"))
    yield server.start()
    server.stop()


def test_without_a_key_nothing_is_written_and_quotas_answer_429(
        keyed: InProcessGateway, scripted_model: ScriptedModel):
    thread_id = str(uuid.uuid4())
    with keyed.client(timeout=30) as http:
        for headers in ({}, {"x-api-key": "wrong"}):
            refused = http.post(thread_path(thread_id), json=USER, headers=headers)
            assert refused.status_code == 401 and refused.json()["error"] == "unauthorized"
            assert refused.headers["x-request-id"]
        assert http.get(f"/v1/threads/{thread_id}", params=USER,
                        headers={"x-api-key": KEY}).status_code == 404

        http.headers["x-api-key"] = KEY
        within_one_minute(20)
        assert create(http, thread_id).status_code == 201  # a start, as the run below is
        scripted_model.enqueue([{"content": "One."}])
        assert send(http, thread_id, "one").status_code == 202
        wait_for(lambda: http.get(f"/v1/threads/{thread_id}", params=USER).json()[
            "runStatus"] == "idle", what="the run to end")
        limited = send(http, thread_id, "two")
    assert limited.status_code == 429
    body = limited.json()
    assert body["error"] == "rate_limited" and body["details"]["code"] == "RATE_LIMITED"
    assert int(limited.headers["retry-after"]) == body["retryAfter"] > 0
