"""Access-log lines without user scopes: `?userKey=` (and `?contextKey=`) values are redacted.

uvicorn's access log writes each request's path with its query string, and a `userKey` there is
a user's scope: whoever reads the log could list, read and delete that user's threads. The
filter rewrites the path argument of `uvicorn.access` records before any handler formats them.
"""

from __future__ import annotations

import logging
import re

_SCOPE_PARAM = re.compile(r"(?i)([?&](?:userKey|contextKey)=)[^&#\s]*")
REDACTED = "[redacted]"


def redact_query(path: str) -> str:
    return _SCOPE_PARAM.sub(lambda m: m.group(1) + REDACTED, path)


class RedactUserKeys(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == "uvicorn.access" and isinstance(record.args, tuple):
            record.args = tuple(redact_query(a) if isinstance(a, str) and "=" in a else a
                                for a in record.args)
        return True
