"""A scripted OpenAI-compatible chat-completions server for tests.

The gateway talks to models through litellm, so the most faithful test double
is a real HTTP upstream that litellm reaches through its ordinary OpenAI path
(``GATEWAY_MODEL=openai/scripted``, ``GATEWAY_MODEL_API_BASE=<base_url>``).
Tests script each model reply exactly (one step = one SSE chunk), so the
deltas the gateway emits are predictable, and they can inspect what the model
was sent (``requests``), on which connection (``peers``), and when a stream was
abandoned (``disconnects``).
It also answers OpenAI's ``POST /v1/audio/transcriptions`` with scripted
transcripts (``enqueue_transcript``), recording what it heard
(``transcriptions``).

Usage::

    with ScriptedModel() as model:
        model.enqueue(
            [{"content": "Let me check."},
             {"tool_call": {"index": 0, "id": "call_1", "name": "get_weather",
                            "arguments": "{\\"city\\":"}},
             {"tool_call": {"index": 0, "arguments": "\\"Paris\\"}"}}],
            [{"content": "It is 21 °C in Paris."}],
        )
        ...  # point the gateway at model.base_url

A turn is a list of steps, consumed FIFO, one per ``POST /v1/chat/completions``:

- ``{"content": str}`` / ``{"reasoning": str}``: one chunk (``delta.content`` /
  ``delta.reasoning_content``).
- ``{"tool_call": {"index", "id"?, "name"?, "arguments"?}}``: one tool-call
  fragment; ``id``/``name`` go on the first fragment of an index only.
- ``{"delay": seconds}``: sleep before the next step.
- ``{"slow": {"text": str, "interval": s}}``: the text one word per chunk;
  ``{"slow": {"count": n, "interval": s}}``: n numbered tokens ("t1 ", "t2 ", ...).
  Tokens must differ: litellm aborts after 100 identical chunks in a row.
- ``{"error": status, "message": str}``: as the first step, an HTTP error with
  an OpenAI-style body; later, the connection is dropped mid-stream.
- ``{"finish": "stop" | "tool_calls" | ...}``: finish_reason (default:
  "tool_calls" if the turn had tool calls, else "stop").
- ``{"usage": {"prompt_tokens": n, "completion_tokens": m}}``: override usage.
- ``{"raw": {"body": str, "piece": n}}``: a recorded SSE body sent verbatim, in writes of n
  bytes (default: whole), ending the stream; for replaying what a real provider sent.
- ``{"signature": str}``: the signature of the reasoning just streamed (Anthropic's
  ``signature_delta``, Gemini's ``thoughtSignature``; the OpenAI format has none). Anthropic and
  Gemini streams sign their reasoning anyway (``sig-<n>``) when a turn does not.
- ``{"redacted": str}``: an Anthropic ``redacted_thinking`` block (ignored by the others).
- ``{"stream_error": {"type"?, "message", "code"?}}``: the provider's error event inside the
  stream (HTTP 200), which ends it.
- ``{"cut": true}``: the body ends there, cleanly, without the provider's end of stream
  (``[DONE]``, ``message_stop``, a ``finishReason``): an error after ``200 OK`` as llama.cpp's
  server shows it (as the first step: an empty body).
- ``{"finish": ""}``: no finish reason at all: the stream ends with ``[DONE]`` only (what
  llama.cpp's server sends when it cuts an answer to serve another request).

The same script speaks three wire formats, by the path it is called on: OpenAI's chat
completions (``base_url``), Anthropic's Messages (``anthropic_base``, for
``anthropic/<name>``; ``tests/support/scripted_anthropic.py``) and Gemini's
``streamGenerateContent`` (``gemini_base``, for ``gemini/<name>``;
``tests/support/scripted_gemini.py``). ``requests`` holds every request in the OpenAI shape
(a native request translated back: system, user, assistant text and tool calls, tool
results, tools), with the body as sent under ``"native"``.

A turn may also be ``{"steps": [...], "stream": bool}``: it is then only used
by a request with that ``stream`` flag, so a background non-streaming call
(thread name, suggestions) cannot steal a turn meant for the agent loop.
``enqueue_for(prompt, *turns)`` reserves turns for requests whose last user text
is exactly ``prompt`` (taken before the shared FIFO): many concurrent runs, each
with its own known reply, whatever order their requests arrive in.
With no matching turn queued, the reply echoes ``You said: <last user text>``.

``context_window`` (tokens, counted as the usage is: characters / 4) makes it a model with a
small window: a request whose messages are longer is answered 400 ``context_length_exceeded``,
as OpenAI answers, and counted in ``overflows``; no turn is taken for it.

Real servers differ from this one's defaults; ``behave(...)`` (or ``"behaviour"`` in a
``/_script`` body) makes its OpenAI format act like one (reset by ``reset()``):

- ``usage=False``: ignore ``stream_options.include_usage`` (no usage in streams);
- ``strict_roles=True``: a chat template that refuses messages whose roles do not alternate
  (user, assistant, user, ...; system first; an assistant's tool results belong to it): a
  streamed request is answered ``200`` and an empty body (a template error after 200), a
  non-streamed one 500; counted in ``refusals``;
- ``refuse_null_content=True``: an assistant message with ``content: null`` is answered 500
  (llama.cpp's server), counted in ``refusals``;
- ``serial=True``: one request at a time, as llama.cpp's server with ``interrupt_requests``: a
  new request ends the stream in progress with ``[DONE]`` and no finish reason;
- ``overflow="after_200"``: with ``context_window`` set, a streamed request too long is answered
  200 and an error event (``context_length_exceeded``) instead of a 400; ``"silent"``: 200 and
  an empty body (llama-cpp-python);
- ``window_on="props"`` / ``"models"``: the window (``context_window``) is told at ``GET
  /props`` (llama.cpp) or in ``GET /v1/models`` (``max_model_len``, as vLLM);
- ``tokenize=True``: ``POST /tokenize`` (``{"content": text}`` -> ``{"tokens": [...]}``, as
  llama.cpp's server) counts as this model does, each call recorded in ``tokenized``.

The same controls exist over HTTP for other processes: ``POST /_script``
(``{"turns": [...]}``, with ``"for": prompt`` to reserve them), ``GET /_requests``, ``GET /_disconnects``,
``POST /_reset``; ``{"contextWindow": n}`` in a ``/_script`` body sets the window. Run standalone with ``python -m tests.support.scripted_model``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Protocol, Self

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

_STEP_KEYS = {"content", "reasoning", "tool_call", "delay", "slow", "error", "finish", "usage",
              "raw", "signature", "redacted", "stream_error", "cut"}
BEHAVIOURS = {"usage": True, "strict_roles": False, "refuse_null_content": False,
              "serial": False, "overflow": "400", "window_on": None, "tokenize": False}


class _AbortStream(Exception):
    """Raised inside the ASGI app to make uvicorn drop the connection mid-stream."""


class _QuietAbort(logging.Filter):
    """Hide uvicorn's traceback for the deliberate mid-stream abort (and only that)."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, _AbortStream)


