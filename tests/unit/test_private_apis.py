"""Every private API of a library the gateway relies on, where it is used and why; and the rule
that such uses live only in the process runtime (`gateway/server/`) and the storage engines
(`gateway/store/engines/`), where they can be found, measured and dropped (DESIGN principle 16).

`PRIVATE` is the list. Each entry names the library object, the names the gateway uses on it
(an underscore name read, set or overridden; an undocumented method called or overridden; a key
or a call the library makes that the gateway's code depends on), the gateway module that uses
them, why, and the decision record that says what it is worth and when to remove it. The first
test checks every name on the installed versions: an upgrade that moves one fails here, naming
the library, its version, the name and the record, before it fails at run time.

The second scans the source: an underscore name imported from a library, read or set on a
library's object (`x._y`, `getattr(x, "_y")`), set or overridden in a subclass of a library
class, and any method overridden in a subclass of the runtime's and drivers' classes (uvicorn,
uvloop, starlette, sse-starlette, SQLAlchemy, the database drivers, redis, aiohttp, anyio): each
must be in one of the two folders, and each class and name must be in `PRIVATE`.
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.metadata
import inspect
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# The scan imports every module with a class; litellm's import must not fetch its price map.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
ROOT = Path(__file__).resolve().parents[2]
GATEWAY = ROOT / "gateway"
ALLOWED = ("gateway/server/", "gateway/store/engines/")
# Subclassing the classes of these modules and overriding a method relies on how they call it
# (a response's `__call__` or `StaticFiles.get_response` are the libraries' own extension
# points; an application's middleware stack or a server's main loop are not).
RUNTIME_LIBRARIES = ("uvicorn", "uvloop", "starlette.applications", "starlette.middleware",
                     "sse_starlette", "sqlalchemy", "aiosqlite", "asyncpg", "redis", "aiohttp",
                     "anyio", "httptools")
# Underscore names that are public API (namedtuple's methods, a SQLAlchemy row's mapping).
PUBLIC_UNDERSCORE = {"_replace", "_asdict", "_fields", "_make", "_field_defaults",
                     "_mapping"}  # and SQLAlchemy's documented `Row._mapping`


@dataclass(frozen=True)
class Private:
    """Names the gateway uses on one library object, beyond its documented API."""

    library: str  # the distribution, for its version in the message
    owner: str  # module[:attribute path] of the object that holds the names
    names: tuple[str, ...]  # attributes of the owner (its class, or `instance()`)
    where: str  # the gateway module that uses them
    why: str
    decision: str  # docs/decisions/...
    source: tuple[str, ...] = ()  # text the owner's source must hold (a call it makes, a key)
    instance: Callable[[Any], Any] | None = None  # makes an instance from the owner, if the
    # names are set by its __init__


def _event_source(owner: Any) -> Any:
    return owner(iter(()))


PRIVATE = [
    Private("python", "asyncio.tasks", ("_enter_task", "_leave_task"), "gateway/server/serve_http.py",
            "a request's task takes its first step in the callback that read the request, with "
            "itself as `current_task()` (what Python 3.12's eager tasks do)",
            "docs/decisions/0002-eager-request-task.md"),
    Private("uvicorn", "uvicorn.protocols.http.httptools_impl:HttpToolsProtocol",
            ("_start_asgi_task",), "gateway/server/serve_http.py",
            "subclassed (`HttpProtocol`) to start each request's task eagerly; uvicorn must "
            "still start every request through `_start_asgi_task`",
            "docs/decisions/0002-eager-request-task.md",
            source=("self._start_asgi_task(", "self.config = config", "self.tasks =",
                    "self.loop =")),
    Private("uvicorn", "uvicorn.protocols.http.httptools_impl:RequestResponseCycle",
            ("run_asgi",), "gateway/server/serve_http.py",
            "the request's coroutine that the eager task runs",
            "docs/decisions/0002-eager-request-task.md"),
    Private("uvicorn", "uvicorn.config:Config", ("reset_contextvars",),
            "gateway/server/serve_http.py", "whether a request's task gets a fresh context",
            "docs/decisions/0002-eager-request-task.md",
            instance=lambda owner: owner(app=None)),
    Private("uvloop", "uvloop:Loop", ("create_server", "connect_accepted_socket"),
            "gateway/server/serve_loop.py",
            "subclassed (`Loop`) to serve the listening socket itself, accepting every waiting "
            "connection at once, and to step `connect_accepted_socket` by hand",
            "docs/decisions/0001-batch-accept.md"),
    Private("uvicorn", "uvicorn.server:Server", ("startup",), "gateway/server/serve_loop.py",
            "uvicorn hands the listening socket to `loop.create_server(..., sock=...)`, which "
            "`Loop` answers with its own server", "docs/decisions/0001-batch-accept.md",
            source=("loop.create_server(create_protocol, sock=sock",)),
    Private("uvicorn", "uvicorn.server:Server",
            ("main_loop", "on_tick", "handle_exit", "startup", "started"),
            "gateway/server/serve.py",
            "`QuietServer` replaces the main loop (one wake-up a second for the `Date` header, at "
            "once on exit) and calls uvicorn's tick; `ListeningServer` logs where it listens",
            "docs/decisions/0003-quiet-main-loop.md",
            instance=lambda owner: owner(importlib.import_module("uvicorn").Config(app=None))),
    Private("starlette", "starlette.applications:Starlette", ("build_middleware_stack",),
            "gateway/server/stack.py",
            "overridden (`FrontedApp`): the app's whole middleware stack is the front",
            "docs/decisions/0004-one-layer-front.md",
            source=("self.middleware_stack = self.build_middleware_stack()",)),
    Private("starlette", "starlette.middleware.cors:CORSMiddleware",
            ("preflight_response", "send"), "gateway/server/front.py",
            "the front runs CORS's preflight answer and its header step itself, only for a "
            "request with an `Origin`", "docs/decisions/0004-one-layer-front.md"),
    Private("starlette", "starlette._exception_handler", ("wrap_app_handling_exceptions",),
            "gateway/server/front.py",
            "the front hands the routes the app's handlers under starlette's scope key, as its "
            "ExceptionMiddleware does", "docs/decisions/0004-one-layer-front.md",
            source=('conn.scope["starlette.exception_handlers"]',)),
    Private("sse-starlette", "sse_starlette.sse:EventSourceResponse",
            ("_stream_response", "_listen_for_exit_signal_with_grace", "_listen_for_disconnect",
             "_ping", "data_sender_callable", "ping_interval", "background"),
            "gateway/server/sse.py",
            "`BoundedEventSource._streamed` runs the response's four parts as asyncio tasks "
            "instead of an anyio task group", "docs/decisions/0005-sse-response-tasks.md",
            instance=_event_source),
    Private("sse-starlette", "sse_starlette.sse:EventSourceResponse",
            ("_send_with_timeout", "send_timeout"), "gateway/server/sse.py",
            "overridden: an event is timed only if its send waits, with asyncio's timeout",
            "docs/decisions/0006-send-timed-only-if-it-waits.md",
            source=("await self._send_with_timeout(",), instance=_event_source),
    Private("sse-starlette", "sse_starlette.sse:EventSourceResponse", ("_send_lock",),
            "gateway/server/sse.py",
            "replaced by an asyncio lock (anyio's takes a checkpoint on every acquire)",
            "docs/decisions/0007-asyncio-send-lock.md",
            source=("async with self._send_lock",), instance=_event_source),
    Private("sse-starlette", "sse_starlette.sse:AppStatus", ("should_exit",),
            "gateway/server/shutdown.py",
            "set once the drain is over, so open event streams end at once instead of at "
            "uvicorn's grace timeout", "docs/decisions/0009-drain-ends-event-streams.md"),
    Private("sqlalchemy", "sqlalchemy.dialects.sqlite.aiosqlite:AsyncAdapt_aiosqlite_cursor",
            ("description", "rowcount", "lastrowid", "arraysize", "execute", "executemany",
             "_async_soft_close", "close", "setinputsizes", "_adapt_connection", "_connection",
             "_cursor", "_soft_closed_memoized", "_rows"),
            "gateway/store/engines/sqlite_driver.py",
            "subclassed (`OneTripCursor`): a statement's steps (cursor, execute, fetch, close) "
            "in one call on aiosqlite's thread, its rows buffered where SQLAlchemy reads them",
            "docs/decisions/0016-sqlite-statement-in-one-call.md"),
    Private("sqlalchemy", "sqlalchemy.dialects.sqlite.aiosqlite:AsyncAdapt_aiosqlite_connection",
            ("rollback", "commit", "_connection", "_handle_exception", "_execute_mutex"),
            "gateway/store/engines/sqlite_driver.py",
            "subclassed (`OneTripConnection`): its cursors are `OneTripCursor`s, and no trip "
            "for a commit or rollback with no transaction open",
            "docs/decisions/0016-sqlite-statement-in-one-call.md"),
    Private("sqlalchemy", "sqlalchemy.dialects.sqlite.aiosqlite:AsyncAdapt_aiosqlite_dbapi",
            ("connect",), "gateway/store/engines/sqlite_driver.py",
            "subclassed (`OneTripDBAPI`): the connections it makes are `OneTripConnection`s",
            "docs/decisions/0016-sqlite-statement-in-one-call.md"),
    Private("sqlalchemy", "sqlalchemy.engine.base:Connection", ("execute", "in_transaction"),
            "gateway/store/engines/sqlite.py",
            "a member's Core statements run through a `Connection` made on the sqlite3 "
            "connection itself (a stand-in for the pool's, `_Raw`), on the database's thread; it "
            "must keep the connection it is given, and leave a failed statement's rollback to "
            "the caller inside a transaction (the member's savepoint)",
            "docs/decisions/0018-sqlite-group-commit.md",
            source=("self._dbapi_connection = connection", "if not self.in_transaction():")),
    Private("sqlalchemy", "sqlalchemy.engine.base:Connection", ("execute",),
            "gateway/store/engines/postgres.py",
            "a transaction's Core statements run through a `Connection` made on the pool's "
            "checked-out connection, committed by the DB-API connection itself",
            "docs/decisions/0017-transaction-in-one-switch.md",
            source=("self._dbapi_connection = connection",)),
    Private("aiosqlite", "aiosqlite:Connection", ("_conn", "_execute"),
            "gateway/store/engines/sqlite_driver.py",
            "a statement's steps as one call on the connection's thread (`_execute`), given the "
            "sqlite3 connection (`_conn`); a group commit's trip handed to that thread",
            "docs/decisions/0016-sqlite-statement-in-one-call.md"),
    Private("aiosqlite", "aiosqlite:Connection", ("_tx", "_running", "_connection"),
            "gateway/store/engines/sqlite_driver.py",
            "`hand_over`: a group commit's trip put on the thread's queue (`_tx`) without "
            "waiting for it, after checking the connection is open",
            "docs/decisions/0018-sqlite-group-commit.md",
            instance=lambda owner: owner(lambda: None, 64)),
]


def _resolve(owner: str) -> Any:
    module, _, path = owner.partition(":")
    found: Any = importlib.import_module(module)
    for part in filter(None, path.split(".")):
        found = getattr(found, part)
    return found


def _version(library: str) -> str:
    if library == "python":
        import platform

        return platform.python_version()
    return importlib.metadata.version(library)


@pytest.mark.parametrize("entry", PRIVATE, ids=lambda e: f"{e.owner}:{','.join(e.names)}")
def test_every_private_api_the_gateway_uses_is_still_there(entry: Private) -> None:
    owner = _resolve(entry.owner)
    holder = entry.instance(owner) if entry.instance is not None else owner
    short = entry.owner.split(":")[-1]
    for name in entry.names:
        assert hasattr(holder, name), (
            f"{entry.library} {_version(entry.library)} moved `{short}.{name}` "
            f"(used by {entry.where}: {entry.why}); see {entry.decision}")
    if entry.source:
        text = inspect.getsource(owner)
        for needed in entry.source:
            assert needed in text, (
                f"{entry.library} {_version(entry.library)} no longer does `{needed}` in "
                f"`{short}` (used by {entry.where}: {entry.why}); see {entry.decision}")
    assert (ROOT / entry.decision).is_file(), f"{entry.decision} is missing"
    assert (ROOT / entry.where).is_file(), f"{entry.where} is missing"


# -- the rule: such uses only under gateway/server/ and gateway/store/engines/ -----------------


@dataclass(frozen=True)
class Use:
    where: str  # the module's path
    line: int
    what: str  # `library.name`, `Class.name` (a subclass's), or `subclass of module.Class`

    def __str__(self) -> str:
        return f"{self.where}:{self.line}: {self.what}"


def _own_private_names() -> set[str]:
    """Underscore names the gateway defines itself (functions, methods, attributes,
    module names): an access to one of these is the gateway's own business."""
    names: set[str] = set()
    for path in GATEWAY.rglob("*.py"):
        names.add(path.stem)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
    return {name for name in names if name.startswith("_")}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__") and name not in PUBLIC_UNDERSCORE


