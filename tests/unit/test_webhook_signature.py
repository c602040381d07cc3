"""A completion webhook's signature (docs/webhooks.md): what the gateway sends
(`runs/automation/webhooks.py`, `sign`) is what a receiver checks (`gateway.client`,
`verify_webhook`): HMAC-SHA256 over `<timestamp>.<body>`, refused when the body, the key or
the time differ."""

from __future__ import annotations

from gateway.client import verify_webhook
from gateway.runs.automation.webhooks import SIGNATURE_HEADER, TIMESTAMP_HEADER, sign

SECRET = "whsec-unit"
BODY = b'{"runId":"run_1","status":"completed"}'


def headers(timestamp: str = "1767261600", secret: str = SECRET) -> dict[str, str]:
    return {TIMESTAMP_HEADER: timestamp, SIGNATURE_HEADER: sign(secret, timestamp, BODY)}


def test_a_signed_body_verifies() -> None:
    assert verify_webhook(SECRET, headers(), BODY, now=1767261600 + 10)


def test_another_body_key_or_a_stale_timestamp_does_not() -> None:
    assert not verify_webhook(SECRET, headers(), BODY + b" ", now=1767261600)
    assert not verify_webhook(SECRET, headers(secret="another"), BODY, now=1767261600)
    assert not verify_webhook(SECRET, headers(), BODY, now=1767261600 + 301)
    assert not verify_webhook(SECRET, {}, BODY)


def test_the_timestamp_is_signed_too() -> None:
    moved = {**headers(), TIMESTAMP_HEADER: "1767261601"}
    assert not verify_webhook(SECRET, moved, BODY, now=1767261600)
