"""Server tools from MCP servers, connected once at start-up through the official `mcp` SDK.

`GATEWAY_MCP_SERVERS` names a JSON file in the common `mcpServers` format:

    {"mcpServers": {
        "files":   {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "."],
                    "env": {"LOG_LEVEL": "warn"}, "cwd": "/srv"},
        "weather": {"url": "https://weather.example/mcp", "headers": {"Authorization": "Bearer ..."}}
    }}

`command` starts a stdio server (it inherits only PATH, HOME and the like plus its own `env`, never
the gateway's secrets; a relative `cwd` is relative to the config file); `url` reaches a streamable
HTTP server. An entry with `"disabled": true` is skipped; one with `"approval": true` has every
tool of the server ask a human before it runs (`engine/tools/approvals.py`).

Start-up fails fast: if any server cannot be started, connected or listed, `open_mcp_tools` raises
`McpStartupError` naming the server and the reason, and the gateway does not start. A gateway
that started without a configured server would silently give its agent fewer tools, which is
harder to notice than a refused start. A server that dies later is not fatal: each call to it
raises, and the agent loop turns that into an error result the model sees.

Each server's connection lives in its own task (anyio task groups belong to the task that
entered them). The agent loop's tasks only send requests through it, which the SDK supports from
any task, and closing happens in the owning task when the lifespan's exit stack unwinds. A crash
inside one connection therefore cancels that task only, never the lifespan or a run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx2
import mcp_types
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from ...observability.redact import mask_secret
from ..loop import ServerToolSpec, ToolError
from . import elicitation
from . import status as tool_status
from .context import current_tool_context
from .mcp_pinned import TIMEOUT as PIN_TIMEOUT
from .mcp_pinned import Pin, PinnedTransport

log = logging.getLogger("gateway.mcp")

CONNECT_TIMEOUT_SECONDS = 30.0
CLOSE_TIMEOUT_SECONDS = 10.0
# What OpenAI-compatible function calling accepts as a tool name.
_TOOL_NAME = re.compile(r"[^A-Za-z0-9_-]")
_MAX_NAME = 64


class McpStartupError(RuntimeError):
    """The MCP configuration is invalid or a configured server could not be reached."""


class McpToolError(ToolError):
    """An MCP tool returned `isError: true`, or its server is gone: the model sees the text."""


@dataclass(frozen=True)
class ServerConfig:
    """One `mcpServers` entry. `secrets` are values that must never appear in a log line."""

    name: str
    stdio: StdioServerParameters | None = None
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    secrets: tuple[str, ...] = ()
    approval: bool = False  # every tool of this server asks a human before it runs
    pin: Pin | None = None  # a run's server: reached at a checked address only (`mcp_pinned`)

    def describe(self) -> str:
        if self.stdio is not None:
            return f"stdio command {self.stdio.command!r}"
        return "streamable HTTP"


def load_config(config_path: str) -> list[ServerConfig]:
    """Parse and check the config file; every mistake names the server and the field."""
    path = Path(config_path)
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise McpStartupError(f"cannot read MCP config {config_path}: {exc.strerror}") from None
    except ValueError as exc:
        raise McpStartupError(f"MCP config {config_path} is not valid JSON: {exc}") from None
    servers = document.get("mcpServers") if isinstance(document, dict) else None
    if not isinstance(servers, dict):
        raise McpStartupError(f'MCP config {config_path} needs an object "mcpServers"')
    configs = []
    for name, entry in servers.items():
        if not isinstance(entry, dict):
            raise McpStartupError(f"MCP server {name!r}: the entry must be an object")
        if entry.get("disabled") is True:
            continue
        config = _server_config(name, entry, path.parent)
        if _typed(name, entry, "approval", bool, False):
            config = replace(config, approval=True)
        configs.append(config)
    return configs


def _server_config(name: str, entry: dict[str, Any], base: Path) -> ServerConfig:
    kind = entry.get("type") or entry.get("transport")
    has_command, has_url = "command" in entry, "url" in entry
    if has_command == has_url:
        raise McpStartupError(f"MCP server {name!r}: give exactly one of \"command\" (stdio) or "
                              f"\"url\" (streamable HTTP)")
    if kind is not None and kind not in ("stdio", "http", "streamable-http", "streamableHttp"):
        raise McpStartupError(f"MCP server {name!r}: transport {kind!r} is not supported; use "
                              f"stdio (\"command\") or streamable HTTP (\"url\")")
    if has_command:
        command = _typed(name, entry, "command", str)
        args = _typed(name, entry, "args", list, [])
        env = _typed(name, entry, "env", dict, {})
        cwd = _typed(name, entry, "cwd", str, None)
        if not all(isinstance(a, str) for a in args):
            raise McpStartupError(f"MCP server {name!r}: \"args\" must be a list of strings")
        if not all(isinstance(v, str) for v in env.values()):
            raise McpStartupError(f"MCP server {name!r}: \"env\" values must be strings")
        params = StdioServerParameters(command=command, args=args, env=env or None,
                                       cwd=str(base / cwd) if cwd else None)
        return ServerConfig(name, stdio=params, secrets=tuple(env.values()) + tuple(args))
    url = _typed(name, entry, "url", str)
    headers = _typed(name, entry, "headers", dict, {})
    if not all(isinstance(v, str) for v in headers.values()):
        raise McpStartupError(f"MCP server {name!r}: \"headers\" values must be strings")
    if not url.startswith(("http://", "https://")):
        raise McpStartupError(f"MCP server {name!r}: \"url\" must be an http(s) URL")
    return ServerConfig(name, url=url, headers=headers, secrets=(url, *headers.values()))


_MISSING = object()


def _typed(name: str, entry: dict[str, Any], key: str, kind: type, default: Any = _MISSING) -> Any:
    value = entry.get(key, default)
    if value is _MISSING or not isinstance(value, kind) and value is not default:
        raise McpStartupError(f"MCP server {name!r}: \"{key}\" must be a {kind.__name__}")
    return value


def _innermost(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _reason(exc: BaseException, secrets: tuple[str, ...]) -> str:
    """A one-line cause: the innermost error of an exception group, with secrets masked."""
    exc = _innermost(exc)
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    for secret in sorted(secrets, key=len, reverse=True):
        text = mask_secret(text, secret)
    return text.splitlines()[0][:500] if text else type(exc).__name__


@contextlib.asynccontextmanager
async def _http_transport(url: str, headers: dict[str, str], statuses: list[int],
                          pin: Pin | None = None) -> AsyncIterator[Any]:
    """Streamable HTTP with the configured headers (the SDK takes them via its httpx2 client).

    Error statuses are recorded because the SDK reports a 401 or 500 only as "Server returned an
    error response", and the status is what an operator needs to see.
    """

    async def record(response: httpx2.Response) -> None:
        if response.status_code >= 400:
            statuses.append(response.status_code)

    # The SDK's defaults (responses may stream), or a run's server's short ones.
    timeout = httpx2.Timeout(30.0, read=300.0) if pin is None else PIN_TIMEOUT
    transport = None if pin is None else PinnedTransport(pin)
    async with (httpx2.AsyncClient(headers=headers, timeout=timeout, transport=transport,
                                   follow_redirects=False,
                                   event_hooks={"response": [record]}) as http,
                streamable_http_client(url, http_client=http) as streams):
        yield streams


class McpConnection:
    """One server's client session, opened and closed by a task of its own."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self._client: Client | None = None
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[list[mcp_types.Tool]] | None = None
        self._http_statuses: list[int] = []
        # The answers of each call in flight (`engine/tools/elicitation.py`), for the server's
        # `elicitation/create` requests.
        self._asking: list[elicitation.Answers] = []

    async def open(self, timeout: float) -> list[mcp_types.Tool]:
        """Connect and list the server's tools; raise `McpStartupError` saying why not."""
        self._ready = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._own(), name=f"mcp:{self.config.name}")
        try:
            return await asyncio.wait_for(asyncio.shield(self._ready), timeout)
        except BaseException as exc:
            await self.close()
            if isinstance(exc, asyncio.CancelledError):
                raise
            reason = (f"no answer within {timeout:g} s" if isinstance(exc, TimeoutError)
                      else _reason(exc, self.config.secrets))
            if self._http_statuses:
                reason += f" (HTTP {self._http_statuses[-1]})"
            elif self.config.stdio is not None and not isinstance(_innermost(exc), OSError):
                reason += " (the server's stderr is in the gateway's log)"
            raise McpStartupError(f"MCP server {self.config.name!r} ({self.config.describe()}) "
                                  f"failed to start: {reason}") from None

    async def _own(self) -> None:
        ready = self._ready
        assert ready is not None
        config = self.config
        target: Any = (config.stdio if config.stdio is not None
                       else _http_transport(config.url or "", config.headers,
                                            self._http_statuses, config.pin))
        try:
            async with Client(target, cache=None, client_info=mcp_types.Implementation(
                    name="gateway", version="0.1.0"),
                    elicitation_callback=self._elicit) as client:
                tools = await _list_tools(client)
                self._client = client
                ready.set_result(tools)
                await self._stop.wait()
        except Exception as exc:  # noqa: BLE001  (any failure is reported, never raised here)
            if not ready.done():
                ready.set_exception(exc)
            else:
                log.warning("MCP server %r closed with an error: %s", config.name,
                            _reason(exc, config.secrets))
        finally:
            self._client = None

    async def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        client = self._client
        if client is None:
            raise McpToolError(f"MCP server {self.config.name!r} is not connected")
        answers = elicitation.current()
        if answers is not None:
            self._asking.append(answers)
        try:
            context = current_tool_context()
            meta = (mcp_types.RequestParamsMeta(**context.mcp_meta())  # type: ignore[typeddict-item]
                    if context is not None else None)
            result = await client.call_tool(tool, arguments, meta=meta,
                                            progress_callback=_progress_of(tool_status.current()))
        except Exception as exc:  # noqa: BLE001  (transport errors become the model's error text)
            raise McpToolError(f"MCP server {self.config.name!r} failed: "
                               f"{_reason(exc, self.config.secrets)}") from None
        finally:
            if answers is not None:
                self._asking.remove(answers)
        return result_output(result)

    async def lists(self, uri: str, max_pages: int = 10) -> bool:
        """Whether the server lists the resource `uri` (`resources/list`, at most `max_pages`
        pages): the only resources the gateway reads from it."""
        client = self._client
        if client is None:
            return False
        cursor: str | None = None
        for _ in range(max_pages):
            page = await client.list_resources(cursor=cursor)
            if any(str(r.uri) == uri for r in page.resources):
                return True
            cursor = page.next_cursor
            if cursor is None:
                break
        return False

    async def read(self, uri: str) -> list[dict[str, Any]]:
        """The resource's contents (`resources/read`) as MCP content dicts: `{uri, mimeType?,
        text}` or `{uri, mimeType?, blob}`."""
        client = self._client
        if client is None:
            raise McpToolError(f"MCP server {self.config.name!r} is not connected")
        result = await client.read_resource(uri)
        return [c.model_dump(mode="json", by_alias=True, exclude_none=True,
                             include={"uri", "mime_type", "text", "blob"})
                for c in result.contents]

    async def _elicit(self, context: Any, params: mcp_types.ElicitRequestParams
                      ) -> mcp_types.ElicitResult | mcp_types.ErrorData:
        """The server asks the user something during a tool call: answered from the call's
        answers, or, when it has none yet, `cancel` (the call is abandoned and the run pauses
        with the question; the tool is called again once the user answered).

        A server on MCP 2026-07-28 asks in the call's result (`InputRequiredResult`), which the
        SDK answers from the calling task: the call's own answers. An older server sends
        `elicitation/create` on the connection, naming no call: it is answered when one call
        is in flight on this connection, and refused otherwise, as a request that is not a
        form is."""
        schema = getattr(params, "requested_schema", None)
        answers = elicitation.current() or (self._asking[0] if len(self._asking) == 1 else None)
        if answers is None or schema is None:
            return mcp_types.ErrorData(code=mcp_types.INVALID_REQUEST,
                                       message="The gateway cannot take this request for input")
        answer = answers.next(params.message, dict(schema))
        if answer is None:
            return mcp_types.ElicitResult(action="cancel")
        return mcp_types.ElicitResult(action=answer["action"], content=answer.get("content"))

    async def close(self) -> None:
        """End the session from its own task; a server that will not stop is abandoned."""
        task = self._task
        if task is None:
            return
        self._stop.set()
        if self._ready is not None and not self._ready.done():
            task.cancel()  # still connecting: nothing to close gracefully
        with contextlib.suppress(asyncio.CancelledError, TimeoutError):
            await asyncio.wait_for(task, CLOSE_TIMEOUT_SECONDS)


