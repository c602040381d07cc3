"""`gateway serve | migrate | config | openapi | keys | agents | usage | prune | chorus`, and
`--version`.

Every way start-up can fail for a reason the operator must fix (a bad setting, a port in use,
a database that cannot be reached or migrated) ends the process at once with one line on stderr
and a non-zero status: a traceback or a process that lingers hides the one thing to fix. No
command prints a secret; URLs are shown with their password masked.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..auth.loopback import is_loopback
from ..config import Settings, SettingsError, load_settings
from ..observability.logs import configure_levels
from ..observability.redact import mask_secret
from . import agents as agents_cli
from . import chorus as chorus_cli
from . import keys as keys_cli
from . import prune as prune_cli
from . import usage as usage_cli

LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")
# Exit statuses: 2 is a bad setting or usage (argparse's own), 1 anything else at start-up.
EXIT_USAGE = 2
EXIT_STARTUP = 1


class StartupError(Exception):
    """A start-up step failed for a reason the operator must fix; the message is one line."""


class UsageError(Exception):
    """Options that cannot go together; the message is one line (exit status 2)."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gateway",
                                     description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--version", action="version", version=f"gateway {package_version()}")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the HTTP server")
    serve.add_argument("--host", default="127.0.0.1")
    # Development mode listens on loopback only, whatever the flags; kept so that existing
    # command lines with keys still start.
    serve.add_argument("--allow-remote", action="store_true", help=argparse.SUPPRESS)
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--database-url", help="overrides GATEWAY_DATABASE_URL")
    serve.add_argument("--model", help="overrides GATEWAY_MODEL")
    serve.add_argument("--log-level", default="info", choices=LOG_LEVELS,
                       help="for the gateway's own loggers and uvicorn's (default: info)")
    serve.add_argument("--workers", type=int, default=1,
                       help="worker processes on this port (PostgreSQL only; default: 1)")
    migrate = commands.add_parser("migrate", help="create or upgrade the database schema, "
                                                  "then exit")
    migrate.add_argument("--database-url", help="overrides GATEWAY_DATABASE_URL")
    commands.add_parser("config", help="print the effective settings (secrets masked)")
    keys_cli.add_parser(commands)
    agents_cli.add_parser(commands)
    usage_cli.add_parser(commands)
    prune_cli.add_parser(commands)
    chorus_cli.add_parser(commands)
    openapi = commands.add_parser("openapi", help="regenerate openapi/, schemas/ and "
                                                  "docs/settings.md")
    openapi.add_argument("--root", default=".", help="the repository root (default: .)")
    openapi.add_argument("--check", action="store_true",
                         help="only report stale files; exit 1 if any")
    return parser


def package_version() -> str:
    """The installed distribution's version (`pyproject.toml`), or `unknown` when the source
    is run without being installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gateway")
    except PackageNotFoundError:
        return "unknown"


def _one_line(exc: BaseException, secret: str | None) -> str:
    """The most specific line of an exception (a driver's own message, not SQLAlchemy's
    wrapper with its URL of the documentation), with a password never in it."""
    inner = getattr(exc, "orig", None) or exc.__cause__ or exc
    text = str(inner).strip() or type(inner).__name__
    line = text.splitlines()[0]
    line = mask_secret(line, secret, "****")
    return line


async def prepare_database(url: str) -> None:
    """Connect and migrate, or raise `StartupError` saying which of the two failed and why."""
    from sqlalchemy.engine import make_url

    from ..openapi.settings_report import mask_url
    from ..store.db import create_engine, migrate

    shown = mask_url(url)
    password = make_url(url).password
    try:
        engine = create_engine(url)
    except Exception as exc:  # a malformed URL or a driver that is not async
        raise StartupError(f"cannot use the database URL {shown}: "
                           f"{_one_line(exc, password)}") from None
    try:
        try:
            async with engine.connect():
                pass
        except Exception as exc:
            raise StartupError(f"cannot reach the database at {shown}: "
                               f"{_one_line(exc, password)}") from None
        try:
            await migrate(engine)
        except Exception as exc:
            raise StartupError(f"cannot migrate the database at {shown}: "
                               f"{_one_line(exc, password)}") from None
    finally:
        await engine.dispose()


def listen(host: str, port: int) -> socket.socket:
    """The listening socket, bound before anything slow starts, so a port in use is reported
    at once instead of after start-up (uvicorn then waits on its lifespan and never exits)."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise StartupError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        reason = exc.strerror.lower() if exc.strerror else str(exc)
        raise StartupError(f"cannot listen on {host}:{port}: {reason}") from None
    sock.set_inheritable(True)
    return sock


