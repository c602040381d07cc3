"""A JSON body checked before it is parsed: its nesting depth, numbers no JSON peer can
carry, NUL characters.

Each refusal is a problem+json with its own code (`JSON_TOO_DEEP`, `INTEGER_OUT_OF_RANGE`,
`NUMBER_OUT_OF_RANGE`, `INVALID_JSON`, `NUL_CHARACTER`). A big body is scanned on a worker
thread (`checked_json_body`), so one large body does not hold every stream of the process up
for the scan's length.
"""

from __future__ import annotations

import asyncio
import math
import re
from dataclasses import dataclass

from ..protocol.problems import ApiError, Problem

# A JSON string (skipped whole, escapes included; unrolled rather than an alternation per
# character) or one bracket: what nesting depth is made of.
_STRING = rb'"[^"\\]*(?:\\.[^"\\]*)*"'
_STRUCTURE = re.compile(_STRING + rb'|[\[\]{}]', re.DOTALL)
# What any number no JSON peer can carry contains: 19 digits in a row, a three-digit exponent,
# `NaN` or `Infinity` (which the parsers accept and JSON has not). Most bodies have none, and
# are read once; the others are read again with their strings emptied (`_STRINGS`, one pass of
# the regular-expression engine), so what is inside a string costs nothing more, and only a
# body that still has one outside its strings is read number by number (`_TOKENS`).
# (Searched for one by one rather than as one alternation.)
_LONG_DIGITS, _LONG_EXPONENT = re.compile(rb'\d{19}'), re.compile(rb'[eE][+-]?\d{3}')
_TOKENS = re.compile(_STRING + rb'|NaN|-?Infinity|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?', re.DOTALL)
_STRINGS = re.compile(_STRING, re.DOTALL)
# JSON text outside strings and whole strings, from a point outside a string: what a window of
# `_emptied` takes (it stops before a string the window would cut).
_SPAN = re.compile(rb'(?:[^"]++|' + _STRING + rb')*+', re.DOTALL)
EMPTY_WINDOW = 64 * 1024  # bytes of a body emptied of its strings per step (`_emptied`)
# `\u0000` as an escape (after an even run of backslashes: `\\u0000` is a backslash and text).
_NUL_ESCAPE = re.compile(rb'(?<!\\)(?:\\\\)*\\u0000')
_QUOTE = ord('"')
_OPENERS = frozenset(b"[{")
_INT64 = range(-(2 ** 63), 2 ** 63)
# From this size a body is scanned off the event loop (`checked_json_body`); a smaller one's
# scan is shorter than the risk a thread hop brings.
SCAN_OFF_LOOP_BYTES = 64 * 1024
SEARCH_WINDOW = 256 * 1024  # bytes per search of the whole body (`_found`)


@dataclass(frozen=True)
class JsonScan:
    """What a JSON text holds that must be refused before it is parsed: its nesting depth
    (the parser recurses into it), the first number no JSON peer can carry (`number`),
    with the problem it is (`number_problem`), and whether a string holds a NUL character
    (`nul`: PostgreSQL can store none, so it is refused on every database alike)."""

    depth: int
    number: bytes | None = None
    number_problem: Problem | None = None
    nul: bool = False


def scan_json(raw: bytes, depth_limit: int | None = None) -> JsonScan:
    """`JsonScan` of a JSON text, read by the regular-expression engine (no parsing: a deep
    body must be refused before the parser recurses into it). A text with no more opening
    brackets than `depth_limit` cannot nest deeper: its depth is not measured, and the count
    of its brackets, an upper bound, stands in for it (most bodies: a run start has a few)."""
    openers = raw.count(b"[") + raw.count(b"{")
    deepest = openers if depth_limit is not None and openers <= depth_limit else \
        _depth(raw)
    nul = b"\\u0000" in raw and _NUL_ESCAPE.search(raw) is not None
    if not _suspect(raw):
        return JsonScan(deepest, nul=nul)
    raw = _emptied(raw)  # what is in a string is no number
    if not _suspect(raw):
        return JsonScan(deepest, nul=nul)
    for match in _TOKENS.finditer(raw):
        token = match.group()
        problem = None if token[0] == _QUOTE else number_problem(token)
        if problem is not None:
            return JsonScan(deepest, token, problem, nul)
    return JsonScan(deepest, nul=nul)


