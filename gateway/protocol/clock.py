"""Time and id helpers shared by every wire format.

Clients sort messages by comparing `createdAt` strings, so every timestamp the gateway writes has
one uniform shape: ISO-8601 UTC with exactly three decimals and a `Z`. Event timestamps are
integer epoch milliseconds because `@ag-ui/client` 1.0 rejects floats.
"""

from __future__ import annotations

import os
import time
from contextvars import ContextVar
from datetime import datetime, timezone

# Crockford's base32 in pairs: a 130-bit ULID (two leading zero bits) is 13 of them.
_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_PAIRS = [a + b for a in _ALPHABET for b in _ALPHABET]
_SHIFTS = range(120, -1, -10)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


# The last second `iso_ms` formatted, and its text up to the decimals: the timestamps of a
# run's frames mostly fall in the same second, and `strftime` is most of the cost.
_last_second: tuple[int, str] = (0, "1970-01-01T00:00:00.")


def iso_ms(ms: int) -> str:
    global _last_second
    second, milli = divmod(ms, 1000)
    if second != _last_second[0]:
        moment = datetime.fromtimestamp(second, tz=timezone.utc)
        _last_second = (second, moment.strftime("%Y-%m-%dT%H:%M:%S."))
    return f"{_last_second[1]}{milli:03d}Z"


def parse_iso_ms(text: str) -> int:
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return int(moment.timestamp() * 1000)


def new_id(prefix: str = "") -> str:
    """A ULID (48 bits of epoch milliseconds, 80 random), optionally prefixed. Never use the
    client-reserved prefixes (`ephemeral_`, `msg_tool_`, `user_msg_`) or the value
    `placeholder`.

    Encoded here in a few calls rather than by `python-ulid` (a run's start makes half a dozen;
    docs/decisions/0032); the text is the same 26 characters."""
    value = (time.time_ns() // 1_000_000) << 80 | int.from_bytes(os.urandom(10), "big")
    return prefix + "".join([_PAIRS[(value >> shift) & 1023] for shift in _SHIFTS])


# When the HTTP request being served reached the gateway (wall-clock ms; set by the front,
# `server/front.py`): a run that ended after it is one that request's client could not know the
# end of (`runs/multitask.follow_ended`).
REQUEST_ARRIVED_MS: ContextVar[int | None] = ContextVar("request_arrived_ms", default=None)
