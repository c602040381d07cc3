"""`gateway chorus connect | list | revoke`: agents' Chorus connection strings (docs/chorus.md).

`connect` makes a secret, stores only its SHA-256 and prints the connection string (a URL with
the secret in it) once: whoever holds it can send the agent messages, within the connection's
limits (its own, or the `GATEWAY_CHORUS_*` defaults). `revoke` ends one at
once, in every process (each delivery looks its secret up).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import secrets
from typing import TYPE_CHECKING

from ..config import Settings
from ..protocol.clock import new_id, now_ms
from .commands import Commands
from .keys import add_limit_flags, agent_name, project_name, unknown_agent

if TYPE_CHECKING:
    from ..store.repository import Store

SECRET_PREFIX = "chs_"  # as `gateway/dialects/chorus/routes.py` expects


def add_parser(commands: Commands) -> None:
    chorus = commands.add_parser("chorus", help="connect an agent to chat channels (Chorus)")
    actions = chorus.add_subparsers(dest="chorus_command", required=True)
    connect = actions.add_parser("connect", help="make a connection string and print it (once)")
    connect.add_argument("--agent", required=True, type=agent_name, metavar="NAME",
                         help="the agent that answers the channel's messages")
    connect.add_argument("--project", default="default", type=project_name,
                         help="the project its threads belong to (default: default)")
    connect.add_argument("--url", default="http://127.0.0.1:8000", metavar="BASE",
                         help="the gateway's public base URL (default: http://127.0.0.1:8000)")
    add_limit_flags(connect, "connection", ("messages in flight (waiting or running)",
                                            "messages per minute"), "GATEWAY_CHORUS_*")
    actions.add_parser("list", help="show connection strings (never their secrets)")
    revoke = actions.add_parser("revoke", help="stop a connection string at once")
    revoke.add_argument("connection_id", help="its id (`chc_...`, from `gateway chorus list`)")
    for action in actions.choices.values():
        action.add_argument("--database-url", help="overrides GATEWAY_DATABASE_URL")


def run(settings: Settings, args: argparse.Namespace) -> int:
    from ..store.db import create_engine
    from ..store.repository import Store

    if args.chorus_command == "connect":
        refused = unknown_agent(settings, args.agent)
        if refused is not None:
            print(f"gateway: --agent: {refused}")
            return 2

    async def with_store() -> int:
        engine = create_engine(settings.database_url)
        try:
            store = Store(engine)
            if args.chorus_command == "connect":
                return await _connect(store, args)
            if args.chorus_command == "list":
                return await _list(store)
            return await _revoke(store, args.connection_id)
        finally:
            await engine.dispose()

    return asyncio.run(with_store())


async def _connect(store: Store, args: argparse.Namespace) -> int:
    from ..store.tables import ChorusConnectionRow

    secret = SECRET_PREFIX + secrets.token_urlsafe(32)
    row = ChorusConnectionRow(id=new_id("chc_"), project_id=args.project, agent=args.agent,
                              secret_hash=hashlib.sha256(secret.encode()).hexdigest(),
                              prefix=secret[:8], created_ms=now_ms(),
                              max_concurrent_runs=args.max_concurrent_runs,
                              runs_per_minute=args.runs_per_minute,
                              daily_tokens=args.daily_tokens)
    await store.add(row)
    print(f"created {row.id} for agent {row.agent} in project {row.project_id}")
    print("the connection string (shown only now; it is a secret):")
    print(f"{args.url.rstrip('/')}/v1/chorus/{secret}")
    return 0


async def _list(store: Store) -> int:
    print("id\tproject\tagent\tprefix\tstate\tlimits")
    for r in await store.list_chorus_connections():
        state = "revoked" if r.revoked_ms is not None else "active"
        own = [f"{name}={value}" for name, value in (
            ("concurrent", r.max_concurrent_runs), ("per-minute", r.runs_per_minute),
            ("daily-tokens", r.daily_tokens)) if value is not None]
        print("\t".join([r.id, r.project_id, r.agent, r.prefix + "...", state,
                         ",".join(own) or "defaults"]))
    return 0


async def _revoke(store: Store, connection_id: str) -> int:
    if not await store.revoke_chorus_connection(connection_id, now_ms()):
        print(f"gateway: no active connection string {connection_id}")
        return 1
    print(f"revoked {connection_id}")
    return 0
