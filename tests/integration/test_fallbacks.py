"""Provider resilience (`GATEWAY_MODEL_FALLBACKS`): two real OpenAI-compatible upstreams, the
second a fallback of the first through litellm's Router. When the first refuses a run before
streaming (429, 500), the second answers it and the run's status names the second; when both
fail, the client sees exactly one RUN_ERROR.

A gateway process of its own, not the in-process app: litellm's Router registers its
deployments in litellm's process-wide model map, which the other apps of the test process would
then read (a model it lists without vision would refuse their image attachments)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import scripted_env
from tests.support.gateway_server import USER, GatewayServer
from tests.support.run_stream import message, run_status, started_ids
from tests.support.scripted_model import ScriptedModel
from tests.support.sse import run_events, text_of

# Fallbacks are litellm's Router in one process; the backend does not take part.
pytestmark = pytest.mark.sqlite_only

SECOND = "openai/second"
THIRD = "openai/third"  # the `own` agent's fallback: the second upstream under another name


@pytest.fixture(scope="module")
def second() -> Iterator[ScriptedModel]:
    with ScriptedModel() as model:
        yield model


@pytest.fixture(scope="module")
def resilient(scripted_model: ScriptedModel, second: ScriptedModel,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayServer]:
    fallbacks = [{"model": SECOND, "api_base": second.base_url, "api_key": "sk-second-key-5678"}]
    workdir = tmp_path_factory.mktemp("fallbacks")
    # `default` inherits the environment's fallbacks; `own` has a list of its own.
    (workdir / "agents.toml").write_text(
        "[agents.default]\n[agents.own]\nfallbacks = [{ model = \"" + THIRD + "\", "
        "api_base = \"" + second.base_url + "\", api_key = \"sk-third-key-9012\" }]\n")
    server = GatewayServer(workdir, scripted_env(
        scripted_model, GATEWAY_MODEL_FALLBACKS=json.dumps(fallbacks),
        GATEWAY_AGENTS_FILE=str(workdir / "agents.toml")))
    server.start()
    yield server
    server.stop()


def run(server: GatewayServer) -> tuple[list, dict]:
    with httpx.Client(base_url=server.url, event_hooks=USER, timeout=60,
                      headers={"x-api-key": "test-key"}) as client:
        events = run_events(client, "POST", "/v1/threads/runs", json={"message": message("hi")})
        return events, run_status(client, *started_ids(events))


@pytest.mark.parametrize("status", [429, 500])
def test_a_failing_first_model_falls_back_to_the_second(
        resilient: GatewayServer, scripted_model: ScriptedModel, second: ScriptedModel,
        status: int, tmp_path: Path):
    second.reset()
    scripted_model.enqueue({"steps": [{"error": status, "message": "first is down"}],
                            "stream": True})
    second.enqueue({"steps": [{"content": "From the "}, {"content": "second."}],
                    "stream": True})
    events, status_body = run(resilient)
    assert events[-1].type == "RUN_FINISHED"
    assert not [e for e in events if e.type == "RUN_ERROR"]
    assert text_of(events) == "From the second."
    assert status_body["status"] == "completed"
    assert status_body["model"] == SECOND
    assert len([r for r in scripted_model.requests if r.get("stream")]) == 1
    assert len([r for r in second.requests if r.get("stream")]) == 1
    # The operator hears of it: the run succeeded, but its model did not answer.
    run_id = status_body["id"]
    assert f"run {run_id}: openai/scripted failed; fallback model {SECOND} answered" in \
        resilient.log()


def test_the_first_model_serves_when_it_answers(
        resilient: GatewayServer, scripted_model: ScriptedModel, second: ScriptedModel):
    second.reset()
    scripted_model.enqueue({"steps": [{"content": "From the first."}], "stream": True})
    events, status_body = run(resilient)
    assert text_of(events) == "From the first."
    assert status_body["model"] == "openai/scripted"
    assert not [r for r in second.requests if r.get("stream")]


def test_every_model_failing_ends_with_one_run_error(
        resilient: GatewayServer, scripted_model: ScriptedModel, second: ScriptedModel):
    second.reset()
    scripted_model.enqueue({"steps": [{"error": 500, "message": "first is down"}],
                            "stream": True})
    second.enqueue({"steps": [{"error": 503, "message": "second is down"}], "stream": True})
    events, status_body = run(resilient)
    errors = [e for e in events if e.type == "RUN_ERROR"]
    assert len(errors) == 1 and events[-1] is errors[0]
    assert errors[0].data["code"] == "LLM_SERVER_ERROR"
    assert errors[0].data["isRetryable"] is True
    assert status_body["status"] == "failed"
    assert len([r for r in second.requests if r.get("stream")]) == 1
    assert "sk-second-key-5678" not in resilient.log()


def test_an_agent_falls_back_to_its_own_list(
        resilient: GatewayServer, scripted_model: ScriptedModel, second: ScriptedModel):
    """An agent with `fallbacks` in the agents file uses its list, not the environment's."""
    second.reset()
    scripted_model.enqueue({"steps": [{"error": 429, "message": "first is busy"}],
                            "stream": True})
    second.enqueue({"steps": [{"content": "From the agent's fallback."}], "stream": True})
    body = {"threadId": f"t-{uuid.uuid4()}", "runId": f"r-{uuid.uuid4()}",
            "protocolVersion": "1.0", "tools": [], "context": [], "state": {},
            "messages": [{"id": "m1", "role": "user", "content": "hi"}], "forwardedProps": {}}
    with httpx.Client(base_url=resilient.url, timeout=60,
                      headers={"x-api-key": "test-key"}) as client:
        events = run_events(client, "POST", "/v1/agui/agents/own/run", json=body)
    assert events[-1].type == "RUN_FINISHED"
    assert text_of(events) == "From the agent's fallback."
    assert [u["model"] for u in events[-1].data["usage"]] == [THIRD]
    assert f"openai/scripted failed; fallback model {THIRD} answered" in resilient.log()
    assert "sk-third-key-9012" not in resilient.log()