def _library_modules(tree: ast.AST) -> dict[str, str]:
    """The names a module binds to libraries' modules or objects: local name -> dotted name."""
    bound: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if not alias.name.startswith("gateway"):
                    bound[(alias.asname or alias.name).split(".")[0]] = alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and \
                not node.module.startswith("gateway"):
            for alias in node.names:
                bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return bound


def _imports(tree: ast.AST, where: str) -> Iterator[Use]:
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and \
                not node.module.startswith("gateway"):
            for alias in node.names:
                parts = [*node.module.split("."), alias.name]
                if any(_private(part) for part in parts):
                    yield Use(where, node.lineno, f"{node.module}.{alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if any(_private(part) for part in alias.name.split(".")):
                    yield Use(where, node.lineno, alias.name)


def _accesses(tree: ast.AST, where: str, own: set[str]) -> Iterator[Use]:
    """`x._y` on anything but `self`/`cls`, and `getattr(x, "_y")`: a library's private name
    unless the gateway defines `_y` itself (and `x` is not a library module)."""
    libraries = _library_modules(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            base = node.value
            while isinstance(base, ast.Attribute):
                base = base.value
            name = base.id if isinstance(base, ast.Name) else ""
            if name in ("self", "cls") or (isinstance(base, ast.Call) and
                                           getattr(base.func, "id", "") == "super"):
                continue
            if name in libraries or node.attr not in own:
                yield Use(where, node.lineno, ast.unparse(node))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id in ("getattr", "setattr", "hasattr", "delattr") and len(node.args) > 1:
            key = node.args[1]
            if isinstance(key, ast.Constant) and isinstance(key.value, str) and \
                    _private(key.value) and key.value not in own:
                yield Use(where, node.lineno, f"{node.func.id}(..., {key.value!r})")


def _library_bases(cls: type) -> list[type]:
    return [base for base in cls.__mro__[1:]
            if not base.__module__.startswith("gateway") and base is not object]


@functools.cache
def _source(cls: type) -> str:
    try:
        return inspect.getsource(cls)
    except (OSError, TypeError):
        return ""


def _inherited(bases: list[type], name: str) -> bool:
    return any(name in vars(base) or f"self.{name}" in _source(base) for base in bases)


def _may_rely_on_a_library(node: ast.ClassDef, libraries: dict[str, str]) -> bool:
    """Whether a class could use a library class's names: one of its bases comes from a
    library, and that is a runtime library's or the class uses underscore names on itself.
    (So that only such modules are imported to look at their classes.)"""
    roots = []
    for base in node.bases:
        while isinstance(base, ast.Attribute | ast.Subscript | ast.Call):
            base = base.value if not isinstance(base, ast.Call) else base.func
        if isinstance(base, ast.Name) and base.id in libraries:
            roots.append(libraries[base.id])
    if not roots:
        return False
    if any(f"{root}.".startswith(tuple(f"{m}." for m in RUNTIME_LIBRARIES)) for root in roots):
        return True
    return any((isinstance(c, ast.Attribute) and getattr(c.value, "id", "") == "self" and
                _private(c.attr)) or (isinstance(c, ast.FunctionDef | ast.AsyncFunctionDef)
                                      and _private(c.name)) for c in ast.walk(node))


def _subclasses(tree: ast.AST, where: str, module: str) -> Iterator[Use]:
    """In a subclass of a library's class: an underscore name of the library's read, set or
    overridden; any method of a runtime library's class overridden; and the subclass itself."""
    libraries = _library_modules(tree)
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef) or not _may_rely_on_a_library(node, libraries):
            continue
        cls = getattr(importlib.import_module(module), node.name, None)
        if not isinstance(cls, type):  # a class made inside a function: not looked into
            yield Use(where, node.lineno, f"subclass of {ast.unparse(node.bases[0])} "
                                          f"({node.name}, inside a function)")
            continue
        bases = _library_bases(cls)
        runtime = [b for b in bases
                   if f"{b.__module__}.".startswith(tuple(f"{m}." for m in RUNTIME_LIBRARIES))]
        for child in ast.walk(node):
            name, line = "", getattr(child, "lineno", node.lineno)
            if isinstance(child, ast.Attribute) and getattr(child.value, "id", "") == "self":
                name = child.attr
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) and child in node.body:
                name = child.name
                if runtime and not name.startswith("__") and _inherited(runtime, name):
                    yield Use(where, line, f"{node.name}.{name} overrides "
                                                   f"{runtime[0].__qualname__}.{name}")
                    continue
            if name and _private(name) and _inherited(bases, name):
                yield Use(where, line, f"{node.name}.{name} (of {bases[0].__qualname__})")
        if runtime and any(isinstance(c, ast.FunctionDef | ast.AsyncFunctionDef) and
                           not c.name.startswith("__") for c in node.body):
            yield Use(where, node.lineno, f"subclass of {runtime[0].__module__}."
                                          f"{runtime[0].__qualname__}")


