"""`AsyncClient`: the gateway from asyncio code (FastAPI/Starlette backends, workers). The same
calls as `Client`, awaited; a run's stream is an async iterator."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx

from .calls import READ_TIMEOUT_SECONDS, Call, Calls, answer_of, auth_headers
from .events import Event, GatewayError, RunCursor, SseParser, StreamView
from .policy import RECONNECTABLE, Reconnects


class AsyncRunStream(StreamView):
    """`RunStream` for `AsyncClient`: `async for event in stream`, reconnecting the same way."""

    def __init__(self, client: AsyncClient, call: Call, cursor: RunCursor | None = None) -> None:
        self._client, self._call = client, call
        self.cursor = cursor or RunCursor()

    async def __aiter__(self) -> AsyncIterator[Event]:
        call, reconnects = self._call, Reconnects(self._client.max_reconnects)
        while True:
            try:
                async for event in self._read(call):
                    reconnects.progress()
                    yield event
            except RECONNECTABLE as exc:
                reconnects.note(exc)
            if self.cursor.ended:
                return
            await asyncio.sleep(reconnects.next_delay())
            call = self._client.calls.join(*self.cursor.resume_target(),
                                           self.cursor.last_event_id)

    async def _read(self, call: Call) -> AsyncIterator[Event]:
        http = self._client.http
        async with http.stream(call.method, call.path, params=call.params, json=call.body,
                               headers=call.headers) as response:
            if response.status_code >= 400:
                await response.aread()
                raise GatewayError.from_response(response.status_code, response.text)
            self.cursor.note_headers(response.headers)
            parser = SseParser()
            async for line in response.aiter_lines():
                for event in parser.feed(line):
                    if self.cursor.accept(event):
                        yield event
                if self.cursor.ended:
                    return

    async def collect(self) -> list[Event]:
        """Read the stream to its end."""
        return [event async for event in self]


class AsyncClient:
    """`Client`, awaited: the same constructor and methods (`transport` is an
    `httpx.AsyncBaseTransport`); `async with AsyncClient(...) as client:` closes it."""

    def __init__(self, base_url: str, api_key: str | None = None, user_key: str | None = None,
                 *, token: str | None = None, timeout: float = READ_TIMEOUT_SECONDS,
                 max_reconnects: int = 5, transport: httpx.AsyncBaseTransport | None = None,
                 **http_options: Any) -> None:
        self.calls = Calls(user_key)
        self.max_reconnects = max_reconnects
        self.http = httpx.AsyncClient(
            base_url=base_url, transport=transport, timeout=httpx.Timeout(timeout, connect=10),
            headers={**auth_headers(api_key, token), **http_options.pop("headers", {})},
            **http_options)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self.http.aclose()

    async def _send(self, call: Call) -> httpx.Response:
        timeout = httpx.USE_CLIENT_DEFAULT if call.timeout is None else httpx.Timeout(
            call.timeout, connect=10)
        return await self.http.request(call.method, call.path, params=call.params,
                                       json=call.body, headers=call.headers, timeout=timeout)

    async def _json(self, call: Call) -> dict[str, Any]:
        response = await self._send(call)
        return answer_of(response.status_code, response.text, response.json)

    def run(self, message: str | Mapping[str, Any], thread_id: str | None = None,
            previous_run_id: str | None = None, **request: Any) -> AsyncRunStream:
        """`Client.run`: the stream starts when it is first iterated."""
        if previous_run_id:
            request["previousRunId"] = previous_run_id
        return AsyncRunStream(self, self.calls.run(message, thread_id, request))

    def join(self, thread_id: str, run_id: str, after: int | None = None) -> AsyncRunStream:
        cursor = RunCursor(thread_id, run_id, after)
        return AsyncRunStream(self, self.calls.join(thread_id, run_id, after), cursor)

    def submit_tool_results(self, thread_id: str, run_id: str, results: Mapping[str, Any],
                            **request: Any) -> AsyncRunStream:
        return AsyncRunStream(self, self.calls.tool_results(thread_id, run_id, results,
                                                            request))

    async def cancel(self, thread_id: str, run_id: str) -> dict[str, Any]:
        return await self._json(self.calls.cancel(thread_id, run_id))

    async def batch(self, runs: list[Mapping[str, Any]]) -> dict[str, Any]:
        """Start several runs at once (`POST /v1/threads/runs/batch`): each a run request
        (`message` may be text; `threadId` for an existing thread). Each item of the answer's
        `runs` has its ids, or the `error` that refused it."""
        return await self._json(self.calls.batch(runs))

    async def cancel_runs(self, thread_ids: list[str] | None = None,
                          metadata: Mapping[str, str] | None = None) -> dict[str, Any]:
        """Cancel the active runs of the user's threads named by id or matching `metadata`."""
        return await self._json(self.calls.cancel_runs(thread_ids, metadata))

    async def run_status(self, thread_id: str, run_id: str) -> dict[str, Any]:
        return await self._json(self.calls.run_status(thread_id, run_id))

    async def run_and_wait(self, message: str | Mapping[str, Any],
                           thread_id: str | None = None, previous_run_id: str | None = None,
                           **request: Any) -> dict[str, Any]:
        """Start a run as `run` does and answer its result once it has ended, without a stream:
        `status`, `threadId`, `runId`, `messages` (what the run added: its input, then its
        answer), `usage` and, for a failed or cancelled run, `error`. A run longer than the
        gateway's wait is waited for again, never started twice."""
        if previous_run_id:
            request["previousRunId"] = previous_run_id
        call: Call | None = self.calls.run_wait(message, thread_id, request)
        while call is not None:
            response = await self._send(call)
            body = answer_of(response.status_code, response.text, response.json)
            call = self.calls.waited(response.status_code, body)
        return body

    async def threads(self, limit: int | None = None, cursor: str | None = None,
                      metadata: Mapping[str, str] | None = None,
                      **filters: Any) -> dict[str, Any]:
        return await self._json(self.calls.threads(limit, cursor, metadata, **filters))

    async def thread(self, thread_id: str) -> dict[str, Any]:
        return await self._json(self.calls.thread(thread_id))

    async def messages(self, thread_id: str, limit: int | None = None,
                       cursor: str | None = None) -> dict[str, Any]:
        return await self._json(self.calls.messages(thread_id, limit, cursor))

    async def runs(self, thread_id: str, limit: int | None = None,
                   cursor: str | None = None) -> dict[str, Any]:
        return await self._json(self.calls.runs(thread_id, limit, cursor))

    async def create_cron(self, schedule: Mapping[str, Any], message: str,
                          **fields: Any) -> dict[str, Any]:
        return await self._json(self.calls.create_cron(schedule, message, fields))

    async def crons(self) -> list[dict[str, Any]]:
        crons: list[dict[str, Any]] = (await self._json(self.calls.crons()))["crons"]
        return crons

    async def delete_cron(self, cron_id: str) -> None:
        await self._json(self.calls.delete_cron(cron_id))
