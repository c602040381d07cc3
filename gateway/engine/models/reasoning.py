"""Reasoning on request: what an agent asks of a model's thinking, said once for every provider.

An agent asks for an effort (`reasoning_effort`: OpenAI's own parameter, which litellm maps to
Anthropic's thinking budget and to Gemini's thinking config) or a budget of thinking tokens
(`thinking_budget`: Anthropic's `thinking` with `budget_tokens`, which litellm maps to Gemini's
`thinkingBudget`). A model call sends the effort in OpenAI's name (`ModelRequest.options`);
where the provider understands a budget (`with_thinking`) the budget goes instead, as
`thinking`, and litellm translates it. An OpenAI-compatible server has no budget: there only
the effort is sent, and an agent that gives only a budget sends nothing for it (docs/models.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

EFFORTS = ("minimal", "low", "medium", "high")


@dataclass(frozen=True)
class Reasoning:
    """An agent's reasoning request; `None` fields ask nothing."""

    effort: str | None = None
    budget: int | None = None

    def __bool__(self) -> bool:
        return self.effort is not None or self.budget is not None


def with_thinking(options: dict[str, Any], reasoning: Reasoning | None,
                  budget_understood: bool) -> dict[str, Any]:
    """`options` (OpenAI's names, the effort among them) with the budget as `thinking` in the
    effort's place when the provider understands a budget."""
    if reasoning is None or reasoning.budget is None or not budget_understood:
        return options
    thinking = {"type": "enabled", "budget_tokens": reasoning.budget}
    return {**{k: v for k, v in options.items() if k != "reasoning_effort"},
            "thinking": thinking}


@dataclass(frozen=True)
class Traits:
    """What a model string's provider takes of reasoning, as litellm sees it."""

    budget: bool = False  # `thinking` with a budget (Anthropic's, Gemini's reasoning models)
    replay: bool = False  # thinking blocks back on the next call (not OpenAI-compatible)


_TRAITS: dict[tuple[str, str | None], Traits] = {}  # by model string and api base


def traits(model: str, api_base: str | None = None) -> Traits:
    """The reasoning traits of `model` (asked of litellm once per model string)."""
    key = (model, api_base)
    if key not in _TRAITS:
        import litellm
        from litellm.constants import openai_compatible_providers

        try:
            name, provider, _, _ = litellm.get_llm_provider(model, api_base=api_base)
            supported = litellm.get_supported_openai_params(
                model=name, custom_llm_provider=provider) or []
        except Exception:
            _TRAITS[key] = Traits()
        else:
            compatible = provider == "openai" or provider in openai_compatible_providers
            _TRAITS[key] = Traits("thinking" in supported, not compatible)
    return _TRAITS[key]


def replayable(messages: list[dict[str, Any]], keeps_thinking: bool) -> list[dict[str, Any]]:
    """`messages` as a provider takes them back. An OpenAI-compatible server
    (`keeps_thinking` false) gets no `thinking_blocks` (it may refuse a field it does not
    know); the others (Anthropic, Gemini, ... through litellm's translation) get no empty text
    beside a turn's tool calls, which litellm would replace by a placeholder sentence of its
    own. The list is copied only when something is removed."""
    def changed(message: dict[str, Any]) -> bool:
        if not keeps_thinking:
            return "thinking_blocks" in message
        return message.get("content") == "" and bool(message.get("tool_calls"))

    if not any(changed(m) for m in messages):
        return messages
    drop = "content" if keeps_thinking else "thinking_blocks"
    return [{k: v for k, v in m.items() if k != drop} if changed(m) else m for m in messages]