def _progress_of(status: tool_status.ToolStatus | None) -> Any:
    """The call's `notifications/progress` as its status (asking for them: the SDK sends a
    progress token with a call that has a callback); None outside a run's tool call."""
    if status is None:
        return None

    async def progressed(progress: float, total: float | None, message: str | None) -> None:
        detail = message if message else (f"{progress:g} of {total:g}" if total is not None
                                          else f"{progress:g}")
        try:
            await status.report(detail, progress=progress, total=total)
        except Exception:  # noqa: BLE001  (a hint that cannot be shown must not end the session)
            log.warning("a progress notification of MCP tool call %s was not shown",
                        status.tool_call_id, exc_info=True)

    return progressed


async def _list_tools(client: Client) -> list[mcp_types.Tool]:
    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    for _ in range(100):  # a server whose cursor never ends cannot hang start-up
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


def result_output(result: mcp_types.CallToolResult) -> Any:
    """An MCP tool result as JSON for the model: structured content if any, else the text."""
    if result.is_error:
        raise McpToolError(_content_text(result.content) or "the tool reported an error")
    if result.structured_content is not None:
        return result.structured_content
    return _content_text(result.content)


def _content_text(blocks: list[Any]) -> str:
    parts = []
    for block in blocks:
        if isinstance(block, mcp_types.TextContent):
            parts.append(block.text)
        elif isinstance(block, mcp_types.ImageContent | mcp_types.AudioContent):
            parts.append(f"[{block.type} {block.mime_type}, {len(block.data)} base64 characters]")
        elif isinstance(block, mcp_types.ResourceLink):
            parts.append(f"[resource {block.uri}]")
        elif isinstance(block, mcp_types.EmbeddedResource):
            resource = block.resource
            if isinstance(resource, mcp_types.TextResourceContents):
                parts.append(resource.text)
            else:
                parts.append(f"[resource {resource.uri}, {resource.mime_type or 'binary'}]")
    return "\n".join(parts)


