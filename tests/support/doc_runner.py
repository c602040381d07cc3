"""Runs the documents' examples (tests/support/doc_examples.py) as a reader runs them.

From the repository's root, against a real `gateway serve` on a free loopback port (the
examples' `127.0.0.1:8000` is rewritten to it, and nothing else is), forked from the suite's
fork server as the tests' other gateways are (or started by `./scripts/serve` itself where it
cannot be), on a database of the test's own, with the demo model at full speed. `gateway` is not on the PATH, as on a fresh
clone: the examples call `./scripts/gateway`.

- **Shell blocks** run in bash with `set -euo pipefail` (a failing command or an unset variable
  fails the example); the variables a block sets are kept for the next blocks of the same
  document, as in one terminal. Their curl commands fail on an HTTP error unless the block
  says what it expects (`expect=`). Whatever a block left running in the background is stopped
  when it ends.
- **A serve command** (`./scripts/serve`, `./scripts/gateway serve`, with the variables before
  it) is not run in the block: once the block has run, the gateway is started again with
  those settings, on the same database and port, and kept for the next blocks.
- **Python blocks** of a document run in one interpreter (`.venv/bin/python`), one namespace,
  from the root, with `tests/support/doc_fixtures` importable (the operator's own modules an
  example imports, such as `shop.tools`).
- **A new document** starts on the default gateway, and on a new database when the previous one
  made a key (development mode has ended there, for good).
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import httpx

from tests.support.doc_examples import ROOT, Example
from tests.support.doc_python import REPLY
from tests.support.fork_server import ForkedProcess, fork_server
from tests.support.gateway_server import free_port

TIMEOUT_SECONDS = 120
SERVE = re.compile(r"\./scripts/serve\b|\./scripts/gateway\s+serve\b")
DOC_ADDRESS = re.compile(r"(127\.0\.0\.1|localhost):8000\b")
# bash's own variables, never carried from one block to the next.
SHELL_OWN = re.compile(r"^(BASH.*|PIPESTATUS|FUNCNAME|LINENO|RANDOM|SECONDS|SRANDOM|EPOCH.*|"
                       r"COLUMNS|LINES|OPTIND|OPTARG|_.*|HIST.*|PWD|OLDPWD|SHLVL|PS[0-9])$")
FIXTURES = Path(__file__).resolve().parent / "doc_fixtures"


class ExampleFailed(AssertionError):
    pass


def _base_environment(database: Path) -> dict[str, str]:
    """This process's environment as a fresh clone's shell has it: no GATEWAY_* setting of
    the test session's, no virtual environment on the PATH."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GATEWAY_", "PYTEST_")) and k != "VIRTUAL_ENV"}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if p and not p.startswith(str(ROOT / ".venv")))
    env["GATEWAY_DATABASE_URL"] = f"sqlite:///{database}"
    # The demo model as fast as it goes: the same answers, sooner (a setting of its own).
    env["GATEWAY_DEMO_TOKENS_PER_SECOND"] = "0"
    return env


