"""The built-in demo model: an offline, scripted stand-in reached through litellm.

It exists so that `gateway serve` works on a laptop with no key and no network. It is not a
language model and says so: it streams an honest reply token by token (with a short reasoning
trace first, to show reasoning streaming) that explains how to configure a real model. When the
user's words name an offered tool or component, it calls it with example arguments
(`demo_tools`), so client tools and components can be tried offline too. It is registered as a
litellm custom provider, so it takes the same code path as every real model.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import litellm
from litellm.llms.custom_llm import CustomLLM
from litellm.types.utils import Delta, GenericStreamingChunk, ModelResponseStream, StreamingChoices

from ..tools.demo import example_value, pick_tool

PROVIDER = "gateway"
TOKEN_DELAY_SECONDS = 0.012  # about 83 tokens a second, as a fast hosted model streams
COUNT_TO = re.compile(r"\bcount to ([0-9]{1,5})\b", re.IGNORECASE)
MAX_COUNT = 20_000
_delay = [TOKEN_DELAY_SECONDS]


def set_speed(tokens_per_second: float) -> None:
    """`GATEWAY_DEMO_TOKENS_PER_SECOND`: how fast the demo model streams (0: as fast as the
    gateway takes it), to try cancel and reconnect on a fast stream."""
    _delay[0] = 1 / tokens_per_second if tokens_per_second > 0 else 0.0


async def _pace() -> None:
    delay = _delay[0]
    await asyncio.sleep(delay)  # 0: still a turn of the loop, as a real stream gives


def _last_user_text(messages: list[dict[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
            return str(content or "")
    return ""


def _last_user_attachments(messages: list[dict[str, Any]]) -> list[str]:
    """What the last user message attached, as short descriptions ("an image (image/png)")."""
    for message in reversed(messages):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        found = []
        for part in content if isinstance(content, list) else []:
            if part.get("type") == "image_url":
                url = part["image_url"]["url"]
                kind = url[5:url.index(";")] if url.startswith("data:") else url
                found.append(f"an image ({kind})")
            elif part.get("type") == "file":
                data = part["file"].get("file_data", "")
                kind = data[5:data.index(";")] if data.startswith("data:") else "a file"
                found.append(f"a file ({part['file'].get('filename') or kind})")
        return found
    return []


def reply_for(messages: list[dict[str, Any]]) -> tuple[str, str]:
    """(reasoning, answer) for a conversation; deterministic, so tests can check it."""
    attached = _last_user_attachments(messages)
    said = " ".join(_last_user_text(messages).split())
    quoted = said if len(said) <= 120 else said[:117] + "..."
    earlier = sum(1 for m in messages if m.get("role") in ("user", "assistant")) - 1
    reasoning = (
        f"The user wrote {len(said)} characters. I am the gateway's built-in demo model, "
        "so the honest answer is to say so and explain how to connect a real model."
    )
    answer = (
        "Hello! I'm the gateway's built-in demo model: a scripted stand-in, not a real "
        f"language model, so I can't really understand you. You said: \u201c{quoted}\u201d. "
        f"The gateway sent me this thread's history ({max(earlier, 0)} earlier "
        f"message{'s' if earlier != 1 else ''}), so follow-ups work. To talk to a real model, "
        "restart the gateway with GATEWAY_MODEL set to any litellm model string, for example "
        "GATEWAY_MODEL=openai/gpt-4o-mini and GATEWAY_MODEL_API_KEY=<your key>, or point "
        "GATEWAY_MODEL_API_BASE at any OpenAI-compatible server."
    )
    if attached:
        answer = (f"I received {', '.join(attached)} with your message; as the demo model I "
                  "cannot look at it, but a real model would see it. ") + answer
    counting = COUNT_TO.search(said)
    if counting:  # a long answer on request: cancel and reconnect can be tried on it
        count = min(int(counting.group(1)), MAX_COUNT)
        answer = " ".join(str(n) for n in range(1, count + 1)) + ". " + answer
    return reasoning, answer


def task_answer(messages: list[dict[str, Any]], task: str | None) -> str:
    """Answers to the gateway's own one-shot tasks (thread title, suggestions), offline; the
    task's name comes beside the prompt (`engine.assist`), not in it."""
    conversation = _last_user_text(messages)
    first_user = next((line.split(":", 1)[1].strip() for line in conversation.splitlines()
                       if line.startswith("user:")), "")
    if task == "title":
        words = first_user.split()[:6]
        return " ".join(words).rstrip(".,!?") or "Demo conversation"
    if task == "suggestions":
        return json.dumps([
            {"title": "Connect a real model",
             "detailedSuggestion": "How do I point the gateway at a real model?"},
            {"title": "What can you do?", "detailedSuggestion": "What can the demo model do?"},
            {"title": "Say hello again", "detailedSuggestion": "Hello again!"},
        ])
    return reply_for(messages)[1]


