"""Google's Gemini API (`streamGenerateContent?alt=sse`), streamed directly: the request as
litellm builds it, the stream read here.

The URL, the key's header and the body (contents, system instruction, function declarations,
tool config, generation and thinking config) are litellm's own (`VertexLLM` for the URL and
key, `transform_request_body` for the body), so the gateway keeps no copy of Gemini's rules.
Only the stream is read here.

The stream maps to the deltas litellm's Gemini path yields: text, thought text as reasoning,
each `functionCall` as one whole tool call (Gemini does not stream a call's arguments; its
`id` when Gemini 3 sends one, else a generated one; the thought signature carried inside the
id as litellm carries it, `<id>__thought__<signature>`, so that it goes back to Gemini with the
call on the next turn), the finish reason through litellm's mapping (`tool_calls` once a call
was seen) and the usage of the last `usageMetadata` through litellm's computation. A stream is
complete only once a candidate said its `finishReason` (or the prompt was blocked); an `error`
object in the stream is the provider's error.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

import orjson

from ..deltas import (
    Delta,
    Finish,
    ReasoningDelta,
    ReasoningSignature,
    TextDelta,
    ToolCallDelta,
    Usage,
    usage_of,
)
from .litellm_model import ModelRequest
from .wire import Incomplete, ProviderError, WireRequest, litellm_optional_params

PROVIDER = "gemini"
SIGNATURE_SEPARATOR = "__thought__"  # litellm's, in a tool call id


def api_key(given: str | None) -> str | None:
    import litellm
    from litellm.llms.gemini.common_utils import get_api_key_from_env
    from litellm.secret_managers.main import get_secret

    key = given or get_api_key_from_env() or get_secret("PALM_API_KEY") or litellm.api_key
    return str(key) if key else None


def endpoint(name: str, api_base: str | None, key: str | None) -> tuple[str, dict[str, str]]:
    """The streaming URL for model `name` and the key's header, as litellm makes them (no
    header without a key: the call then fails as litellm's would, `build_request`)."""
    import litellm
    from litellm.llms.vertex_ai.gemini.vertex_and_google_ai_studio_gemini import VertexLLM
    from litellm.secret_managers.main import get_secret

    base = api_base or litellm.api_base or get_secret("GEMINI_API_BASE")
    auth, url = VertexLLM().get_token_and_url(
        model=name, auth_header=None, gemini_api_key=key or "none", vertex_project=None,
        vertex_location=None, vertex_credentials=None, stream=True,
        custom_llm_provider="gemini", api_base=str(base) if base else None)
    return url, dict(auth) if isinstance(auth, dict) and key else {}


async def build_request(name: str, request: ModelRequest, url: str, auth: dict[str, str],
                        key: str | None) -> WireRequest:
    """The streamed generateContent request litellm would send for `request` to `name`."""
    import litellm
    from litellm.llms.vertex_ai.gemini.transformation import async_transform_request_body
    from litellm.llms.vertex_ai.gemini.vertex_and_google_ai_studio_gemini import (
        VertexGeminiConfig,
    )

    if not key:
        raise litellm.AuthenticationError(
            message="Missing Gemini API key. Set the GEMINI_API_KEY or GOOGLE_API_KEY "
                    "environment variable.", llm_provider=PROVIDER, model=name)
    messages = orjson.loads(orjson.dumps(request.messages))  # litellm's transform edits them
    optional = litellm_optional_params(name, PROVIDER, request, messages)
    optional.pop("stream", None)
    headers = VertexGeminiConfig().validate_environment(
        api_key=auth, headers=None, model=name, messages=messages, optional_params=optional,
        litellm_params={})
    body = await async_transform_request_body(
        gemini_api_key=key, messages=messages, api_base=None, model=name, client=None,
        timeout=None, extra_headers=None, optional_params=optional, logging_obj=None,
        custom_llm_provider=PROVIDER, litellm_params={}, vertex_project=None,
        vertex_location=None, vertex_auth_header=None)
    return WireRequest(url, headers, orjson.dumps(body), GeminiStream())


@dataclass
class GeminiStream:
    """One generateContent stream's state: calls seen, the last usage, the finish reason."""

    calls: int = 0  # function calls so far: the next one's index
    finish: str | None = None
    done: bool = False  # Gemini's stream is read to its end (its last event has no marker)
    metadata: dict[str, Any] | None = None  # the last usageMetadata

    def feed(self, event: dict[str, Any]) -> list[Delta]:
        if "error" in event:
            raise _stream_error(event["error"])
        metadata = event.get("usageMetadata")
        if metadata:
            self.metadata = metadata
        out: list[Delta] = []
        for candidate in event.get("candidates") or ():
            content = candidate.get("content")
            if content:
                for part in content.get("parts") or ():
                    self._part(part, out)
            if candidate.get("finishReason"):
                self.finish = candidate["finishReason"]
        if not event.get("candidates") and (event.get("promptFeedback") or {}).get(
                "blockReason"):
            self.finish = "PROMPT_BLOCKED"
        return out

    def _part(self, part: dict[str, Any], out: list[Delta]) -> None:
        text = part.get("text")
        call = part.get("functionCall")
        if call is not None:
            call_id = call.get("id") or f"call_{uuid.uuid4().hex[:28]}"
            signature = part.get("thoughtSignature")
            if signature:
                call_id = f"{call_id}{SIGNATURE_SEPARATOR}{signature}"
            arguments = json.dumps(call.get("args") or {}, ensure_ascii=False)  # as litellm
            out.append(ToolCallDelta(self.calls, call_id, call.get("name") or "", arguments))
            self.calls += 1
        elif part.get("thought"):
            if text:
                out.append(ReasoningDelta(text))
            if part.get("thoughtSignature"):  # litellm's thinking block, signed
                out.append(ReasoningSignature(part["thoughtSignature"]))
        elif text:
            out.append(TextDelta(text))

    def end(self) -> list[Delta]:
        if self.finish is None:
            raise Incomplete("the stream ended before Gemini's finishReason")
        from litellm.llms.vertex_ai.gemini.vertex_and_google_ai_studio_gemini import (
            VertexGeminiConfig,
        )

        if self.finish == "PROMPT_BLOCKED":
            reason = "content_filter"
        elif self.calls:
            reason = "tool_calls"
        else:
            reason = VertexGeminiConfig.check_finish_reason(None, self.finish)
        return [Finish(reason), *self.usage()]

    def usage(self) -> list[Delta]:
        """The last usage the provider reported, as litellm computes it (none before it)."""
        if not self.metadata:
            return []
        from litellm.llms.vertex_ai.gemini.vertex_and_google_ai_studio_gemini import (
            VertexGeminiConfig,
        )

        usage: Usage | None = usage_of(VertexGeminiConfig.calculate_usage(
            completion_response={"usageMetadata": self.metadata}))
        return [usage] if usage is not None else []


def _stream_error(error: Any) -> ProviderError:
    """An error inside the stream (HTTP 200): Google's `{code, message, status}`."""
    if not isinstance(error, dict):
        return ProviderError(500, str(error), str(error) or "An error occurred during streaming")
    code = error.get("code")
    status = code if isinstance(code, int) and 400 <= code < 600 else 500
    message = str(error.get("message") or "An error occurred during streaming")
    return ProviderError(status, orjson.dumps({"error": error}).decode(), message)