def tool_name(name: str) -> str:
    """A name function calling accepts: letters, digits, `_` and `-`, at most 64 characters."""
    return _TOOL_NAME.sub("_", name)[:_MAX_NAME] or "tool"


def _specs(listed: list[tuple[McpConnection, list[mcp_types.Tool]]],
           namespaced: bool = False) -> dict[str, ServerToolSpec]:
    """Name every tool; a name offered by several servers (or every name, `namespaced`)
    becomes `<server>__<tool>`."""
    offered: dict[str, int] = {}
    for _, tools in listed:
        for name in {tool_name(t.name) for t in tools}:
            offered[name] = offered.get(name, 0) + 1
    specs: dict[str, ServerToolSpec] = {}
    for connection, tools in listed:
        for tool in tools:
            name = tool_name(tool.name)
            if offered[name] > 1 or namespaced:
                name = tool_name(f"{connection.config.name}__{name}")
            if name in specs:
                raise McpStartupError(f"MCP server {connection.config.name!r}: two tools are both "
                                      f"named {name!r} once made valid for the model")
            specs[name] = ServerToolSpec(
                name=name, description=tool.description or tool.title or tool.name,
                parameters=dict(tool.input_schema), call=_caller(connection, tool.name),
                approval=connection.config.approval, resources=connection)
    return specs


