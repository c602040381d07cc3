"""The contract every model adapter keeps (`gateway/engine/stream_contract.py`): the providers'
finish reasons in one vocabulary, what an incomplete stream raises, and the words of a
context-length error (`gateway/engine/context_window.py`)."""

from __future__ import annotations

import logging

import pytest

from gateway.engine.context_window import context_error, window_in
from gateway.engine.deltas import ModelError
from gateway.engine.stream_contract import (
    INCOMPLETE,
    finish_reason,
    incomplete,
    require_finish,
    truncation,
)


@pytest.mark.parametrize("said, meant", [
    ("stop", "stop"), ("length", "length"), ("tool_calls", "tool_calls"),
    ("end_turn", "stop"), ("max_tokens", "length"), ("tool_use", "tool_calls"),
    ("refusal", "content_filter"), ("MAX_TOKENS", "length"), ("SAFETY", "content_filter"),
    ("STOP", "stop"), ("something_new", "something_new")])
def test_every_providers_finish_reason_reads_as_openais(said: str, meant: str) -> None:
    assert finish_reason(said) == meant


def test_only_length_and_content_filter_are_truncations() -> None:
    assert [truncation(r) for r in ("length", "content_filter", "stop", "tool_calls", None)] == [
        "length", "content_filter", None, None, None]


def test_a_stream_without_a_finish_reason_is_incomplete_and_logged_with_its_words(
        caplog: pytest.LogCaptureFixture) -> None:
    assert require_finish("stop") == "stop"
    with pytest.raises(ModelError) as raised:
        require_finish(None, "openai/x")
    assert (raised.value.code, raised.value.retryable) == (INCOMPLETE, True)
    with caplog.at_level(logging.WARNING):
        error = incomplete("the body ended", "Template error: roles must alternate", "m")
    assert "Template error: roles must alternate" in caplog.text
    assert "Template" not in error.message  # the client's message stays generic


@pytest.mark.parametrize("message, window", [
    ("This model's maximum context length is 4096 tokens. However, you requested 5000 tokens",
     4096),
    ("Requested tokens (5000) exceed context window of 1024", 1024),
    ("prompt is too long: 210000 tokens > 200000 maximum", 200000),
    ('the request exceeds the available context size {"n_ctx": 8192}', 8192),
    ("context_length_exceeded", None),
])
def test_a_context_length_error_is_recognised_with_its_window(message: str,
                                                              window: int | None) -> None:
    assert context_error(message)
    assert window_in(message) == window


def test_other_errors_are_not_context_errors() -> None:
    assert not context_error("Rate limit reached for requests")
