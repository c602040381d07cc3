"""A provider's error in its own words: the message inside the error body it sent.

litellm words a failed call as its exception class, the provider adapter's name and the error
body as it came, which is JSON (Anthropic's `{"type": "error", "error": {"type", "message"}}`,
Google's `{"error": {"code", "message", "status"}}`, OpenAI's `{"error": {"message", ...}}`),
a Python dict's repr (the openai SDK's `Error code: 429 - {...}`), or the body's bytes' repr
(`b'{"type":"error",...}'`, litellm's Anthropic and Gemini streaming paths). A client shown
that reads a Python literal; what it needs is the sentence inside. `words` finds the body in
the text, whichever of these it is, and returns the provider's message, or the text unchanged
when there is none to find.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

_BYTES = re.compile(r"""b(['"])(?:\\.|(?!\1).)*\1""")
MAX_SCANNED = 16 * 1024  # an error text longer than this is not searched past it


def words(text: str) -> str:
    """The provider's message in `text`, else `text`."""
    scanned = text[:MAX_SCANNED]
    for candidate in _bodies(scanned):
        message = _message(candidate)
        if message:
            return message
    return text


def _bodies(text: str) -> list[Any]:
    """The structured values in `text`: a bytes literal's content, then JSON or a Python
    literal starting at each of the first few `{` or `[`."""
    found: list[Any] = []
    for match in _BYTES.finditer(text):
        try:
            raw = ast.literal_eval(match.group(0))
        except (ValueError, SyntaxError):
            continue
        if isinstance(raw, bytes):
            found.extend(_bodies(raw.decode("utf-8", errors="replace")))
    starts = [i for i, c in enumerate(text) if c in "{["][:4]
    for start in starts:
        value = _parsed(text[start:])
        if value is not None:
            found.append(value)
    return found


def _parsed(text: str) -> Any:
    try:
        return json.JSONDecoder().raw_decode(text)[0]
    except ValueError:
        pass
    end = _closing(text)
    if end is None:
        return None
    try:
        return ast.literal_eval(text[:end + 1])
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None


def _closing(text: str) -> int | None:
    """The index of the bracket that closes the one `text` starts with (quotes respected)."""
    depth, quote, escaped = 0, "", False
    for i, c in enumerate(text):
        if quote:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
        elif c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
            if depth == 0:
                return i
    return None


def _message(value: Any) -> str | None:
    """`error.message` (or `message`, or an `error` that is a string) in a body."""
    if isinstance(value, list) and value:
        return _message(value[0])
    if not isinstance(value, dict):
        return None
    error = value.get("error")
    if isinstance(error, dict):
        return _message(error) or None
    if isinstance(error, str) and error.strip():
        return error.strip()
    message = value.get("message")
    return message.strip() if isinstance(message, str) and message.strip() else None
