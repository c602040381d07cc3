"""`gateway keys create | list | revoke [--project NAME]`: managed API keys in the database.

A key belongs to one project (`--project`, default `default`: the project development mode
serves, so the first key made on a laptop sees the threads made before it).

`create` prints the new key once (only its hash is stored, so it cannot be shown again);
`create --admin` makes an operator's key, for the console (`/admin`) and `/v1/admin/...` only;
`list` shows ids, prefixes, expiry, state, limits, agent and last use (to the minute), never a
key; `revoke` stops a key in
every process within `GATEWAY_KEY_CACHE_SECONDS`.
"""

from __future__ import annotations

import argparse
import asyncio
import re
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from ..config import Settings
from ..protocol.clock import now_ms
from .commands import Commands

if TYPE_CHECKING:
    from ..store.repository import Store

T = TypeVar("T")
_PROJECT = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
_DURATION = re.compile(r"^([0-9]+)([smhd])$")
DEFAULT_PROJECT = "default"  # development mode's project (`auth.caller`)
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def add_parser(commands: Commands) -> None:
    keys = commands.add_parser("keys", help="create, list or revoke managed API keys")
    actions = keys.add_subparsers(dest="keys_command", required=True)
    create = actions.add_parser("create", help="make a key and print it (once)")
    create.add_argument("--project", default=DEFAULT_PROJECT, type=project_name,
                        help="the project whose threads the key reaches (default: default, "
                             "development mode's)")
    create.add_argument("--agent", type=agent_name, metavar="NAME",
                        help="the agent this key's Tambo runs use (default: "
                             "GATEWAY_DEFAULT_AGENT); checked against the configured agents")
    create.add_argument("--admin", action="store_true",
                        help="an operator's key: the console (/admin) and /v1/admin/... of "
                             "its project only; it cannot run agents")
    create.add_argument("--expires", type=expiry, metavar="DURATION|DATE",
                        help="e.g. 30d, 12h, or an ISO date/time (UTC); default: never")
    add_limit_flags(create, "key", ("runs at once", "runs started per minute"),
                    "GATEWAY_KEY_*")
    listing = actions.add_parser("list", help="show keys (never the keys themselves)")
    listing.add_argument("--project", type=project_name)
    revoke = actions.add_parser("revoke", help="stop a key, in every process")
    revoke.add_argument("--project", default=DEFAULT_PROJECT, type=project_name,
                        help="the key's project (default: default)")
    revoke.add_argument("key_id", metavar="KEY_ID_OR_KEY",
                        help="the key's id (`key_...`, from `gateway keys list`), or the key "
                             "itself (`gwk_...`)")
    for action in (create, listing, revoke):
        action.add_argument("--database-url", help="overrides GATEWAY_DATABASE_URL")


def project_name(value: str) -> str:
    if not _PROJECT.match(value):
        raise argparse.ArgumentTypeError("letters, digits and ._- only (at most 128)")
    return value


def agent_name(value: str) -> str:
    from ..engine.agents.agent import AGENT_NAME

    if not AGENT_NAME.match(value):
        raise argparse.ArgumentTypeError("letters, digits, _ and - only (at most 64)")
    return value


def unknown_agent(settings: Settings, name: str | None) -> str | None:
    """Why a key cannot run agent `name` on this configuration (None: it can)."""
    from ..engine.agents.agent import AgentError
    from ..engine.agents.file import registry_for

    if name is None:
        return None
    try:
        agents = registry_for(settings)
    except AgentError as exc:
        return f"the agents cannot be checked: {exc}"
    if agents.get(name) is None:
        return f"no agent {name!r} is configured (agents: {', '.join(a.name for a in agents)})"
    return None


def add_limit_flags(parser: argparse.ArgumentParser, holder: str, runs: tuple[str, str],
                    settings: str) -> None:
    """The three quota flags a credential takes (a key, a Chorus connection string), so both
    commands spell and explain them alike."""
    for flag, what in (("--max-concurrent-runs", runs[0]), ("--runs-per-minute", runs[1]),
                       ("--daily-tokens", "model tokens per UTC day")):
        parser.add_argument(flag, type=non_negative, metavar="N",
                            help=f"this {holder}'s limit of {what} (0: none; default: the "
                                 f"{settings} setting)")


def non_negative(value: str) -> int:
    if not value.isdigit():
        raise argparse.ArgumentTypeError("a whole number, 0 or more")
    return int(value)


