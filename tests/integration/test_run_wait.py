"""Run and wait from outside: `POST /v1/threads[/{id}]/runs/wait` answers the ended run as JSON
(the messages it added, its usage, its error), a run longer than `GATEWAY_RUN_WAIT_SECONDS` is
answered 202 with the ids to wait on again, and the Python client's `run_and_wait` hides that
loop."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from gateway.client import AsyncClient, Client
from tests.conftest import scripted_env
from tests.support import engines
from tests.support.gateway_server import DEFAULT_USER, USER
from tests.support.inprocess_app import InProcess, InProcessCluster, InProcessGateway
from tests.support.scripted_model import ScriptedModel

WAIT_SECONDS = 2


@pytest.fixture(scope="module")
def waiting_gateway(scripted_model: ScriptedModel, tmp_path_factory: pytest.TempPathFactory
                    ) -> Iterator[InProcess]:
    workdir = tmp_path_factory.mktemp("run-wait")
    env = scripted_env(scripted_model, GATEWAY_RUN_WAIT_SECONDS=str(WAIT_SECONDS))
    server = (InProcessCluster(workdir, env) if engines.ENGINES is not None
              else InProcessGateway(workdir, env)).start()
    yield server
    server.stop()


@pytest.fixture
def http(waiting_gateway: InProcess) -> Iterator[httpx.Client]:
    with waiting_gateway.client(event_hooks=USER, timeout=30,
                                headers={"x-api-key": "test-key"}) as client:
        yield client


def _message(text: str) -> dict[str, object]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def _texts(answer: dict) -> list[tuple[str, str]]:
    return [(m["role"], "".join(b.get("text", "") for b in m["content"]))
            for m in answer["messages"]]


def test_wait_answers_the_final_message_as_json(http: httpx.Client,
                                                scripted_model: ScriptedModel):
    scripted_model.enqueue([{"content": "Hi "}, {"content": "there"}])
    first = http.post("/v1/threads/runs/wait", json={"message": _message("hello"),
                                                     "thread": {"userKey": DEFAULT_USER}})
    assert first.status_code == 200, first.text
    answer = first.json()
    assert answer["status"] == "completed"
    assert _texts(answer) == [("user", "hello"), ("assistant", "Hi there")]
    assert all(m["runId"] == answer["runId"] for m in answer["messages"])
    assert answer["usage"]["totalTokens"] >= 0
    assert "error" not in answer

    # A run on the thread: only this run's messages; the thread has all of them.
    scripted_model.enqueue([{"content": "Again."}])
    thread_id = answer["threadId"]
    second = http.post(f"/v1/threads/{thread_id}/runs/wait",
                       json={"message": _message("more"), "previousRunId": answer["runId"]})
    assert second.status_code == 200, second.text
    assert _texts(second.json()) == [("user", "more"), ("assistant", "Again.")]
    listed = http.get(f"/v1/threads/{thread_id}/messages").json()["messages"]
    assert len(listed) == 4


def test_a_failed_run_answers_its_error(http: httpx.Client, scripted_model: ScriptedModel):
    scripted_model.enqueue([{"error": 400, "message": "bad request upstream"}])
    answer = http.post("/v1/threads/runs/wait", json={"message": _message("fail")})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["status"] == "failed" and body["error"]["code"]
    assert "sk-test" not in answer.text


def test_bad_request_is_refused_before_any_run(http: httpx.Client):
    refused = http.post("/v1/threads/runs/wait", json={"message": {"role": "user"}})
    assert refused.status_code == 400
    assert refused.headers["content-type"].startswith("application/problem+json")
    missing = http.post("/v1/threads/thr_nope/runs/wait", json={"message": _message("x")})
    assert missing.status_code == 404


def test_a_long_run_answers_202_then_waits_again(http: httpx.Client,
                                                 scripted_model: ScriptedModel):
    scripted_model.enqueue([{"content": "slow "}, {"delay": WAIT_SECONDS * 2},
                            {"content": "answer"}])
    started = http.post("/v1/threads/runs/wait", json={"message": _message("take time")})
    assert started.status_code == 202, started.text
    body = started.json()
    assert body["status"] == "running" and "messages" not in body
    location = started.headers["location"]
    assert location == f"/v1/threads/{body['threadId']}/runs/{body['runId']}/wait"

    for _ in range(10):  # each wait is bounded; the run goes on meanwhile
        again = http.get(location)
        if again.status_code == 200:
            break
        assert again.status_code == 202
    assert again.json()["status"] == "completed"
    assert _texts(again.json())[-1] == ("assistant", "slow answer")
    runs = http.get(f"/v1/threads/{body['threadId']}/runs").json()["runs"]
    assert [r["id"] for r in runs] == [body["runId"]]  # waiting again never starts a run


def test_python_client_run_and_wait(waiting_gateway: InProcess, scripted_model: ScriptedModel):
    scripted_model.enqueue([{"delay": WAIT_SECONDS * 1.5}, {"content": "patient"}])
    with Client(waiting_gateway.url, api_key="test-key", user_key=DEFAULT_USER,
                transport=waiting_gateway.sync_transport()) as client:
        answer = client.run_and_wait("wait for it")
        assert answer["status"] == "completed"
        assert _texts(answer) == [("user", "wait for it"), ("assistant", "patient")]
        scripted_model.enqueue([{"content": "next"}])
        follow = client.run_and_wait("and then", thread_id=answer["threadId"],
                                     previous_run_id=answer["runId"])
        assert _texts(follow)[-1] == ("assistant", "next")


async def test_the_async_client_waits_again_as_the_blocking_one_does(
        waiting_gateway: InProcess, scripted_model: ScriptedModel) -> None:
    """`AsyncClient.run_and_wait` follows a 202 to the run's end, starting nothing twice."""
    scripted_model.enqueue([{"delay": WAIT_SECONDS * 1.5}, {"content": "patient too"}])
    async with AsyncClient(waiting_gateway.url, api_key="test-key", user_key=DEFAULT_USER,
                           transport=waiting_gateway.async_transport()) as client:
        answer = await client.run_and_wait("wait again")
        assert answer["status"] == "completed"
        assert _texts(answer) == [("user", "wait again"), ("assistant", "patient too")]
        runs = await client.runs(answer["threadId"])
        assert [r["id"] for r in runs["runs"]] == [answer["runId"]]