logging.getLogger("uvicorn.error").addFilter(_QuietAbort())


def _validate_turn(turn: Any) -> dict:
    """Normalise a turn to ``{"steps": [...], "stream": bool | None}``; fail early on typos."""
    if isinstance(turn, dict):
        steps, stream = turn.get("steps"), turn.get("stream")
    else:
        steps, stream = turn, None
    if not isinstance(steps, list):
        raise TypeError(f"a turn must be a list of steps, got {turn!r}")
    for step in steps:
        if not isinstance(step, dict) or not (set(step) & _STEP_KEYS):
            raise ValueError(f"unknown step {step!r}; known keys: {sorted(_STEP_KEYS)}")
        if "error" not in step and len(step) != 1:
            raise ValueError(f"a step has exactly one key, got {step!r}")
    return {"steps": list(steps), "stream": stream}


def _message_text(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"
        )
    return ""


def _echo_turn(body: dict) -> dict:
    """Default reply: 'You said: <last user text>' in a few chunks."""
    users = [m for m in body.get("messages", []) if m.get("role") == "user"]
    text = _message_text(users[-1]) if users else ""
    words = re.findall(r"\S+\s*", text) or [""]
    chunks = ["You said: "] + ["".join(words[i : i + 3]) for i in range(0, len(words), 3)]
    return {"steps": [{"content": c} for c in chunks if c], "stream": None}