def _after_tool(messages: list[dict[str, Any]]) -> tuple[str, str]:
    result = str(messages[-1].get("content", ""))
    shown = result if len(result) <= 300 else result[:297] + "..."
    return ("A tool answered; I can only repeat what it returned.",
            f"The tool returned: {shown}. I'm the demo model, so I only repeat it; a real model "
            "would use it to answer you.")


def _chunk(text: str, tool_use: Any = None, finish: str = "") -> Any:
    return GenericStreamingChunk(text=text, is_finished=bool(finish), finish_reason=finish,
                                 usage=None, index=0, tool_use=tool_use)


def _tokens(text: str) -> Iterator[str]:
    yield from re.findall(r"\S+\s*|\s+", text)


class DemoModel(CustomLLM):  # type: ignore[misc]  # litellm is not read by mypy (pyproject.toml)
    # litellm's signature lists a dozen positional parameters; this model reads two of them.
    async def astreaming(self, model: str, messages: list[Any], *args: Any,
                         **kwargs: Any) -> AsyncIterator[Any]:
        tools = (kwargs.get("optional_params") or {}).get("tools") or []
        last = messages[-1] if messages else {}
        tool = None if last.get("role") == "tool" else pick_tool(_last_user_text(messages), tools)
        if last.get("role") == "tool":
            reasoning, answer = _after_tool(messages)
        elif tool is not None:
            reasoning = f"The user's words name the {tool['name']} tool, so I will call it."
            answer = f"I'm the demo model, so here is a demo call to {tool['name']}."
        else:
            reasoning, answer = reply_for(messages)
        for token in _tokens(reasoning):
            await _pace()
            yield ModelResponseStream(
                choices=[StreamingChoices(index=0, delta=Delta(reasoning_content=token))]
            )
        for token in _tokens(answer):
            await _pace()
            yield _chunk(token)
        if tool is not None:
            arguments = json.dumps(example_value(tool.get("parameters") or {}))
            third = max(1, len(arguments) // 3)
            for index, start in enumerate(range(0, len(arguments), third)):
                await _pace()
                call = {"id": "call_demo_" + uuid.uuid4().hex[:12] if index == 0 else None,
                        "type": "function", "index": 0,
                        "function": {"name": tool["name"] if index == 0 else None,
                                     "arguments": arguments[start:start + third]}}
                yield _chunk("", tool_use=call)
        yield _chunk("", finish="tool_calls" if tool is not None else "stop")

    async def acompletion(self, model: str, messages: list[Any], *args: Any,
                          **kwargs: Any) -> Any:
        metadata = (kwargs.get("litellm_params") or {}).get("metadata") or {}
        answer = task_answer(messages, metadata.get("gateway_task"))
        return litellm.mock_completion(model="demo", mock_response=answer, messages=messages)


def register() -> None:
    """Make `gateway/demo` a litellm model string (idempotent)."""
    providers = [p for p in litellm.custom_provider_map if p.get("provider") != PROVIDER]
    providers.append({"provider": PROVIDER, "custom_handler": DemoModel()})
    litellm.custom_provider_map = providers
