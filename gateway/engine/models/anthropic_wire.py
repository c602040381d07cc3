"""Anthropic's Messages API, streamed directly: the request as litellm builds it, the stream read
here.

The request (messages, tools, tool choice, thinking, `max_tokens`, the headers with the key and
the API version and betas) is litellm's own (`AnthropicConfig`: parameter mapping, message and
tool translation, the header rules), so the gateway keeps no copy of Anthropic's rules. Only the
stream is read here: each event is a few dictionary lookups, where litellm's stream wrapper
builds and keeps objects per chunk.

The stream maps to the same deltas litellm's Anthropic path yields: text, thinking (with its
signature at the block's end, and redacted blocks), tool calls (an index per `tool_use` block,
counted from 0, its arguments as `input_json_delta` fragments; a call with no fragment gets
`{}`), the stop reason through litellm's mapping, and the usage litellm computes from the
counts of `message_start` and `message_delta`. A stream is complete only once `message_stop`
came after a stop reason; an `error` event is the provider's error.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..deltas import (
    Delta,
    Finish,
    ReasoningDelta,
    ReasoningSignature,
    RedactedReasoning,
    TextDelta,
    ToolCallDelta,
    Usage,
    usage_of,
)
from .litellm_model import ModelRequest
from .wire import Incomplete, ProviderError, WireRequest, litellm_optional_params

PROVIDER = "anthropic"
DEFAULT_BASE = "https://api.anthropic.com"
PATH = "/v1/messages"


def endpoint(api_base: str | None) -> str:
    """The Messages URL for `api_base`, as litellm makes it (its environment variables and
    default, `/v1/messages` appended unless already there)."""
    import litellm
    from litellm.secret_managers.main import get_secret, get_secret_bool

    base = str(api_base or litellm.api_base or get_secret("ANTHROPIC_API_BASE")
               or get_secret("ANTHROPIC_BASE_URL") or DEFAULT_BASE)
    if not base.endswith(PATH) and not get_secret_bool("LITELLM_ANTHROPIC_DISABLE_URL_SUFFIX"):
        base = base.rstrip("/") + PATH
    return base


def api_key(given: str | None) -> str | None:
    import litellm

    return given or litellm.anthropic_key or litellm.api_key or os.environ.get(
        "ANTHROPIC_API_KEY")


async def build_request(name: str, request: ModelRequest, url: str, key: str | None
                        ) -> WireRequest:
    """The streamed Messages request litellm would send for `request` to model `name`."""
    from litellm.anthropic_beta_headers_manager import update_request_with_filtered_beta
    from litellm.llms.anthropic.chat.transformation import (
        ANTHROPIC_TOOL_NAME_REVERSE_MAP_KEY,
        AnthropicConfig,
    )

    messages = orjson.loads(orjson.dumps(request.messages))  # litellm's transform edits them
    optional = litellm_optional_params(name, PROVIDER, request, messages)
    optional.pop("stream", None)
    config = AnthropicConfig()
    litellm_params: dict[str, Any] = {}
    headers = config.validate_environment(headers={}, model=name, messages=messages,
                                          optional_params=optional,
                                          litellm_params=litellm_params, api_key=key,
                                          api_base=url)
    data = await config.async_transform_request(model=name, messages=messages,
                                                optional_params=optional,
                                                litellm_params=litellm_params, headers=headers)
    headers, data = update_request_with_filtered_beta(headers=headers, request_data=data,
                                                      provider=PROVIDER)
    data["stream"] = True
    names = litellm_params.get(ANTHROPIC_TOOL_NAME_REVERSE_MAP_KEY) or {}
    return WireRequest(url, headers, orjson.dumps(data), AnthropicStream(dict(names)))


@dataclass
class AnthropicStream:
    """One Messages stream's state: the open block, the tool index, the counts so far.

    `feed` takes one event's JSON and returns its deltas; `end` the last ones (the usage) once
    the body ended, or `Incomplete` if the provider never said the message was over."""

    tool_names: dict[str, str] = field(default_factory=dict)  # sanitized -> the caller's
    tool_index: int = -1
    block: str | None = None  # the open content block's type
    block_fragments: int = 0  # input_json_delta fragments of the open tool_use block
    counts: dict[str, Any] = field(default_factory=dict)  # message_start's, then message_delta's
    reasoning: list[str] = field(default_factory=list)  # for a usage that does not count it
    stop_reason: str | None = None
    done: bool = False  # message_stop came

    def feed(self, event: dict[str, Any]) -> list[Delta]:
        kind = event.get("type")
        if kind == "content_block_delta":
            return self._delta(event.get("delta") or {})
        if kind == "content_block_start":
            return self._start(event.get("content_block") or {})
        if kind == "content_block_stop":
            return self._stop()
        if kind == "message_delta":
            self.counts.update(event.get("usage") or {})
            self.stop_reason = (event.get("delta") or {}).get("stop_reason") or "stop"
            return []
        if kind == "message_start":
            self.counts.update((event.get("message") or {}).get("usage") or {})
            return []
        if kind == "message_stop":
            self.done = True
            return []
        if kind == "error":
            raise _stream_error(event)
        return []  # ping, and what a newer API version adds

    def _delta(self, delta: dict[str, Any]) -> list[Delta]:
        kind = delta.get("type")
        if kind == "text_delta":
            text = delta.get("text")
            return [TextDelta(text)] if text else []
        if kind == "input_json_delta":
            piece = delta.get("partial_json")
            if self.block != "tool_use" or not piece:
                return []
            self.block_fragments += 1
            return [ToolCallDelta(self.tool_index, None, None, piece)]
        if kind == "thinking_delta":
            text = delta.get("thinking")
            if not text:
                return []
            self.reasoning.append(text)
            return [ReasoningDelta(text)]
        if kind == "signature_delta" and delta.get("signature"):
            return [ReasoningSignature(delta["signature"])]
        return []  # citations, and what a newer API version adds

    def _start(self, block: dict[str, Any]) -> list[Delta]:
        self.block = kind = block.get("type")
        if kind == "text":
            text = block.get("text")
            return [TextDelta(text)] if text else []
        if kind in ("tool_use", "server_tool_use"):
            self.block = "tool_use"
            self.tool_index += 1
            self.block_fragments = 0
            name = block.get("name") or ""
            return [ToolCallDelta(self.tool_index, block.get("id") or None,
                                  self.tool_names.get(name, name), "")]
        if kind == "redacted_thinking" and block.get("data"):
            return [RedactedReasoning(block["data"])]
        return []

    def _stop(self) -> list[Delta]:
        """A tool call that streamed no argument is called with `{}`, as litellm does."""
        empty = self.block == "tool_use" and not self.block_fragments
        self.block = None
        return [ToolCallDelta(self.tool_index, None, None, "{}")] if empty else []

    def end(self) -> list[Delta]:
        if not (self.done and self.stop_reason):
            raise Incomplete("the stream ended before Anthropic's message_stop")
        from litellm.litellm_core_utils.core_helpers import map_finish_reason

        return [Finish(map_finish_reason(self.stop_reason)), *self.usage()]

    def usage(self) -> list[Delta]:
        """The usage the provider counted so far, as litellm computes it (none before
        `message_start`)."""
        if not self.counts:
            return []
        from litellm.llms.anthropic.chat.transformation import AnthropicConfig

        usage: Usage | None = usage_of(AnthropicConfig().calculate_usage(
            usage_object=self.counts, reasoning_content="".join(self.reasoning) or None))
        return [usage] if usage is not None else []


def _stream_error(event: dict[str, Any]) -> ProviderError:
    """An `error` event: Anthropic says only its type (500 as litellm takes it, 529 overloaded
    as 503: both temporary) and its message."""
    found = event.get("error")
    error: dict[str, Any] = found if isinstance(found, dict) else {}
    kind = str(error.get("type") or "api_error")
    message = str(error.get("message") or "An error occurred during streaming")
    status = {"rate_limit_error": 429, "overloaded_error": 503, "invalid_request_error": 400,
              "authentication_error": 401, "permission_error": 403}.get(kind, 500)
    return ProviderError(status, orjson.dumps({"type": "error", "error": error}).decode(),
                         message)
