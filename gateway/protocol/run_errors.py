"""The one builder of a run's error: the fields of its `RUN_ERROR`, as the `error` control frame
carries them and the run row keeps them (a cancel's row keeps only `ErrorFields`).

Every way a run fails (a provider error, a lost process, a shutdown, a lost database, a
cancel, a stream that broke while it was read) builds its error here, so the fields and their
names (`code`, `message`, `category`, `isRetryable`, `status`) are written in one place; each
dialect translates the frame into its own event (`gateway/dialects/`).
"""

from __future__ import annotations

import enum
from typing import Final, Literal, NotRequired, TypedDict

from . import timbal
from .frames_schema import ErrorFrame

ErrorCategory = Literal["client_error", "server_error"]


class ErrorFields(TypedDict):
    """What every error of a run says: a cancelled run's row keeps just this."""

    code: str
    message: str


class RunError(ErrorFields):
    """A failed run's error: the `error` frame's fields (`frames_schema.ErrorFrame`), which the
    run's row keeps too. `status`: the HTTP status the error stands for, when it has one."""

    category: ErrorCategory
    isRetryable: bool
    status: NotRequired[int | None]


class _Omitted(enum.Enum):
    OMITTED = enum.auto()


# `status` left out of the fields (a provider error keeps its `status`, null when unknown).
NO_STATUS: Final = _Omitted.OMITTED


def run_error(code: str, message: str, *, category: ErrorCategory = "server_error",
              retryable: bool = False,
              status: int | None | Literal[_Omitted.OMITTED] = NO_STATUS) -> RunError:
    """A run's error. `status`: the HTTP status the error stands for (503, a provider's 429;
    None when the provider gave none), left out by default."""
    fields: RunError = {"code": code, "message": message, "category": category,
                        "isRetryable": retryable}
    if status is not NO_STATUS:
        fields["status"] = status
    return fields


def error_frame(error: RunError) -> ErrorFrame:
    """The log's `error` control frame of `error` (each dialect's `RUN_ERROR`)."""
    frame: ErrorFrame = {"c": timbal.ERROR, "code": error["code"], "message": error["message"],
                         "category": error["category"], "isRetryable": error["isRetryable"]}
    if "status" in error:
        frame["status"] = error["status"]
    return frame