def _slow_tokens(spec: dict) -> list[str]:
    if "count" in spec:
        return [f"t{i} " for i in range(1, int(spec["count"]) + 1)]
    return re.findall(r"\s*\S+\s*", spec.get("text", "")) or [""]


def _error_body(step: dict) -> dict:
    status = int(step["error"])
    kind = {400: "invalid_request_error", 401: "authentication_error", 429: "rate_limit_error"}
    return {
        "error": {
            "message": step.get("message", f"scripted error {status}"),
            "type": step.get("type", kind.get(status, "server_error")),
            "param": None,
            "code": step.get("code"),
        }
    }


def _prompt_tokens(body: dict) -> int:
    """The request's input tokens as this model counts them: characters / 4."""
    return sum(len(_message_text(m)) for m in body.get("messages", [])) // 4 + 1


def _text_tokens(text: str) -> int:
    """A text's tokens as this model counts them (characters / 4)."""
    return len(text) // 4 + 1 if text else 0


def _alternates(messages: list) -> bool:
    """Whether the roles alternate as a strict chat template (Gemma 3's) wants: system
    messages first, then user, assistant, user, ...; an assistant's tool results belong to
    its turn."""
    roles = [m.get("role") for m in messages if isinstance(m, dict)]
    while roles and roles[0] == "system":
        roles.pop(0)
    expected, previous = "user", None
    for role in roles:
        if role == "tool" and previous in ("assistant", "tool"):
            previous = role
            continue
        if role != expected:
            return False
        previous, expected = role, "assistant" if role == "user" else "user"
    return True


def _null_content(messages: list) -> bool:
    return any(isinstance(m, dict) and m.get("role") == "assistant" and m.get("content") is None
               for m in messages)


def _too_long(window: int, tokens: int) -> dict:
    return _error_body({"error": 400, "code": "context_length_exceeded",
                        "message": f"This model's maximum context length is {window} tokens. "
                                   f"However, your messages resulted in {tokens} tokens."})