@functools.cache
def private_uses(root: Path = GATEWAY) -> list[Use]:
    own = _own_private_names()
    found: list[Use] = []
    for path in sorted(root.rglob("*.py")):
        where = path.relative_to(ROOT).as_posix()
        tree = ast.parse(path.read_text())
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        found += [*_imports(tree, where), *_accesses(tree, where, own),
                  *_subclasses(tree, where, module)]
    return found


def test_private_apis_are_used_only_in_the_runtime_and_the_storage_engines() -> None:
    outside = [str(use) for use in private_uses() if not use.where.startswith(ALLOWED)]
    assert not outside, (
        "private internals of libraries belong in gateway/server/ or gateway/store/engines/ "
        "behind a plain function, listed in PRIVATE with a decision record "
        f"(DESIGN principle 16): {outside}")


def test_every_private_use_in_the_allowed_folders_is_listed() -> None:
    listed = {(entry.where, name) for entry in PRIVATE for name in entry.names}
    listed |= {(entry.where, entry.owner.split(":")[-1].split(".")[-1]) for entry in PRIVATE}
    unlisted = []
    for use in private_uses():
        names = {part for part in use.what.replace("(", " ").replace(")", " ").replace(
            ".", " ").split() if part.isidentifier()}
        if not any((use.where, name) in listed for name in names):
            unlisted.append(str(use))
    assert not unlisted, f"add these to PRIVATE (what, why, the decision record): {unlisted}"


