"""The contract of a model call's stream: when it is complete, what an incomplete one raises,
and how usage the provider did not report is counted and marked. Every adapter keeps it
(`models/direct.py`, `models/litellm_model.py`, and any other provider's), and the agent loop
(`loop.stream_turn`) checks it, so a call's outcome is never guessed.

**Complete** means the provider said so, in its own words:

1. a finish reason (a `Finish` delta, normalised by `finish_reason`: `stop`, `tool_calls`,
   `length`, `content_filter`, ...), and
2. the protocol's own end of stream: `data: [DONE]` for an OpenAI-compatible SSE stream,
   `message_stop` for Anthropic's Messages API, the last chunk of a Gemini stream.

An adapter yields `Finish` only for a reason the provider sent, never one it made up (litellm
synthesises `stop` at the end of any stream: its adapter drops that one), and raises
`incomplete(...)` when the body ends without the protocol's end (2). The loop raises
`incomplete(...)` when a stream ended without any `Finish` (1): an OpenAI-compatible server that
cut an answer short to serve another request sends `[DONE]` with no finish reason. Either way
the run fails with `LLM_STREAM_INCOMPLETE` (retryable: the same request may well complete), its
partial answer kept and marked cancelled, and the upstream's own words, if it said any, logged
for the operator.

A stream that ended before it said anything at all (`200 OK`, then an empty body: how
llama-cpp-python's server reports a template error or a request longer than its window) gives
nothing to log. Its adapter then asks once more, the same request not streamed and capped at one
token, to hear the server's words (`diagnosed`): an error answer is raised as that error (a
context-length error lets the run retry with a shorter history), anything else as incomplete
with those words. This costs a request on a failure path only.

**Truncated** is complete, but cut: `length` (the call's `max_tokens`, or the server's window)
or `content_filter` (`TRUNCATIONS`). The answer is kept, marked on its stored message and on the
run's end (`docs/models.md`); what follows (stop, or ask the model to continue) is the
operator's choice (`GATEWAY_ON_TRUNCATION`).

**Usage** is the provider's when it reports it (every adapter asks: `stream_options.
include_usage`, or the provider's own). A complete stream without it is counted by the gateway
(`estimated_usage`): with the upstream's own tokenizer when the adapter can reach one
(`Tokenizer`: a llama.cpp or vLLM server's `/tokenize`), else litellm's `token_counter` for the
model. Such a `Usage` has `estimated=True`, and the mark follows it into the run's usage entry,
its stored row and its `usage` events; limits and quotas count it as reported usage is counted.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal, Protocol

from .deltas import ModelError, Usage

log = logging.getLogger(__name__)

INCOMPLETE = "LLM_STREAM_INCOMPLETE"
# Finish reasons that end an answer before the model did: the stored answer is marked.
TRUNCATIONS = frozenset({"length", "content_filter"})
# Providers' own words for them (Anthropic's Messages API, Gemini), as the OpenAI names.
_FINISH_NAMES = {
    "end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool_calls",
    "max_tokens": "length", "model_context_window_exceeded": "length", "refusal": "content_filter",
    "STOP": "stop", "MAX_TOKENS": "length", "SAFETY": "content_filter",
    "RECITATION": "content_filter", "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter", "SPII": "content_filter",
    "function_call": "tool_calls",
}
# How much of an upstream's words a log line repeats.
WORDS_CHARS = 500


def finish_reason(reason: str) -> str:
    """A provider's finish reason in the OpenAI names the engine reads (unknown ones as they
    are: they still say the stream was complete)."""
    return _FINISH_NAMES.get(reason, reason)


TruncationReason = Literal["length", "content_filter"]


def truncation(reason: str | None) -> TruncationReason | None:
    """`length` or `content_filter` when a call with that finish reason was cut, else None."""
    if reason == "length":
        return "length"
    if reason == "content_filter":
        return "content_filter"
    return None


def incomplete(what: str, words: str | None = None, model: str | None = None) -> ModelError:
    """The error of a stream that ended before the provider said it was complete, logged once
    with what the upstream said (`words`, if anything): the client's message stays generic."""
    said = f": the upstream said {words[:WORDS_CHARS]!r}" if words else ""
    log.warning("model call failed: %s (model %s): %s%s", INCOMPLETE, model or "?", what, said)
    return ModelError(INCOMPLETE, "The AI provider's answer ended before it was complete",
                      "server_error", True, 502)


def diagnosed(words: str, model: str | None = None) -> ModelError:
    """The error of a stream that ended before its first word, when asking again brought no
    error answer (`words`: what the server said instead)."""
    return incomplete("the stream ended before its first chunk", words, model)


def require_finish(finish: str | None, model: str | None = None) -> str:
    """The call's finish reason, or `incomplete(...)` if the stream gave none."""
    if finish is None:
        raise incomplete("the stream ended without a finish reason (an error after the answer "
                         "began, or a server that cut it to serve another request)",
                         model=model)
    return finish


class Tokenizer(Protocol):
    """An adapter that can count tokens as its upstream's model does (a server's
    `/tokenize`): `None` when it cannot (then litellm's counter is used)."""

    async def count_tokens(self, texts: Sequence[str]) -> list[int] | None: ...


# Tokens a chat template adds around each message (role markers), as litellm's counter adds.
PER_MESSAGE_TOKENS = 3


async def estimated_usage(model: Any, model_name: str | None, messages: Sequence[dict[str, Any]],
                          output: str, tools: Sequence[Any] = ()) -> Usage:
    """A call's usage counted by the gateway (the provider reported none), `estimated=True`:
    the input (`messages` and the `tools` offered) and the `output` (text, reasoning and tool
    arguments) through the upstream's tokenizer when `model` offers one, else litellm's."""
    model_name = model_name or getattr(model, "litellm_model", None) or getattr(
        model, "model", None)
    texts = [_text_of(m) for m in messages]
    if tools:
        texts.append(json.dumps(list(tools), separators=(",", ":")))
    given = "\n".join(texts)  # one count of the input: a server is asked twice, not per message
    counts: list[int] | None = None
    count_tokens: Callable[[Sequence[str]], Awaitable[list[int] | None]] | None = getattr(
        model, "count_tokens", None)
    if count_tokens is not None:
        try:
            counts = await count_tokens([given, output])
        except Exception as error:  # never fail a complete call over its count
            log.info("counting tokens on the upstream failed (%s); using litellm's counter",
                     type(error).__name__)
    if counts is None or len(counts) != 2:
        counts = [_litellm_count(model_name, given), _litellm_count(model_name, output)]
    return Usage(counts[0] + PER_MESSAGE_TOKENS * (len(messages) + 1), counts[1],
                 estimated=True)


def _text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    text = content if isinstance(content, str) else ""
    calls = message.get("tool_calls")
    if calls:
        text += json.dumps(calls, separators=(",", ":"))
    return text


def _litellm_count(model: str | None, text: str) -> int:
    if not text:
        return 0
    from litellm import token_counter

    try:
        return int(token_counter(model=model or "", text=text, count_response_tokens=True))
    except Exception:  # a tokenizer litellm cannot load: a rough count, never a failure
        return len(text) // 4 + 1
