"""Opaque pagination cursors: base64url JSON of the sort key of the last row returned."""

from __future__ import annotations

import base64
import json
from typing import Any


class InvalidCursor(ValueError):
    pass


def encode(key: list[Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(key).encode()).decode().rstrip("=")


def decode(cursor: str, shape: tuple[type, ...]) -> list[Any]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        key = json.loads(base64.urlsafe_b64decode(padded.encode()).decode())
    except Exception as exc:  # any garbage is the client's mistake, never a 500
        raise InvalidCursor(cursor) from exc
    if not isinstance(key, list) or len(key) != len(shape):
        raise InvalidCursor(cursor)
    if not all(isinstance(v, t) and not isinstance(v, bool) for v, t in zip(key, shape, strict=True)):
        raise InvalidCursor(cursor)
    if not all(_storable(v) for v in key):
        raise InvalidCursor(cursor)
    return key


def _storable(value: Any) -> bool:
    """Whether a cursor's value can be compared in a query: a 64-bit integer (SQLite cannot
    bind a larger one, PostgreSQL refuses it) or text without NUL (PostgreSQL refuses it). No
    cursor the gateway made holds anything else."""
    if isinstance(value, int):
        return -(2 ** 63) <= value < 2 ** 63
    return not isinstance(value, str) or "\x00" not in value
