"""Text that arrives in pieces (a token at a time) and is read whole once complete."""

from __future__ import annotations

# Pieces joined into one string at a time. A `str` costs about 50 bytes besides its text, so a
# list of token-sized pieces holds some 60 bytes per token for as long as its message streams,
# which at hundreds of concurrent runs is a good part of each run's memory.
FOLD = 16


class Fragments:
    """A list of pieces, the most recent `FOLD` of them joined into one string whenever there
    are that many: appending to one growing string instead would copy it at every token."""

    __slots__ = ("_parts", "_loose")

    def __init__(self, first: str = "") -> None:
        self._parts: list[str] = [first] if first else []
        self._loose = len(self._parts)  # pieces appended since the last join

    def append(self, piece: str) -> None:
        self._parts.append(piece)
        self._loose += 1
        if self._loose >= FOLD:
            self._parts[-FOLD:] = ["".join(self._parts[-FOLD:])]
            self._loose = 0

    def __str__(self) -> str:
        return "".join(self._parts)
