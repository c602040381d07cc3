"""Where a run start waits: stamps of each phase of every run start, for `bench/start_phases.py`.

Loaded into a `gateway serve` process by `PYTHONPATH` (Python imports `sitecustomize` at start-up)
with `GATEWAY_START_PHASES_LOG` naming a file; not part of the gateway. It records
`time.perf_counter()` at each point a start passes in a dict that the request's context carries
(the run's task is created in that context, so it sees the same dict), and appends the dict as
one JSON line when the response's first token frame leaves (or the response ends):

arrival (the server hands the request to the app) -> gate (the start gate asked) -> turn (its
slot) -> committed (the admission transaction) -> upstream_sent (the model request handed to
httpx, litellm's path) -> upstream_headers -> first_chunk (the first content from the model) ->
first_frame (the response's first bytes) -> first_token_frame.

It sees the gateway through public points only: an ASGI wrapper around the app
(`gateway.server.serve.APP_PROBES`), the store's hooks (`StoreHooks`, set once the app has
started), and the public `StartGate.turn`, `ModelCallMeter.received` and
`services.monitor_loop_lag` wrapped; nothing private of the gateway is touched. To compare the
runtime's mechanisms, run the gateway with `GATEWAY_STOCK_RUNTIME` (`--gateway-env`):
`loop` for uvloop's own accept, `http,loop` for uvicorn's own protocol as well.
`GATEWAY_START_PHASES_SAMPLE=1` samples what the loop runs while it is late (`<log>.samples`).

And every hold of a pooled database connection (checkout to checkin), with what held it (the
task's name: the log writer, a run's task, a request), one JSON line each in `<log>.holds`: on
SQLite the process has one connection, and whatever holds it makes every start wait; and each
commit on SQLite's thread (`bench/sqlite_watch.py`: its statements' and its own time, the WAL
frames it wrote, whether it checkpointed, the transactions it carried).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

LOG = os.environ.get("GATEWAY_START_PHASES_LOG")
ARRIVALS = [0]  # run starts arrived (the sampler ignores the start-up and the warm-up's)
STAMPS: contextvars.ContextVar[dict[str, float] | None] = contextvars.ContextVar(
    "start_phases", default=None)


def stamp(name: str) -> None:
    stamps = STAMPS.get()
    if stamps is not None and name not in stamps:
        stamps[name] = time.perf_counter()


def _install() -> None:
    import httpx

    from gateway.observability import metrics
    from gateway.runs.admission import start_gate
    from gateway.server import serve

    out = open(LOG, "a", buffering=1)  # noqa: SIM115 - for the process's life
    serve.APP_PROBES.append(lambda app: _Arrivals(app, out, _watch_connections()))
    turn = start_gate.StartGate.turn

    @contextlib.asynccontextmanager
    async def stamped_turn(self: Any) -> Any:
        stamp("gate")
        stamps = STAMPS.get()
        if stamps is not None:  # when the gate expects this start to get its turn
            stamps["expected_turn"] = time.perf_counter() + self.queue_wait()
        async with turn(self):
            stamp("turn")
            yield

    start_gate.StartGate.turn = stamped_turn  # type: ignore[method-assign]
    send = httpx.AsyncClient.send

    async def sent(self: Any, *args: Any, **kwargs: Any) -> Any:
        stamp("upstream_sent")
        response = await send(self, *args, **kwargs)
        stamp("upstream_headers")
        return response

    httpx.AsyncClient.send = sent  # type: ignore[method-assign]
    _watch_holds(open(f"{LOG}.holds", "a", buffering=1))  # noqa: SIM115
    received = metrics.ModelCallMeter.received

    def first(self: Any, content: bool) -> None:
        if content:
            stamp("first_chunk")
        received(self, content)

    metrics.ModelCallMeter.received = first  # type: ignore[method-assign]


class _Committed:
    """The store's hooks with the admission transaction's end stamped (`StoreHooks`: the
    operation's time is told in the caller's task, as it returns)."""

    STARTS = ("start_run", "start_run_on_new_thread")

    def __init__(self, hooks: Any) -> None:
        self.hooks = hooks

    def operation_timed(self, name: str, seconds: float) -> None:
        if name in self.STARTS:
            stamp("committed")
        self.hooks.operation_timed(name, seconds)


class _Arrivals:
    """An ASGI wrapper around the app: a run start's arrival and its first frames stamped, the
    line written; and, once the app has started, the store's hooks wrapped (`_Committed`)."""

    def __init__(self, app: Any, out: Any, connected: dict[int, float]) -> None:
        self.app, self.out, self.connected = app, out, connected

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            return await self.app(scope, receive, self._started(scope, send))
        if scope["type"] != "http" or scope["method"] != "POST" or "/run" not in scope["path"]:
            return await self.app(scope, receive, send)
        stamps = {"arrival": time.perf_counter()}
        ARRIVALS[0] += 1
        client = scope.get("client")
        port = client[1] if client else 0
        if client and (made := self.connected.pop(port, None)) is not None:
            stamps["connected"] = made  # written as a negative offset: before arrival
        STAMPS.set(stamps)
        written = False

        def write() -> None:
            nonlocal written
            if not written:
                written = True
                start = stamps["arrival"]
                # `at` and `port` join the line to the reader's own stamps of the same request
                # (perf_counter is CLOCK_MONOTONIC on Linux: the readers' time.monotonic()).
                self.out.write(json.dumps({**{k: round((v - start) * 1000, 2)
                                              for k, v in stamps.items()},
                                           "at": start, "port": port}) + "\n")

        async def sending(message: Any) -> None:
            if message["type"] == "http.response.body":
                stamp("first_frame")
                if b"TEXT_MESSAGE_CONTENT" in message.get("body", b""):
                    stamp("first_token_frame")
                    write()
                elif not message.get("more_body"):
                    write()
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            write()

    @staticmethod
    def _started(scope: Any, send: Any) -> Any:
        async def sending(message: Any) -> None:
            if message["type"] == "lifespan.startup.complete":
                store = scope["app"].state.services.store  # the app is starlette's: it set it
                store.hooks = _Committed(store.hooks)
            await send(message)

        return sending


