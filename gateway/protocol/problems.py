"""The error every layer raises when a request must be refused before a stream starts.

It lives in `protocol` because refusing a run is decided in `runs` (atomically, with the lock)
but answered by `api` as problem+json; both may import `protocol`.
"""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    def __init__(self, status: int, code: str, detail: str, **extra: Any) -> None:
        super().__init__(detail)
        self.status, self.code, self.detail, self.extra = status, code, detail, extra


class InvalidRequest(Exception):
    """A request body that does not fit its model (answered 400 VALIDATION_ERROR).

    Wrapped so that only the request's own validation is answered 400: a pydantic error from
    anywhere else (a response model the server filled wrongly) is the server's bug, a 500.
    """

    def __init__(self, error: Any) -> None:  # a pydantic ValidationError
        super().__init__(str(error))
        self.error = error