def _usage(body: dict, completion_chars: int, override: dict | None) -> dict:
    """Rough, deterministic token counts (chars/4); a ``usage`` step overrides them."""
    usage = {"prompt_tokens": _prompt_tokens(body), "completion_tokens": completion_chars // 4 + 1}
    usage.update(override or {})
    usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    return usage


class ScriptedModel:
    """OpenAI-compatible upstream on 127.0.0.1 in a daemon thread. See the module docstring."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._turns: deque[dict] = deque()
        self._turns_for: dict[str, deque[dict]] = {}
        self._requests: list[dict] = []
        self._disconnects: list[tuple[float, int]] = []
        self._peers: list[int] = []  # the client port of each chat request
        self._headers: list[dict[str, str]] = []  # each model request's headers
        self._transcripts: deque[str] = deque()
        self._transcriptions: list[dict] = []
        self.context_window: int | None = None
        self.overflows = 0  # requests refused as longer than `context_window`
        self.behaviour: dict[str, Any] = dict(BEHAVIOURS)
        self.refusals = 0  # requests refused by `strict_roles` or `refuse_null_content`
        self.tokenized: list[str] = []  # texts counted at /tokenize
        self._streaming: _SseApp | None = None  # the stream in progress (`serial`)
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.port: int | None = None
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._chat_endpoint, methods=["POST"]),
                Route("/chat/completions", self._chat_endpoint, methods=["POST"]),
                Route("/anthropic/v1/messages", self._anthropic_endpoint, methods=["POST"]),
                Route("/gemini/models/{target:path}", self._gemini_endpoint, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
                Route("/props", self._props, methods=["GET"]),
                Route("/tokenize", self._tokenize, methods=["POST"]),
                Route("/v1/audio/transcriptions", self._transcription, methods=["POST"]),
                Route("/_transcriptions", self._http_transcriptions, methods=["GET"]),
                Route("/_script", self._http_script, methods=["POST"]),
                Route("/_requests", self._http_requests, methods=["GET"]),
                Route("/_disconnects", self._http_disconnects, methods=["GET"]),
                Route("/_reset", self._http_reset, methods=["POST"]),
            ]
        )

    # ---- test-facing API ------------------------------------------------

    @property
    def base_url(self) -> str:
        """The OpenAI base URL to hand to litellm (``api_base``)."""
        if self.port is None:
            raise RuntimeError("ScriptedModel is not started")
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def anthropic_base(self) -> str:
        """The api_base for `anthropic/<name>` (litellm appends `/v1/messages`)."""
        return self.base_url.removesuffix("/v1") + "/anthropic"

    @property
    def gemini_base(self) -> str:
        """The api_base for `gemini/<name>` (litellm appends `/models/<name>:<method>`)."""
        return self.base_url.removesuffix("/v1") + "/gemini"

    def base_for(self, wire: str) -> str:
        """The api_base of `wire` ("openai", "anthropic" or "gemini")."""
        return {"openai": self.base_url, "anthropic": self.anthropic_base,
                "gemini": self.gemini_base}[wire]

    @property
    def requests(self) -> list[dict]:
        """Snapshot of every received chat-completions JSON body, in order."""
        with self._lock:
            return list(self._requests)

    @property
    def peers(self) -> list[int]:
        """The client's port for each chat-completions request, in order: requests from the
        same port came over the same (kept-alive) connection."""
        with self._lock:
            return list(self._peers)

    @property
    def headers(self) -> list[dict[str, str]]:
        """The headers of each model request (any format), in order, names in lower case."""
        with self._lock:
            return list(self._headers)

    @property
    def disconnects(self) -> list[tuple[float, int]]:
        """``(time.monotonic(), request_index)`` for each stream the client closed early."""
        with self._lock:
            return list(self._disconnects)

    def behave(self, **behaviour: Any) -> Self:
        """Act like a real server in the ways named (see the module docstring)."""
        unknown = set(behaviour) - set(BEHAVIOURS)
        if unknown:
            raise ValueError(f"unknown behaviour {sorted(unknown)}; known: {sorted(BEHAVIOURS)}")
        self.behaviour.update(behaviour)
        return self

    def enqueue(self, *turns: Any) -> None:
        """Queue replies, one turn per chat-completions request, FIFO."""
        checked = [_validate_turn(t) for t in turns]
        with self._lock:
            self._turns.extend(checked)

    def enqueue_for(self, prompt: str, *turns: Any) -> None:
        """Queue replies only for requests whose last user text is `prompt` (or ends with it,
        after an unanswered one joined to it), FIFO."""
        checked = [_validate_turn(t) for t in turns]
        with self._lock:
            self._turns_for.setdefault(prompt, deque()).extend(checked)

    def enqueue_transcript(self, *texts: str) -> None:
        """Queue transcripts, one per `/audio/transcriptions` request, FIFO."""
        with self._lock:
            self._transcripts.extend(texts)

    @property
    def transcriptions(self) -> list[dict]:
        """Each transcription request: `{model, filename, contentType, size}`."""
        with self._lock:
            return list(self._transcriptions)

    def pending(self) -> int:
        """Number of scripted turns not yet consumed."""
        with self._lock:
            return len(self._turns) + sum(len(q) for q in self._turns_for.values())

    def reset(self) -> None:
        """Forget queued turns, recorded requests and disconnects."""
        with self._lock:
            self._turns.clear()
            self._turns_for.clear()
            self._requests.clear()
            self._disconnects.clear()
            self._peers.clear()
            self._headers.clear()
            self._transcripts.clear()
            self._transcriptions.clear()
            self.context_window, self.overflows = None, 0
            self.behaviour, self.refusals = dict(BEHAVIOURS), 0
            self.tokenized.clear()

    def start(self) -> Self:
        """Serve on a free port in a daemon thread; return once it accepts connections."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            self.app,
            log_config=None,  # never reconfigure the test process's logging
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=2,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name="scripted-model", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self._server.started:
                try:
                    socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                    return self
                except OSError:
                    pass
            if not self._thread.is_alive():
                break
            time.sleep(0.01)
        raise RuntimeError("ScriptedModel did not start")

    def stop(self) -> None:
        """Ask uvicorn to exit and wait for the thread (open streams get ~2 s)."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- internals ----------------------------------------------------------

    def _take_turn(self, body: dict) -> tuple[int, dict]:
        """Record the request and pop the first turn usable for its stream flag."""
        stream = bool(body.get("stream"))
        users = [m for m in body.get("messages", []) if m.get("role") == "user"]
        prompt = _message_text(users[-1]) if users else None
        with self._lock:
            self._requests.append(body)
            index = len(self._requests) - 1
            if prompt is not None and prompt not in self._turns_for and "\n\n" in prompt:
                # A user message with no answer (its run cancelled before any) goes to the
                # model joined to the next one (`engine/history.py`: roles alternate): the
                # turn queued for the newest prompt is for it.
                prompt = prompt.rsplit("\n\n", 1)[1]
            reserved = self._turns_for.get(prompt, deque()) if prompt is not None else deque()
            for queue in (reserved, self._turns):
                for turn in queue:
                    if turn["stream"] is None or turn["stream"] == stream:
                        queue.remove(turn)
                        if queue is reserved and not reserved:
                            del self._turns_for[prompt]
                        return index, turn
        return index, _echo_turn(body)

    def _record_disconnect(self, index: int) -> None:
        with self._lock:
            self._disconnects.append((time.monotonic(), index))

    async def _chat_endpoint(self, request: Request):
        return await self._serve(request, OPENAI, await request.json())

    async def _anthropic_endpoint(self, request: Request):
        from tests.support.scripted_anthropic import ANTHROPIC

        return await self._serve(request, ANTHROPIC, await request.json())

    async def _gemini_endpoint(self, request: Request):
        from tests.support.scripted_gemini import GEMINI

        model, _, method = request.path_params["target"].rpartition(":")
        return await self._serve(request, GEMINI, await request.json(), {
            "model": model, "stream": method == "streamGenerateContent"})

    async def _serve(self, request: Request, wire: Wire, native: dict,
                     extra: dict | None = None):
        """One model call in `wire`'s format (`extra`: what its URL says); the real work is a
        raw ASGI app so that disconnects are seen at once."""
        body = {**wire.normalized(native), **(extra or {})}
        with self._lock:
            self._headers.append({k.lower(): v for k, v in request.headers.items()})
            if request.client is not None:
                self._peers.append(request.client.port)
        refused = self._refused(body, wire)
        if refused is not None:
            return refused
        index, turn = self._take_turn(body)
        steps = turn["steps"]
        if steps and "error" in steps[0]:
            return JSONResponse(wire.error_body(steps[0]), status_code=int(steps[0]["error"]))
        if not body.get("stream"):
            summary = await summarize(steps)
            if summary.error is not None:
                return JSONResponse(wire.error_body(summary.error))
            return JSONResponse(wire.completion(body, index, summary))
        return _SseApp(self, body, index, steps, wire.renderer(body, index))

    def _refused(self, body: dict, wire: Wire) -> Any:
        """The answer to a request this server refuses (too long, or, in the OpenAI format, a
        message shape it does not take), as a real server gives it; None to answer it."""
        window, tokens = self.context_window, _prompt_tokens(body)
        stream, overflow = bool(body.get("stream")), self.behaviour["overflow"]
        if window is not None and tokens > window:
            with self._lock:
                self._requests.append(body)
                self.overflows += 1
            if stream and overflow in ("after_200", "silent") and wire is OPENAI:
                return _EndedApp(_too_long(window, tokens) if overflow == "after_200" else None)
            return JSONResponse(wire.too_long(window, tokens), status_code=400)
        messages = body.get("messages", [])
        null = self.behaviour["refuse_null_content"] and _null_content(messages)
        if wire is not OPENAI or not (null or self.behaviour["strict_roles"]
                                      and not _alternates(messages)):
            return None
        with self._lock:
            self._requests.append(body)
            self.refusals += 1
        if null:
            return JSONResponse({"error": {"message": "Internal Server Error"}}, status_code=500)
        if stream:
            return _EndedApp(None)
        return JSONResponse({"error": {"message": "Conversation roles must alternate "
                                       "user/assistant/user/assistant/..."}}, status_code=500)

    async def _models(self, request: Request) -> JSONResponse:
        model: dict[str, Any] = {"id": "scripted", "object": "model", "owned_by": "tests"}
        if self.behaviour["window_on"] == "models" and self.context_window is not None:
            model["max_model_len"] = self.context_window
        return JSONResponse({"object": "list", "data": [model]})

    async def _props(self, request: Request) -> JSONResponse:
        """llama.cpp's server properties: its window, when `window_on="props"`."""
        if self.behaviour["window_on"] != "props" or self.context_window is None:
            return JSONResponse({"detail": "Not Found"}, status_code=404)
        return JSONResponse({"default_generation_settings": {"n_ctx": self.context_window}})

    async def _tokenize(self, request: Request) -> JSONResponse:
        """llama.cpp's `POST /tokenize` (`{"content": text}` -> `{"tokens": [...]}`)."""
        if not self.behaviour["tokenize"]:
            return JSONResponse({"detail": "Not Found"}, status_code=404)
        text = str((await request.json()).get("content", ""))
        with self._lock:
            self.tokenized.append(text)
        return JSONResponse({"tokens": list(range(_text_tokens(text)))})

    async def _transcription(self, request: Request) -> JSONResponse:
        """OpenAI's `POST /audio/transcriptions` (multipart `file` and `model`): the next
        scripted transcript, or one that names the bytes it heard."""
        async with request.form() as form:
            upload = form.get("file")
            audio = await upload.read() if hasattr(upload, "read") else b""
            record = {"model": form.get("model"), "size": len(audio),
                      "filename": getattr(upload, "filename", None),
                      "contentType": getattr(upload, "content_type", None)}
        with self._lock:
            self._transcriptions.append(record)
            text = (self._transcripts.popleft() if self._transcripts
                    else f"(scripted transcript of {len(audio)} bytes)")
        return JSONResponse({"text": text})

    async def _http_transcriptions(self, request: Request) -> JSONResponse:
        return JSONResponse(self.transcriptions)

    async def _http_script(self, request: Request) -> JSONResponse:
        payload = await request.json()
        if "contextWindow" in payload:
            self.context_window = payload["contextWindow"]
        try:
            self.behave(**payload.get("behaviour", {}))
            if payload.get("for") is not None:
                self.enqueue_for(str(payload["for"]), *payload.get("turns", []))
            else:
                self.enqueue(*payload.get("turns", []))
        except (TypeError, ValueError) as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        return JSONResponse({"pending": self.pending()})

    async def _http_requests(self, request: Request) -> JSONResponse:
        return JSONResponse(self.requests)

    async def _http_disconnects(self, request: Request) -> JSONResponse:
        return JSONResponse([list(d) for d in self.disconnects])

    async def _http_reset(self, request: Request) -> JSONResponse:
        self.reset()
        return JSONResponse({"ok": True})


@dataclass
class Summary:
    """A whole turn, for a non-streamed answer: what its steps add up to."""

    content: str = ""
    reasoning: str = ""
    signature: str | None = None
    calls: dict[int, dict] = field(default_factory=dict)  # index -> {id, name, arguments}
    finish: str | None = None
    usage: dict | None = None
    error: dict | None = None


async def summarize(steps: list[dict]) -> Summary:
    """A turn's steps taken whole (delays slept), for a non-streamed answer."""
    summary = Summary()
    for step in steps:
        if "delay" in step:
            await asyncio.sleep(step["delay"])
        elif "error" in step:
            summary.error = step
            return summary
        elif "content" in step:
            summary.content += step["content"]
        elif "reasoning" in step:
            summary.reasoning += step["reasoning"]
        elif "signature" in step:
            summary.signature = step["signature"]
        elif "slow" in step:
            summary.content += "".join(_slow_tokens(step["slow"]))
        elif "tool_call" in step:
            tc = step["tool_call"]
            call = summary.calls.setdefault(tc.get("index", 0), {
                "id": tc.get("id"), "name": tc.get("name"), "arguments": ""})
            call["arguments"] += tc.get("arguments", "")
        elif "finish" in step:
            summary.finish = step["finish"]
        elif "usage" in step:
            summary.usage = step["usage"]
    return summary


class Renderer(Protocol):
    """One stream's events in a wire format, step by step (each returns the bytes to send)."""

    def content(self, text: str) -> bytes: ...
    def reasoning(self, text: str) -> bytes: ...
    def signature(self, signature: str) -> bytes: ...
    def redacted(self, data: str) -> bytes: ...
    def tool_call(self, fragment: dict) -> bytes: ...
    def stream_error(self, error: dict) -> bytes: ...
    def end(self, finish: str | None, usage: dict) -> bytes: ...


class Wire(Protocol):
    """A wire format the scripted model speaks: its requests read back in the OpenAI shape, its
    error answers, its streams and its non-streamed answers."""

    def normalized(self, native: dict) -> dict: ...
    def error_body(self, step: dict) -> dict: ...
    def too_long(self, window: int, tokens: int) -> dict: ...
    def renderer(self, body: dict, index: int) -> Renderer: ...
    def completion(self, body: dict, index: int, summary: Summary) -> dict: ...


class _OpenAIRenderer:
    """OpenAI's chat-completions chunks; the usage only when `stream_options` asks for it."""

    def __init__(self, body: dict, index: int) -> None:
        self.body = body
        self.base = {
            "id": f"chatcmpl-scripted-{index}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": body.get("model", "scripted"),
        }
        self.role_sent = False

    def _chunk(self, delta: dict, finish: str | None = None) -> bytes:
        if not self.role_sent:
            delta = {"role": "assistant", **delta}
            self.role_sent = True
        obj = {
            **self.base,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        return f"data: {json.dumps(obj)}\n\n".encode()

    def content(self, text: str) -> bytes:
        return self._chunk({"content": text})

    def reasoning(self, text: str) -> bytes:
        return self._chunk({"reasoning_content": text})

    def signature(self, signature: str) -> bytes:
        return b""

    def redacted(self, data: str) -> bytes:
        return b""

    def tool_call(self, tc: dict) -> bytes:
        fragment: dict[str, Any] = {"index": tc.get("index", 0)}
        function: dict[str, Any] = {}
        if "id" in tc:
            fragment["id"] = tc["id"]
            fragment["type"] = "function"
        if "name" in tc:
            function["name"] = tc["name"]
        function["arguments"] = tc.get("arguments", "")
        fragment["function"] = function
        return self._chunk({"tool_calls": [fragment]})

    def stream_error(self, error: dict) -> bytes:
        body = {"error": {"message": error.get("message", "scripted stream error"),
                          "type": error.get("type", "server_error"), "param": None,
                          "code": error.get("code")}}
        return f"data: {json.dumps(body)}\n\n".encode()

    def end(self, finish: str | None, usage: dict) -> bytes:
        body = self._chunk({}, finish)
        if usage and (self.body.get("stream_options") or {}).get("include_usage"):
            chunk = {**self.base, "choices": [], "usage": usage}
            body += f"data: {json.dumps(chunk)}\n\n".encode()
        return body + b"data: [DONE]\n\n"


class _OpenAIWire:
    def normalized(self, native: dict) -> dict:
        return native

    def error_body(self, step: dict) -> dict:
        return _error_body(step)

    def too_long(self, window: int, tokens: int) -> dict:
        return _too_long(window, tokens)

    def renderer(self, body: dict, index: int) -> Renderer:
        return _OpenAIRenderer(body, index)

    def completion(self, body: dict, index: int, summary: Summary) -> dict:
        message: dict[str, Any] = {"role": "assistant", "content": summary.content or None}
        if summary.reasoning:
            message["reasoning_content"] = summary.reasoning
        if summary.calls:
            message["tool_calls"] = [
                {"id": c["id"], "type": "function",
                 "function": {"name": c["name"], "arguments": c["arguments"]}}
                for _, c in sorted(summary.calls.items())]
        return {
            "id": f"chatcmpl-scripted-{index}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "scripted"),
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": summary.finish or (
                             "tool_calls" if summary.calls else "stop")}],
            "usage": _usage(body, len(summary.content) + len(summary.reasoning), summary.usage),
        }