def _caller(connection: McpConnection, tool: str) -> Any:
    async def call(arguments: dict[str, Any]) -> Any:
        return await connection.call(tool, arguments)

    return call


async def open_mcp_tools(config_path: str, stack: contextlib.AsyncExitStack,
                         connect_timeout: float = CONNECT_TIMEOUT_SECONDS
                         ) -> dict[str, ServerToolSpec]:
    """Connect every configured server (concurrently) and return its tools as server tools.

    The sessions stay open until `stack` closes, which must happen in the task that called this
    (the app's lifespan). Raises `McpStartupError` if the config is wrong or any server fails.
    """
    configs = load_config(config_path)
    # httpx2 logs every request URL at INFO: noise per tool call, and a URL can carry a secret.
    logging.getLogger("httpx2").setLevel(logging.WARNING)
    connections = [McpConnection(config) for config in configs]
    outcomes = await asyncio.gather(*(c.open(connect_timeout) for c in connections),
                                    return_exceptions=True)
    failures = [o for o in outcomes if isinstance(o, BaseException)]
    try:
        if failures:
            for failure in failures:
                if not isinstance(failure, McpStartupError):
                    raise failure
            raise McpStartupError("; ".join(str(f) for f in failures))
        listed = [(c, tools) for c, tools in zip(connections, outcomes, strict=True)
                  if not isinstance(tools, BaseException)]
        specs = _specs(listed)
    except BaseException:
        await asyncio.gather(*(c.close() for c in connections))
        raise
    for connection, tools in listed:
        stack.push_async_callback(connection.close)
        log.info("MCP server %r connected: %d tool(s)", connection.config.name, len(tools))
    return specs


