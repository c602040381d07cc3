"""Access-log lines carry no user scope (`?userKey=`, `?contextKey=`)."""

from __future__ import annotations

import io
import logging

from gateway.observability.logs import configure


def test_user_keys_in_access_log_paths_are_redacted() -> None:
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    stream = io.StringIO()
    try:
        configure(logging.INFO, "text")
        root.handlers[0].setStream(stream)  # type: ignore[attr-defined]
        # Handed to the root handler itself: which loggers propagate to it is uvicorn's set-up
        # (a test that ran uvicorn in this process may have changed it), not what is tested.
        record = logging.getLogger("uvicorn.access").makeRecord(
            "uvicorn.access", logging.INFO, __file__, 0, '%s - "%s %s HTTP/%s" %d',
            ("127.0.0.1:5000", "GET",
             "/v1/threads?limit=5&userKey=alice%40example.com&contextKey=bob", "1.1", 200), None)
        root.handlers[0].handle(record)
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
    line = stream.getvalue()
    assert "alice" not in line and "bob" not in line
    assert "limit=5&userKey=[redacted]&contextKey=[redacted]" in line


def test_a_secret_is_masked_where_it_stands_not_inside_words() -> None:
    """A dummy key such as `x` used to turn every `x` of a message into `***`
    (`OpenAIE***ception`), which also told which letters the key had."""
    from gateway.engine.models.litellm_model import scrub
    from gateway.observability.redact import mask_secret

    said = "OpenAIException - Incorrect API key provided: x. Bearer x; api_key=x&expires=1"
    assert mask_secret(said, "x") == ("OpenAIException - Incorrect API key provided: ***. "
                                      "Bearer ***; api_key=***&expires=1")
    assert scrub("litellm.AuthenticationError: OpenAIException - bad key x", "x") == \
        "bad key ***"
    long = "sk-test-secret-key-1234"
    assert mask_secret(f"key {long}, again:{long}", long) == "key ***, again:***"
    assert mask_secret("nothing to hide", None) == "nothing to hide"


def test_a_chorus_secret_is_redacted_from_any_loggers_line() -> None:
    """The secret is the path itself: an error line naming the path must not carry it
    either, nor a message formatted before it was logged."""
    from gateway.observability.redact import RedactSecrets

    record = logging.getLogger("gateway.api.errors").makeRecord(
        "gateway.api.errors", logging.WARNING, __file__, 0,
        "database unreachable on %s %s (from /v1/chorus/chs_inline)",
        ("POST", "/v1/chorus/chs_Secret-123?x=1"), None)
    RedactSecrets().filter(record)
    line = record.getMessage()
    assert "chs_" not in line
    assert line == ("database unreachable on POST /v1/chorus/[redacted]?x=1 "
                    "(from /v1/chorus/[redacted])")
