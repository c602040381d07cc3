"""Fitting a thread's history to the model's input budget (docs/context.md).

A thread lives for weeks; a model's window does not grow with it. Before each model call the
messages are fitted to the budget: every system message (the agent's instructions, a client's
system prompt) and the newest turn are kept, and whole older turns are left out, oldest first,
until the rest fits. A turn starts at a user message and holds everything the model and the
tools said after it, so a tool call is never separated from its result. (A user message that
comes right after tool results, the page's context sent with a client tool's results, belongs
to the turn of those results.)

The budget is the model's input limit (the agent's `max_input_tokens`, else the window the
model's server said, else litellm's model information, else `GATEWAY_MAX_INPUT_TOKENS`; none of
them: no limit) less a reserve for the answer (the call's `max_tokens`, else
`GATEWAY_OUTPUT_RESERVE_TOKENS`, never more than half) and a margin (`GATEWAY_CONTEXT_MARGIN`,
a fraction of the window: the gateway's count is not the server's tokenizer's). A server that
refuses a call as too long anyway, before it answered anything, gets it once more with a
shorter history (`shrunk`), and the window it named is remembered for later runs.

Tokens are counted with litellm's `token_counter`, one message at a time, and each count is
remembered (keyed by the model's tokenizer and the message itself): a long thread's turns are
counted once per process, not on every run, and a fit walks back from the newest turn only as
far as the budget reaches, so its cost follows what is kept, not the thread's length.
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

ChatMessage = dict[str, Any]

# Counted messages remembered per process; a message's key is its role and text (its JSON when
# it has more), so about this many messages' text is held.
COUNT_CACHE_SIZE = 20_000
# How a summary of the turns left out is put to the model (`runs/summaries.py`).
SUMMARY_PREFIX = "Summary of the earlier part of this conversation (older turns are not shown):"


# How servers word a request longer than their window (OpenAI and vLLM, llama-cpp-python,
# llama.cpp, Anthropic), and where they say the window's size.
_CONTEXT_WORDS = re.compile(r"context.length|context window|context size|prompt is too long|"
                            r"exceed_context_size", re.IGNORECASE)
_WINDOW_SIZES = (re.compile(r"maximum context length is (\d+)"),
                 re.compile(r"context window of (\d+)"),
                 re.compile(r"(\d+) maximum"),
                 re.compile(r"\bn_ctx\W{1,3}(\d+)"))


def context_error(message: str) -> bool:
    """Whether a provider's error message says the request is longer than its window."""
    return bool(_CONTEXT_WORDS.search(message))


def window_in(message: str) -> int | None:
    """The window size a context-length error names, if it names one."""
    for pattern in _WINDOW_SIZES:
        found = pattern.search(message)
        if found:
            return int(found.group(1))
    return None


@functools.lru_cache(maxsize=256)
def model_input_limit(model: str) -> int | None:
    """litellm's `max_input_tokens` for a model it knows (its local map: no network), else
    None."""
    import litellm

    try:
        info = litellm.get_model_info(model)
    except Exception:  # "This model isn't mapped yet": an unknown or self-hosted model
        return None
    limit = info.get("max_input_tokens") or info.get("max_tokens")
    return int(limit) if limit else None


def input_limit(model: str | None, agent_limit: int | None, default: int | None,
                server: int | None = None) -> int | None:
    """The input tokens a call may carry: the agent's, else what the model's server said (its
    `server` answer, or a context-length error's words), else litellm's for the model, else the
    gateway's setting (None: no limit)."""
    if agent_limit is not None:
        return agent_limit
    for known in (learned_window(model), server, model_input_limit(model) if model else None):
        if known is not None:
            return known
    return default