def check_exposure(settings: Settings, host: str) -> None:
    """Development mode accepts any API key, so it only ever listens on loopback: an open
    gateway in front of a paid model must never be one typo away. It is on while there is no
    key at all (`GATEWAY_DEVELOPMENT_MODE=auto`: no GATEWAY_API_KEYS and no managed key ever
    made), or when asked for (`on`)."""
    if is_loopback(host) or not settings.development_possible:
        return
    if settings.development_mode == "on" or not asyncio.run(
            keys_cli.managed_keys_exist(settings.database_url)):
        raise StartupError(f"refusing to listen on {host} in development mode (any key is "
                           "accepted, so it listens on loopback only): create a key (gateway "
                           "keys create) or set GATEWAY_API_KEYS")


def check_agents(settings: Settings) -> None:
    """The agents (GATEWAY_AGENTS_FILE, or the environment's one agent), checked before
    anything starts: a bad file never starts a half-configured gateway."""
    from ..engine.agents.agent import AgentError
    from ..engine.agents.file import registry_for

    try:
        registry_for(settings)
    except AgentError as error:
        what = "agents file" if settings.agents_file else "agents:"
        raise UsageError(f"invalid {what} {error}") from None


def check_model(settings: Settings) -> None:
    """`GATEWAY_MODEL_ADAPTER=direct` with a model it cannot serve, refused before anything
    starts, in one line saying why (inside the app's start-up, uvicorn would only say that
    the start-up failed). Only then is litellm imported this early: it decides the provider."""
    if settings.model_adapter != "direct":
        return
    from ..engine.models.adapters import AdapterError, adapter_for, load_litellm

    load_litellm()
    try:
        adapter_for(settings)
    except AdapterError as error:
        raise UsageError(str(error)) from None


def serve_workers(settings: Settings, host: str, port: int, log_level: str,
                  workers: int) -> int:
    """`--workers N`: uvicorn's supervisor and N worker processes sharing one socket, each with
    its own app (and run manager). The schema is migrated once, here, before they start."""
    from ..app import WORKER_LOG_LEVEL
    from ..server import serve as server

    if settings.database_url.startswith("sqlite"):
        # SQLite takes one writer at a time: more workers would queue on its lock instead of
        # adding capacity, so this is refused rather than made to work slowly.
        raise UsageError(f"--workers {workers} needs PostgreSQL; set "
                         "GATEWAY_DATABASE_URL=postgresql://... (SQLite serves one worker)")
    sock = listen(host, port)
    asyncio.run(prepare_database(settings.database_url))
    shared_metrics_directory()
    # Each worker reads its settings again: pass the command-line overrides on.
    os.environ["GATEWAY_DATABASE_URL"] = settings.database_url
    os.environ["GATEWAY_MODEL"] = settings.model
    os.environ[WORKER_LOG_LEVEL] = log_level
    # Each worker configures its logging as `serve` does (`app_from_environment`), so every
    # process logs in the one format.
    server.serve_workers("gateway.app:app_from_environment", sock, workers=workers,
                         log_level=log_level, stock=settings.stock_runtime,
                         ws_max_size=settings.max_websocket_frame_bytes)
    return 0


