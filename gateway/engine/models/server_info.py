"""What a self-hosted OpenAI-compatible server says of its model: its context window, and how
many tokens a text is to its tokenizer.

litellm's model map knows hosted models' windows; a server the operator runs (vLLM, llama.cpp,
LM Studio, ...) serves whatever window it was started with, and many say so: vLLM's and
OpenRouter's `GET /v1/models` (`max_model_len`, `context_length`), llama.cpp's `GET /props`
(`default_generation_settings.n_ctx`). Asked once per server and process, at the first run that
needs it (a run's budget, `runs/context_fit.py`), with a short timeout; a server that says
nothing (llama-cpp-python's says nothing) leaves the budget to the agent's or the gateway's
setting, and to what a context-length error teaches (`context_window.learn_window`).

Token counts are asked only for a call whose server reported no usage (`stream_contract.
estimated_usage`): llama.cpp's and vLLM's `POST /tokenize` (`{"content"}` -> `{"tokens"}`,
`{"prompt"}` -> `{"count"}`). Which one a server has is found once; a server with none is
counted by litellm. llama-cpp-python's `POST /extras/tokenize/count` is not used: it takes the
model's lock like a completion does, so on a server that serves one request at a time
(`interrupt_requests`, its default) counting one run's tokens would cut another run's answer.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

log = logging.getLogger(__name__)

TIMEOUT_SECONDS = 3.0
# Where `/v1/models` entries put the window, by server.
_MODEL_FIELDS = ("max_model_len", "context_length", "context_window", "max_context_length")
_asked: dict[tuple[str, str], asyncio.Task[int | None]] = {}
# Each server's way of counting for a model, once found (None: it has none): (path, body key).
_counting: dict[tuple[str, str], tuple[str, str] | None] = {}
_COUNTERS = (("/tokenize", "content"), ("/tokenize", "prompt"))


async def server_window(api_base: str, api_key: str | None, model: str) -> int | None:
    """The window the server at `api_base` says `model` has (None: it does not say)."""
    key = (api_base, model)
    task = _asked.get(key)
    if task is None:
        task = _asked[key] = asyncio.get_running_loop().create_task(
            _ask(api_base, api_key, model))
    try:
        return await asyncio.shield(task)
    except Exception:
        return None


async def _ask(api_base: str, api_key: str | None, model: str) -> int | None:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    base = api_base.rstrip("/")
    async with httpx.AsyncClient(timeout=TIMEOUT_SECONDS, headers=headers) as client:
        for url, read in ((f"{base}/models", _from_models), (_root(base) + "/props", _from_props)):
            try:
                response = await client.get(url)
                found = read(response.json(), model) if response.status_code == 200 else None
            except (httpx.HTTPError, ValueError):
                found = None
            if found:
                log.info("the model server at %s says %s has a window of %d tokens", base,
                         model, found)
                return found
    return None


async def server_count(api_base: str, api_key: str | None, model: str,
                       texts: Sequence[str]) -> list[int] | None:
    """Each text's tokens as the server at `api_base` counts them (None: it cannot)."""
    root = _root(api_base.rstrip("/"))
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    async with httpx.AsyncClient(timeout=TIMEOUT_SECONDS, headers=headers) as client:
        key = (root, model)
        ways = [_counting[key]] if key in _counting else list(_COUNTERS)
        for way in ways:
            if way is None:
                return None
            counts = [await _counted(client, root, way, model, text) for text in texts]
            if None not in counts:
                _counting[key] = way
                return [c for c in counts if c is not None]
        _counting[key] = None
    return None


async def _counted(client: httpx.AsyncClient, root: str, way: tuple[str, str], model: str,
                   text: str) -> int | None:
    path, key = way
    try:
        response = await client.post(root + path, json={key: text, "model": model})
        body = response.json() if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None
    if not isinstance(body, dict):
        return None
    found = body.get("count", len(body["tokens"]) if isinstance(body.get("tokens"), list)
                     else None)
    return found if _count(found) or found == 0 else None


def _root(base: str) -> str:
    """The server's root: llama.cpp serves `/props` beside `/v1`."""
    parts = urlsplit(base)
    path = parts.path[:-3] if parts.path.endswith("/v1") else parts.path
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def _from_models(body: Any, model: str) -> int | None:
    entries = body.get("data") if isinstance(body, dict) else None
    if not isinstance(entries, list):
        return None
    mine = [e for e in entries if isinstance(e, dict) and e.get("id") == model]
    if not mine and len(entries) == 1 and isinstance(entries[0], dict):
        mine = entries
    for entry in mine:
        for name in _MODEL_FIELDS:
            found: Any = entry.get(name)
            if _count(found):
                return int(found)
    return None


def _from_props(body: Any, model: str) -> int | None:
    if not isinstance(body, dict):
        return None
    settings = body.get("default_generation_settings")
    found: Any = settings.get("n_ctx") if isinstance(settings, dict) else body.get("n_ctx")
    return found if _count(found) else None


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0