def _watch_connections() -> dict[int, float]:
    """When uvicorn took each connection (by the client's port): the time from there to the
    app's call is the loop's, reading and parsing the request."""
    made: dict[int, float] = {}
    for module in ("httptools_impl", "h11_impl"):
        try:
            protocol = getattr(__import__(f"uvicorn.protocols.http.{module}",
                                          fromlist=["x"]),
                               "HttpToolsProtocol" if module == "httptools_impl" else
                               "H11Protocol")
        except ImportError:
            continue
        original = protocol.connection_made

        def connection_made(self: Any, transport: Any, original: Any = original) -> None:
            peer = transport.get_extra_info("peername")
            if peer:
                made[peer[1]] = time.perf_counter()
            original(self, transport)

        protocol.connection_made = connection_made
    return made


def _task() -> Any:
    try:
        return asyncio.current_task()
    except RuntimeError:
        return None


def _count_round_trips() -> dict[Any, int]:
    """Calls to PostgreSQL by task (asyncpg's: each a round trip), so that a hold of a pooled
    connection says how many trips it made (the pool's pre-ping, BEGIN and COMMIT included)."""
    counts: dict[Any, int] = {}
    try:
        import asyncpg
        from asyncpg import prepared_stmt, transaction
    except ImportError:
        return counts
    methods = [(asyncpg.Connection, ("fetch", "fetchrow", "fetchval", "execute", "executemany",
                                     "prepare")),
               (prepared_stmt.PreparedStatement, ("fetch", "fetchrow", "fetchval", "executemany")),
               (transaction.Transaction, ("start", "commit", "rollback"))]
    for owner, names in methods:
        for name in names:
            original = getattr(owner, name)

            async def counted(*args: Any, _original: Any = original, **kwargs: Any) -> Any:
                task = _task()
                counts[task] = counts.get(task, 0) + 1
                return await _original(*args, **kwargs)

            setattr(owner, name, counted)
    return counts


def _watch_holds(out: Any) -> None:
    from sqlalchemy import event
    from sqlalchemy.pool import Pool

    held: dict[int, tuple[float, str, Any, int]] = {}

    def holder() -> str:
        try:
            task = asyncio.current_task()
        except RuntimeError:
            return "thread"
        name = task.get_name() if task is not None else "none"
        if name.startswith("promote after "):
            return "promote after (a queued run)"
        return "run" if name.startswith("run ") and name != "run log writer" else (
            "request" if name.startswith("Task-") else name)

    trips = _count_round_trips()

    @event.listens_for(Pool, "checkout")
    def checkout(dbapi: Any, record: Any, proxy: Any) -> None:
        held[id(record)] = (time.perf_counter(), holder(), _task(), trips.get(_task(), 0))

    if os.environ.get("GATEWAY_START_PHASES_SQL"):  # which statements, by whom
        from sqlalchemy.engine import Engine

        @event.listens_for(Engine, "before_cursor_execute")
        def statement(conn: Any, cursor: Any, sql: str, *args: Any) -> None:
            out.write(json.dumps({"by": holder(), "sql": " ".join(sql.split())[:90]}) + "\n")

    _watch_commits(out)
    _watch_collections(out)
    if pragmas := os.environ.get("GATEWAY_START_PHASES_PRAGMAS"):  # e.g. "wal_autocheckpoint=0"
        @event.listens_for(Pool, "connect")
        def more_pragmas(dbapi: Any, _record: Any) -> None:
            cursor = dbapi.cursor()
            for pragma in pragmas.split(","):
                cursor.execute(f"PRAGMA {pragma}")
            cursor.close()

    @event.listens_for(Pool, "checkin")
    def checkin(dbapi: Any, record: Any) -> None:
        start = held.pop(id(record), None)
        if start is not None:
            out.write(json.dumps({"by": start[1], "at": start[0],
                                  "ms": round((time.perf_counter() - start[0]) * 1000, 2),
                                  "trips": trips.get(start[2], 0) - start[3]}) + "\n")


