"""Start-up and CLI hygiene, as an operator meets it: each command run as a real subprocess
(forked from the session's fork server, tests/support/fork_server.py, which gives what `exec`
would without importing the gateway and litellm again for each command).

A start-up that cannot succeed ends at once with one line on stderr and a non-zero status (no
traceback, no lingering process); no command prints a secret; `--log-level` governs the
gateway's own loggers; `gateway config` shows what the process would run with.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.support.fork_server import ForkedProcess, fork_server
from tests.support.gateway_server import free_port, gateway_command

# Each command runs with GATEWAY_ settings of its own, on SQLite: the same in both configurations.
pytestmark = pytest.mark.sqlite_only

PASSWORD = "hunter2-secret"
UNREACHABLE_PG = f"postgresql+asyncpg://gw:{PASSWORD}@127.0.0.1:{free_port()}/gw"


def gateway(*args: str, cwd: Path, timeout: float = 60, **env: str
            ) -> subprocess.CompletedProcess[str]:
    """`python -m gateway *args` in `cwd` with no GATEWAY_ settings but `env`, run to its end."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_")}
    return gateway_command(list(args), env, cwd, timeout, base=clean)


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


def test_a_port_in_use_ends_serve_at_once(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        started = time.monotonic()
        result = gateway("serve", "--port", str(port), cwd=tmp_path, timeout=30)
        elapsed = time.monotonic() - started
    assert result.returncode == 1
    assert one_line(result) == (f"gateway: cannot listen on 127.0.0.1:{port}: "
                                "address already in use")
    print(f"port in use: exited in {elapsed:.1f} s")


def test_an_unreachable_database_ends_serve_with_one_line_and_no_password(tmp_path: Path) -> None:
    result = gateway("serve", "--port", str(free_port()), cwd=tmp_path,
                     GATEWAY_DATABASE_URL=UNREACHABLE_PG)
    assert result.returncode == 1
    line = one_line(result)
    assert line.startswith("gateway: cannot reach the database at postgresql+asyncpg://gw:****@")
    assert PASSWORD not in result.stdout + result.stderr


def test_a_pasted_synchronous_sqlite_url_uses_the_async_driver(tmp_path: Path) -> None:
    result = gateway("migrate", cwd=tmp_path,
                     GATEWAY_DATABASE_URL=f"sqlite:///{tmp_path / 'sync.db'}")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"database is up to date: sqlite+aiosqlite:///{tmp_path}/sync.db"


def test_an_unsupported_database_driver_is_one_line(tmp_path: Path) -> None:
    result = gateway("migrate", cwd=tmp_path,
                     GATEWAY_DATABASE_URL="postgresql+psycopg2://gw@127.0.0.1/gw")
    assert result.returncode == 2
    line = one_line(result)
    assert line.startswith("gateway: invalid setting GATEWAY_DATABASE_URL: not a supported")
    assert "postgresql://" in line and "sqlite:///path" in line


def test_a_failed_migration_ends_serve_with_one_line(tmp_path: Path) -> None:
    db = tmp_path / "future.db"
    with sqlite3.connect(db) as connection:  # a schema from a newer gateway than this one
        connection.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) PRIMARY KEY)")
        connection.execute("INSERT INTO alembic_version VALUES ('9999_from_the_future')")
    result = gateway("serve", "--port", str(free_port()), cwd=tmp_path,
                     GATEWAY_DATABASE_URL=f"sqlite+aiosqlite:///{db}")
    assert result.returncode == 1
    line = one_line(result)
    assert line.startswith(f"gateway: cannot migrate the database at sqlite+aiosqlite:///{db}: ")
    assert "9999_from_the_future" in line


def test_migrate_masks_the_password(tmp_path: Path) -> None:
    ok = gateway("migrate", cwd=tmp_path,
                 GATEWAY_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path / 'gateway.db'}")
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.strip() == (f"database is up to date: sqlite+aiosqlite:///"
                                 f"{tmp_path / 'gateway.db'}")
    failed = gateway("migrate", cwd=tmp_path, GATEWAY_DATABASE_URL=UNREACHABLE_PG)
    assert failed.returncode == 1
    assert PASSWORD not in failed.stdout + failed.stderr
    assert "gw:****@" in one_line(failed)


def test_config_prints_effective_settings_with_secrets_masked(tmp_path: Path) -> None:
    result = gateway("config", cwd=tmp_path, GATEWAY_DATABASE_URL=UNREACHABLE_PG,
                     GATEWAY_MODEL_API_KEY="sk-live-abcdef", GATEWAY_API_KEYS="key-one:alpha",
                     GATEWAY_MAX_STEPS="4", GATEWAY_MODEL_API_BASE="http://user:tok3n@h/v1",
                     GATEWAY_REDIS_URL="redis://:r3dis-pw@cache:6379/0",
                     GATEWAY_TOKEN_SECRET="t" * 40)
    assert result.returncode == 0, result.stderr
    shown = dict(line.split("=", 1) for line in result.stdout.strip().splitlines())
    assert shown["GATEWAY_MAX_STEPS"] == "4"
    assert shown["GATEWAY_MODEL"] == "gateway/demo"
    assert shown["GATEWAY_MODEL_API_KEY"] == "****"
    assert shown["GATEWAY_API_KEYS"] == "****:alpha"
    assert shown["GATEWAY_DATABASE_URL"] == UNREACHABLE_PG.replace(PASSWORD, "****")
    assert shown["GATEWAY_MODEL_API_BASE"] == "http://user:****@h/v1"
    assert shown["GATEWAY_REDIS_URL"] == "redis://:****@cache:6379/0"
    assert shown["GATEWAY_TOKEN_SECRET"] == "****"
    for secret in (PASSWORD, "sk-live-abcdef", "key-one", "tok3n", "r3dis-pw", "t" * 40):
        assert secret not in result.stdout + result.stderr


