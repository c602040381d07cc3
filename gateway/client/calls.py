"""The gateway's HTTP calls as data (method, path, query, body, headers), built once for both
clients, so `Client` and `AsyncClient` cannot drift apart in what they send."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from .events import GatewayError

SSE = "text/event-stream"
# Reading a stream waits at most this long for a byte; the gateway sends a heartbeat comment
# every 15 s by default (`GATEWAY_HEARTBEAT_SECONDS`), so a longer silence is a dead connection.
READ_TIMEOUT_SECONDS = 60.0
# A run-and-wait call is held by the gateway up to `GATEWAY_RUN_WAIT_SECONDS` (at most an
# hour), then answered 202 and asked again: its read waits at most that long.
WAIT_TIMEOUT_SECONDS = 3660.0


@dataclass(frozen=True)
class Call:
    method: str
    path: str
    params: dict[str, str] = field(default_factory=dict)
    body: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    timeout: float | None = None  # the read's bound, if not the client's own


def answer_of(status: int, text: str, json_body: Callable[[], Any]) -> dict[str, Any]:
    """A JSON answer's body (`{}` for 204), or the `GatewayError` an error answer is;
    `json_body` reads the body as JSON."""
    if status >= 400:
        raise GatewayError.from_response(status, text)
    if status == 204:
        return {}
    body: dict[str, Any] = json_body()
    return body


def _segment(value: str) -> str:
    return quote(value, safe="")


def user_message(message: str | Mapping[str, Any]) -> dict[str, Any]:
    """A plain string becomes a user text message; a mapping is sent as it is (content blocks,
    attachments, `additionalContext`)."""
    if isinstance(message, str):
        return {"role": "user", "content": [{"type": "text", "text": message}]}
    return dict(message)


def tool_results_message(results: Mapping[str, Any]) -> dict[str, Any]:
    """Answers to a paused run's client tool calls, by tool call id: a string is sent as the
    result's text, anything else as its JSON."""
    blocks = [{"type": "tool_result", "toolUseId": call_id,
               "content": [{"type": "text",
                            "text": value if isinstance(value, str) else json.dumps(value)}]}
              for call_id, value in results.items()]
    return {"role": "user", "content": blocks}


class Calls:
    """Every call the clients make, with the user scope added where the gateway reads it."""

    def __init__(self, user_key: str | None) -> None:
        self.user_key = user_key

    def _scoped(self, params: Mapping[str, Any] | None = None) -> dict[str, str]:
        given = {k: str(v) for k, v in (params or {}).items() if v is not None}
        return {"userKey": self.user_key, **given} if self.user_key else given

    def run(self, message: str | Mapping[str, Any], thread_id: str | None,
            request: Mapping[str, Any]) -> Call:
        body = {"message": user_message(message), **request}
        path = f"/v1/threads/{_segment(thread_id)}/runs" if thread_id else "/v1/threads/runs"
        return Call("POST", path, self._scoped(), body, {"accept": SSE})

    def run_wait(self, message: str | Mapping[str, Any], thread_id: str | None,
                 request: Mapping[str, Any]) -> Call:
        body = {"message": user_message(message), **request}
        path = (f"/v1/threads/{_segment(thread_id)}/runs/wait" if thread_id
                else "/v1/threads/runs/wait")
        return Call("POST", path, self._scoped(), body, {"accept": "application/json"},
                    WAIT_TIMEOUT_SECONDS)

    def waited(self, status: int, body: Mapping[str, Any]) -> Call | None:
        """After a run-and-wait answer: the call that waits again for the run a 202 named (the
        gateway's wait ran out first), or None once the run has ended."""
        if status != 202:
            return None
        return Call("GET", f"/v1/threads/{_segment(body['threadId'])}/runs/"
                    f"{_segment(body['runId'])}/wait", self._scoped(), None,
                    {"accept": "application/json"}, WAIT_TIMEOUT_SECONDS)

    def batch(self, runs: list[Mapping[str, Any]]) -> Call:
        """Each run's `message` may be text, as `run` takes it."""
        items = [{**run, "message": user_message(run["message"])} for run in runs]
        return Call("POST", "/v1/threads/runs/batch", self._scoped(), {"runs": items})

    def cancel_runs(self, thread_ids: list[str] | None,
                    metadata: Mapping[str, str] | None) -> Call:
        body: dict[str, Any] = {}
        if thread_ids:
            body["threadIds"] = list(thread_ids)
        if metadata:
            body["metadata"] = dict(metadata)
        return Call("POST", "/v1/threads/runs/cancel", self._scoped(), body)

    def join(self, thread_id: str, run_id: str, after: int | None) -> Call:
        headers = {"accept": SSE}
        if after is not None:
            headers["last-event-id"] = str(after)
        return Call("GET", f"/v1/threads/{_segment(thread_id)}/runs/{_segment(run_id)}",
                    self._scoped(), None, headers)

    def tool_results(self, thread_id: str, run_id: str, results: Mapping[str, Any],
                     request: Mapping[str, Any]) -> Call:
        body = {"message": tool_results_message(results), "previousRunId": run_id, **request}
        return Call("POST", f"/v1/threads/{_segment(thread_id)}/runs", self._scoped(), body,
                    {"accept": SSE})

    def cancel(self, thread_id: str, run_id: str) -> Call:
        return Call("DELETE", f"/v1/threads/{_segment(thread_id)}/runs/{_segment(run_id)}",
                    self._scoped())

    def get(self, path: str, **params: Any) -> Call:
        return Call("GET", path, self._scoped(params), None, {"accept": "application/json"})

    def run_status(self, thread_id: str, run_id: str) -> Call:
        return self.get(f"/v1/threads/{_segment(thread_id)}/runs/{_segment(run_id)}")

    def threads(self, limit: int | None, cursor: str | None,
                metadata: Mapping[str, str] | None = None, **filters: Any) -> Call:
        """The thread list; `metadata` and `filters` (`status`, `agent`, `namePrefix`,
        `createdAfter`, ..., `count`) narrow it (`GET /v1/threads`)."""
        given = {f"metadata.{key}": value for key, value in (metadata or {}).items()}
        flags = {k: str(v).lower() if isinstance(v, bool) else v for k, v in filters.items()}
        return self.get("/v1/threads", limit=limit, cursor=cursor, **given, **flags)

    def thread(self, thread_id: str) -> Call:
        return self.get(f"/v1/threads/{_segment(thread_id)}")

    def messages(self, thread_id: str, limit: int | None, cursor: str | None) -> Call:
        return self.get(f"/v1/threads/{_segment(thread_id)}/messages", limit=limit,
                        cursor=cursor)

    def runs(self, thread_id: str, limit: int | None, cursor: str | None) -> Call:
        return self.get(f"/v1/threads/{_segment(thread_id)}/runs", limit=limit, cursor=cursor)

    def create_cron(self, schedule: Mapping[str, Any], message: str,
                    fields: Mapping[str, Any]) -> Call:
        body = {"schedule": dict(schedule), "message": message, **fields}
        return Call("POST", "/v1/crons", self._scoped(), body, {"accept": "application/json"})

    def crons(self) -> Call:
        return self.get("/v1/crons")

    def delete_cron(self, cron_id: str) -> Call:
        return Call("DELETE", f"/v1/crons/{_segment(cron_id)}", self._scoped())


def auth_headers(api_key: str | None, token: str | None) -> dict[str, str]:
    headers = {}
    if api_key:
        headers["x-api-key"] = api_key
    if token:
        headers["authorization"] = f"Bearer {token}"
    return headers
