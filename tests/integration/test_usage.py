"""Usage and cost as an operator and a user see them, on a real gateway: the run's status, the
thread's sum, the terminal frame of the Timbal view, Prometheus, and `gateway usage`. A failed
run reports what it consumed before it failed."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from ag_ui.core import Event
from prometheus_client.parser import text_string_to_metric_families
from pydantic import TypeAdapter

from tests.conftest import scripted_env
from tests.support.gateway_server import DEFAULT_USER, USER, GatewayServer, gateway_command
from tests.support.run_stream import gateway_ids
from tests.support.scripted_model import ScriptedModel
from tests.support.sse import run_events, text_of

TOOLS = Path(__file__).resolve().parents[1] / "support" / "server_tools.py"
PRICED = "openai/gpt-4o-mini"  # in litellm's price map; the scripted server answers any name
UNPRICED = "openai/scripted"
REPORTED = {"prompt_tokens": 120, "completion_tokens": 30,
            "completion_tokens_details": {"reasoning_tokens": 10},
            "prompt_tokens_details": {"cached_tokens": 100}}


@pytest.fixture(scope="module")
def server(scripted_model: ScriptedModel, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[GatewayServer]:
    env = scripted_env(scripted_model, GATEWAY_MODEL=PRICED, GATEWAY_MODELS=UNPRICED,
                       GATEWAY_TOOLS=str(TOOLS))
    gateway = GatewayServer(tmp_path_factory.mktemp("usage"), env)
    gateway.start()
    yield gateway
    gateway.stop()


@pytest.fixture
def client(server: GatewayServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, event_hooks=USER, timeout=30,
                      headers={"x-api-key": "test-key"}) as http:
        yield http


def run(client: httpx.Client, url: str, text: str, **body: object) -> tuple[str, str, list]:
    events = run_events(client, "POST", url, json={
        "message": {"role": "user", "content": [{"type": "text", "text": text}]}, **body})
    return events[0].data["threadId"], events[0].data["runId"], events


def status(client: httpx.Client, thread_id: str, run_id: str) -> dict:
    return client.get(f"/v1/threads/{thread_id}/runs/{run_id}",
                      headers={"accept": "application/json"}).json()


def litellm_cost(model: str, prompt: int, completion: int, cached: int) -> float:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    return sum(litellm.cost_per_token(model=model, prompt_tokens=prompt,
                                      completion_tokens=completion,
                                      cache_read_input_tokens=cached))


def tokens_metric(client: httpx.Client, model: str, kind: str) -> float:
    for family in text_string_to_metric_families(client.get("/metrics").text):
        for sample in family.samples:
            if sample.name == "gateway_model_tokens_total" and sample.labels == {
                    "agent": "default", "model": model, "kind": kind}:
                return sample.value
    return 0.0


def test_usage_and_cost_reach_the_run_the_thread_the_log_metrics_and_the_cli(
        server: GatewayServer, client: httpx.Client, scripted_model: ScriptedModel) -> None:
    before = tokens_metric(client, PRICED, "input")
    scripted_model.enqueue([{"content": "Hello!"}, {"usage": REPORTED}])
    thread_id, first, events = run(client, "/v1/threads/runs", "hi",
                                   thread={"userKey": DEFAULT_USER})
    assert text_of(events) == "Hello!"

    usage = status(client, thread_id, first)["usage"]
    cost = litellm_cost(PRICED, 120, 30, 100)
    assert usage["models"] == [{
        "model": PRICED, "calls": 1, "inputTokens": 120, "outputTokens": 30,
        "totalTokens": 150, "reasoningTokens": 10, "cachedInputTokens": 100,
        "costUsd": pytest.approx(cost)}]
    assert (usage["inputTokens"], usage["outputTokens"], usage["costUsd"]) == (
        120, 30, pytest.approx(cost))
    assert tokens_metric(client, PRICED, "input") == before + 120

    # A second run, on a model litellm cannot price, with a server tool: two calls.
    scripted_model.enqueue(
        [{"tool_call": {"index": 0, "id": "call_1", "name": "add",
                        "arguments": '{"a": 1, "b": 2}'}},
         {"usage": {"prompt_tokens": 50, "completion_tokens": 5}}],
        [{"content": "3"}, {"usage": {"prompt_tokens": 60, "completion_tokens": 1}}])
    _, second, _ = run(client, f"/v1/threads/{thread_id}/runs", "add them",
                       previousRunId=first, model=UNPRICED, userKey=DEFAULT_USER)
    assert status(client, thread_id, second)["usage"] == {
        "inputTokens": 110, "outputTokens": 6, "totalTokens": 116, "reasoningTokens": 0,
        "cachedInputTokens": 0, "costUsd": None, "models": [{
            "model": UNPRICED, "calls": 2, "inputTokens": 110, "outputTokens": 6,
            "totalTokens": 116, "reasoningTokens": 0, "cachedInputTokens": 0,
            "costUsd": None}]}

    thread = client.get(f"/v1/threads/{thread_id}").json()["usage"]
    assert (thread["inputTokens"], thread["outputTokens"], thread["costUsd"]) == (230, 36, None)
    assert [(m["model"], m["calls"]) for m in thread["models"]] == [(PRICED, 1), (UNPRICED, 2)]

    # The Timbal view is the log itself: its terminal frame carries the same usage.
    lines = client.get(f"/v1/timbal/threads/{thread_id}/runs/{first}").text.splitlines()
    finished = [json.loads(line) for line in lines if '"run.finished"' in line]
    assert finished[-1]["usage"] == usage["models"]

    report = gateway_command(["usage", "--since", "1h", "--by", "model"], server.env,
                             server.workdir, timeout=60)
    assert report.returncode == 0, report.stderr
    rows = {line.split()[0]: line.split() for line in report.stdout.splitlines()[1:]}
    assert rows[PRICED][1:5] == ["1", "1", "120", "30"]
    assert rows[UNPRICED][1:5] == ["1", "2", "110", "6"]
    assert rows[UNPRICED][-3:] == ["-", "1", "0"]  # not priced, not estimated


def test_a_failed_run_reports_what_it_consumed_before_it_failed(
        client: httpx.Client, scripted_model: ScriptedModel) -> None:
    scripted_model.enqueue(
        [{"tool_call": {"index": 0, "id": "call_1", "name": "add",
                        "arguments": '{"a": 1, "b": 2}'}},
         {"usage": {"prompt_tokens": 40, "completion_tokens": 4}}],
        [{"error": 500, "message": "upstream broke"}])
    thread_id, run_id, events = run(client, "/v1/threads/runs", "add",
                                    thread={"userKey": DEFAULT_USER})
    assert events[-1].type == "RUN_ERROR"
    run_status = status(client, thread_id, run_id)
    assert run_status["status"] == "failed"
    assert run_status["usage"]["inputTokens"] == 40
    assert run_status["usage"]["models"][0]["calls"] == 1


def test_an_agui_run_finished_carries_the_usage_the_run_status_shows(
        client: httpx.Client, scripted_model: ScriptedModel) -> None:
    scripted_model.enqueue([{"content": "Hello!"}, {"usage": REPORTED}])
    body = {"threadId": f"t-{uuid.uuid4()}", "runId": f"r-{uuid.uuid4()}",
            "protocolVersion": "1.0", "tools": [], "context": [], "state": {},
            "forwardedProps": {"userKey": DEFAULT_USER},
            "messages": [{"id": "m-1", "role": "user", "content": "hi"}]}
    events = run_events(client, "POST", "/v1/agui/agents/default/run", json=body)
    finished = events[-1]
    TypeAdapter(Event).validate_python(finished.data)  # ag_ui.core's own models accept it
    assert finished.type == "RUN_FINISHED"
    assert finished.data["usage"] == [{
        "provider": "openai", "model": PRICED, "inputTokens": 120, "outputTokens": 30,
        "totalTokens": 150, "reasoningTokens": 10, "cachedInputTokens": 100}]
    usage = status(client, *gateway_ids(client, body))["usage"]
    assert (usage["inputTokens"], usage["outputTokens"]) == (120, 30)