def test_version_answers(tmp_path: Path) -> None:
    from importlib.metadata import version

    result = gateway("--version", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"gateway {version('gateway')}"


def test_a_direct_adapter_that_cannot_serve_the_model_says_why_in_one_line(
        tmp_path: Path) -> None:
    """Refused before the database, the port or uvicorn start: only litellm's import (it
    decides the provider) comes first."""
    port = free_port()
    started = time.monotonic()
    result = gateway("serve", "--port", str(port), cwd=tmp_path, timeout=120,
                     GATEWAY_MODEL_ADAPTER="direct", GATEWAY_MODEL="cohere/command-r")
    print(f"direct adapter refused in {time.monotonic() - started:.1f} s")
    assert result.returncode == 2
    assert one_line(result) == (
        "gateway: GATEWAY_MODEL_ADAPTER=direct cannot serve 'cohere/command-r': "
        "provider 'cohere' is neither an OpenAI-compatible chat-completions API nor "
        "Anthropic's or Gemini's")
    assert not (tmp_path / "data").exists()  # nothing was started


def test_cors_origins_that_are_not_origins_stop_serve_in_one_line(tmp_path: Path) -> None:
    result = gateway("serve", "--port", str(free_port()), cwd=tmp_path,
                     GATEWAY_CORS_ORIGINS="not a url")
    assert result.returncode == 2
    assert one_line(result).startswith(
        "gateway: invalid setting GATEWAY_CORS_ORIGINS='not a url': 'not a url' is not an origin")


def test_an_sqlite_path_in_a_missing_directory_stops_serve_in_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "typo" / "gateway.db"
    result = gateway("serve", "--port", str(free_port()), cwd=tmp_path,
                     GATEWAY_DATABASE_URL=f"sqlite:///{missing}")
    assert result.returncode == 2
    assert "does not exist" in one_line(result)
    assert not missing.parent.exists()


def test_config_with_a_bad_value_is_one_line_and_status_2(tmp_path: Path) -> None:
    result = gateway("config", cwd=tmp_path, GATEWAY_HEARTBEAT_SECONDS="-1")
    assert result.returncode == 2
    assert one_line(result).startswith("gateway: invalid setting GATEWAY_HEARTBEAT_SECONDS=")


def test_a_short_token_secret_stops_serve_with_one_line_and_status_2(tmp_path: Path) -> None:
    result = gateway("serve", "--port", str(free_port()), cwd=tmp_path,
                     GATEWAY_TOKEN_SECRET="pw123")
    assert result.returncode == 2
    assert one_line(result).startswith("gateway: invalid setting GATEWAY_TOKEN_SECRET: too short")
    assert "pw123" not in result.stderr  # a secret is never shown, not even a bad one


def test_a_token_secret_equal_to_the_identity_secret_stops_serve(tmp_path: Path) -> None:
    """The gateway's tokens and the identity provider's must not be signed with one key."""
    shared = "same-secret-for-both-0123456789abcdef"
    result = gateway("serve", "--port", str(free_port()), cwd=tmp_path,
                     GATEWAY_TOKEN_SECRET=shared, GATEWAY_OAUTH_HS256_SECRET=shared,
                     GATEWAY_OAUTH_HS256_ISSUER="https://app.example",
                     GATEWAY_OIDC_AUDIENCE="app")
    assert result.returncode == 2
    assert one_line(result).startswith("gateway: invalid setting GATEWAY_TOKEN_SECRET: must "
                                       "differ from GATEWAY_OAUTH_HS256_SECRET")
    assert shared not in result.stderr


def test_a_keys_daily_token_budget_is_finite_by_default(tmp_path: Path) -> None:
    result = gateway("config", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    shown = dict(line.split("=", 1) for line in result.stdout.strip().splitlines())
    assert int(shown["GATEWAY_KEY_DAILY_TOKENS"]) > 0
    assert int(shown["GATEWAY_CHORUS_DAILY_TOKENS"]) > 0
    assert shown["GATEWAY_QUOTA_OUTAGE"] == "local"


def test_log_level_governs_the_gateways_own_loggers(tmp_path: Path) -> None:
    """In development mode the gateway warns at start-up; `--log-level error` silences it."""
    port = free_port()
    log = (tmp_path / "serve.log").open("w+")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_")}
    args = ["serve", "--port", str(port), "--log-level", "error"]
    forks = fork_server()
    process: subprocess.Popen[bytes] | ForkedProcess = (
        forks.spawn(args, clean, tmp_path, tmp_path / "serve.log")
        if forks is not None and forks.can_fork(args, clean) else
        subprocess.Popen([sys.executable, "-m", "gateway", *args], cwd=tmp_path, env=clean,
                         stdout=log, stderr=subprocess.STDOUT))
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            assert process.poll() is None, (tmp_path / "serve.log").read_text()
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        else:
            raise AssertionError("gateway did not start")
    finally:
        process.terminate()
        process.wait(timeout=30)
    output = (tmp_path / "serve.log").read_text()
    assert "development mode" not in output
    assert "WARNING" not in output and "INFO" not in output


def test_a_broken_tools_module_ends_serve_with_one_line_not_a_traceback(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-tools.py"
    result = gateway("serve", "--port", str(free_port()), "--log-level", "warning",
                     cwd=tmp_path, timeout=120, GATEWAY_TOOLS=str(missing))
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "Traceback" not in output
    [line] = [row for row in output.splitlines() if "cannot start" in row]
    assert "FileNotFoundError: [Errno 2] No such file or directory" in line
    assert str(missing) in line
