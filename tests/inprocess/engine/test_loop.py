"""The agent loop on its own: scripted deltas in, Timbal frames out (no run manager, no store)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from gateway import ToolContext, server_tool
from gateway.engine.deltas import Finish, ModelError, TextDelta, Usage
from gateway.engine.loop import RunInput, SubagentTool, run_agent
from gateway.engine.tools.context import bind_tool_context
from gateway.engine.tools.python_tools import spec_for
from gateway.engine.tools.status import StatusBudget
from gateway.protocol import timbal
from gateway.protocol.run_spec import ClientTool, Component
from tests.inprocess.conftest import ScriptedDeltas, text_turn, tool_turn


class ListSink:
    def __init__(self) -> None:
        self.frames: list[timbal.Frame] = []

    async def emit(self, frame: timbal.Frame) -> None:
        self.frames.append(frame)

    def values(self) -> list[dict[str, Any]]:
        return [f["v"] for f in self.frames if timbal.kind(f) == "set"]


def history(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


@server_tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@server_tool
async def slow() -> str:
    """Never answers in time."""
    await asyncio.sleep(5)
    return "late"


TOOLS = {spec.name: spec for spec in (spec_for(add), spec_for(slow))}


async def test_text_and_reasoning_stream_as_appends_then_one_value_each() -> None:
    model, sink = ScriptedDeltas(), ListSink()
    model.enqueue(text_turn("Hel", "lo", reasoning="Think."))
    outcome = await run_agent(model, RunInput(history=history("hi")), sink)
    assert outcome.pending == []
    appends = [f["a"] for f in sink.frames if timbal.kind(f) == "append"]
    assert appends == ["Think.", "Hel", "lo"]
    assert [(v["type"], v["content"]) for v in sink.values()] == [("thinking", "Think."),
                                                                   ("agent", "Hello")]
    assert len({v["messageId"] for v in sink.values()}) == 1  # one Tambo message per turn


async def test_a_server_tool_runs_inline_and_the_model_sees_its_result() -> None:
    model, sink = ScriptedDeltas(), ListSink()
    model.enqueue(tool_turn("call_1", "add", '{"a": 2, "b": 3}'), text_turn("It is 5."))
    await run_agent(model, RunInput(history=history("2+3?"), server_tools=TOOLS), sink)
    result = next(v for v in sink.values() if v["type"] == "tool_result")
    assert (result["status"], result["output"]) == ("success", 5)
    second = model.requests[1]
    assert second.messages[-1] == {"role": "tool", "tool_call_id": "call_1", "content": "5"}
    assert {t["function"]["name"] for t in second.tools} == {"add", "slow"}


@pytest.mark.parametrize("turn, error", [
    (tool_turn("call_1", "add", '{"a": "two"}'), "Invalid arguments"),
    (tool_turn("call_1", "nope", "{}"), "not available"),
    (tool_turn("call_1", "slow", "{}"), "timed out"),
])
async def test_a_failing_tool_is_an_error_result_the_model_sees(turn: list, error: str) -> None:
    model, sink = ScriptedDeltas(), ListSink()
    model.enqueue(turn, text_turn("Sorry."))
    await run_agent(model, RunInput(history=history("go"), server_tools=TOOLS,
                                    tool_timeout=0.05), sink)
    result = next(v for v in sink.values() if v["type"] == "tool_result")
    assert result["status"] == "error" and error in result["error"]
    assert error in model.requests[1].messages[-1]["content"]


async def test_a_client_tool_call_ends_the_loop_with_it_pending() -> None:
    model, sink = ScriptedDeltas(), ListSink()
    model.enqueue(tool_turn("call_7", "get_time", '{"tz": "UTC"}'))
    tool = ClientTool("get_time", "", {"type": "object"})
    outcome = await run_agent(model, RunInput(history=history("time"), client_tools=[tool]),
                              sink)
    assert [(p["toolCallId"], p["toolName"], json.loads(p["arguments"]))
            for p in outcome.pending] == [("call_7", "get_time", {"tz": "UTC"})]
    assert len(model.requests) == 1


async def test_a_component_streams_its_props_and_ends_the_turn() -> None:
    model, sink = ScriptedDeltas(), ListSink()
    model.enqueue(tool_turn("call_c", "show_component_Card", '{"title": "News"}'))
    card = Component("Card", "", {"type": "object"})
    await run_agent(model, RunInput(history=history("card"), components=[card]), sink)
    [component] = [v for v in sink.values() if v["type"] == "x-component"]
    assert (component["name"], component["props"]) == ("Card", {"title": "News"})
    assert component["componentId"].startswith("comp_")
    assert len(model.requests) == 1


async def test_max_steps_bounds_a_model_that_keeps_calling_tools() -> None:
    model, sink = ScriptedDeltas(), ListSink()
    model.enqueue(*[tool_turn(f"call_{n}", "add", '{"a": 1, "b": 1}') for n in range(3)])
    with pytest.raises(ModelError) as stopped:
        await run_agent(model, RunInput(history=history("loop"), server_tools=TOOLS,
                                        max_steps=3), sink)
    assert stopped.value.code == "MAX_STEPS_EXCEEDED" and len(model.requests) == 3


async def test_the_runs_output_tokens_stop_it_before_the_next_model_call() -> None:
    model, sink = ScriptedDeltas(), ListSink()
    model.enqueue(*[[*tool_turn(f"call_{n}", "add", '{"a": 1, "b": 1}'), Usage(10, 40)]
                    for n in range(3)])
    with pytest.raises(ModelError) as stopped:
        await run_agent(model, RunInput(history=history("loop"), server_tools=TOOLS,
                                        max_output_tokens=70, max_tokens=50), sink)
    assert stopped.value.code == "OUTPUT_TOKEN_LIMIT" and len(model.requests) == 2
    # The request's maxTokens, capped to what the run had left for each call.
    assert [r.max_tokens for r in model.requests] == [50, 30]


async def test_without_max_tokens_in_the_request_none_is_sent() -> None:
    model, sink = ScriptedDeltas(), ListSink()
    model.enqueue([TextDelta("fine"), Usage(5, 5), Finish("stop")])
    await run_agent(model, RunInput(history=history("hi"), max_output_tokens=100), sink)
    assert model.requests[0].max_tokens is None


async def test_a_provider_error_mid_stream_closes_the_partial_message() -> None:
    model, sink = ScriptedDeltas(), ListSink()
    model.enqueue([TextDelta("half "), ModelError("LLM_SERVER_ERROR", "upstream 503")])
    with pytest.raises(ModelError):
        await run_agent(model, RunInput(history=history("go")), sink)
    [agent] = sink.values()
    assert agent["content"] == "half " and agent["cancelled"] is True


async def test_a_cancel_during_a_frame_write_closes_the_model_stream_before_saving() -> None:
    """A cancel that lands while a frame is written (not inside the model stream) closes the
    upstream before the partial answer is saved, not whenever its generator is collected."""
    order: list[str] = []
    writing = asyncio.Event()

    class HeldOpen:
        async def stream(self, request: Any) -> Any:
            try:
                yield TextDelta("half ")
                await asyncio.Event().wait()
            finally:
                order.append("stream closed")

    class SlowSink(ListSink):
        async def emit(self, frame: timbal.Frame) -> None:
            self.frames.append(frame)
            if timbal.kind(frame) == "set":
                order.append("answer saved")
            elif timbal.kind(frame) == "append" and not writing.is_set():
                writing.set()
                await asyncio.Event().wait()  # the write the cancel lands in

    sink = SlowSink()
    run = asyncio.create_task(run_agent(HeldOpen(), RunInput(history=history("go")), sink))
    await writing.wait()
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert order[0] == "stream closed" and "answer saved" in order
    [agent] = sink.values()
    assert agent["content"] == "half " and agent["cancelled"] is True


@server_tool
async def survey(sources: int, caller: ToolContext) -> str:
    """Report a status per source searched."""
    for n in range(1, sources + 1):
        await caller.status(f"Source {n} " + "x" * 600, state="searching")
    return "done"


async def test_a_tools_statuses_are_one_status_message_replaced_then_deleted() -> None:
    """`ctx.status(...)`: each status sets the call's one `status` message (the same `i`),
    cut to 500 characters, signed by the agent; the message is deleted before the result."""
    bind_tool_context(ToolContext("p1", "thr_1", "run_1", None))
    model, sink = ScriptedDeltas(), ListSink()
    model.enqueue(tool_turn("call_s", "survey", '{"sources": 2}'), text_turn("Done."))
    await run_agent(model, RunInput(history=history("search"), sender="scout",
                                    server_tools={"survey": spec_for(survey)},
                                    status_budget=StatusBudget(100)), sink)
    statuses = [f for f in sink.frames if (f.get("v") or {}).get("type") == "status"]
    assert [f["v"]["detail"][:8] for f in statuses] == ["Source 1", "Source 2"]
    assert {len(f["v"]["detail"]) for f in statuses} == {500}
    assert statuses[0]["v"] | {"detail": ""} == {
        "type": "status", "state": "searching", "detail": "", "toolCallId": "call_s",
        "sender": "scout"}
    assert len({f["i"] for f in statuses}) == 1
    deleted = sink.frames.index({"i": statuses[0]["i"], "v": None})
    result = next(k for k, f in enumerate(sink.frames)
                  if (f.get("v") or {}).get("type") == "tool_result")
    assert sink.frames.index(statuses[-1]) < deleted < result
    assert all("status" not in json.dumps(m) for m in model.requests[1].messages)


async def test_a_runs_statuses_stop_at_its_budget_and_without_one_none_are_written() -> None:
    bind_tool_context(ToolContext("p1", "thr_1", "run_1", None))
    model, sink = ScriptedDeltas(), ListSink()
    model.enqueue(tool_turn("call_s", "survey", '{"sources": 5}'), text_turn("Done."))
    budget = StatusBudget(max_per_run=3)
    await run_agent(model, RunInput(history=history("search"), status_budget=budget,
                                    server_tools={"survey": spec_for(survey)}), sink)
    assert len([f for f in sink.frames if (f.get("v") or {}).get("type") == "status"]) == 3
    assert budget.used == 3

    model, sink = ScriptedDeltas(), ListSink()
    model.enqueue(tool_turn("call_s", "survey", '{"sources": 2}'), text_turn("Done."))
    await run_agent(model, RunInput(history=history("search"),
                                    server_tools={"survey": spec_for(survey)}), sink)
    assert not any(f.get("v", {}) is None or (f.get("v") or {}).get("type") == "status"
                   for f in sink.frames)


async def test_a_sub_agents_tool_statuses_are_its_own_and_count_against_the_run() -> None:
    bind_tool_context(ToolContext("p1", "thr_1", "run_1", None))
    model, sink = ScriptedDeltas(), ListSink()

    def prepare(task: str, invocation: str) -> RunInput:
        return RunInput(history=history(task), server_tools={"survey": spec_for(survey)},
                        sender="helper", subagent_run_id=invocation)

    model.enqueue(tool_turn("call_h", "helper", '{"task": "look"}'),
                  tool_turn("call_s", "survey", '{"sources": 3}'), text_turn("Looked."),
                  text_turn("Done."))
    await run_agent(model, RunInput(history=history("ask"), sender="lead", subagents={
        "helper": SubagentTool("helper", "Helps", model, prepare)},
        status_budget=StatusBudget(max_per_run=2)), sink)
    statuses = [f["v"] for f in sink.frames if (f.get("v") or {}).get("type") == "status"]
    started = next(f for f in sink.frames if f.get("c") == "subagent.started")
    assert [(s["sender"], s["subagentRunId"]) for s in statuses] == [
        ("helper", started["subagentRunId"])] * 2
