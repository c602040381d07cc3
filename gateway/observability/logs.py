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

from .redact import RedactSecrets

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
    handler.addFilter(RedactSecrets())  # no user scope nor Chorus secret in a log line
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


def valid_request_id(given: bytes | None) -> str:
    """The request's id: the caller's `X-Request-Id` (a proxy's id) if it is a short plain
    token, else a new one. The front (`server/front.py`) echoes it on every response."""
    if given is not None:
        text = given.decode("latin-1")
        if _VALID_ID.match(text):
            return text
    return uuid.uuid4().hex
