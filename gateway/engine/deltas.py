"""What a model adapter yields: plain deltas, so no provider object leaks past the adapter."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    text: str


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
    input_tokens: int
    output_tokens: int


@dataclass(frozen=True, slots=True)
class Served:
    """Which model answered, when it may not be the one asked for (a fallback list)."""

    model: str


Delta = TextDelta | ReasoningDelta | ToolCallDelta | Finish | Usage | Served


@dataclass(eq=False)
class ModelError(Exception):
    """A provider failure, already classified the way the Tambo clients read `RUN_ERROR`.

    Not frozen: raising an exception through a context manager sets its `__traceback__`.
    """

    code: str
    message: str
    category: str = "server_error"
    retryable: bool = False
    status: int | None = None

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"
