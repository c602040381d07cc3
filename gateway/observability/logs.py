"""Log lines that carry the request id and the run id they belong to, as JSON or plain text.

The ids live in context variables: a run's task is created inside the request that started it,
so it inherits the request id, and sets its own run id; every line logged while handling either
(by any logger, ours or a library's) is stamped by one filter on the root handler.
"""

from __future__ import annotations

import contextvars
import json
import logging
import re
import sys
import time
import uuid
from typing import Any

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .redact import RedactUserKeys

request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("request_id",
                                                                         default=None)
run_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("run_id", default=None)

REQUEST_ID_HEADER = "x-request-id"
RUN_ID_HEADER = "x-run-id"
# An incoming id is echoed into logs and headers: only short, plain tokens are trusted.
_VALID_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_RESERVED = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}
# Fields libraries add that carry nothing for a log pipeline: uvicorn's `color_message` (the
# message again, with ANSI escapes).
_DROPPED = {"color_message"}
# A value whose only text is its address (`<object object at 0x7f...>`, a library's sentinel
# such as litellm's `litellm_redacted`): noise, and different on every line.
_ADDRESS_ONLY = re.compile(r"^<[\w. ]+ at 0x[0-9a-fA-F]+>$")


class ContextFilter(logging.Filter):
    """Stamps every record with the current request and run ids (None outside of them)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = request_id.get()
        record.run_id = run_id.get()
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: what log collectors parse without a custom grammar. A field
    without a value (no request or run id outside of them) is left out, not written `null`."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():  # the ids, and `extra=` fields
            if key in _RESERVED or key in _DROPPED or key in line or value is None:
                continue
            if not isinstance(value, (str, int, float, bool)):
                value = repr(value)
                if _ADDRESS_ONLY.match(value):
                    continue
            line[key] = value
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """The plain format for a terminal, with the ids appended when there are any."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        ids = [f"{name}={value}" for name in ("request_id", "run_id")
               if (value := getattr(record, name, None))]
        return f"{text} [{' '.join(ids)}]" if ids else text


JsonFormatter.converter = TextFormatter.converter = time.gmtime


def configure(level: int, log_format: str = "auto") -> None:
    """The root handler on stderr: JSON unless `auto` finds a terminal there."""
    use_json = log_format == "json" or (log_format == "auto" and not sys.stderr.isatty())
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if use_json else TextFormatter())
    handler.addFilter(ContextFilter())
    handler.addFilter(RedactUserKeys())  # no user scope in an access-log line
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)


def configure_levels(level_name: str, log_format: str = "auto") -> None:
    """`configure` for a `--log-level` name: one level for the gateway's loggers (and the root),
    so the flag means what it says; alembic's only from warnings up."""
    level = logging.DEBUG if level_name == "trace" else getattr(logging, level_name.upper())
    configure(level, log_format)
    logging.getLogger("gateway").setLevel(level)
    logging.getLogger("alembic").setLevel(max(level, logging.WARNING))


class RequestIdMiddleware:
    """Takes `X-Request-Id` from the caller (a proxy's id) or makes one, and echoes it back.

    The outermost middleware, so it is also where the headers of every HTTP response are set:
    `X-Content-Type-Options: nosniff` on JSON, problem+json and streams alike, so no browser
    ever guesses a type from a body a client wrote into (a message, a thread name).
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = next((v.decode("latin-1") for k, v in scope["headers"]
                      if k == REQUEST_ID_HEADER.encode()), "")
        rid = given if _VALID_ID.match(given) else uuid.uuid4().hex
        request_id.set(rid)  # each request runs in its own task: its own copy of the context

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers[REQUEST_ID_HEADER] = rid
                headers["x-content-type-options"] = "nosniff"
                # The server logs its access line as it sends this: a run request's line
                # names the run it started (its `X-Run-Id`).
                if RUN_ID_HEADER in headers:
                    run_id.set(headers[RUN_ID_HEADER])
            await send(message)

        await self.app(scope, receive, send_with_id)
