"""Secrets out of what is logged or shown: user scopes and Chorus connection secrets in the
paths log lines carry, and known secret values (an API key, a password) in error messages.

uvicorn's access log writes each request's path with its query string, and a `userKey` there is
a user's scope: whoever reads the log could list, read and delete that user's threads. A Chorus
connection string carries its secret in the path itself (`/v1/chorus/{secret}`), and whoever has
it posts runs as the connection. Other lines name a path too (an error's, a slow reader's). The
one filter on the root handler (`RedactSecrets`) rewrites every record's message and string
arguments before any handler formats them, so no logger (ours, uvicorn's, a library's) can
write either.

`mask_secret` masks a secret where it stands as a value, not wherever its characters occur: a
dummy key such as `x` must not turn `OpenAIException` into `OpenAIE***ception` (and a short key
would otherwise say which letters it has by the holes it leaves).
"""

from __future__ import annotations

import logging
import re

_SCOPE_PARAM = re.compile(r"(?i)([?&](?:userKey|contextKey)=)[^&#\s]*")
# The path segment after the Chorus prefix is the connection's secret, whatever it looks like.
CHORUS_PREFIX = "/v1/chorus/"
_CHORUS_SECRET = re.compile(r"(?i)(/v1/chorus/)[^/?#\s\"')]+")
REDACTED = "[redacted]"
# The characters of a token (a word, a key): a secret next to one is part of a longer token, not
# the secret's value standing alone.
_TOKEN = r"[A-Za-z0-9_\-]"


def mask_secret(text: str, secret: str | None, mask: str = "***") -> str:
    """`text` with every occurrence of `secret` that is not inside a longer token (word,
    key, URL part) replaced by `mask`."""
    if not secret:
        return text
    pattern = f"(?<!{_TOKEN}){re.escape(secret)}(?!{_TOKEN})"
    return re.sub(pattern, mask, text)


def redact_query(path: str) -> str:
    return _SCOPE_PARAM.sub(lambda m: m.group(1) + REDACTED, path)


def redact_path(text: str) -> str:
    """`text` without the user scopes of a query string nor a Chorus connection's secret."""
    if "=" in text:
        text = redact_query(text)
    if CHORUS_PREFIX in text.lower():
        text = _CHORUS_SECRET.sub(lambda m: m.group(1) + REDACTED, text)
    return text


def _redacted(value: object) -> object:
    return redact_path(value) if isinstance(value, str) else value


class RedactSecrets(logging.Filter):
    """Every record's message and string arguments through `redact_path`."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = redact_path(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(_redacted(a) for a in record.args)
        elif isinstance(record.args, dict):
            record.args = {k: _redacted(v) for k, v in record.args.items()}
        return True
