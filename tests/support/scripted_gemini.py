"""The scripted model's Gemini format (`POST /gemini/models/<name>:streamGenerateContent?alt=sse`,
and `:generateContent` for a non-streamed call).

The same steps as the OpenAI format (`tests/support/scripted_model.py`), as Gemini streams them:
one `GenerateContentResponse` per event, its `candidates[0].content.parts` holding text, thought
text (`"thought": true`) or a whole `functionCall` (Gemini does not stream a call's arguments:
the script's fragments are joined and sent as one call, with the script's id as Gemini 3 sends
one), the thought signature on the first call that follows the reasoning (or on an empty text
part at the end), `finishReason` on the last candidate and `usageMetadata` on every event; an
error inside the stream as `{"error": {...}}`; an error answer as Google's `{"error": {"code",
"message", "status"}}`.

A request is recorded in the OpenAI shape (`normalized`), so that a test reads what the model
was sent the same way for every format.
"""

from __future__ import annotations

import json
from typing import Any

from tests.support.scripted_model import Renderer, Summary, Wire, _usage

FINISH = {"stop": "STOP", "tool_calls": "STOP", "length": "MAX_TOKENS",
          "content_filter": "SAFETY"}
STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
          404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE",
          504: "DEADLINE_EXCEEDED"}


def _texts(parts: list[dict]) -> str:
    return "".join(p.get("text", "") for p in parts if "text" in p and not p.get("thought"))


def _response_text(response: Any) -> str:
    if isinstance(response, dict) and set(response) == {"content"}:
        return str(response["content"])
    return json.dumps(response)


def _content_messages(content: dict) -> list[dict]:
    parts = content.get("parts", [])
    if content.get("role") == "model":
        message: dict[str, Any] = {"role": "assistant", "content": _texts(parts) or None}
        calls = [{"id": c.get("id") or c["name"], "type": "function", "function": {
                      "name": c["name"], "arguments": json.dumps(c.get("args") or {})}}
                 for p in parts if (c := p.get("functionCall") or p.get("function_call"))]
        if calls:
            message["tool_calls"] = calls
        return [message]
    out = [{"role": "tool", "content": _response_text(r.get("response")),
            "tool_call_id": r.get("id") or r.get("name")}
           for p in parts if (r := p.get("functionResponse") or p.get("function_response"))]
    text = _texts(parts)
    if text or not out:
        out.append({"role": "user", "content": text})
    return out


def normalized(native: dict) -> dict:
    """A Gemini request in the OpenAI shape, the body as sent under "native"."""
    messages: list[dict] = []
    system = native.get("system_instruction") or native.get("systemInstruction")
    if system:
        messages.append({"role": "system", "content": _texts(system.get("parts", []))})
    for content in native.get("contents", []):
        messages.extend(_content_messages(content))
    body: dict[str, Any] = {"messages": messages, "native": native}
    declarations = [d for t in native.get("tools") or []
                    for d in t.get("function_declarations") or t.get("functionDeclarations") or []]
    if declarations:
        body["tools"] = [{"type": "function", "function": {
            "name": d["name"], "description": d.get("description", ""),
            "parameters": d.get("parameters", {})}} for d in declarations]
    config = native.get("generationConfig") or {}
    if "max_output_tokens" in config or "maxOutputTokens" in config:
        body["max_tokens"] = config.get("max_output_tokens", config.get("maxOutputTokens"))
    return body


def _metadata(usage: dict, thoughts: int) -> dict:
    details = usage.get("completion_tokens_details") or {}
    thoughts = details.get("reasoning_tokens", thoughts)
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
    metadata = {"promptTokenCount": usage["prompt_tokens"],
                "candidatesTokenCount": max(0, usage["completion_tokens"] - thoughts),
                "totalTokenCount": usage["prompt_tokens"] + usage["completion_tokens"]}
    if thoughts:
        metadata["thoughtsTokenCount"] = thoughts
    if cached:
        metadata["cachedContentTokenCount"] = cached
    return metadata


