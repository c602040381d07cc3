"""Time and id helpers shared by every wire format.

Clients sort messages by comparing `createdAt` strings, so every timestamp the gateway writes has
one uniform shape: ISO-8601 UTC with exactly three decimals and a `Z`. Event timestamps are
integer epoch milliseconds because `@ag-ui/client` 1.0 rejects floats.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone

from ulid import ULID


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def iso_ms(ms: int) -> str:
    moment = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def parse_iso_ms(text: str) -> int:
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return int(moment.timestamp() * 1000)


def new_id(prefix: str = "") -> str:
    """A ULID, optionally prefixed. Never use the client-reserved prefixes
    (`ephemeral_`, `msg_tool_`, `user_msg_`) or the value `placeholder`."""
    return f"{prefix}{ULID()}"
