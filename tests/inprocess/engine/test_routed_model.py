"""Fallbacks through litellm's Router, against the real scripted upstream on loopback: the next
model answers when one fails before any content, and says so (`Served`); one error when all fail.

Both deployments point at the same scripted server under different names, so its request log
shows which model each call went to. The end-to-end cases (RUN_ERROR, the thread's record) are
in tests/integration/test_fallbacks.py.
"""

from __future__ import annotations

import pytest

from gateway.engine.deltas import ModelError, Served, TextDelta
from gateway.engine.models.routed import Deployment, RoutedModel
from gateway.services import load_litellm
from tests.support.model_stream import outcome
from tests.support.scripted_model import ScriptedModel

load_litellm()
KEY = "sk-test-secret-key-1234"


@pytest.fixture
def routed(scripted_model: ScriptedModel) -> RoutedModel:
    return RoutedModel([Deployment("openai/main", scripted_model.base_url, KEY),
                        Deployment("openai/backup", scripted_model.base_url, KEY)])


def streamed_models(scripted_model: ScriptedModel) -> list[str]:
    return [r["model"] for r in scripted_model.requests if r.get("stream")]


async def test_the_first_model_serves_when_it_answers(
        routed: RoutedModel, scripted_model: ScriptedModel) -> None:
    scripted_model.enqueue([{"content": "From main."}])
    seen = await outcome(routed)
    assert seen[0] == Served("openai/main") and TextDelta("From main.") in seen
    assert streamed_models(scripted_model) == ["main"]


@pytest.mark.parametrize("status", [429, 503])
async def test_a_failing_first_model_falls_back_to_the_next(
        routed: RoutedModel, scripted_model: ScriptedModel, status: int) -> None:
    scripted_model.enqueue([{"error": status, "message": "main is down"}],
                           [{"content": "From backup."}])
    seen = await outcome(routed)
    assert seen[0] == Served("openai/backup") and TextDelta("From backup.") in seen
    assert not any(isinstance(d, ModelError) for d in seen)
    assert streamed_models(scripted_model) == ["main", "backup"]


async def test_every_model_failing_is_one_error_without_the_key(
        routed: RoutedModel, scripted_model: ScriptedModel) -> None:
    scripted_model.enqueue([{"error": 500, "message": f"main is down ({KEY})"}],
                           [{"error": 503, "message": f"backup is down ({KEY})"}])
    [error] = await outcome(routed)
    assert isinstance(error, ModelError) and error.code == "LLM_SERVER_ERROR"
    assert KEY not in error.message
    assert streamed_models(scripted_model) == ["main", "backup"]


async def test_retries_call_the_same_model_again(scripted_model: ScriptedModel) -> None:
    model = RoutedModel([Deployment("openai/main", scripted_model.base_url, KEY)], retries=1)
    scripted_model.enqueue([{"error": 503, "message": "busy"}], [{"content": "Second try."}])
    assert TextDelta("Second try.") in await outcome(model)
    assert streamed_models(scripted_model) == ["main", "main"]
