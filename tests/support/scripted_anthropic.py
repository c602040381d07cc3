"""The scripted model's Anthropic Messages format (`POST /anthropic/v1/messages`).

The same steps as the OpenAI format (`tests/support/scripted_model.py`), as Anthropic streams
them: `message_start` (with the input tokens), one content block at a time (`thinking` with its
`signature_delta`, `redacted_thinking`, `text`, `tool_use` with `input_json_delta` fragments),
`message_delta` (the stop reason and the output tokens) and `message_stop`; an `error` event for
an error inside the stream; an error answer as `{"type": "error", "error": {...}}`. Tool calls
go one block after the other, as Anthropic sends them: a fragment for a call whose block has
closed is refused (a script that interleaves parallel calls is OpenAI's).

A request is recorded in the OpenAI shape (`normalized`), so that a test reads what the model
was sent the same way for every format.
"""

from __future__ import annotations

import json
from typing import Any

from tests.support.scripted_model import Renderer, Summary, Wire, _usage

STOP_REASONS = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens",
                "content_filter": "refusal"}
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
               500: "api_error", 529: "overloaded_error"}


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content or [] if b.get("type") == "text")


def _user_messages(content: Any) -> list[dict]:
    """A user turn: its tool results first (as tool messages), then its text."""
    if isinstance(content, str):
        return [{"role": "user", "content": content}]
    out: list[dict] = []
    for block in content:
        if block.get("type") == "tool_result":
            out.append({"role": "tool", "tool_call_id": block["tool_use_id"],
                        "content": _text(block.get("content"))})
    texts = [b for b in content if b.get("type") != "tool_result"]
    if texts:
        out.append({"role": "user", "content": _text(texts)})
    return out


def _assistant_message(content: Any) -> dict:
    if isinstance(content, str):
        return {"role": "assistant", "content": content}
    message: dict[str, Any] = {"role": "assistant", "content": _text(content) or None}
    calls = [{"id": b["id"], "type": "function",
              "function": {"name": b["name"], "arguments": json.dumps(b.get("input") or {})}}
             for b in content if b.get("type") == "tool_use"]
    if calls:
        message["tool_calls"] = calls
    thinking = [b for b in content if b.get("type") in ("thinking", "redacted_thinking")]
    if thinking:
        message["thinking_blocks"] = thinking
    return message


def normalized(native: dict) -> dict:
    """An Anthropic request in the OpenAI shape, the body as sent under "native"."""
    messages: list[dict] = []
    system = native.get("system")
    if system:
        messages.append({"role": "system", "content": _text(system)})
    for message in native.get("messages", []):
        if message["role"] == "user":
            messages.extend(_user_messages(message["content"]))
        else:
            messages.append(_assistant_message(message["content"]))
    body: dict[str, Any] = {"model": native.get("model"), "stream": bool(native.get("stream")),
                            "messages": messages, "native": native}
    if native.get("tools"):
        body["tools"] = [{"type": "function", "function": {
            "name": t["name"], "description": t.get("description", ""),
            "parameters": t.get("input_schema", {})}} for t in native["tools"]]
    for key in ("max_tokens", "temperature", "tool_choice", "thinking"):
        if key in native:
            body[key] = native[key]
    return body


def _event(kind: str, data: dict) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()


def _usage_of(usage: dict) -> dict:
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
    return {"input_tokens": usage["prompt_tokens"] - cached, "cache_read_input_tokens": cached,
            "cache_creation_input_tokens": 0, "output_tokens": usage["completion_tokens"]}


