"""Fitting a history to a budget (gateway/engine/context_window.py): whole turns, oldest first,
system messages and the newest turn always kept, a tool call never apart from its result."""

from __future__ import annotations

from gateway.engine.context_window import available_tokens, fit

SYSTEM = {"role": "system", "content": "You are helpful."}


def size(message: dict) -> int:
    """A count that makes the arithmetic of each test plain: 10 per message."""
    return 10


def user(text: str) -> dict:
    return {"role": "user", "content": text}


def answer(text: str) -> dict:
    return {"role": "assistant", "content": text}


def call(call_id: str) -> list[dict]:
    return [{"role": "assistant", "content": None,
             "tool_calls": [{"id": call_id, "type": "function",
                             "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": call_id, "content": "42"}]


def test_everything_fits_nothing_dropped() -> None:
    history = [SYSTEM, user("a"), answer("b"), user("c")]
    fitted = fit(history, 100, size)
    assert fitted.messages == history and not fitted.trimmed and fitted.tokens == 40


def test_oldest_whole_turns_go_first_system_stays() -> None:
    history = [SYSTEM, user("1"), answer("1"), user("2"), answer("2"), user("3")]
    fitted = fit(history, 40, size)
    assert fitted.messages == [SYSTEM, user("2"), answer("2"), user("3")]
    assert fitted.dropped == [user("1"), answer("1")]
    assert fitted.tokens == 40


def test_a_tool_call_and_its_result_go_together() -> None:
    history = [SYSTEM, user("1"), *call("c1"), answer("1"), user("2"), *call("c2"), user("3")]
    # Turn 2 is user 2, the call and its result: 30; with the system and turn 3, 50.
    fitted = fit(history, 55, size)
    assert fitted.messages == [SYSTEM, user("2"), *call("c2"), user("3")]
    kept_calls = {c["id"] for m in fitted.messages for c in m.get("tool_calls", [])}
    kept_results = {m["tool_call_id"] for m in fitted.messages if m["role"] == "tool"}
    assert kept_calls == kept_results == {"c2"}


def test_context_sent_with_tool_results_stays_with_them() -> None:
    # A client tool's results, then the page's context as a user message: one turn.
    context = {"role": "user", "content": "Additional context: {}"}
    history = [user("0"), answer("0"), user("1"), *call("c1"), context]
    assert fit(history, 40, size).messages == [user("1"), *call("c1"), context]


def test_the_newest_turn_is_kept_even_when_over() -> None:
    history = [SYSTEM, user("1"), answer("1"), user("2"), *call("c2"), answer("2")]
    fitted = fit(history, 15, size)
    assert fitted.messages == [SYSTEM, user("2"), *call("c2"), answer("2")]
    assert fitted.tokens == 50


def test_the_answer_reserve_is_at_most_half() -> None:
    assert available_tokens(10_000, None, 1024) == 8976
    assert available_tokens(10_000, 500, 1024) == 9500
    assert available_tokens(1000, None, 1024) == 500
