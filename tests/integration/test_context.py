"""A long thread on a model with a small window (docs/context.md), on a real gateway (in the
test process; two apps on PostgreSQL + Redis with GATEWAY_TEST_BACKEND=postgres): the scripted
model refuses (400 `context_length_exceeded`) any request longer than its window, and the
gateway, told the budget by `GATEWAY_MAX_INPUT_TOKENS`, leaves older turns out so that every run
finishes and the model always gets the newest message."""

from __future__ import annotations

import random
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import scripted_env
from tests.support import engines
from tests.support.gateway_server import DEFAULT_USER, USER
from tests.support.inprocess_app import InProcess, InProcessCluster, InProcessGateway
from tests.support.run_stream import message
from tests.support.scripted_model import ScriptedModel
from tests.support.sse import run_events

WINDOW = 6000  # the model's window, in its tokens (characters / 4)
BUDGET = 3000  # GATEWAY_MAX_INPUT_TOKENS: the gateway's count is litellm's, kept well inside
WORDS = ("river", "lamp", "orange", "quiet", "seventeen", "paper", "window", "garden", "cloud",
         "engine", "silver", "morning", "harbour", "pencil", "violet", "thunder")


@pytest.fixture(scope="module")
def small_model() -> Iterator[ScriptedModel]:
    with ScriptedModel() as model:
        model.context_window = WINDOW
        yield model


@pytest.fixture(scope="module")
def gateway(small_model: ScriptedModel, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[InProcess]:
    env = scripted_env(small_model, GATEWAY_MAX_INPUT_TOKENS=str(BUDGET))
    workdir = tmp_path_factory.mktemp("context")
    server = (InProcessCluster(workdir, env) if engines.ENGINES is not None
              else InProcessGateway(workdir, env)).start()
    yield server
    server.stop()


@pytest.fixture
def client(gateway: InProcess) -> Iterator[httpx.Client]:
    with gateway.client(event_hooks=USER, timeout=30, headers={"x-api-key": "test-key"}) as http:
        yield http


def long_text(n: int, words: int = 300) -> str:
    """About 2,000 characters (500 of the model's tokens; its echo doubles each turn)."""
    pick = random.Random(n)
    return f"message {n}: " + " ".join(pick.choice(WORDS) for _ in range(words))


def last_user_text(body: dict) -> str:
    users = [m for m in body["messages"] if m["role"] == "user"]
    return users[-1]["content"]


def test_forty_long_messages_on_one_thread_all_finish(client: httpx.Client,
                                                      small_model: ScriptedModel) -> None:
    thread_id = run_id = None
    for n in range(40):
        text = long_text(n)
        body: dict = {"message": message(text)}
        if thread_id is None:
            url, body["thread"] = "/v1/threads/runs", {"userKey": DEFAULT_USER}
        else:
            url, body["previousRunId"] = f"/v1/threads/{thread_id}/runs", run_id
        events = run_events(client, "POST", url, json=body)
        assert events[-1].type == "RUN_FINISHED", (n, events[-1].data)
        thread_id, run_id = events[0].data["threadId"], events[0].data["runId"]
        assert last_user_text(small_model.requests[-1]) == text

    assert small_model.overflows == 0
    sent = small_model.requests[-1]["messages"]
    assert len(sent) < 20  # the newest turns only, not 80 messages
    thread = client.get(f"/v1/threads/{thread_id}").json()
    assert thread["historyTrimmed"] is True
    assert 0 < thread["contextTokens"] <= BUDGET
    # The thread itself keeps everything: only what the model is sent is trimmed.
    messages = client.get(f"/v1/threads/{thread_id}/messages", params={"limit": 100}).json()
    assert len(messages["messages"]) == 80


def test_a_message_larger_than_the_budget_is_refused_before_streaming(
        client: httpx.Client, small_model: ScriptedModel) -> None:
    before = len(small_model.requests)
    refused = client.post("/v1/threads/runs", json={
        "message": message(long_text(99, words=3000)), "thread": {"userKey": DEFAULT_USER}})

    assert refused.status_code == 400
    assert refused.headers["content-type"].startswith("application/problem+json")
    problem = refused.json()
    assert problem["code"] == "MESSAGE_TOO_LARGE_FOR_MODEL"
    assert problem["tokens"] > problem["budgetTokens"]
    assert len(small_model.requests) == before  # the model was never called


def test_a_short_thread_is_sent_whole(client: httpx.Client, small_model: ScriptedModel) -> None:
    events = run_events(client, "POST", "/v1/threads/runs", json={
        "message": message("hello"), "thread": {"userKey": DEFAULT_USER}})
    thread = client.get(f"/v1/threads/{events[0].data['threadId']}").json()

    assert thread["historyTrimmed"] is False
    assert thread["contextTokens"] > 0
