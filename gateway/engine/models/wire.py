"""What every provider's own streaming format shares on the direct path (`native.py`): the
request a wire module builds, the stream reader it hands back, and the two ways a stream
fails that are the provider's doing rather than the connection's.

A wire module (`anthropic_wire`, `gemini_wire`) builds the request through litellm's own
mapping for that provider (`litellm_optional_params`, then the provider's transformation) and
reads its stream: `feed` takes one SSE event's JSON and returns the deltas it holds, `end` the
last deltas (finish reason, usage) once the body ended (or the provider said it was over:
`done`), or `Incomplete` when the provider never said so (`engine/stream_contract.py`: it is
raised as `LLM_STREAM_INCOMPLETE`); `usage` what the provider counted so
far, for a call that failed after it started (every model call is metered).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from ..deltas import Delta
from .litellm_model import ModelRequest
from .reasoning import with_thinking


class StreamReader(Protocol):
    done: bool  # the provider said its answer is over: what follows is the body's end

    def feed(self, event: dict[str, Any]) -> list[Delta]: ...
    def end(self) -> list[Delta]: ...
    def usage(self) -> list[Delta]: ...


@dataclass(frozen=True)
class WireRequest:
    """One streamed call: where it goes, its headers and JSON body, and its stream's reader."""

    url: str
    headers: dict[str, str]
    body: bytes
    reader: StreamReader


class Incomplete(Exception):
    """The body ended without the provider's end of stream."""


class ProviderError(Exception):
    """An error the provider stated inside a stream (HTTP 200): the status it stands for, the
    error as the provider sent it (for litellm's mapping), and its message in words."""

    def __init__(self, status: int, body: str, message: str) -> None:
        super().__init__(message)
        self.status, self.body, self.message = status, body, message


# The reasoning parameters a provider's body takes as they are named in OpenAI's terms (the
# others litellm maps into the provider's own: Gemini's `thinkingConfig`).
REASONING_KEYS = ("reasoning_effort", "thinking")
TAKEN_AS_IS = {"anthropic": {"thinking"}}


def litellm_optional_params(name: str, provider: str, request: ModelRequest,
                            messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The provider's parameters for `request`, as litellm maps the OpenAI ones (tools, tool
    choice, max tokens, temperature, reasoning) for `provider` before its transformation.
    `messages` are litellm's cleaned copy (`validate_and_fix_openai_messages`, in place).

    Reasoning is mapped for any model of the provider, also one litellm does not list as a
    reasoning model (a model newer than its list): it is passed as allowed, and what litellm
    would then also send untranslated is taken out again."""
    from litellm.utils import get_optional_params, validate_and_fix_openai_messages

    messages[:] = validate_and_fix_openai_messages(messages)
    params = with_thinking(request.options(), request.reasoning, True)
    asked = [key for key in REASONING_KEYS if key in params]
    optional = dict(get_optional_params(model=name, custom_llm_provider=provider, stream=True,
                                        messages=messages, allowed_openai_params=asked or None,
                                        **params))
    for key in set(asked) - TAKEN_AS_IS.get(provider, set()):
        optional.pop(key, None)
    return optional
