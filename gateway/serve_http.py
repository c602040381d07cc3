"""`gateway serve`'s HTTP protocol: uvicorn's, each request's task taking its first step at once.

uvicorn parses a request in the protocol's `data_received` and creates an asyncio task for the
app, whose first step runs at the next turn of the event loop. On an idle process a turn is
microseconds; on a busy one (hundreds of streams, PostgreSQL's and Redis's replies) it is tens
of milliseconds, and a request pays it on top of the turns it already waits (the connection
accepted, its transport made, its bytes read). A refusal at the door (`api/door.py`) is done in
that first step, without a single wait: started at once, it leaves in the callback that read the
request, one turn sooner (bench/README.md, "Refusals on PostgreSQL + Redis, eighth round").

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
from collections.abc import Coroutine, Generator
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

_NOT_YET = object()


class Stepped(Coroutine[Any, Any, Any]):
    """A coroutine whose first step was taken before its task ran it: the task's first `send`
    gets what that step gave (what it awaits, its result or its error); the rest go through."""

    def __init__(self, coro: Coroutine[Any, Any, Any]) -> None:
        self.coro = coro
        self.given: Any = _NOT_YET  # what the first step awaits (a future), until taken
        self.result: Any = None
        self.error: BaseException | None = None
        self.done = False

    def first_step(self) -> None:
        try:
            self.given = self.coro.send(None)
        except StopIteration as stop:
            self.done, self.result = True, stop.value
        except BaseException as error:  # noqa: BLE001 - the task's to raise, as its own step
            self.done, self.error = True, error

    def send(self, value: Any) -> Any:
        if self.done:
            return self._finished()
        if self.given is not _NOT_YET:
            given, self.given = self.given, _NOT_YET
            return given
        return self.coro.send(value)

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        if self.done:  # cancelled between the first step, which finished, and the task's
            return self._finished()
        self.given = _NOT_YET
        return self.coro.throw(typ, val, tb) if val is not None else self.coro.throw(typ)

    def close(self) -> None:
        self.coro.close()

    def _finished(self) -> Any:
        if self.error is not None:
            error, self.error = self.error, None
            raise error
        raise StopIteration(self.result)

    def __await__(self) -> Generator[Any, None, Any]:
        return self.coro.__await__()

    def __getattr__(self, name: str) -> Any:  # cr_frame, cr_running, __qualname__: the coroutine's
        return getattr(self.coro, name)


def eager_task(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any],
               context: contextvars.Context | None = None) -> asyncio.Task[Any]:
    """A task for `coro`, its first step taken now (see the module's docstring). Inside another
    task (a pipelined request started by the previous one's response) a plain task."""
    if asyncio.current_task(loop) is not None:
        return loop.create_task(coro, context=context)
    context = contextvars.copy_context() if context is None else context
    stepped = Stepped(coro)
    task = loop.create_task(stepped, context=context)
    asyncio.tasks._enter_task(loop, task)  # what `current_task()` answers in the step
    try:
        context.run(stepped.first_step)
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
