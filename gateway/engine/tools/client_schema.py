"""Client JSON Schemas (a component's `stateSchema`, a client tool's `inputSchema`), checked
without letting a request hold the event loop.

A `stateSchema` comes from the client and is run on the event loop at every state update, and a
tool's schema at every call the model makes (`engine/tool_arguments.py`), so nothing in it may
cost more than a bounded amount of work:

- `pattern` and `patternProperties` run on RE2, a linear-time engine (Python's `re` backtracks:
  `^(a+)+$` against 29 characters took 15 s). A pattern RE2 cannot compile (backreferences,
  lookaround) is refused when the run declares it, with 400 `UNSUPPORTED_SCHEMA_PATTERN`.
- `$ref` resolves inside the schema only: a remote `$ref` would make the validator fetch a URL
  (from inside the network, blocking the loop), so it is refused (400 `UNSUPPORTED_SCHEMA_REF`).
- `uniqueItems` compares canonical forms through a set (linear) instead of pairs (quadratic).
- Every keyword evaluated spends one step of a budget (`MAX_STEPS`, and `MAX_SECONDS` of wall
  time); a schema that needs more (recursive `$ref`s under `anyOf` grow exponentially) is
  answered 422 `STATE_SCHEMA_TOO_COMPLEX` instead of running on.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

import re2
import referencing
from jsonschema import SchemaError, ValidationError
from jsonschema.protocols import Validator
from jsonschema.validators import extend, validator_for

# Keywords evaluated per validation, and wall time, before a schema is judged too costly. A
# component with a few hundred rows of a dozen fields stays well inside both.
MAX_STEPS = 50_000
MAX_SECONDS = 0.25
# Values that hold data, not schemas: a {"pattern": ...} inside them is not a keyword.
_DATA_KEYWORDS = frozenset({"const", "enum", "default", "examples"})

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a refused pattern is the client's error, not a line on stderr
_OPTIONS.max_mem = 1 << 20  # a compiled pattern may not take more than 1 MiB


class SchemaRefused(Exception):
    """A client schema the gateway will not run, with a stable `code`."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


class SchemaTooCostly(Exception):
    """Validation spent its budget (`MAX_STEPS` keywords or `MAX_SECONDS`)."""


@functools.lru_cache(maxsize=1024)
def compiled(pattern: str) -> Any:
    """The RE2 program for an ECMA-262-style pattern, or `SchemaRefused`."""
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error:
        raise SchemaRefused(
            "UNSUPPORTED_SCHEMA_PATTERN",
            f"The pattern {pattern[:200]!r} is not supported: patterns run on a linear-time "
            "engine (no backreferences or lookaround)") from None


def check_client_schema(schema: object) -> None:
    """Refuse what a client schema may not hold: patterns RE2 cannot run, non-local `$ref`s,
    and `unevaluatedProperties` next to `patternProperties` (jsonschema would match those with
    Python's `re`)."""
    found: dict[str, bool] = {}
    _walk(schema, found)
    if found.get("patternProperties") and found.get("unevaluatedProperties"):
        raise SchemaRefused("UNSUPPORTED_SCHEMA_KEYWORD",
                            "unevaluatedProperties cannot be combined with patternProperties")


def _walk(node: object, found: dict[str, bool]) -> None:
    if isinstance(node, list):
        for item in node:
            _walk(item, found)
        return
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        if key in _DATA_KEYWORDS:
            continue
        if key == "pattern" and isinstance(value, str):
            compiled(value)
        elif key == "patternProperties" and isinstance(value, dict):
            found[key] = True
            for pattern in value:
                compiled(pattern)
        elif key in ("$ref", "$dynamicRef", "$recursiveRef") and isinstance(value, str):
            if not value.startswith("#"):
                raise SchemaRefused("UNSUPPORTED_SCHEMA_REF",
                                    f"The $ref {value[:200]!r} is not inside the schema; "
                                    "only local references (#...) are resolved")
        elif key == "unevaluatedProperties":
            found[key] = True
        _walk(value, found)


def validator(schema: dict[str, Any]) -> Validator:
    """A validator for a checked client schema (`SchemaRefused` or `SchemaError` if it is not
    one), running patterns on RE2 and resolving no `$ref` outside the schema."""
    check_client_schema(schema)
    cls = validator_for(schema)
    cls.check_schema(schema)
    return _bounded_class(cls)(schema, registry=referencing.Registry())