class _Renderer:
    """Gemini's stream: one event per step; a tool call held until its arguments are whole."""

    def __init__(self, body: dict, index: int) -> None:
        self.body, self.index = body, index
        self.call: dict | None = None  # the call whose fragments are being joined
        self.pending: str | None = None  # a signature waiting for the next call (or the end)
        self.reasoned = 0  # characters of reasoning

    def _event(self, parts: list[dict], finish: str | None = None,
               usage: dict | None = None) -> bytes:
        candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
        if finish:
            candidate["finishReason"] = finish
        prompt = _usage(self.body, 0, None)["prompt_tokens"]
        chunk = {"candidates": [candidate],
                 "usageMetadata": usage or {"promptTokenCount": prompt,
                                            "totalTokenCount": prompt},
                 "modelVersion": self.body.get("model") or "scripted",
                 "responseId": f"scripted-{self.index}"}
        return f"data: {json.dumps(chunk)}\r\n\r\n".encode()

    def _flush(self) -> bytes:
        """The call being joined, sent whole."""
        if self.call is None:
            return b""
        call, self.call = self.call, None
        part: dict[str, Any] = {"functionCall": {
            "name": call["name"], "args": json.loads(call["arguments"] or "{}")}}
        if call.get("id"):
            part["functionCall"]["id"] = call["id"]
        if self.pending:
            part["thoughtSignature"], self.pending = self.pending, None
        return self._event([part])

    def content(self, text: str) -> bytes:
        return self._flush() + self._event([{"text": text}])

    def reasoning(self, text: str) -> bytes:
        self.reasoned += len(text)
        if not self.pending:
            self.pending = "sig-1"
        return self._flush() + self._event([{"text": text, "thought": True}])

    def signature(self, signature: str) -> bytes:
        self.pending = signature
        return b""

    def redacted(self, data: str) -> bytes:
        return b""

    def tool_call(self, tc: dict) -> bytes:
        out = b""
        if "name" in tc:
            out = self._flush()
            self.call = {"id": tc.get("id"), "name": tc["name"], "arguments": ""}
        if self.call is None:
            raise ValueError("a tool call fragment before its name")
        self.call["arguments"] += tc.get("arguments", "")
        return out

    def stream_error(self, error: dict) -> bytes:
        code = int(error.get("code") or 500)
        body = {"error": {"code": code, "message": error.get("message", "scripted stream error"),
                          "status": error.get("type", STATUS.get(code, "INTERNAL"))}}
        return self._flush() + f"data: {json.dumps(body)}\r\n\r\n".encode()

    def end(self, finish: str | None, usage: dict) -> bytes:
        out = self._flush()
        parts: list[dict] = [{"text": ""}]
        if self.pending:
            parts[0]["thoughtSignature"] = self.pending
        thoughts = self.reasoned // 4 + 1 if self.reasoned else 0
        return out + self._event(parts, FINISH.get(finish or "stop", finish),
                                 _metadata(usage, thoughts))


class _GeminiWire:
    def normalized(self, native: dict) -> dict:
        return normalized(native)

    def error_body(self, step: dict) -> dict:
        status = int(step["error"])
        return {"error": {"code": status, "message": step.get("message", f"scripted error "
                                                                         f"{status}"),
                          "status": step.get("type", STATUS.get(status, "INTERNAL"))}}

    def too_long(self, window: int, tokens: int) -> dict:
        return {"error": {"code": 400, "status": "INVALID_ARGUMENT", "message": (
            f"The input token count ({tokens}) exceeds the maximum number of tokens allowed "
            f"({window}).")}}

    def renderer(self, body: dict, index: int) -> Renderer:
        return _Renderer(body, index)

    def completion(self, body: dict, index: int, summary: Summary) -> dict:
        parts: list[dict] = []
        if summary.reasoning:
            parts.append({"text": summary.reasoning, "thought": True})
        if summary.content:
            parts.append({"text": summary.content})
        for _, call in sorted(summary.calls.items()):
            parts.append({"functionCall": {"name": call["name"],
                                           "args": json.loads(call["arguments"] or "{}")}})
        finish = summary.finish or "stop"
        usage = _usage(body, len(summary.content) + len(summary.reasoning), summary.usage)
        return {"candidates": [{"content": {"parts": parts or [{"text": ""}], "role": "model"},
                                "finishReason": FINISH.get(finish, finish), "index": 0}],
                "usageMetadata": _metadata(usage, len(summary.reasoning) // 4),
                "modelVersion": body.get("model") or "scripted",
                "responseId": f"scripted-{index}"}


GEMINI: Wire = _GeminiWire()
