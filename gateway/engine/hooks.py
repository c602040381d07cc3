"""The agent loop's hooks: the points where whoever runs the loop may watch it.

The loop calls them at well-defined moments of each model call (opened, a delta received and
handled, usage and serving model reported, ended) instead of being wrapped from outside: the
deltas pass through one generator (the adapter's) on their way to the frames, and metrics,
traces and quota counting are plain method calls a type checker sees. The engine knows nothing
of what listens: `runs` plugs its hooks in (metrics, traces, the quota ticket); `NO_HOOKS` does
nothing, for tests and one-off calls.
"""

from __future__ import annotations

from typing import Protocol

from .deltas import Usage


class ModelCallHooks(Protocol):
    """One model call, watched. Called per delta: keep them O(1) and free of awaits."""

    def received(self, content: bool) -> None:
        """The adapter handed over a delta (`content`: text, reasoning or a tool-call
        fragment, as opposed to usage, the serving model or the finish reason)."""

    def handled(self) -> None:
        """The loop is done with that delta (its frames are written) and asks for the next."""

    def usage(self, input_tokens: int, output_tokens: int) -> None:
        """The call's token usage, as the provider reported it."""

    def served(self, model: str) -> None:
        """The model that answered, when the adapter says (a fallback list)."""

    def ended(self, error_code: str | None, completed: bool) -> None:
        """The call is over: `completed` when its stream ran to its end, `error_code` when it
        failed with a classified provider error (neither: cancelled)."""


class LoopHooks(Protocol):
    """A run's hooks: one `ModelCallHooks` per model call, and the tokens it used."""

    def model_call(self, model: str | None) -> ModelCallHooks:
        """Called just before the loop opens a call to `model` (None: the configured one)."""
        ...

    async def tokens_used(self, usage: Usage) -> None:
        """A call's usage as the provider reported it, awaited before the loop goes on (the
        run's usage record and its quota count it)."""


class _Silent:
    """Hooks that do nothing."""

    def received(self, content: bool) -> None:
        pass

    def handled(self) -> None:
        pass

    def usage(self, input_tokens: int, output_tokens: int) -> None:
        pass

    def served(self, model: str) -> None:
        pass

    def ended(self, error_code: str | None, completed: bool) -> None:
        pass

    def model_call(self, model: str | None) -> ModelCallHooks:
        return self

    async def tokens_used(self, usage: Usage) -> None:
        pass


NO_HOOKS: LoopHooks = _Silent()
