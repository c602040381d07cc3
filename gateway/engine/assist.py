"""Small one-shot model tasks the clients ask for: a thread's name, follow-up suggestions.

They use the thread's model with a short instruction and parse its answer leniently, because a
model asked for "a title" or "a JSON array" does not always answer with exactly that. The task's
name travels beside the prompt (`task=`), never in it: the built-in demo model reads it to answer
offline, and a real model sees only the instruction.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, Protocol

UsageSink = Callable[[int], None]
TITLE_TASK = "title"
SUGGESTIONS_TASK = "suggestions"


class CompletionModel(Protocol):
    async def complete(self, messages: list[dict[str, Any]], max_tokens: int = 200,
                       task: str | None = None, usage: UsageSink | None = None) -> str: ...


# Characters of the conversation's end the model is shown; the caller reads no more than that.
TRANSCRIPT_CHARS = 4000


def transcript(history: list[dict[str, Any]], limit: int = TRANSCRIPT_CHARS) -> str:
    """The conversation as plain text (user and assistant text only), newest part kept."""
    lines = []
    for message in history:
        if message["role"] in ("user", "assistant") and message.get("content"):
            lines.append(f"{message['role']}: {message['content']}")
    return "\n".join(lines)[-limit:]


async def generate_title(model: CompletionModel, history: list[dict[str, Any]],
                         usage: UsageSink | None = None) -> str:
    instruction = ("Give a short title (at most 6 words) for the conversation below. Reply with "
                   "the title only, no quotes.")
    answer = await model.complete([
        {"role": "system", "content": instruction},
        {"role": "user", "content": transcript(history) or "(empty conversation)"},
    ], max_tokens=30, task=TITLE_TASK, usage=usage)
    return clean_title(answer)


def clean_title(text: str) -> str:
    line = next((row for row in text.strip().splitlines() if row.strip()), "")
    line = re.sub(r"^(title\s*:\s*)", "", line.strip(), flags=re.IGNORECASE)
    return line.strip(" \"'*#`").strip()[:80] or "New conversation"


async def generate_suggestions(model: CompletionModel, history: list[dict[str, Any]],
                               components: list[dict[str, Any]], count: int,
                               usage: UsageSink | None = None) -> list[dict[str, str]]:
    names = ", ".join(c["name"] for c in components) or "none"
    instruction = (
        f"Suggest {count} short follow-up messages the user could send next. "
        f"UI components the assistant can show: {names}. Reply with a JSON array of objects "
        'with "title" (a few words) and "detailedSuggestion" (the full message).')
    answer = await model.complete([
        {"role": "system", "content": instruction},
        {"role": "user", "content": transcript(history) or "(empty conversation)"},
    ], max_tokens=400, task=SUGGESTIONS_TASK, usage=usage)
    return parse_suggestions(answer, count)


def parse_suggestions(text: str, count: int) -> list[dict[str, str]]:
    items: list[Any] = []
    start, end = text.find("["), text.rfind("]")
    if 0 <= start < end:
        try:
            items = json.loads(text[start:end + 1])
        except ValueError:
            items = []
    if not isinstance(items, list) or not items:
        items = [line.strip(" -*0123456789.") for line in text.splitlines() if line.strip()]
    out = []
    for item in items:
        if isinstance(item, dict):
            title = str(item.get("title") or item.get("detailedSuggestion") or "").strip()
            detail = str(item.get("detailedSuggestion") or item.get("description") or title).strip()
        else:
            title = detail = str(item).strip()
        if title:
            out.append({"title": title[:120], "detailedSuggestion": detail[:1000]})
    return out[:count]
