"""One-shot tasks (thread names, suggestions): lenient parsing of what a model answers, and the
task's name passed beside the prompt, never in it."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.engine.assist import (
    clean_title,
    generate_suggestions,
    generate_title,
    parse_suggestions,
)

HISTORY = [{"role": "user", "content": "Plan a trip to Paris"},
           {"role": "assistant", "content": "Sure, when?"}]


class Recorder:
    def __init__(self, answer: str) -> None:
        self.answer, self.calls = answer, []

    async def complete(self, messages: list[dict[str, Any]], max_tokens: int = 200,
                       task: str | None = None, usage: Any = None) -> str:
        self.calls.append((messages, task))
        return self.answer


@pytest.mark.parametrize("answer, title", [
    ('"Trip to Paris"', "Trip to Paris"),
    ("Title: **Trip to Paris**\nmore text", "Trip to Paris"),
    ("\n\n", "New conversation"),
])
def test_titles_are_cleaned(answer: str, title: str) -> None:
    assert clean_title(answer) == title


def test_suggestions_parse_from_json_or_lines() -> None:
    wrapped = 'Here you go: [{"title": "Museums", "detailedSuggestion": "Which museums?"}] ok'
    assert parse_suggestions(wrapped, 3) == [
        {"title": "Museums", "detailedSuggestion": "Which museums?"}]
    assert [s["title"] for s in parse_suggestions("1. Food\n2. Hotels\n3. Trains", 2)] == [
        "Food", "Hotels"]


async def test_the_task_travels_beside_the_prompt() -> None:
    titles, suggestions = Recorder("Trip to Paris"), Recorder('[{"title": "Food"}]')
    assert await generate_title(titles, HISTORY) == "Trip to Paris"
    assert await generate_suggestions(suggestions, HISTORY, [{"name": "Map"}], 1) == [
        {"title": "Food", "detailedSuggestion": "Food"}]
    for recorder, task in ((titles, "title"), (suggestions, "suggestions")):
        [(messages, sent_task)] = recorder.calls
        assert sent_task == task
        assert "[gateway" not in str(messages) and "user: Plan a trip to Paris" in str(messages)
