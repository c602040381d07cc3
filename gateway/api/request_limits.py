"""Limits on what one request may ask of the gateway, checked before anything starts.

Each refusal is a problem+json with its own code, so a client can tell which limit it met and
an operator which setting to raise (`GATEWAY_MAX_*`).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from ..config import Settings
from ..engine.attachments import is_image_url
from ..protocol.problems import ApiError, Problem
from ..protocol.run_spec import Block, RunSpec
from ..runs.state_schema import SchemaRefused, check_client_schema
from .stored_caps import check_initial_messages, check_metadata

# A JSON string (skipped whole, escapes included) or one bracket: what nesting depth is made of.
_STRUCTURE = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)
_OPENERS = frozenset(b"[{")
# A string (skipped whole) or an integer literal of 19 digits or more (not a fraction's or an
# exponent's digits): the only integers that can fall outside 64 bits.
_LONG_INTEGER = re.compile(rb'"(?:[^"\\]|\\.)*"|(?<![\d.eE+-])-?\d{19,}(?![\d.eE])',
                           re.DOTALL)
_INT64 = range(-(2 ** 63), 2 ** 63)
# A string (skipped whole), a constant Python's and the validator's parsers accept but JSON has
# not (`NaN`, `Infinity`), or a number that may be too large for a double: one with an exponent
# or with more integer digits than a double's largest (309).
_FLOAT_RISK = re.compile(rb'"(?:[^"\\]|\\.)*"|NaN|-?Infinity|-?\d+(?:\.\d+)?[eE][+-]?\d+'
                         rb'|-?\d{309,}\.\d+', re.DOTALL)


def json_depth(raw: bytes) -> int:
    """The deepest nesting of arrays and objects in a JSON text, read in one pass of the
    regular-expression engine (no parsing: a deep body must be refused before the parser
    recurses into it)."""
    depth = deepest = 0
    for match in _STRUCTURE.finditer(raw):
        token = match.group()
        if len(token) != 1:
            continue  # a string
        if token[0] in _OPENERS:
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def has_integer_beyond_64_bits(raw: bytes) -> bool:
    """Whether a JSON text holds an integer outside the signed 64-bit range.

    Python's parser accepts any integer, but such a number cannot be stored or sent on: the
    model client's encoder (and other JSON peers) refuse it, which would fail the run after it
    started. So it is refused with the body, like any other JSON a peer cannot read.
    """
    return any(len(token) > 1 and token[:1] != b'"' and int(token) not in _INT64
               for token in (m.group() for m in _LONG_INTEGER.finditer(raw)))


def non_finite_number(raw: bytes) -> bytes | None:
    """The first number of a JSON text that is not a finite double, if any: `NaN` or
    `Infinity` (not JSON, yet accepted by the parsers) or a literal beyond a double's range
    (`1e400`, read as infinity). None of them can be stored (PostgreSQL refuses them in JSON)
    or sent on as JSON, so the body is refused before anything starts."""
    for match in _FLOAT_RISK.finditer(raw):
        token = match.group()
        if token[:1] == b'"':
            continue
        if token[-1:] in b"Ny" or math.isinf(float(token)):  # NaN, Infinity
            return token
    return None


def check_json_body(raw: bytes, depth_limit: int) -> None:
    """400 for a JSON body nested too deep or holding a number no JSON peer can carry,
    checked before it is parsed."""
    if json_depth(raw) > depth_limit:
        raise ApiError(Problem.JSON_TOO_DEEP,
                       f"The request body nests arrays and objects deeper than {depth_limit} "
                       "levels", limit=depth_limit)
    if has_integer_beyond_64_bits(raw):
        raise ApiError(Problem.INTEGER_OUT_OF_RANGE,
                       "The request body holds an integer outside the signed 64-bit range")
    token = non_finite_number(raw)
    if token is not None:
        if not token[-1:].isdigit():
            raise ApiError(Problem.INVALID_JSON,
                           f"The request body is not valid JSON: {token.decode()} is not a "
                           "JSON number")
        raise ApiError(Problem.NUMBER_OUT_OF_RANGE,
                       "The request body holds a number beyond the range of a double")


def _text_chars(blocks: list[Block]) -> int:
    return sum(len(b["text"]) for b in blocks if b.get("type") == "text")


def message_chars(spec: RunSpec) -> int:
    """Characters of text the input carries (the user's text blocks and tool results)."""
    total = _text_chars(spec.user.blocks) if spec.user is not None else 0
    return total + sum(_text_chars(r.blocks) for r in spec.tool_results)


def _schema_bytes(*schemas: Any) -> int:
    return sum(len(json.dumps(s, separators=(",", ":"))) for s in schemas if s is not None)


def check_run_request(settings: Settings, spec: RunSpec) -> None:
    """The run's input, tools and components within the configured limits."""
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
    check_image_urls(settings, spec)
    check_metadata(settings, spec.metadata)
    check_initial_messages(settings, [m.text for m in spec.seed_messages])


def check_image_urls(settings: Settings, spec: RunSpec) -> None:
    """400 for an image attached by URL unless `GATEWAY_IMAGE_URLS=pass`: the model provider
    would fetch it, and a self-hosted one does so from inside the operator's network."""
    if settings.image_urls == "pass" or spec.user is None:
        return
    for block in spec.user.blocks:
        if block.get("type") == "resource" and is_image_url(block.get("resource") or {}):
            raise ApiError(Problem.IMAGE_URL_NOT_ALLOWED,
                           "Images must be attached as data (a base64 `blob`), not as a URL: "
                           "this gateway does not pass image URLs to its model "
                           "(GATEWAY_IMAGE_URLS)")


def check_state_schema(name: str, schema: Any) -> None:
    """400 for a `stateSchema` the gateway will not run (it is checked on the event loop at
    every state update, so only what runs in bounded time is accepted)."""
    try:
        check_client_schema(schema)
    except SchemaRefused as exc:
        raise ApiError(Problem[exc.code], f"Component {name[:200]!r}: {exc.message}") from None