def available_tokens(limit: int, max_tokens: int | None, reserve: int, margin: float = 0.0
                     ) -> int:
    """What is left of `limit` for the messages once the answer's reserve is kept, and the
    `margin` (a fraction of the window) for the difference between the gateway's count and
    the server's tokenizer."""
    kept = max_tokens if max_tokens is not None else reserve
    return limit - min(kept, limit // 2) - int(limit * margin)


class TokenCounter:
    """litellm's token count of single messages for one model, remembered process-wide."""

    _counts: OrderedDict[tuple[str, str], int] = OrderedDict()

    def __init__(self, model: str | None) -> None:
        self.model = model or ""

    def message(self, message: ChatMessage) -> int:
        content = message.get("content")
        if isinstance(content, str) and len(message) == 2:  # role and text: the usual case
            key = (self.model, f"{message.get('role')}:{content}")
        else:
            key = (self.model, json.dumps(message, separators=(",", ":"), ensure_ascii=False))
        counts = self._counts
        found = counts.get(key)
        if found is not None:
            with contextlib.suppress(KeyError):  # evicted meanwhile (apps on other threads)
                counts.move_to_end(key)
            return found
        found = self._count(messages=[message])
        counts[key] = found
        if len(counts) > COUNT_CACHE_SIZE:
            with contextlib.suppress(KeyError):
                counts.popitem(last=False)
        return found

    def text(self, text: str) -> int:
        return self._count(text=text) if text else 0

    def _count(self, **what: Any) -> int:
        from litellm import token_counter

        try:
            return int(token_counter(model=self.model, **what))
        except Exception:  # a tokenizer litellm cannot load: a rough count, never a failure
            return len(json.dumps(what)) // 3 + 1


@dataclass
class Fitted:
    """What one fit sends: the messages and their counted tokens; `dropped`, the messages of
    the turns left out (oldest first), is read from the history only when asked for."""

    messages: list[ChatMessage]
    tokens: int
    history: Sequence[ChatMessage] = ()
    cut: int = 0  # history[cut:] is sent (with the system messages before it)

    @property
    def trimmed(self) -> bool:
        return self.cut > 0

    @property
    def dropped(self) -> list[ChatMessage]:
        return [m for m in self.history[:self.cut] if m.get("role") != "system"]


def _previous_role(messages: Sequence[ChatMessage], i: int) -> str | None:
    """The role of the last message before `i` that is not a system message (None: none)."""
    for j in range(i - 1, -1, -1):
        role = messages[j].get("role")
        if role != "system":
            return str(role)
    return None


def fit(messages: Sequence[ChatMessage], available: int,
        count: Callable[[ChatMessage], int]) -> Fitted:
    """The newest whole turns that fit in `available` tokens with every system message. The
    newest turn is always kept, even when it alone is over: the provider then says so.

    Walks back from the newest message and stops at the first turn that does not fit, so
    only what is kept is counted (a 500-turn thread costs what its last 20 turns cost)."""
    systems = [i for i, m in enumerate(messages) if m.get("role") == "system"]
    used = sum(count(messages[i]) for i in systems)
    cut = end = len(messages)  # messages[cut:] are kept; the turn being read ends at `end`
    size, trimmed = 0, False
    for i in range(len(messages) - 1, -1, -1):
        role = messages[i].get("role")
        if role == "system":
            continue
        size += count(messages[i])
        previous = _previous_role(messages, i)
        if role == "user" and previous in ("user", "tool") or (
                role != "user" and previous is not None):
            continue  # the turn goes on before this message
        if end < len(messages) and used + size > available:
            trimmed = True
            break
        used, cut, end, size = used + size, i, i, 0
    if not trimmed:
        return Fitted(list(messages), used)
    kept = [messages[i] for i in systems if i < cut] + list(messages[cut:])
    return Fitted(kept, used, messages, cut)


@dataclass
class ContextBudget:
    """One run's budget: every model call of the run is fitted to it (`engine/loop.py`)."""

    available: int
    counter: TokenCounter
    _tools: tuple[int, int] = (-1, 0)  # (how many tools, their tokens): counted once per set

    def fitted(self, messages: Sequence[ChatMessage], tools: Sequence[Any]) -> Fitted:
        if self._tools[0] != len(tools):
            self._tools = (len(tools), self.counter.text(json.dumps(tools)) if tools else 0)
        return fit(messages, self.available - self._tools[1], self.counter.message)


# What a budget keeps of itself when the provider refused a fitted history anyway and said no
# window size: the gateway's count was too low by more than its margin.
SHRINK = 0.75
# The fraction of a window kept free by default: the gateway's count (litellm's tokenizer, or
# characters) and the server's differ, by 11 % on code for a llama.cpp server.
MARGIN = 0.1
# Windows servers have told this process (a context-length error's words, or their own
# `/props` and `/v1/models`), by model string: every later run's budget uses them.
_learned: dict[str, int] = {}
LEARNED_MAX = 1024


def learn_window(model: str | None, window: int) -> None:
    """Remember the window a server said `model` has."""
    if model and window > 0 and (model in _learned or len(_learned) < LEARNED_MAX):
        _learned[model] = window


def learned_window(model: str | None) -> int | None:
    return _learned.get(model) if model else None


def shrunk(budget: ContextBudget | None, model: str | None, request: Any,
           window: int | None) -> ContextBudget:
    """The budget for one more try of a call the provider refused as too long: the window it
    named (learned for later runs too), less the answer's reserve and the margin; without one,
    three quarters of what was sent. Never more than the budget it replaces."""
    counter = budget.counter if budget is not None else TokenCounter(model)
    sent = sum(counter.message(m) for m in request.messages)
    if request.tools:
        sent += counter.text(json.dumps(request.tools))
    available = int(sent * SHRINK)
    if window:
        learn_window(model, window)
        available = min(available, available_tokens(window, request.max_tokens, 0, MARGIN))
    if budget is not None:
        available = min(available, int(budget.available * SHRINK))
    return ContextBudget(max(1, available), counter)
