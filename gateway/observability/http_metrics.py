"""HTTP request metrics by route template and status, observed by the front (`server/front.py`).

The route label is the template the request matched (`/v1/threads/{thread_id}/runs`), read
from the scope once the router has matched it, so the label set stays bounded whatever ids
clients send; a request that matched no route is `unmatched`. Duration is to the response's
first byte (its status and headers): a run's stream stays open for the whole run, and its
length is the run's, already measured by the run metrics.
"""

from __future__ import annotations

from prometheus_client import Counter, Histogram
from starlette.types import Scope

UNMATCHED = "unmatched"

HTTP_REQUESTS = Counter(
    "gateway_http_requests", "HTTP requests answered, by method, route template and status.",
    ["method", "route", "status"])
HTTP_RESPONSE_START = Histogram(
    "gateway_http_response_start_seconds",
    "From a request's arrival to its response's status and headers, by method and route "
    "template (for a stream: until it starts).", ["method", "route"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))


def route_template(scope: Scope) -> str:
    """The matched route's template (a mount's prefix for its files: `/web`)."""
    path = getattr(scope.get("route"), "path", None)
    return path if isinstance(path, str) else UNMATCHED


def method_label(method: str) -> str:
    """The method as a label: the usual ones by name, anything else `other` (bounded)."""
    return method if method in _METHODS else "other"


def started(method: str, scope: Scope, seconds: float) -> None:
    """A response started `seconds` after its request arrived."""
    key = (method, route_template(scope))
    child = _started.get(key)
    if child is None:
        child = _started[key] = HTTP_RESPONSE_START.labels(*key)
    child.observe(seconds)


def answered(method: str, scope: Scope, status: int | None) -> None:
    """A request is over, answered with `status` (None: its client went away first, counted
    as nginx's 499). Every HTTP response is counted once: refusals before the routes and the
    500 of an unexpected error too (the front calls this)."""
    key = (method, route_template(scope), "499" if status is None else str(status))
    child = _answered.get(key)
    if child is None:
        child = _answered[key] = HTTP_REQUESTS.labels(*key)
    child.inc()


_METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"})
# Each label set's child, found once: `labels()` validates and locks on every call. Bounded as
# the label sets are (methods, route templates, statuses).
_started: dict[tuple[str, str], Histogram] = {}
_answered: dict[tuple[str, str, str], Counter] = {}