def shared_metrics_directory() -> str:
    """Prometheus multiprocess mode for `--workers`: each worker writes its samples under one
    directory, and whichever worker a scrape reaches answers for all of them. The operator's
    PROMETHEUS_MULTIPROC_DIR is used (emptied: old samples would be counted again), else a
    new temporary one."""
    import atexit
    import shutil
    import tempfile
    from pathlib import Path

    from ..observability.metrics import MULTIPROCESS_DIR

    given = os.environ.get(MULTIPROCESS_DIR)
    if given:
        Path(given).mkdir(parents=True, exist_ok=True)
        for stale in Path(given).glob("*.db"):
            stale.unlink()
        return given
    directory = tempfile.mkdtemp(prefix="gateway-metrics-")
    os.environ[MULTIPROCESS_DIR] = directory
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    return directory


def quiet_startup_failure(app: ASGIApp) -> ASGIApp:
    """The app, minus the traceback uvicorn prints when its start-up fails: the lifespan has
    already logged one line saying why (Starlette hands uvicorn the formatted traceback)."""

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            return await app(scope, receive, send)

        async def send_quietly(message: Message) -> None:
            if message["type"] == "lifespan.startup.failed":
                message = {**message, "message": ""}
            await send(message)

        await app(scope, receive, send_quietly)

    return wrapped


def serve(settings: Settings, host: str, port: int, log_level: str) -> int:
    from ..app import create_app
    from ..server import serve as server

    sock = listen(host, port)
    asyncio.run(prepare_database(settings.database_url))
    app = quiet_startup_failure(create_app(settings, drain_on_signals=True))
    started = server.serve(app, sock, host=host, port=port, log_level=log_level,
                           stock=settings.stock_runtime,
                           ws_max_size=settings.max_websocket_frame_bytes)
    # uvicorn returns (rather than exiting) when the app's start-up failed.
    return 0 if started else EXIT_STARTUP


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        settings = load_settings(database_url=getattr(args, "database_url", None),
                                 model=getattr(args, "model", None))
    except SettingsError as error:
        print(f"gateway: {error}", file=sys.stderr)
        return EXIT_USAGE
    configure_levels(getattr(args, "log_level", "info" if args.command == "serve"
                                                  else "warning"), settings.log_format)

    try:
        if args.command == "openapi":
            from pathlib import Path

            from ..app import create_app
            from ..openapi.schema_gen import main as generate

            return generate(Path(args.root), args.check, create_app(Settings()).routes)
        if args.command == "config":
            from ..openapi.settings_report import effective_lines

            print("\n".join(effective_lines(settings)))
            return 0
        if args.command == "keys":
            asyncio.run(prepare_database(settings.database_url))
            return keys_cli.run(settings, args)
        if args.command == "migrate":
            from ..openapi.settings_report import mask_url

            asyncio.run(prepare_database(settings.database_url))
            print(f"database is up to date: {mask_url(settings.database_url)}")
            return 0
        if args.command == "agents":
            return agents_cli.run(settings, args)
        if args.command == "chorus":
            asyncio.run(prepare_database(settings.database_url))
            return chorus_cli.run(settings, args)
        if args.command == "usage":
            asyncio.run(prepare_database(settings.database_url))
            return usage_cli.run(settings, args)
        if args.command == "prune":
            asyncio.run(prepare_database(settings.database_url))
            return prune_cli.run(settings, args)
        check_agents(settings)
        check_model(settings)
        check_exposure(settings, args.host)
        if args.workers < 1:
            raise UsageError("--workers must be at least 1")
        if args.workers > 1:
            return serve_workers(settings, args.host, args.port, args.log_level, args.workers)
        return serve(settings, args.host, args.port, args.log_level)
    except UsageError as error:
        print(f"gateway: {error}", file=sys.stderr)
        return EXIT_USAGE
    except StartupError as error:
        print(f"gateway: {error}", file=sys.stderr)
        return EXIT_STARTUP


if __name__ == "__main__":
    sys.exit(main())