class DocRunner:
    def __init__(self, workdir: Path) -> None:
        self.workdir, self.port = workdir, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.databases = 0
        self.env = _base_environment(self._new_database())
        self.server: subprocess.Popen[bytes] | ForkedProcess | None = None
        self.server_settings: dict[str, str] | None = None  # those the running one has
        self.document: str | None = None
        self.python: subprocess.Popen[str] | None = None
        self.state = workdir / "shell-state"
        self.pristine = set(subprocess.run(["bash", "-c", "compgen -v"], env=self.env,
                                           capture_output=True, text=True).stdout.split())

    # -- the gateway --------------------------------------------------------------------------

    def _new_database(self) -> Path:
        self.databases += 1
        return self.workdir / f"gateway-{self.databases}.db"

    def _keys_made(self) -> bool:
        path = Path(self.env["GATEWAY_DATABASE_URL"].removeprefix("sqlite:///"))
        if not path.exists():
            return False
        with sqlite3.connect(path) as db:
            try:
                return bool(db.execute("select count(*) from api_keys").fetchone()[0])
            except sqlite3.OperationalError:  # not migrated yet
                return False

    def serve(self, settings: dict[str, str]) -> None:
        """The gateway with these GATEWAY_* settings (over the defaults), started again only
        when they differ from the running one's."""
        if self.server is not None and self.server.poll() is None \
                and self.server_settings == settings:
            return
        self.stop_server()
        self.server = self._start({**self.env, **settings})
        self.server_settings = settings
        deadline = time.monotonic() + TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            if self.server.poll() is not None:
                raise ExampleFailed(f"./scripts/serve exited:\n{self.server_log()}")
            try:
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise ExampleFailed(f"./scripts/serve did not start:\n{self.server_log()}")

    def _start(self, env: dict[str, str]) -> subprocess.Popen[bytes] | ForkedProcess:
        """`gateway serve` on the port, from the root: forked from the suite's fork server
        (which imported the gateway once) when it can be, else `./scripts/serve` itself."""
        args = ["serve", "--port", str(self.port), "--log-level", "warning"]
        log = self.workdir / f"gateway-{self.port}.log"
        settings = {k: v for k, v in env.items() if k.startswith("GATEWAY_")}
        forked = {**{k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_")},
                  **settings}
        forks = fork_server()
        if forks is not None and forks.can_fork(args, forked):
            return forks.spawn(args, forked, ROOT, log)
        with open(log, "ab") as out:
            return subprocess.Popen([str(ROOT / "scripts" / "serve"), *args[1:]], cwd=ROOT,
                                    env=env, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)

    def server_log(self) -> str:
        return (self.workdir / f"gateway-{self.port}.log").read_text(errors="replace")[-6000:]

    def stop_server(self) -> None:
        if self.server is not None and self.server.poll() is None:
            self.server.send_signal(signal.SIGTERM)
            try:
                self.server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.server.kill()
                self.server.wait()
        self.server = None

    # -- documents ----------------------------------------------------------------------------

    def begin(self, document: str) -> None:
        """A new document: its own shell and interpreter, the default gateway, and a new
        database if the last one has a key."""
        if document == self.document:
            return
        self.document = document
        self.close_python()
        self.state.write_text("")
        if self._keys_made():
            self.env["GATEWAY_DATABASE_URL"] = f"sqlite:///{self._new_database()}"
            self.stop_server()
        self.serve({})

    def run(self, example: Example) -> str:
        """Run one example; its output, or `ExampleFailed` saying what went wrong."""
        self.begin(example.document)
        time.sleep(example.wait)
        if example.language == "python":
            return self._python(example)
        return self._shell(example)

    def close(self) -> None:
        self.close_python()
        self.stop_server()

    # -- shell --------------------------------------------------------------------------------

    def _shell_script(self, example: Example, serve_file: Path) -> str:
        code = DOC_ADDRESS.sub(f"127.0.0.1:{self.port}", example.code)
        code = SERVE.sub("__serve", code)
        curl = ("" if example.expect else
                'curl() { command curl --fail-with-body --max-time 120 "$@"; }\n')
        return (f"source {self.state}\n"
                f'__serve() {{ env > {serve_file}; }}\n{curl}'
                "set -euo pipefail\n"
                f"{code}\n"
                "__keep() { local name; for name in $(compgen -v); do\n"
                f'  grep -qxF "$name" {self.workdir / "pristine"} && continue\n'
                f'  [[ $name =~ {SHELL_OWN.pattern} ]] && continue\n'
                '  declare -p "$name" 2>/dev/null || true; done; }\n'
                f"__keep > {self.state}.new && mv {self.state}.new {self.state}\n")

    def _shell(self, example: Example) -> str:
        (self.workdir / "pristine").write_text("\n".join(sorted(self.pristine)) + "\n")
        serve_file = self.workdir / "serve-request"
        serve_file.unlink(missing_ok=True)
        output_path = self.workdir / "output"
        with open(output_path, "w") as output:
            process = subprocess.Popen(["bash", "-c", self._shell_script(example, serve_file)],
                                       cwd=ROOT, env=self.env, stdout=output,
                                       stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       start_new_session=True)
            try:
                status = process.wait(timeout=TIMEOUT_SECONDS)
            except subprocess.TimeoutExpired:
                status = None
            finally:  # what the block left in the background (`&`) goes with it
                try:
                    os.killpg(process.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        shown = output_path.read_text(errors="replace")
        if status != 0:
            raise ExampleFailed(f"{example.name} exited with {status}:\n{example.code}\n"
                                f"--- output ---\n{shown[-6000:]}")
        self._check(example, shown)
        if serve_file.exists():
            asked = dict(line.split("=", 1) for line in serve_file.read_text().splitlines()
                         if line.startswith("GATEWAY_") and "=" in line)
            asked = {k: v for k, v in asked.items() if self.env.get(k) != v}
            self.serve(asked)
        return shown

    # -- python -------------------------------------------------------------------------------

    def _python(self, example: Example) -> str:
        if self.python is None:
            env = {**self.env, "PYTHONPATH": str(FIXTURES)}
            self.python = subprocess.Popen(
                [str(ROOT / ".venv" / "bin" / "python"), "-u",
                 str(Path(__file__).with_name("doc_python.py"))],
                cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, text=True)
        assert self.python.stdin is not None and self.python.stdout is not None
        code = DOC_ADDRESS.sub(f"127.0.0.1:{self.port}", example.code)
        self.python.stdin.write(json.dumps({"name": example.name, "code": code}) + "\n")
        self.python.stdin.flush()
        reply, stray = None, []
        deadline = time.monotonic() + TIMEOUT_SECONDS
        while reply is None:
            ready, _, _ = select.select([self.python.stdout], [], [],
                                        max(0.0, deadline - time.monotonic()))
            line = self.python.stdout.readline() if ready else ""
            if not line:
                self.close_python()
                raise ExampleFailed(f"{example.name}: no answer from the interpreter:\n"
                                    f"{example.code}\n{''.join(stray)[-4000:]}")
            if line.startswith(REPLY):
                reply = json.loads(line[len(REPLY):])
            else:
                stray.append(line)
        shown = "".join(stray) + reply["output"]
        if not reply["ok"]:
            raise ExampleFailed(f"{example.name} raised:\n{example.code}\n--- output ---\n"
                                f"{shown[-4000:]}\n{reply['error']}")
        self._check(example, shown)
        return shown

    def close_python(self) -> None:
        if self.python is not None:
            if self.python.stdin:
                self.python.stdin.close()
            try:
                self.python.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.python.kill()
                self.python.wait()
            self.python = None

    @staticmethod
    def _check(example: Example, shown: str) -> None:
        missing = [text for text in example.expect if text not in shown]
        if missing:
            raise ExampleFailed(f"{example.name}: its output lacks {missing}:\n{example.code}\n"
                                f"--- output ---\n{shown[-4000:]}")
