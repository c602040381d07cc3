"""`gateway serve`'s HTTP protocol: uvicorn's, each request's task taking its first step at once.

uvicorn parses a request in the protocol's `data_received` and creates an asyncio task for the
app, whose first step runs at the next turn of the event loop. On a busy process (hundreds of
streams, PostgreSQL's and Redis's replies) a turn is long, and a request pays it on top of the
turns it already waits (the connection accepted, its transport made, its bytes read). A refusal
at the door (`api/door.py`) is done in that first step, without a single wait: started at once,
it leaves in the callback that read the request, one turn sooner
(docs/decisions/0002-eager-request-task.md; `GATEWAY_STOCK_RUNTIME=http` runs uvicorn's own).

So the task is created as usual (uvicorn keeps it, cancels it at shutdown) and its first step
is taken here, as Python 3.12's eager tasks do (`eager_start`; this runs on 3.11 too): in the
task's own copy of the context, with the task as `asyncio.current_task()` (anyio's cancel
scopes, `asyncio.timeout` need it). What it awaits first is handed to the task, whose steps go
on from there; a request whose app awaits its body at once loses nothing, as the body arrives in
the same `data_received` right after. Pipelined requests, started from inside the previous
request's task, are started as uvicorn starts them.
"""

from __future__ import annotations

import asyncio
import contextvars
import types
from collections.abc import Coroutine, Generator
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle


@types.coroutine
def _eagerly(coro: Coroutine[Any, Any, Any]) -> Generator[Any, Any, Any]:
    """`coro` as its task's coroutine, its first step taken when `eager_task` primes this (the
    bare `yield`), the task's first step going on from there: it waits for what the first step
    awaits, then the rest is `yield from` (each later step one C-level hop, no Python call)."""
    try:
        waiting = coro.send(None)
    except StopIteration as stop:
        yield  # primed; the task's first step ends it with the result
        return stop.value
    except BaseException as error:  # noqa: BLE001 - raised by the task's first step, as its own
        yield
        raise error
    primed = False
    while True:
        try:
            if not primed:
                primed = True
                yield
            yield waiting
            break
        except BaseException as thrown:  # cancelled while it waits (before its own first step
            try:  # too): the coroutine is told, where it waits
                waiting = coro.throw(thrown)
            except StopIteration as stop:
                return stop.value
    return (yield from coro)


def eager_task(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any],
               context: contextvars.Context | None = None) -> asyncio.Task[Any]:
    """A task for `coro`, its first step taken now (see the module's docstring). Inside another
    task (a pipelined request started by the previous one's response) a plain task."""
    if asyncio.current_task(loop) is not None:
        return loop.create_task(coro, context=context)
    context = contextvars.copy_context() if context is None else context
    eagerly = _eagerly(coro)
    task = loop.create_task(eagerly, context=context)
    asyncio.tasks._enter_task(loop, task)  # what `current_task()` answers in the step
    try:
        context.run(eagerly.send, None)
    finally:
        asyncio.tasks._leave_task(loop, task)
    return task


class HttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol (`--http httptools`), its request tasks started at once."""

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: Any) -> None:
        context = contextvars.Context() if self.config.reset_contextvars else None
        task = eager_task(self.loop, cycle.run_asgi(app), context)
        task.add_done_callback(self.tasks.discard)
        self.tasks.add(task)