def expiry(value: str, now: datetime | None = None) -> int:
    """Epoch ms of `30d`/`12h`/`15m`/`90s` from now, or of an ISO date (UTC unless it says)."""
    now = now or datetime.now(UTC)
    if match := _DURATION.match(value):
        at = now + timedelta(**{_UNITS[match[2]]: int(match[1])})
    else:
        try:
            at = datetime.fromisoformat(value)
        except ValueError:
            raise argparse.ArgumentTypeError("a duration (30d, 12h, 15m) or an ISO date") \
                from None
        at = at if at.tzinfo else at.replace(tzinfo=UTC)
    if at <= now:
        raise argparse.ArgumentTypeError("the expiry is in the past")
    return int(at.timestamp() * 1000)


def _when(ms: int | None) -> str:
    return "-" if ms is None else datetime.fromtimestamp(ms / 1000, UTC).strftime(
        "%Y-%m-%d %H:%M UTC")


def _limit(value: int | None) -> str:
    return "default" if value is None else "none" if value == 0 else str(value)


async def managed_keys_exist(database_url: str) -> bool:
    """Whether the database holds a managed key, revoked and expired ones included (then
    development mode is over for good); a database that does not exist yet (or has no schema)
    holds none, and is not created by asking."""
    from sqlalchemy.engine import make_url

    from ..store.db import create_engine
    from ..store.repository import Store

    database = make_url(database_url).database
    if database_url.startswith("sqlite") and not (database and Path(database).exists()):
        return False
    engine = create_engine(database_url)
    try:
        return await Store(engine).count_api_keys() > 0
    except Exception:  # unreachable or not migrated: no keys to speak of
        return False
    finally:
        await engine.dispose()


def run(settings: Settings, args: argparse.Namespace) -> int:
    from ..store.db import create_engine
    from ..store.repository import Store

    async def with_store(work: Callable[[Store], Awaitable[T]]) -> T:
        engine = create_engine(settings.database_url)
        try:
            return await work(Store(engine))
        finally:
            await engine.dispose()

    if args.keys_command == "create":
        if args.admin and args.agent:
            print("gateway: --agent: an admin key runs no agent")
            return 2
        refused = unknown_agent(settings, args.agent)
        if refused is not None:
            print(f"gateway: --agent: {refused}")
            return 2
        return asyncio.run(with_store(lambda store: _create(store, args)))
    if args.keys_command == "list":
        return asyncio.run(with_store(lambda store: _list(store, args.project)))
    return asyncio.run(with_store(lambda store: _revoke(store, args.project, args.key_id)))


async def _create(store: Store, args: argparse.Namespace) -> int:
    from ..auth.keyring import key_row, new_key

    key = new_key()
    row = key_row(key, args.project, args.expires, args.max_concurrent_runs,
                  args.runs_per_minute, args.daily_tokens, args.agent, args.admin)
    await store.add_api_key(row)
    print(f"created {'admin key ' if row.admin else ''}{row.id} in project {row.project_id} "
          f"(expires: {_when(row.expires_ms)}{f'; agent: {row.agent}' if row.agent else ''})")
    print("the key (shown only now; store it safely):")
    print(key)
    return 0


async def _list(store: Store, project: str | None) -> int:
    rows = await store.list_api_keys(project)
    now = now_ms()
    print("id\tproject\tprefix\tcreated\texpires\tstate\tconcurrent\tper-minute\tdaily-tokens"
          "\tkind\tagent\tlast-used")
    for r in rows:
        state = ("revoked" if r.revoked_ms is not None else
                 "expired" if r.expires_ms is not None and r.expires_ms <= now else "active")
        print("\t".join([r.id, r.project_id, r.prefix + "...", _when(r.created_ms),
                         _when(r.expires_ms), state, _limit(r.max_concurrent_runs),
                         _limit(r.runs_per_minute), _limit(r.daily_tokens),
                         "admin" if r.admin else "client", r.agent or "-",
                         _when(r.last_used_ms)]))
    return 0


async def _revoke(store: Store, project: str, key_id: str) -> int:
    from ..auth.keyring import KEY_PREFIX, hash_key

    if key_id.startswith(KEY_PREFIX):  # the key itself: its id, found by its hash
        found = await store.find_api_key(hash_key(key_id))
        if found is None:
            print("gateway: no such key")
            return 1
        key_id = found.id
    if not await store.revoke_api_key(key_id, project, now_ms()):
        print(f"gateway: no active key {key_id} in project {project}")
        return 1
    print(f"revoked {key_id}")
    return 0