def test_the_scan_sees_each_kind_of_use() -> None:
    tree = ast.parse(
        "import asyncio\nfrom jsonschema._utils import extras_msg\nfrom x import _y\n"
        "asyncio.tasks._enter_task(1, 2)\ngetattr(stream, '_hidden_params')\n")
    seen = {use.what for use in [*_imports(tree, "m.py"),
                                 *_accesses(tree, "m.py", {"_own"})]}
    assert seen == {"jsonschema._utils.extras_msg", "x._y", "asyncio.tasks._enter_task",
                    "getattr(..., '_hidden_params')"}
    assert not list(_accesses(ast.parse("thing._own()\nself._x\n"), "m.py", {"_own"}))


def test_the_scan_sees_a_subclass_that_relies_on_a_library_class() -> None:
    module = "gateway.server.sse"
    found = [use.what for use in _subclasses(ast.parse(inspect.getsource(
        importlib.import_module(module))), "sse.py", module)]
    assert "BoundedEventSource._send_with_timeout overrides EventSourceResponse." \
           "_send_with_timeout" in found
    assert "BoundedEventSource._send_lock (of EventSourceResponse)" in found
    assert "subclass of sse_starlette.sse.EventSourceResponse" in found
    nested = ast.parse("import uvicorn\ndef serve():\n    class Server(uvicorn.Server):\n"
                       "        async def main_loop(self): ...\n")
    assert [u.what for u in _subclasses(nested, "m.py", "gateway.server.sse")] == [
        "subclass of uvicorn.Server (Server, inside a function)"]
