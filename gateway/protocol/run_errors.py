"""The one builder of a run's error: the fields of its `RUN_ERROR`, as the `error` control frame
carries them and the run row keeps them.

Every way a run fails (a provider error, a lost process, a shutdown, a lost database, a
cancel, a stream that broke while it was read) builds its error here, so the fields and their
names (`code`, `message`, `category`, `isRetryable`, `status`) are written in one place; each
dialect translates the frame into its own event (`gateway/dialects/`).
"""

from __future__ import annotations

import enum
from typing import Any, Final, Literal

from . import timbal

RunErrorFields = dict[str, Any]


class _Omitted(enum.Enum):
    OMITTED = enum.auto()


# `status` left out of the fields (a provider error keeps its `status`, null when unknown).
NO_STATUS: Final = _Omitted.OMITTED


def run_error(code: str, message: str, *, category: str | None = "server_error",
              retryable: bool | None = False,
              status: int | None | Literal[_Omitted.OMITTED] = NO_STATUS) -> RunErrorFields:
    """A run's error. `category` and `retryable` None: left out (a cancel is neither);
    `status`: the HTTP status the error stands for (503, a provider's 429; None when the
    provider gave none), left out by default."""
    fields: RunErrorFields = {"code": code, "message": message}
    if category is not None:
        fields["category"] = category
    if retryable is not None:
        fields["isRetryable"] = retryable
    if status is not NO_STATUS:
        fields["status"] = status
    return fields


def error_frame(error: RunErrorFields) -> timbal.Frame:
    """The log's `error` control frame of `error` (each dialect's `RUN_ERROR`)."""
    return timbal.control(timbal.ERROR, **error)
