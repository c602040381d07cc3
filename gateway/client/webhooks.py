"""Checking a completion webhook on the receiving side (docs/webhooks.md): the gateway signs
`<timestamp>.<body>` with HMAC-SHA256 and `GATEWAY_WEBHOOK_SECRET`; a receiver recomputes it
over the raw body it received and refuses an old timestamp (a replay)."""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Mapping

TIMESTAMP_HEADER = "x-gateway-timestamp"
SIGNATURE_HEADER = "x-gateway-signature"


def verify_webhook(secret: str, headers: Mapping[str, str], body: bytes,
                   tolerance_seconds: float = 300, now: float | None = None) -> bool:
    """Whether `body` (the raw bytes) with these headers is the gateway's, signed at most
    `tolerance_seconds` ago (or ahead)."""
    lowered = {k.lower(): v for k, v in headers.items()}
    timestamp, signature = lowered.get(TIMESTAMP_HEADER), lowered.get(SIGNATURE_HEADER)
    if not timestamp or not signature or not timestamp.isdigit():
        return False
    if abs((time.time() if now is None else now) - int(timestamp)) > tolerance_seconds:
        return False
    expected = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return hmac.compare_digest("v1=" + expected.hexdigest(), signature)
