"""`gateway serve | migrate | openapi`."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from .config import SettingsError, load_settings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gateway", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the HTTP server")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--database-url", help="overrides GATEWAY_DATABASE_URL")
    serve.add_argument("--model", help="overrides GATEWAY_MODEL")
    serve.add_argument("--log-level", default="info")
    commands.add_parser("migrate", help="create or upgrade the database schema, then exit")
    openapi = commands.add_parser("openapi", help="regenerate openapi/openapi.json and schemas/")
    openapi.add_argument("--root", default=".", help="the repository root (default: .)")
    openapi.add_argument("--check", action="store_true",
                         help="only report stale files; exit 1 if any")
    args = parser.parse_args(argv)

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("alembic").setLevel(logging.WARNING)
    try:
        settings = load_settings(database_url=getattr(args, "database_url", None),
                                 model=getattr(args, "model", None))
    except SettingsError as error:
        print(f"gateway: {error}", file=sys.stderr)
        return 2

    if args.command == "openapi":
        from pathlib import Path

        from .schema_gen import main as generate

        return generate(Path(args.root), args.check)

    if args.command == "migrate":
        from .store.db import create_engine, migrate

        async def run() -> None:
            engine = create_engine(settings.database_url)
            await migrate(engine)
            await engine.dispose()

        asyncio.run(run())
        print(f"database is up to date: {settings.database_url}")
        return 0

    import uvicorn

    from .app import create_app

    uvicorn.run(create_app(settings), host=args.host, port=args.port, log_level=args.log_level,
                timeout_graceful_shutdown=5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
