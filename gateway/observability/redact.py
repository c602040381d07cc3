"""Secrets out of what is logged or shown: user scopes in access-log lines, and known secret
values (an API key, a password) in error messages.

uvicorn's access log writes each request's path with its query string, and a `userKey` there is
a user's scope: whoever reads the log could list, read and delete that user's threads. The
filter rewrites the path argument of `uvicorn.access` records before any handler formats them.

`mask_secret` masks a secret where it stands as a value, not wherever its characters occur: a
dummy key such as `x` must not turn `OpenAIException` into `OpenAIE***ception` (and a short key
would otherwise say which letters it has by the holes it leaves).
"""

from __future__ import annotations

import logging
import re

_SCOPE_PARAM = re.compile(r"(?i)([?&](?:userKey|contextKey)=)[^&#\s]*")
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


class RedactUserKeys(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == "uvicorn.access" and isinstance(record.args, tuple):
            record.args = tuple(redact_query(a) if isinstance(a, str) and "=" in a else a
                                for a in record.args)
        return True
