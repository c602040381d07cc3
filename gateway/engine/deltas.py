"""What a model adapter yields: plain deltas, so no provider object leaks past the adapter."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..protocol.run_errors import ErrorCategory


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ReasoningSignature:
    """The provider's signature of the reasoning just streamed (Anthropic's thinking block):
    it ends that block, and goes back to the provider with it on the next call."""

    signature: str


@dataclass(frozen=True, slots=True)
class RedactedReasoning:
    """A block of reasoning the provider encrypted (Anthropic's `redacted_thinking`): nothing
    to show, but it goes back to the provider on the next call."""

    data: str


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """One fragment of a tool call; `id` and `name` come on the first fragment of an index."""

    index: int
    id: str | None
    name: str | None
    arguments: str


@dataclass(frozen=True, slots=True)
class Finish:
    reason: str


@dataclass(frozen=True, slots=True)
class Usage:
    """What one model call consumed, as the provider reported it. `reasoning_tokens` is part
    of `output_tokens` and `cached_input_tokens` part of `input_tokens` (OpenAI's accounting,
    which litellm normalises every provider to)."""

    input_tokens: int
    output_tokens: int
    reasoning_tokens: int = 0
    cached_input_tokens: int = 0
    # Counted by the gateway, not reported: the provider gave none (a server that reports no
    # usage: `stream_contract.estimated_usage`), or the call was cut off before it came (a
    # cancel, a dropped stream, an error mid-answer; `usage.estimate`).
    estimated: bool = False


def usage_of(reported: Any) -> Usage | None:
    """A chunk's `usage` (a JSON object on the direct path, litellm's object otherwise) as a
    `Usage`, or None when it reports nothing."""
    if reported is None or not _field(reported, "total_tokens"):
        return None
    completion = _field(reported, "completion_tokens_details")
    prompt = _field(reported, "prompt_tokens_details")
    return Usage(_count(_field(reported, "prompt_tokens")),
                 _count(_field(reported, "completion_tokens")),
                 _count(_field(completion, "reasoning_tokens")),
                 _count(_field(prompt, "cached_tokens")))


def _field(value: Any, name: str) -> Any:
    if value is None:
        return None
    return value.get(name) if isinstance(value, dict) else getattr(value, name, None)


def _count(value: Any) -> int:
    """A provider's count, or 0 for anything that is not a whole number of tokens."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


@dataclass(frozen=True, slots=True)
class Served:
    """Which model answered, when it may not be the one asked for (a fallback list)."""

    model: str


Delta = (TextDelta | ReasoningDelta | ReasoningSignature | RedactedReasoning | ToolCallDelta
         | Finish | Usage | Served)


@dataclass(eq=False)
class ModelError(Exception):
    """A provider failure, already classified the way the Tambo clients read `RUN_ERROR`.

    Not frozen: raising an exception through a context manager sets its `__traceback__`.
    """

    code: str
    message: str
    category: ErrorCategory = "server_error"
    retryable: bool = False
    status: int | None = None
    window: int | None = None  # a context-length error's window size, when the provider said

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"