class _Renderer:
    """Anthropic's stream: one content block open at a time."""

    def __init__(self, body: dict, index: int) -> None:
        self.body, self.index = body, index
        self.block: str | None = None  # the open block's type
        self.count = 0  # blocks opened
        self.call: int | None = None  # the open tool_use block's call index
        self.done_calls: set[int] = set()
        self.signed = False  # the open thinking block got its signature

    def _start(self) -> bytes:
        if self.count or self.block:
            return b""
        usage = _usage(self.body, 0, None)
        return _event("message_start", {"message": {
            "id": f"msg_scripted_{self.index}", "type": "message", "role": "assistant",
            "model": self.body.get("model") or "scripted", "content": [], "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": usage["prompt_tokens"], "output_tokens": 1}}})

    def _open(self, kind: str, block: dict) -> bytes:
        out = self._start() + self._close()
        self.block = kind
        self.count += 1
        return out + _event("content_block_start", {"index": self.count - 1,
                                                     "content_block": block})

    def _close(self) -> bytes:
        if self.block is None:
            return b""
        out = b""
        if self.block == "thinking" and not self.signed:
            out += self._delta({"type": "signature_delta", "signature": f"sig-{self.count}"})
        if self.call is not None:
            self.done_calls.add(self.call)
            self.call = None
        self.block, self.signed = None, False
        return out + _event("content_block_stop", {"index": self.count - 1})

    def _delta(self, delta: dict) -> bytes:
        return _event("content_block_delta", {"index": self.count - 1, "delta": delta})

    def content(self, text: str) -> bytes:
        out = b"" if self.block == "text" else self._open("text", {"type": "text", "text": ""})
        return out + self._delta({"type": "text_delta", "text": text})

    def reasoning(self, text: str) -> bytes:
        out = b"" if self.block == "thinking" and not self.signed else self._open(
            "thinking", {"type": "thinking", "thinking": "", "signature": ""})
        return out + self._delta({"type": "thinking_delta", "thinking": text})

    def signature(self, signature: str) -> bytes:
        out = b"" if self.block == "thinking" and not self.signed else self._open(
            "thinking", {"type": "thinking", "thinking": "", "signature": ""})
        self.signed = True
        return out + self._delta({"type": "signature_delta", "signature": signature})

    def redacted(self, data: str) -> bytes:
        return self._open("redacted_thinking", {"type": "redacted_thinking", "data": data})

    def tool_call(self, tc: dict) -> bytes:
        index = tc.get("index", 0)
        out = b""
        if self.call != index:
            if index in self.done_calls or "name" not in tc:
                raise ValueError("the Anthropic format streams one tool call after the other")
            out = self._open("tool_use", {"type": "tool_use", "id": tc.get("id") or
                                          f"toolu_{self.index}_{index}", "name": tc["name"],
                                          "input": {}})
            self.call = index
            out += self._delta({"type": "input_json_delta", "partial_json": ""})
        if tc.get("arguments"):
            out += self._delta({"type": "input_json_delta", "partial_json": tc["arguments"]})
        return out

    def stream_error(self, error: dict) -> bytes:
        return self._start() + _event("error", {"error": {
            "type": error.get("type", "overloaded_error"),
            "message": error.get("message", "Overloaded")}})

    def end(self, finish: str | None, usage: dict) -> bytes:
        out = self._start() + self._close()
        counts = _usage_of(usage)
        return out + _event("message_delta", {
            "delta": {"stop_reason": STOP_REASONS.get(finish or "stop", finish),
                      "stop_sequence": None},
            "usage": counts}) + _event("message_stop", {})


class _AnthropicWire:
    def normalized(self, native: dict) -> dict:
        return normalized(native)

    def error_body(self, step: dict) -> dict:
        status = int(step["error"])
        return {"type": "error", "error": {
            "type": step.get("type", ERROR_TYPES.get(status, "api_error")),
            "message": step.get("message", f"scripted error {status}")}}

    def too_long(self, window: int, tokens: int) -> dict:
        return {"type": "error", "error": {
            "type": "invalid_request_error",
            "message": f"prompt is too long: {tokens} tokens > {window} maximum"}}

    def renderer(self, body: dict, index: int) -> Renderer:
        return _Renderer(body, index)

    def completion(self, body: dict, index: int, summary: Summary) -> dict:
        content: list[dict] = []
        if summary.reasoning:
            content.append({"type": "thinking", "thinking": summary.reasoning,
                            "signature": summary.signature or "sig-1"})
        if summary.content:
            content.append({"type": "text", "text": summary.content})
        for i, call in sorted(summary.calls.items()):
            content.append({"type": "tool_use", "id": call["id"] or f"toolu_{index}_{i}",
                            "name": call["name"], "input": json.loads(call["arguments"] or "{}")})
        finish = summary.finish or ("tool_calls" if summary.calls else "stop")
        usage = _usage(body, len(summary.content) + len(summary.reasoning), summary.usage)
        return {"id": f"msg_scripted_{index}", "type": "message", "role": "assistant",
                "model": body.get("model") or "scripted", "content": content,
                "stop_reason": STOP_REASONS.get(finish, finish), "stop_sequence": None,
                "usage": _usage_of(usage)}


ANTHROPIC: Wire = _AnthropicWire()