def errors(checker: Validator, instance: Any) -> list[ValidationError]:
    """The validator's errors for the instance, within the step and time budget
    (`SchemaTooCostly` past it)."""
    token = _BUDGET.set(_Budget())
    try:
        return list(checker.iter_errors(instance))
    except referencing.exceptions.Unresolvable as exc:
        raise SchemaError(f"unresolvable reference: {exc}") from None
    finally:
        _BUDGET.reset(token)


class _Budget:
    __slots__ = ("steps", "deadline")

    def __init__(self) -> None:
        self.steps = MAX_STEPS
        self.deadline = time.monotonic() + MAX_SECONDS

    def spend(self) -> None:
        self.steps -= 1
        if self.steps < 0 or (self.steps % 256 == 0 and time.monotonic() > self.deadline):
            raise SchemaTooCostly


_BUDGET: ContextVar[_Budget | None] = ContextVar("state_schema_budget", default=None)
Keyword = Callable[[Any, Any, Any, Any], Any]


def _metered(keyword: Keyword) -> Keyword:
    def run(checker: Any, value: Any, instance: Any, schema: Any) -> Any:
        budget = _BUDGET.get()
        if budget is not None:
            budget.spend()
        return keyword(checker, value, instance, schema)
    return run


@functools.lru_cache(maxsize=None)
def _bounded_class(cls: Any) -> Any:
    keywords = dict(cls.VALIDATORS)
    for name, keyword in _LINEAR_KEYWORDS.items():
        if name in keywords:
            keywords[name] = keyword
    return extend(cls, {name: _metered(keyword) for name, keyword in keywords.items()})


def _pattern(checker: Any, pattern: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if checker.is_type(instance, "string") and not compiled(pattern).search(instance):
        yield ValidationError(f"{_short(instance)} does not match {pattern[:200]!r}")


def _pattern_properties(checker: Any, patterns: dict[str, Any], instance: Any, schema: Any
                        ) -> Iterator[ValidationError]:
    if not checker.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if compiled(pattern).search(key):
                yield from checker.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(checker: Any, allowed: Any, instance: Any, schema: Any
                           ) -> Iterator[ValidationError]:
    if not checker.is_type(instance, "object"):
        return
    properties = schema.get("properties", {})
    patterns = [compiled(p) for p in schema.get("patternProperties", {})]
    extras = [key for key in instance if key not in properties
              and not any(p.search(key) for p in patterns)]
    if checker.is_type(allowed, "object"):
        for extra in extras:
            yield from checker.descend(instance[extra], allowed, path=extra)
    elif not allowed and extras:
        yield ValidationError("Additional properties are not allowed (%s %s unexpected)"
                              % _extras(sorted(extras, key=str)))


def _extras(extras: list[Any]) -> tuple[str, str]:
    """The unexpected properties and their verb, worded as jsonschema words them."""
    return ", ".join(repr(extra) for extra in extras), "was" if len(extras) == 1 else "were"


def _unique_items(checker: Any, unique: Any, instance: Any, schema: Any
                  ) -> Iterator[ValidationError]:
    if not unique or not checker.is_type(instance, "array"):
        return
    seen: set[tuple[str, object]] = set()
    for item in instance:
        key = _canonical(item)
        if key in seen:
            yield ValidationError(f"{_short(instance)} has non-unique elements")
            return
        seen.add(key)


def _canonical(value: object) -> tuple[str, object]:
    """A hashable form equal exactly when JSON Schema calls two values equal (1 == 1.0, but
    true != 1)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return (type(value).__name__, value)
    if isinstance(value, int | float):
        return ("number", value)
    if isinstance(value, list):
        return ("array", tuple(_canonical(v) for v in value))
    if isinstance(value, dict):
        return ("object", frozenset((k, _canonical(v)) for k, v in value.items()))
    return ("other", repr(value))


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 200 else text[:200] + "..."


_LINEAR_KEYWORDS: dict[str, Keyword] = {
    "pattern": _pattern, "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties, "uniqueItems": _unique_items}