def _watch_commits(out: Any) -> None:
    """Per commit on SQLite's connection thread (`bench/sqlite_watch.py`), one line: when its
    transaction's first statement ran (`trip_at`), the time from there to the commit's end and
    the thread's CPU over it, the commit's own time, the WAL frames it wrote, and the pages a
    checkpoint copied in it; `group` the transactions it carried (savepoints, at least one)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository's `bench`
    from bench.sqlite_watch import Commit, SqliteWatch

    def committed(commit: Commit) -> None:
        ended = commit.commit_at + commit.commit_s
        out.write(json.dumps({
            "group": max(1, commit.savepoints), "trip_at": commit.began,
            "trip_ms": round((ended - commit.began) * 1000, 2),
            "cpu_ms": round(commit.cpu * 1000, 2),
            "commit_ms": round(commit.commit_s * 1000, 2), "frames": commit.frames,
            "wal": commit.wal_before[0],
            "backfilled": max(0, commit.wal_after[1] - commit.wal_before[1])}) + "\n")

    SqliteWatch(committed).install()


def _watch_collections(out: Any) -> None:
    """Every collection of the garbage collector on the loop's thread, with its generation and
    how long it stopped the loop."""
    import gc
    import threading

    main = threading.main_thread()
    began: list[float] = [0.0]

    def callback(phase: str, info: dict[str, Any]) -> None:
        if threading.current_thread() is not main:
            return
        if phase == "start":
            began[0] = time.perf_counter()
        else:
            out.write(json.dumps({"gc": info["generation"], "gc_at": began[0],
                                  "gc_ms": round((time.perf_counter() - began[0]) * 1000, 2),
                                  "collected": info["collected"]}) + "\n")

    gc.callbacks.append(callback)


def _sample_late_turns(path: str) -> None:
    """What the loop's thread runs while the loop is late (`GATEWAY_START_PHASES_SAMPLE=1`):
    a ticker on the loop stamps each turn it gets (every 2 ms at most); a thread samples the
    loop thread's stack every millisecond and, while the last stamp is over 20 ms old (the
    loop in one long turn, or the process not given a core), counts the sample by the
    callback or task step the loop is in (the frame below the loop's entry; none: the loop's
    own code in C) and by the innermost frames (what it was doing), once the warm-up's 20 run
    starts have arrived (the start-up's imports are no load). Written to `path` every 2 s."""
    import collections
    import sys
    import threading

    import gateway.services

    late_after = 0.02
    main = threading.main_thread().ident
    last = [time.perf_counter()]
    outer: collections.Counter[str] = collections.Counter()
    inner: collections.Counter[str] = collections.Counter()
    counts = [0, 0]  # samples, of which late

    def name(frame: Any) -> str:
        code = frame.f_code
        return f"{code.co_filename.rsplit('site-packages/', 1)[-1]}:{code.co_qualname}"

    def sample() -> None:
        written = time.perf_counter()
        while True:
            time.sleep(0.001)
            now = time.perf_counter()
            frame = sys._current_frames().get(main)
            counts[0] += 1
            if frame is not None and now - last[0] > late_after and ARRIVALS[0] > 20:
                counts[1] += 1
                chain = []
                while frame is not None and frame.f_code.co_qualname != "Runner.run":
                    chain.append(name(frame))  # innermost first, up to the loop's callback
                    frame = frame.f_back
                outer[chain[-1] if chain else "(the loop itself)"] += 1
                inner[" < ".join(chain[:10]) if chain else "(the loop itself)"] += 1
            if now - written > 2.0:
                written = now
                with open(path, "w") as out:
                    json.dump({"samples": counts[0], "late": counts[1],
                               "outer": outer.most_common(40),
                               "inner": inner.most_common(60)}, out, indent=0)

    original = gateway.services.monitor_loop_lag

    async def monitored(every: float) -> None:
        loop = asyncio.get_running_loop()

        def tick() -> None:
            last[0] = time.perf_counter()
            loop.call_later(0.002, tick)

        tick()
        threading.Thread(target=sample, daemon=True).start()
        await original(every)

    gateway.services.monitor_loop_lag = monitored


if LOG:
    _install()
    if os.environ.get("GATEWAY_START_PHASES_SAMPLE"):
        _sample_late_turns(f"{LOG}.samples")
