"""How the agent loop ends a call the provider cut, refused as too long or did not count
(`gateway/engine/stream_contract.py`): the loop alone, scripted deltas in, frames out."""

from __future__ import annotations

from gateway.engine.context_window import ContextBudget, TokenCounter
from gateway.engine.deltas import Finish, ModelError, TextDelta, Usage
from gateway.engine.loop import RunInput, run_agent
from tests.inprocess.conftest import ScriptedDeltas, text_turn
from tests.inprocess.engine.test_loop import TOOLS, ListSink, history


async def test_a_cut_answer_ends_the_run_marked_when_the_operator_says_stop() -> None:
    model, sink = ScriptedDeltas(), ListSink()
    model.enqueue([TextDelta("A long ans"), Finish("length")])
    outcome = await run_agent(model, RunInput(history=history("go"), max_tokens=5), sink)
    [answer] = sink.values()
    assert (answer["content"], answer["status"], answer["finishReason"]) == (
        "A long ans", "truncated", "length")
    assert outcome.truncated == {"reason": "length", "messageId": answer["messageId"]}
    assert len(model.requests) == 1


async def test_a_cut_answer_is_continued_when_the_operator_says_continue() -> None:
    model, sink = ScriptedDeltas(), ListSink()
    model.enqueue([TextDelta("A long ans"), Finish("length")], text_turn("wer."))
    outcome = await run_agent(model, RunInput(history=history("go"), max_tokens=5,
                                              on_truncation="continue"), sink)
    assert [v["content"] for v in sink.values()] == ["A long ans", "wer."]
    assert outcome.truncated is None and outcome.text == "wer."
    sent = model.requests[1].messages
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert sent[1]["content"] == "A long ans" and "cut off" in sent[2]["content"]


async def test_a_content_filter_is_never_continued() -> None:
    model, sink = ScriptedDeltas(), ListSink()
    model.enqueue([TextDelta("I can"), Finish("content_filter")])
    outcome = await run_agent(model, RunInput(history=history("go"), on_truncation="continue"),
                              sink)
    assert outcome.truncated is not None and outcome.truncated["reason"] == "content_filter"
    assert len(model.requests) == 1


async def test_usage_no_one_reported_is_counted_and_trips_the_runs_output_limit() -> None:
    """No usage from the provider used to mean no limit: the run's cap never tripped."""
    model, sink = ScriptedDeltas(), ListSink()
    call = [TextDelta("word " * 60), *_add_call()]
    model.enqueue(call, call, call)
    seen: list[Usage] = []

    class Hooks:
        def model_call(self, model: str | None) -> "Hooks":
            return self

        def received(self, content: bool) -> None: ...
        def handled(self) -> None: ...
        def usage(self, input_tokens: int, output_tokens: int) -> None: ...
        def served(self, model: str) -> None: ...
        def ended(self, error_code: str | None, completed: bool) -> None: ...

        async def tokens_used(self, usage: Usage) -> None:
            seen.append(usage)

    run = RunInput(history=history("go"), server_tools=TOOLS, max_output_tokens=50,
                   hooks=Hooks())
    try:
        await run_agent(model, run, sink)
    except ModelError as error:
        assert error.code == "OUTPUT_TOKEN_LIMIT"
    else:
        raise AssertionError("the run's output limit did not trip")
    assert seen and all(u.estimated and u.output_tokens > 40 for u in seen)
    assert len(model.requests) == 1


def _add_call() -> list:
    from gateway.engine.deltas import ToolCallDelta

    return [ToolCallDelta(0, "call_1", "add", '{"a": 1, "b": 2}'), Finish("tool_calls")]


async def test_a_context_length_refusal_before_any_answer_is_retried_once_shorter() -> None:
    model, sink = ScriptedDeltas(), ListSink()
    refused = ModelError("LLM_CONTEXT_WINDOW_EXCEEDED", "too long", "client_error", False, 400,
                         window=120)
    model.enqueue([refused], text_turn("Fits."))
    old = [m for i in range(8) for m in (
        {"role": "user", "content": f"question {i} " + "word " * 30},
        {"role": "assistant", "content": f"answer {i} " + "word " * 30})]
    run = RunInput(history=[*old, *history("last")], max_tokens=10,
                   context=ContextBudget(100_000, TokenCounter("openai/unknown-model")))
    outcome = await run_agent(model, run, sink)
    assert outcome.text == "Fits."
    first, second = (len(r.messages) for r in model.requests)
    assert first == 17 and second < first and model.requests[1].messages[-1]["content"] == "last"


async def test_a_second_refusal_fails_the_run() -> None:
    model, sink = ScriptedDeltas(), ListSink()
    refused = ModelError("LLM_CONTEXT_WINDOW_EXCEEDED", "too long", "client_error", False, 400)
    model.enqueue([refused], [refused])
    try:
        await run_agent(model, RunInput(history=history("go")), sink)
    except ModelError as error:
        assert error.code == "LLM_CONTEXT_WINDOW_EXCEEDED"
    else:
        raise AssertionError("a second refusal passed")
    assert len(model.requests) == 2