OPENAI: Wire = _OpenAIWire()


class _SseApp:
    """One SSE stream of a turn's steps, in the renderer's wire format. Watches ``receive()``
    for ``http.disconnect`` while writing, so an abandoned stream is recorded the moment the
    client leaves, not at the next write (which may be seconds away in a slow stream)."""

    def __init__(self, model: ScriptedModel, body: dict, index: int, steps: list[dict],
                 renderer: Renderer) -> None:
        self.model, self.body, self.index, self.steps = model, body, index, steps
        self.renderer = renderer
        self.interrupted = False  # another request came (`serial`): end with [DONE] only

    async def __call__(self, scope, receive, send) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"text/event-stream"),
                    (b"cache-control", b"no-cache"),
                ],
            }
        )
        if self.model.behaviour["serial"]:
            if self.model._streaming is not None:
                self.model._streaming.interrupted = True
            self.model._streaming = self
        produce = asyncio.ensure_future(self._produce(send))
        watch = asyncio.ensure_future(self._wait_disconnect(receive))
        try:
            await asyncio.wait({produce, watch}, return_when=asyncio.FIRST_COMPLETED)
            if not produce.done():
                self.model._record_disconnect(self.index)
                produce.cancel()
            else:
                produce.result()  # re-raise _AbortStream so uvicorn drops the connection
        except asyncio.CancelledError:
            if not produce.done():
                self.model._record_disconnect(self.index)
            raise
        finally:
            for task in (produce, watch):
                task.cancel()
            if self.model._streaming is self:
                self.model._streaming = None

    @staticmethod
    async def _wait_disconnect(receive) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    async def _produce(self, send) -> None:
        render = self.renderer
        had_tools = False
        finish, usage_override, completion_chars = None, None, 0

        async def emit(data: bytes) -> None:
            if data:
                await send({"type": "http.response.body", "body": data, "more_body": True})

        for step in self.steps:
            if self.interrupted:
                break
            if "raw" in step:
                body = step["raw"]["body"].encode()
                piece = int(step["raw"].get("piece") or len(body))
                for start in range(0, len(body), piece):
                    await emit(body[start:start + piece])
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                return
            if "delay" in step:
                await asyncio.sleep(step["delay"])
            elif "content" in step:
                completion_chars += len(step["content"])
                await emit(render.content(step["content"]))
            elif "reasoning" in step:
                completion_chars += len(step["reasoning"])
                await emit(render.reasoning(step["reasoning"]))
            elif "signature" in step:
                await emit(render.signature(step["signature"]))
            elif "redacted" in step:
                await emit(render.redacted(step["redacted"]))
            elif "slow" in step:
                interval = float(step["slow"].get("interval", 0.05))
                for token in _slow_tokens(step["slow"]):
                    if self.interrupted:
                        break
                    completion_chars += len(token)
                    await emit(render.content(token))
                    await asyncio.sleep(interval)
            elif "tool_call" in step:
                had_tools = True
                completion_chars += len(step["tool_call"].get("arguments", ""))
                await emit(render.tool_call(step["tool_call"]))
            elif "error" in step:
                raise _AbortStream(step.get("message", "scripted abort"))
            elif "stream_error" in step:
                await send({"type": "http.response.body", "more_body": False,
                            "body": render.stream_error(step["stream_error"])})
                return
            elif "cut" in step:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                return
            elif "finish" in step:
                finish = step["finish"]
            elif "usage" in step:
                usage_override = step["usage"]

        if self.interrupted:  # `serial`: cut to serve another request
            await send({"type": "http.response.body", "body": b"data: [DONE]\n\n",
                        "more_body": False})
            return
        if finish is None:
            finish = "tool_calls" if had_tools else "stop"
        usage = _usage(self.body, completion_chars, usage_override)
        if not self.model.behaviour["usage"] and isinstance(render, _OpenAIRenderer):
            usage = {}  # a server that ignores `include_usage`
        await send({"type": "http.response.body", "body": render.end(finish or None, usage),
                    "more_body": False})


class _EndedApp:
    """A `200 OK` stream that ends at once: empty, or with one error event (`error`)."""

    def __init__(self, error: dict | None) -> None:
        self.error = error

    async def __call__(self, scope, receive, send) -> None:
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream")]})
        body = f"data: {json.dumps(self.error)}\n\n".encode() if self.error else b""
        await send({"type": "http.response.body", "body": body, "more_body": False})


if __name__ == "__main__":  # pragma: no cover - manual / cross-process use
    import argparse

    parser = argparse.ArgumentParser(description="Run the scripted OpenAI-compatible model server.")
    parser.add_argument("--port", type=int, default=0, help="0 = pick a free port")
    args = parser.parse_args()
    model = ScriptedModel()
    if args.port:
        app = model.app
        print(f"http://127.0.0.1:{args.port}/v1", flush=True)
        uvicorn.run(app, host="127.0.0.1", port=args.port, log_config=None, lifespan="off")
    else:
        model.start()
        print(model.base_url, flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            model.stop()
