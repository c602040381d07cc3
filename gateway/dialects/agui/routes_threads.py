"""The caller's AG-UI threads (`GET /v1/agui/threads`): the threads an AG-UI client named,
by those names, for a thread picker (CopilotKit's `useThreads`, through a runner such as
examples/copilotkit/gateway-runner.mjs).

It is the Tambo thread list (`GET /v1/threads`) under the AG-UI dialect's names: the same user
scope, required as there (a call without one would list threads of no one), the same search
filters (`api/threads.py`, `thread_filter`), order and cursor, narrowed to the threads that
carry a client's name (`ThreadFilter.named`). A thread without one (made by the Tambo
endpoints, or a branch's original, whose name moved to the branch the client is on) is left
out: a client would list the same conversation twice, or one it never named.
"""

from __future__ import annotations

import dataclasses

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ...api.context import int_param, project_of, required_user_scope, services
from ...api.threads import thread_filter
from ...protocol.clock import iso_ms
from ...protocol.tambo import wire
from ...store.tables import ThreadRow
from .snapshot import AguiThreadList, AguiThreadSummary


def summary(thread: ThreadRow) -> AguiThreadSummary:
    """A thread as the list shows it, by the id its AG-UI client knows (`routes.client_ids`;
    the list reads named threads only)."""
    return AguiThreadSummary(threadId=thread.client_id or thread.id, agent=thread.agent,
                             name=thread.name, createdAt=iso_ms(thread.created_ms),
                             updatedAt=iso_ms(thread.updated_ms),
                             running=thread.run_status != "idle")


async def list_threads(request: Request) -> Response:
    """A page of the caller's named threads, newest first."""
    scope = required_user_scope(request)
    limit = int_param(request, "limit", 20, 1, 100)
    match = dataclasses.replace(thread_filter(request), named=True)
    page = await services(request).store.search_threads(
        project_of(request), scope, match, limit, request.query_params.get("cursor"))
    return JSONResponse(wire(AguiThreadList(threads=[summary(t) for t in page.rows],
                                            hasMore=page.has_more,
                                            nextCursor=page.next_cursor)))
