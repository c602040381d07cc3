"""Throwaway PostgreSQL, Redis and HAProxy on loopback, for the PostgreSQL + Redis configuration.

`GATEWAY_TEST_BACKEND=postgres` selects it (`sqlite`, the default, needs none of this). Each
engine gets its own data directory under a temporary directory and a free port; PostgreSQL runs
as the `postgres` user when the tests run as root (initdb refuses root).
"""

from __future__ import annotations

import hashlib
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import httpx

from tests.support.gateway_server import free_port

PG_BIN = Path("/usr/lib/postgresql/15/bin")


def backend() -> str:
    return os.environ.get("GATEWAY_TEST_BACKEND", "sqlite")


def _as_postgres(argv: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *argv] if os.getuid() == 0 else argv


class Postgres:
    def __init__(self, root: Path) -> None:
        self.dir = root / "pg"
        self.port = free_port()

    def start(self) -> Postgres:
        self.dir.mkdir(parents=True)
        if os.getuid() == 0:
            user = pwd.getpwnam("postgres")
            os.chown(self.dir.parent, user.pw_uid, user.pw_gid)
            os.chown(self.dir, user.pw_uid, user.pw_gid)
        run = lambda *argv: subprocess.run(_as_postgres([str(a) for a in argv]), check=True,  # noqa: E731
                                           capture_output=True, cwd="/")
        run(PG_BIN / "initdb", "-D", self.dir / "data", "-U", "postgres", "--auth=trust",
            "--no-sync")
        run(PG_BIN / "pg_ctl", "-D", self.dir / "data", "-l", self.dir / "log", "-w", "-o",
            self.options, "start")
        return self

    @property
    def options(self) -> str:
        return f"-h 127.0.0.1 -p {self.port} -k {self.dir} -c fsync=off -c max_connections=400"

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}"

    def create_database(self, name: str) -> str:
        subprocess.run([str(PG_BIN / "createdb"), "-h", "127.0.0.1", "-p", str(self.port),
                        "-U", "postgres", name], capture_output=True)  # exists already: fine
        return f"{self.url}/{name}"

    def pause(self) -> None:
        """Stop accepting connections (fast shutdown): the database is unreachable."""
        subprocess.run(_as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(self.dir / "data"),
                                     "-m", "fast", "-w", "stop"]), check=True, cwd="/",
                       capture_output=True)

    def resume(self) -> None:
        subprocess.run(_as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(self.dir / "data"), "-l",
                                     str(self.dir / "log"), "-w", "-o", self.options, "start"]),
                       check=True, cwd="/", capture_output=True)

    def stop(self) -> None:
        subprocess.run(_as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(self.dir / "data"),
                                     "-m", "immediate", "stop"]), cwd="/", capture_output=True)


class RedisServer:
    def __init__(self, root: Path) -> None:
        self.dir = root / "redis"
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> RedisServer:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            ["redis-server", "--bind", "127.0.0.1", "--port", str(self.port), "--save", "",
             "--appendonly", "no", "--dir", str(self.dir)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if subprocess.run(["redis-cli", "-p", str(self.port), "ping"],
                              capture_output=True).stdout.strip() == b"PONG":
                return self
            time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def restart(self) -> None:
        """Kill it and start an empty one on the same port, as a crash and restart would."""
        self.stop()
        self.start()


class Engines:
    """PostgreSQL and Redis for one test session."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="gateway-engines-"))
        self.postgres = Postgres(self.root)
        self.redis = RedisServer(self.root)

    def start(self) -> Engines:
        self.postgres.start()
        self.redis.start()
        return self

    def stop(self) -> None:
        self.redis.stop()
        self.postgres.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def env_for(self, workdir: Path) -> dict[str, str]:
        """Gateway settings for a group of processes sharing `workdir`: one database each."""
        name = "gw_" + hashlib.sha1(str(workdir).encode()).hexdigest()[:12]
        return {"GATEWAY_DATABASE_URL": self.postgres.create_database(name),
                "GATEWAY_REDIS_URL": self.redis.url}


ENGINES: Engines | None = None  # set by the session (tests/conftest.py) when selected


class HAProxy:
    """Round robin, no stickiness, in front of gateway processes; a config generated here."""

    # A process that misses one health check (300 ms) is out at once: crash tests want that.
    FAST_CHECK = "inter 300ms fall 1 rise 2"

    def __init__(self, workdir: Path, backends: list[int], check: str = FAST_CHECK) -> None:
        self.workdir, self.backends, self.check = workdir, backends, check
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> HAProxy:
        servers = "\n".join(f"    server g{i} 127.0.0.1:{port} check {self.check}"
                            for i, port in enumerate(self.backends))
        config = self.workdir / "haproxy.cfg"
        config.write_text(f"""global
    maxconn 2000
defaults
    mode http
    timeout connect 2s
    timeout client 120s
    timeout server 120s
    option http-server-close
frontend gateway
    bind 127.0.0.1:{self.port}
    default_backend gateways
backend gateways
    balance roundrobin
    option httpchk GET /health
    retries 2
    option redispatch 1
{servers}
""")
        self.process = subprocess.Popen(["haproxy", "-db", "-f", str(config)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                time.sleep(0.05)
        raise RuntimeError("haproxy did not start")

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            self.process.wait()
