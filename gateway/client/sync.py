"""`Client`: the gateway from Python code that blocks (scripts, Django/Flask backends, tests)."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from typing import Any

import httpx

from .calls import READ_TIMEOUT_SECONDS, Call, Calls, answer_of, auth_headers
from .events import Event, GatewayError, RunCursor, SseParser, StreamView
from .policy import RECONNECTABLE, Reconnects


class RunStream(StreamView):
    """A run's events, in order, each once, to its end (`RUN_FINISHED` or `RUN_ERROR`).

    Iterate it once. A connection that drops (or a server that cannot read the run's log) is
    reopened with `Last-Event-ID`, and the stream goes on after the last event received;
    `GatewayError` (`STREAM_LOST`) only when the gateway stays unreachable. `thread_id` and
    `run_id` are known as soon as the gateway answers, before the first event.
    """

    def __init__(self, client: Client, call: Call, cursor: RunCursor | None = None) -> None:
        self._client, self._call = client, call
        self.cursor = cursor or RunCursor()

    def __iter__(self) -> Iterator[Event]:
        call, reconnects = self._call, Reconnects(self._client.max_reconnects)
        while True:
            try:
                for event in self._read(call):
                    reconnects.progress()
                    yield event
            except RECONNECTABLE as exc:
                reconnects.note(exc)
            if self.cursor.ended:
                return
            time.sleep(reconnects.next_delay())
            call = self._client.calls.join(*self.cursor.resume_target(),
                                           self.cursor.last_event_id)

    def _read(self, call: Call) -> Iterator[Event]:
        with self._client.http.stream(call.method, call.path, params=call.params,
                                      json=call.body, headers=call.headers) as response:
            if response.status_code >= 400:
                response.read()
                raise GatewayError.from_response(response.status_code, response.text)
            self.cursor.note_headers(response.headers)
            parser = SseParser()
            for line in response.iter_lines():
                for event in parser.feed(line):
                    if self.cursor.accept(event):
                        yield event
                if self.cursor.ended:
                    return

    def collect(self) -> list[Event]:
        """Read the stream to its end."""
        return list(self)


class Client:
    """The gateway's Tambo v1 API: start and follow runs, reconnect, cancel, answer client
    tools, list threads and messages.

    `api_key` is sent as `x-api-key`; `user_key` names the end user whose threads these are
    (`userKey`); `token` is a signed-in user's gateway access token (`Authorization: Bearer`,
    instead of `user_key`). `transport` and `http_options` go to `httpx.Client`.
    """

    def __init__(self, base_url: str, api_key: str | None = None, user_key: str | None = None,
                 *, token: str | None = None, timeout: float = READ_TIMEOUT_SECONDS,
                 max_reconnects: int = 5, transport: httpx.BaseTransport | None = None,
                 **http_options: Any) -> None:
        self.calls = Calls(user_key)
        self.max_reconnects = max_reconnects
        self.http = httpx.Client(
            base_url=base_url, transport=transport, timeout=httpx.Timeout(timeout, connect=10),
            headers={**auth_headers(api_key, token), **http_options.pop("headers", {})},
            **http_options)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self.http.close()

    def _send(self, call: Call) -> httpx.Response:
        timeout = httpx.USE_CLIENT_DEFAULT if call.timeout is None else httpx.Timeout(
            call.timeout, connect=10)
        return self.http.request(call.method, call.path, params=call.params, json=call.body,
                                     headers=call.headers, timeout=timeout)

    def _json(self, call: Call) -> dict[str, Any]:
        response = self._send(call)
        return answer_of(response.status_code, response.text, response.json)

    def run(self, message: str | Mapping[str, Any], thread_id: str | None = None,
            previous_run_id: str | None = None, **request: Any) -> RunStream:
        """Start a run (in a new thread unless `thread_id`) and stream its events. `message`
        is text, or a whole Tambo input message. A thread that has messages is continued
        after its last run: `previous_run_id` (the thread's `lastCompletedRunId`). `request`
        adds fields of the run request (`tools`, `availableComponents`, `model`, ...)."""
        if previous_run_id:
            request["previousRunId"] = previous_run_id
        return RunStream(self, self.calls.run(message, thread_id, request))

    def join(self, thread_id: str, run_id: str, after: int | None = None) -> RunStream:
        """Follow a run, running or ended, from after event `after` (from its start: None)."""
        cursor = RunCursor(thread_id, run_id, after)
        return RunStream(self, self.calls.join(thread_id, run_id, after), cursor)

    def submit_tool_results(self, thread_id: str, run_id: str, results: Mapping[str, Any],
                            **request: Any) -> RunStream:
        """Answer the client tool calls run `run_id` paused for (by tool call id; a string is
        the result's text, anything else is sent as JSON): a new run continues the turn."""
        return RunStream(self, self.calls.tool_results(thread_id, run_id, results, request))

    def cancel(self, thread_id: str, run_id: str) -> dict[str, Any]:
        """Cancel a run (idempotent); its stream ends with `RUN_ERROR` `CANCELLED`."""
        return self._json(self.calls.cancel(thread_id, run_id))

    def batch(self, runs: list[Mapping[str, Any]]) -> dict[str, Any]:
        """Start several runs at once (`POST /v1/threads/runs/batch`): each a run request
        (`message` may be text; `threadId` for an existing thread). Each item of the answer's
        `runs` has its ids, or the `error` that refused it."""
        return self._json(self.calls.batch(runs))

    def cancel_runs(self, thread_ids: list[str] | None = None,
                    metadata: Mapping[str, str] | None = None) -> dict[str, Any]:
        """Cancel the active runs of the user's threads named by id or matching `metadata`."""
        return self._json(self.calls.cancel_runs(thread_ids, metadata))

    def run_status(self, thread_id: str, run_id: str) -> dict[str, Any]:
        return self._json(self.calls.run_status(thread_id, run_id))

    def run_and_wait(self, message: str | Mapping[str, Any], thread_id: str | None = None,
                     previous_run_id: str | None = None, **request: Any) -> dict[str, Any]:
        """Start a run as `run` does and answer its result once it has ended, without a stream:
        `status`, `threadId`, `runId`, `messages` (what the run added: its input, then its
        answer), `usage` and, for a failed or cancelled run, `error`. A run longer than the
        gateway's wait is waited for again, never started twice."""
        if previous_run_id:
            request["previousRunId"] = previous_run_id
        call: Call | None = self.calls.run_wait(message, thread_id, request)
        while call is not None:
            response = self._send(call)
            body = answer_of(response.status_code, response.text, response.json)
            call = self.calls.waited(response.status_code, body)
        return body

    def threads(self, limit: int | None = None, cursor: str | None = None,
                metadata: Mapping[str, str] | None = None, **filters: Any) -> dict[str, Any]:
        """A page of the user's threads: `threads`, `hasMore`, `nextCursor`; `metadata` (string
        values by key) and `filters` (`status`, `agent`, `namePrefix`, `createdAfter`,
        `createdBefore`, `updatedAfter`, `updatedBefore`, `count=True`) narrow it."""
        return self._json(self.calls.threads(limit, cursor, metadata, **filters))

    def thread(self, thread_id: str) -> dict[str, Any]:
        return self._json(self.calls.thread(thread_id))

    def messages(self, thread_id: str, limit: int | None = None,
                 cursor: str | None = None) -> dict[str, Any]:
        """A page of a thread's messages: `messages`, `hasMore`, `nextCursor`."""
        return self._json(self.calls.messages(thread_id, limit, cursor))

    def runs(self, thread_id: str, limit: int | None = None,
             cursor: str | None = None) -> dict[str, Any]:
        """A page of a thread's runs, newest first: `runs`, `hasMore`, `nextCursor`."""
        return self._json(self.calls.runs(thread_id, limit, cursor))

    def create_cron(self, schedule: Mapping[str, Any], message: str,
                    **fields: Any) -> dict[str, Any]:
        """Schedule runs (docs/crons.md): `schedule` is `{"cron": "0 8 * * 1-5", "timezone":
        "Europe/Paris"}` or `{"every": 3600}`; `fields` adds `agent`, `threadId`, `metadata`,
        `webhook`, `multitaskStrategy`. The schedule as created (its `id`, `nextRunAt`)."""
        return self._json(self.calls.create_cron(schedule, message, fields))

    def crons(self) -> list[dict[str, Any]]:
        """The user's schedules."""
        crons: list[dict[str, Any]] = (self._json(self.calls.crons()))["crons"]
        return crons

    def delete_cron(self, cron_id: str) -> None:
        self._json(self.calls.delete_cron(cron_id))
