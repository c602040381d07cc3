"""A run's usage as the dialects put it on their terminal events.

The log's terminal frame (`run.finished`, `run.cancelled` or `error`) carries the run's usage,
one entry per model (`frames_schema.UsageEntry`); the Timbal view shows it as it is. AG-UI 1.0
defines `usage` on `RUN_FINISHED` and `RUN_ERROR`: a list of `TokenUsage`, one per provider and
model, counts only (no cost: `ag_ui.core` keeps content and prices out of it); the AG-UI
dialect sets it (`dialects/agui/translate.py`). `tambo_usage` is the same list as an extra
field of the Tambo `RUN_FINISHED`, not plugged in yet: it waits for a run of the real Tambo
clients (conformance) showing they accept it. Counts the provider did not break down
(reasoning, cache) are left out rather than sent as a measured zero, as `TokenUsage` asks. Counts
the gateway made itself (the provider reported none) are said in the terminal event's AG-UI
`metadata` (`usageEstimated: true`, `run_metadata`): `@ag-ui/client` strips a field it does not
know from a `TokenUsage` (and warns), but reads `metadata`.

    Tambo:  {"type": "RUN_FINISHED", ..., **tambo_usage(frame)}   (dialects/tambo/translate.py)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NotRequired

from ag_ui.core import TokenUsage
from typing_extensions import TypedDict  # what pydantic reads on Python 3.11 (`dialects/tambo`)

from .frames_schema import TerminalFrame, UsageEntry


class TokenCounts(TypedDict):
    """One model's tokens as AG-UI 1.0's `TokenUsage` is on the wire (camelCase)."""

    provider: NotRequired[str]
    model: str
    inputTokens: int
    outputTokens: int
    totalTokens: int
    reasoningTokens: NotRequired[int]
    cachedInputTokens: NotRequired[int]


class TamboUsage(TypedDict, total=False):
    usage: list[TokenCounts]


def token_usage(entries: list[UsageEntry] | None) -> list[TokenCounts]:
    """The frame's usage entries as AG-UI `TokenUsage` objects on the wire (camelCase)."""
    found = []
    for entry in entries if isinstance(entries, list) else ():
        model = str(entry["model"])
        provider, slash, _ = model.partition("/")
        usage: TokenCounts = {"model": model, "inputTokens": entry["inputTokens"],
                              "outputTokens": entry["outputTokens"],
                              "totalTokens": entry["inputTokens"] + entry["outputTokens"]}
        if slash:
            usage = {"provider": provider, **usage}
        if entry.get("reasoningTokens"):
            usage["reasoningTokens"] = entry["reasoningTokens"]
        if entry.get("cachedInputTokens"):
            usage["cachedInputTokens"] = entry["cachedInputTokens"]
        found.append(usage)
    return found


def run_metadata(frame: Mapping[str, object]) -> dict[str, Any] | None:
    """AG-UI `metadata` of the terminal event of `frame` (None: nothing to say): the answer the
    provider cut (`truncated`: `{reason, messageId}`), and `usageEstimated` when some of the
    usage was counted by the gateway (the provider reported none)."""
    metadata: dict[str, Any] = {}
    truncated = frame.get("truncated")
    if truncated:
        metadata["truncated"] = truncated
    entries = frame.get("usage")
    if isinstance(entries, list) and any(isinstance(e, dict) and e.get("estimatedCalls")
                                         for e in entries):
        metadata["usageEstimated"] = True
    return metadata or None


def agui_usage(frame: TerminalFrame) -> list[TokenUsage] | None:
    """`usage` for the AG-UI terminal event of `frame`; None when the run used no model."""
    usage = token_usage(frame.get("usage"))
    return [TokenUsage.model_validate(u) for u in usage] or None


def tambo_usage(frame: TerminalFrame) -> TamboUsage:
    """The extra field of the Tambo `RUN_FINISHED` for `frame` (nothing when no model ran)."""
    usage = token_usage(frame.get("usage"))
    return {"usage": usage} if usage else {}