def _emptied(raw: bytes) -> bytes:
    """`raw` with every string's text taken out (`"..."` becomes `""`), a window of
    `EMPTY_WINDOW` bytes at a time (each window ends outside a string), so on a worker thread
    the loop waits one window at most; a single string longer than a window is one step."""
    out, pos, size = [], 0, len(raw)
    while pos < size:
        span = _SPAN.match(raw, pos, min(pos + EMPTY_WINDOW, size))
        end = span.end() if span is not None else pos
        if end > pos:
            out.append(_STRINGS.sub(b'""', raw[pos:end]))
            pos = end
            continue
        whole = _STRINGS.match(raw, pos)  # a string longer than the window
        if whole is None:  # not closed: the parser refuses the body
            out.append(raw[pos:])
            break
        out.append(b'""')
        pos = whole.end()
    return b"".join(out)


def _suspect(raw: bytes) -> bool:
    """Whether `raw` holds what a number no JSON peer can carry is made of (`_TOKENS` says
    whether it is one)."""
    return (b"NaN" in raw or b"Infinity" in raw or _found(_LONG_EXPONENT, raw, 5)
            or _found(_LONG_DIGITS, raw, 19))


def _depth(raw: bytes) -> int:
    """How deep a JSON text nests arrays and objects (brackets in strings do not count)."""
    depth = deepest = 0
    for match in _STRUCTURE.finditer(raw):
        token = match.group()
        if len(token) != 1:
            continue  # a string
        if token[0] in _OPENERS:
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def _found(pattern: re.Pattern[bytes], raw: bytes, longest: int) -> bool:
    """Whether `pattern` (whose matches are at most `longest` bytes) occurs in `raw`, searched
    a window of `SEARCH_WINDOW` bytes at a time: one search is one call that holds the GIL
    throughout, so on a worker thread (`checked_json_body`) the loop waits one window at
    most, not the whole body."""
    for start in range(0, len(raw), SEARCH_WINDOW):
        if pattern.search(raw, start, start + SEARCH_WINDOW + longest - 1):
            return True
    return False


def number_problem(token: bytes) -> Problem | None:
    """Why a number literal cannot be carried on, if it cannot.

    The parsers read any integer, `NaN`, `Infinity` and `1e400` (as infinity), but none of them
    can be stored (PostgreSQL refuses them in JSON) or sent on: the model client's encoder
    refuses an integer beyond 64 bits, which failed the run after it started (the fuzzer found
    it). So the body is refused with the request, like any other JSON a peer cannot read.
    """
    if token[-1:] in (b"N", b"y"):  # NaN, Infinity
        return Problem.INVALID_JSON
    exponent = b"e" in token or b"E" in token
    if not exponent and b"." not in token:
        return (Problem.INTEGER_OUT_OF_RANGE if len(token) >= 19 and int(token) not in _INT64
                else None)
    if (exponent or len(token) > 308) and math.isinf(float(token)):
        return Problem.NUMBER_OUT_OF_RANGE
    return None


async def checked_json_body(raw: bytes, depth_limit: int) -> None:
    """`check_json_body`, on a worker thread for a body of `SCAN_OFF_LOOP_BYTES` or more: on
    the event loop a large body's scan would stall every stream of the process. (The regular
    expressions hold the GIL, but the loop gets it back every switch interval, so the streams
    go on meanwhile.)"""
    if len(raw) < SCAN_OFF_LOOP_BYTES:
        check_json_body(raw, depth_limit)
    else:
        await asyncio.to_thread(check_json_body, raw, depth_limit)


def check_json_body(raw: bytes, depth_limit: int) -> None:
    """400 for a JSON body nested too deep, holding a number no JSON peer can carry or a NUL
    character, checked before it is parsed."""
    scan = scan_json(raw, depth_limit)
    if scan.depth > depth_limit:
        raise ApiError(Problem.JSON_TOO_DEEP,
                       f"The request body nests arrays and objects deeper than {depth_limit} "
                       "levels", limit=depth_limit)
    if scan.number_problem is not None and scan.number is not None:
        raise ApiError(scan.number_problem, _NUMBER_REFUSALS[scan.number_problem].format(
            scan.number[:40].decode()))
    if scan.nul:
        raise ApiError(Problem.NUL_CHARACTER, "The request body holds a NUL character "
                       "(\\u0000) in a string, which the gateway cannot store")


_NUMBER_REFUSALS = {
    Problem.INVALID_JSON: "The request body is not valid JSON: {} is not a JSON number",
    Problem.INTEGER_OUT_OF_RANGE: "The request body holds an integer outside the signed "
                                  "64-bit range: {}",
    Problem.NUMBER_OUT_OF_RANGE: "The request body holds a number beyond the range of a "
                                 "double: {}",
}
