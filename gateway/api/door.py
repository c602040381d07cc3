"""The door: a new run refused before any work while the process is saturated.

A saturated process (`runs/admission/start_gate.py`: its runs at `GATEWAY_MAX_ACTIVE_RUNS`, a start
waiting too long, its event loop late) must say no at once, so that a balancer sends the user
elsewhere. Said in the route, the no came late: the request had already queued behind the busy
loop, been authenticated (maybe a database read), had its body read, scanned and parsed, each
step another wait on the loop that is already too full. Here the question is asked first, as
the request arrives, from its method and path alone: a few comparisons, and it touches neither
the body nor the store (docs/decisions/0027-refusal-at-the-door.md). It still waits for the
loop like every request, which is why the loop's lateness is one of the limits
(`runs/admission/lateness.py`).

What is a run start is marked where the endpoint is declared (`mark_run_start`, which
`api.runs.gated` applies); everything else (reads, reconnects to a run's stream, cancels,
`/ready`, `/metrics`) goes through whatever the load. A tool result is a run start too (the
paused run ended; the result starts the next one, with a model call like any start): it is
refused like one, and the pause waits for the client's retry (`Retry-After`), as it would wait
for a slow user.

The answer tells an unauthenticated caller only which limit was reached (a setting's name), not
the process's figures; `/ready` carries those for the operator.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from starlette.responses import Response
from starlette.routing import BaseRoute, Match, Route
from starlette.types import Scope

from ..runs.admission.start_gate import Overloaded
from ..server.problem_json import api_error_response

F = TypeVar("F", bound=Callable[..., Any])
# Set on an endpoint that starts runs: how its refusals are shaped (the dialect's error body).
MARK = "run_start_refusal"
Shape = Callable[[Response], Response]


def mark_run_start(endpoint: F, shape: Shape | None = None) -> F:
    """Declares `endpoint` a run start, refused at the door while the process is saturated;
    `shape` turns the problem+json refusal into the dialect's own error (Timbal's)."""
    setattr(endpoint, MARK, shape or _as_is)
    return endpoint


def _as_is(response: Response) -> Response:
    return response


def refusal(refused: Overloaded) -> Response:
    """The 503 of a refused run start, as the start gate's own refusal is answered: the
    limit's setting name, never the process's figures."""
    return api_error_response(refused)


class Door:
    """Asked by the front (`server/front.py`) before anything reads, authenticates or parses a
    request."""

    def __init__(self) -> None:
        self._starts: list[tuple[Route, Shape]] | None = None

    def refusal(self, scope: Scope) -> Response | None:
        """The 503 for this request if it starts a run while the process is saturated."""
        if scope["method"] != "POST":
            return None
        # Saturation first: a few comparisons; the routes are matched only while it holds.
        services = getattr(scope["app"].state, "services", None)
        gate = services.runs.start_gate if services else None
        saturation = gate.saturation() if gate else None
        if gate is None or saturation is None:
            return None
        shape = self._run_start(scope)
        return None if shape is None else shape(refusal(gate.refused(saturation)))

    def _run_start(self, scope: Scope) -> Shape | None:
        """How a refusal of this request is shaped if it starts a run (None: it does not)."""
        if self._starts is None:
            self._starts = list(run_starts(scope["app"].routes))
        for route, shape in self._starts:
            if route.matches(scope)[0] is Match.FULL:
                return shape
        return None


def run_starts(routes: list[BaseRoute]) -> list[tuple[Route, Shape]]:
    """The app's routes whose endpoints are marked as run starts, with their refusal shapes."""
    return [(route, getattr(route.endpoint, MARK)) for route in routes
            if isinstance(route, Route) and hasattr(route.endpoint, MARK)]
