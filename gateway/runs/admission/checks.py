"""What a run request may ask for, checked before anything is written: the model, its
attachments, the size of its input, tools, components and metadata, and whether its message
can reach the model at all.

Each refusal is a problem+json with its own code, so a client can tell which limit it met and
an operator which setting to raise (`GATEWAY_MAX_*`, `GATEWAY_MODELS`). `check_request` needs
only the settings and the spec; `check_fits` needs the agent.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ...config import Settings
from ...engine import attachments
from ...engine.agents.agent import ResolvedAgent
from ...engine.attachments import is_image_url
from ...engine.context_window import TokenCounter, available_tokens, input_limit
from ...engine.history import user_messages
from ...engine.tools.client_schema import SchemaRefused, check_client_schema
from ...protocol.problems import ApiError, Problem
from ...protocol.run_spec import Block, RunSpec
from .threads import check_initial_messages, check_metadata


def check_request(settings: Settings, spec: RunSpec) -> None:
    """Everything about a run request that can be refused before its thread is looked at: the
    model, the attachments, then the input's limits."""
    check_model(settings, spec)
    check_attachments(settings, spec)
    check_limits(settings, spec)
    check_shared_state(settings, spec)


def check_shared_state(settings: Settings, spec: RunSpec) -> None:
    """The client's shared state is kept with the thread: bounded as a component's state."""
    if spec.state is None:
        return
    size = len(json.dumps(spec.state, separators=(",", ":"), ensure_ascii=False).encode())
    limit = settings.max_component_state_bytes
    if size > limit:
        raise ApiError(Problem.STATE_TOO_LARGE, f"The state takes {size} bytes; the limit is "
                       f"{limit} (GATEWAY_MAX_COMPONENT_STATE_BYTES)", limit=limit)


def check_model(settings: Settings, spec: RunSpec) -> None:
    """A run may pick its model only from the allow-list (`GATEWAY_MODELS`): a browser must
    never choose an arbitrary, possibly expensive, model on the operator's key."""
    if spec.model is None:
        return
    allowed = (settings.model, *settings.models)
    if spec.model not in allowed:
        raise ApiError(Problem.MODEL_NOT_ALLOWED,
                       f"Model {spec.model[:200]!r} is not allowed on this gateway; allowed: "
                       f"{', '.join(allowed)} (set GATEWAY_MODELS to allow more)",
                       allowedModels=list(allowed))


def check_attachments(settings: Settings, spec: RunSpec) -> None:
    """Attachments the model cannot take are refused before anything starts (400/413)."""
    given = [*(spec.user.blocks if spec.user else []),
             *(b for m in spec.seed_messages for b in m.blocks or [])]
    check_blocks(settings, given, spec.model)


def check_blocks(settings: Settings, given: Sequence[Block], model: str | None = None) -> None:
    """The attachments among `given` (a message's blocks, a thread's seeds'), for `model`:
    their sizes and kinds (400/413), and no image by URL unless `GATEWAY_IMAGE_URLS=pass`."""
    blocks = [b for b in given if b.get("type") == "resource"]
    if not blocks:
        return
    try:
        attachments.check(blocks, settings.max_attachment_bytes,
                          attachments.capabilities(model or settings.model))
    except attachments.AttachmentError as exc:
        raise ApiError(Problem[exc.code], str(exc)) from None
    if settings.image_urls == "pass":
        return
    if any(is_image_url(b.get("resource") or {}) for b in blocks):
        raise ApiError(Problem.IMAGE_URL_NOT_ALLOWED,
                       "Images must be attached as data (a base64 `blob`), not as a URL: "
                       "this gateway does not pass image URLs to its model "
                       "(GATEWAY_IMAGE_URLS)")


def _text_chars(blocks: list[Block]) -> int:
    return sum(len(b["text"]) for b in blocks if b.get("type") == "text")


def message_chars(spec: RunSpec) -> int:
    """Characters of text the input carries (the user's text blocks and tool results)."""
    total = _text_chars(spec.user.blocks) if spec.user is not None else 0
    return total + sum(_text_chars(r.blocks) for r in spec.tool_results)


def _schema_bytes(*schemas: Any) -> int:
    return sum(len(json.dumps(s, separators=(",", ":"))) for s in schemas if s is not None)


def check_limits(settings: Settings, spec: RunSpec) -> None:
    """The run's input, tools, components and metadata within the configured limits."""
    chars = message_chars(spec)
    if chars > settings.max_message_chars:
        raise ApiError(Problem.MESSAGE_TOO_LARGE,
                       f"The message carries {chars} characters of text; the limit is "
                       f"{settings.max_message_chars}", limit=settings.max_message_chars)
    tools = [*spec.client_tools, *(t for c in spec.components for t in c.context_tools)]
    for kind, items, limit, refused in (
            ("tools", tools, settings.max_tools, Problem.TOO_MANY_TOOLS),
            ("components", spec.components, settings.max_components,
             Problem.TOO_MANY_COMPONENTS)):
        if len(items) > limit:
            raise ApiError(refused,
                           f"The request declares {len(items)} {kind}; the limit is {limit}",
                           limit=limit)
    named = [(t.name, t.input_schema, t.output_schema) for t in tools] + [
        (c.name, c.props_schema, c.state_schema) for c in spec.components]
    for name, *schemas in named:
        size = _schema_bytes(*schemas)
        if size > settings.max_schema_bytes:
            raise ApiError(Problem.SCHEMA_TOO_LARGE,
                           f"The schemas of {name[:200]!r} take {size} bytes; the limit is "
                           f"{settings.max_schema_bytes}", limit=settings.max_schema_bytes)
    for component in spec.components:
        check_state_schema(component.name, component.state_schema)
    check_metadata(settings, spec.metadata, spec.user.metadata if spec.user else None)
    check_initial_messages(settings, [m.text for m in spec.seed_messages])


def check_state_schema(name: str, schema: Any) -> None:
    """400 for a `stateSchema` the gateway will not run (it is checked on the event loop at
    every state update, so only what runs in bounded time is accepted)."""
    try:
        check_client_schema(schema)
    except SchemaRefused as exc:
        raise ApiError(Problem[exc.code], f"Component {name[:200]!r}: {exc.message}") from None


def check_fits(settings: Settings, spec: RunSpec, agent: ResolvedAgent) -> None:
    """A new message that could never reach the model, whatever history is left out (with the
    agent's instructions it is over the model's input budget), is refused before the run
    starts (400 `MESSAGE_TOO_LARGE_FOR_MODEL`), not failed by the provider after it."""
    if spec.user is None:
        return
    model = spec.model or agent.model
    limit = input_limit(model, agent.max_input_tokens, settings.max_input_tokens)
    if limit is None:
        return
    max_tokens = min((n for n in (spec.max_tokens, agent.max_tokens) if n is not None),
                     default=None)
    budget = available_tokens(limit, max_tokens, settings.output_reserve_tokens)
    counter = TokenCounter(model)
    part = {"type": "user", "content": spec.user.text, "blocks": spec.user.blocks,
            "context": spec.user.context}
    tokens = sum(counter.message(m) for m in user_messages([part]))
    if agent.instructions:
        tokens += counter.message({"role": "system", "content": agent.instructions})
    if tokens > budget:
        raise ApiError(Problem.MESSAGE_TOO_LARGE_FOR_MODEL,
                       f"The message has {tokens} tokens; the model's input budget is "
                       f"{budget} (its limit {limit}, less room for the answer)",
                       tokens=tokens, budgetTokens=budget)
