"""`gateway prune --older-than 30d [--dry-run]`: delete threads not updated for that long,
with their runs, frame logs, messages, component state and idempotency keys (usage rows are
kept: they are accounting). A thread with a live or paused run is never deleted. Safe while
servers run: the deletes go in small batches (`gateway/store/pruning.py`)."""

from __future__ import annotations

import argparse
import asyncio

from ..config import Settings
from .commands import Commands
from .usage import since


def add_parser(commands: Commands) -> None:
    prune = commands.add_parser("prune", help="delete threads not updated for a while")
    prune.add_argument("--older-than", type=since, required=True, metavar="DURATION",
                       help="not updated for: 90m, 24h, 30d")
    prune.add_argument("--dry-run", action="store_true",
                       help="only count what would be deleted")
    prune.add_argument("--database-url", help="overrides GATEWAY_DATABASE_URL")


def run(settings: Settings, args: argparse.Namespace) -> int:
    from ..store.db import create_engine
    from ..store.pruning import prune
    from ..store.repository import Store

    async def pruned() -> tuple[int, int]:
        engine = create_engine(settings.database_url)
        try:
            done = await prune(Store(engine), args.older_than, dry_run=args.dry_run)
            return done.threads, done.runs
        finally:
            await engine.dispose()

    threads, runs = asyncio.run(pruned())
    verb = "would delete" if args.dry_run else "deleted"
    print(f"{verb} {threads} threads ({runs} runs)")
    return 0