@dataclass
class RunMcpTools:
    """Servers one run brings with it (a Chorus message's `mcp`): their tools, named
    `<server>__<tool>`, for that run only; `close` when the run has ended."""

    tools: dict[str, ServerToolSpec] = field(default_factory=dict)
    connections: list[McpConnection] = field(default_factory=list)

    async def close(self) -> None:
        await asyncio.gather(*(c.close() for c in self.connections))


async def open_run_tools(servers: Sequence[tuple[str, str, dict[str, str], Pin | None]],
                         connect_timeout: float) -> RunMcpTools:
    """Connect each `(name, url, headers, pin)` server over streamable HTTP (at the pinned
    address, when one is given); a server that cannot be reached is left out (logged without
    its headers), the others' tools are offered."""
    logging.getLogger("httpx2").setLevel(logging.WARNING)
    connections = [McpConnection(ServerConfig(name, url=url, headers=headers,
                                              secrets=(url, *headers.values()), pin=pin))
                   for name, url, headers, pin in servers]
    outcomes = await asyncio.gather(*(c.open(connect_timeout) for c in connections),
                                    return_exceptions=True)
    listed = []
    for connection, outcome in zip(connections, outcomes, strict=True):
        if isinstance(outcome, BaseException):
            log.warning("%s", outcome)  # McpStartupError: names the server, never its secrets
        else:
            listed.append((connection, outcome))
    found = RunMcpTools(connections=[c for c, _ in listed])
    try:
        found.tools = _specs(listed, namespaced=True)
    except McpStartupError as exc:
        log.warning("%s", exc)
    return found
