"""Settings: one object, read once from the environment (and CLI flags), passed down explicitly.

Nothing below `app.create_app` reads the environment itself, so tests can run several gateways
with different settings in one process.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path

DEMO_MODEL = "gateway/demo"


@dataclass(frozen=True)
class Settings:
    database_url: str = ""
    model: str = DEMO_MODEL
    model_api_base: str | None = None
    model_api_key: str | None = None
    # API key -> project id. Empty means development mode: any key, one default project.
    api_keys: dict[str, str] = field(default_factory=dict)
    disconnect_grace_seconds: float = 30.0
    heartbeat_seconds: float = 15.0
    lease_seconds: float = 30.0
    max_steps: int = 10
    tool_timeout_seconds: float = 30.0
    tools_module: str | None = None
    mcp_servers: str | None = None
    cors_origins: tuple[str, ...] = ("*",)

    @property
    def development_mode(self) -> bool:
        return not self.api_keys

    def with_overrides(self, **changes: object) -> "Settings":
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


def default_database_url(cwd: Path | None = None) -> str:
    """An SQLite file under ./data, so a first `gateway serve` needs no set-up at all."""
    data_dir = (cwd or Path.cwd()) / "data"
    return f"sqlite+aiosqlite:///{data_dir / 'gateway.db'}"


def parse_api_keys(raw: str) -> dict[str, str]:
    """`key1,key2` or `key1:projectA,key2:projectB`; a key without a project gets `default`."""
    keys: dict[str, str] = {}
    for item in raw.split(","):
        item = item.strip()
        if not item:
            continue
        key, _, project = item.partition(":")
        keys[key.strip()] = project.strip() or "default"
    return keys


def settings_from_env(env: os._Environ[str] | dict[str, str] | None = None) -> Settings:
    env = os.environ if env is None else env
    return Settings(
        database_url=env.get("GATEWAY_DATABASE_URL") or default_database_url(),
        model=env.get("GATEWAY_MODEL") or DEMO_MODEL,
        model_api_base=env.get("GATEWAY_MODEL_API_BASE") or None,
        model_api_key=env.get("GATEWAY_MODEL_API_KEY") or None,
        api_keys=parse_api_keys(env.get("GATEWAY_API_KEYS", "")),
        disconnect_grace_seconds=float(env.get("GATEWAY_DISCONNECT_GRACE_SECONDS", "30")),
        heartbeat_seconds=float(env.get("GATEWAY_HEARTBEAT_SECONDS", "15")),
        lease_seconds=float(env.get("GATEWAY_LEASE_SECONDS", "30")),
        max_steps=int(env.get("GATEWAY_MAX_STEPS", "10")),
        tool_timeout_seconds=float(env.get("GATEWAY_TOOL_TIMEOUT_SECONDS", "30")),
        tools_module=env.get("GATEWAY_TOOLS") or None,
        mcp_servers=env.get("GATEWAY_MCP_SERVERS") or None,
    )
