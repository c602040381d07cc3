"""The pieces of the browser test: build the React example, serve it, and drive Chromium.

The app is built with Vite exactly as a user builds it (`npm run build`), pointed at the test's
gateway, served from a loopback port, and opened in Debian's Chromium by `browser.mjs`
(playwright-core, no browser download). The Python test sends that script one command per step
and gets back what the page shows, so it can check the page, the gateway and the model together.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import select
import shutil
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
APP_DIR = ROOT / "examples" / "react"
E2E_DIR = Path(__file__).resolve().parent
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")


def require_tools() -> None:
    """Skip on a laptop without Node or Chromium; in CI (where scripts/test installs them) fail."""
    missing = [name for name, ok in (("node", shutil.which("node")), ("npm", shutil.which("npm")),
                                     ("chromium", Path(CHROMIUM).exists())) if not ok]
    if missing:
        message = (f"browser test needs {', '.join(missing)} (scripts/test installs them; "
                   "or: apt-get install -y chromium)")
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


def npm_ci(directory: Path) -> None:
    """`npm ci` when node_modules is missing or older than the lock file (scripts/test already
    ran it in CI; this covers a plain `pytest tests/e2e`)."""
    marker = directory / "node_modules" / ".package-lock.json"
    lock = directory / "package-lock.json"
    if marker.exists() and marker.stat().st_mtime >= lock.stat().st_mtime:
        return
    run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], directory, timeout=600)


def run(cmd: list[str], cwd: Path, timeout: float, env: dict[str, str] | None = None) -> None:
    proc = subprocess.run(cmd, cwd=cwd, env={**os.environ, **(env or {})}, capture_output=True,
                          text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n"
                           f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")


def build_app(out_dir: Path, gateway_url: str, user_key: str,
              extra_env: dict[str, str] | None = None) -> Path:
    """`npm run build` of the React example, configured the documented way (VITE_* variables)."""
    return vite_build(APP_DIR, out_dir, {"VITE_GATEWAY_URL": gateway_url,
                                         "VITE_USER_KEY": user_key, **(extra_env or {})})


def vite_build(app_dir: Path, out_dir: Path, env: dict[str, str]) -> Path:
    """`npm run build` of an example into `out_dir`, with its VITE_* settings in `env`."""
    npm_ci(app_dir)
    run(["npm", "run", "build", "--", "--outDir", str(out_dir), "--emptyOutDir"], app_dir,
        timeout=300, env=env)
    return out_dir


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def static_server(directory: Path) -> Iterator[str]:
    """Serve a built app on a free loopback port (a plain static host, like a user's CDN)."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, name="e2e-static", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def clean(result: dict[str, Any]) -> dict[str, Any]:
    """A step's page snapshot, once we know no request failed and nothing was logged as error."""
    failed = [r for r in result["requests"] if r["status"] >= 400]
    assert not failed, f"the browser's requests got errors: {json.dumps(failed, indent=1)}"
    assert not result["errors"], f"browser errors: {result['errors']}"
    return result["page"]


class StepFailed(AssertionError):
    """The browser could not complete a step; the message holds what the page showed."""


class Browser:
    """`node <script>` (browser.mjs by default) as a step-by-step remote control (see that file
    for the commands)."""

    def __init__(self, app_url: str, gateway_url: str, log_path: Path,
                 script: str = "browser.mjs") -> None:
        npm_ci(E2E_DIR)
        self.log_path = log_path
        with open(log_path, "w") as log:  # a file, not a pipe: a chatty stderr cannot block it
            self.process = subprocess.Popen(
                ["node", str(E2E_DIR / script), app_url, gateway_url],
                cwd=E2E_DIR, env={**os.environ, "CHROMIUM": CHROMIUM}, text=True,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
            )

    def step(self, action: str, timeout: float = 45, **args: Any) -> dict[str, Any]:
        """Do one action and return `{page, requests, errors}`; a failed step raises with them."""
        assert self.process.stdin and self.process.stdout
        self.process.stdin.write(json.dumps({"action": action, **args}) + "\n")
        self.process.stdin.flush()
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        line = self.process.stdout.readline() if ready else ""
        if not line:
            self.close()
            stderr = self.log_path.read_text(errors="replace")
            raise StepFailed(f"the browser script gave no reply to {action!r} within {timeout} s "
                             f"(exit {self.process.poll()}):\n{stderr[-4000:]}")
        result = json.loads(line)
        if not result["ok"]:
            raise StepFailed(f"step {action!r} failed: {result['error']}\n"
                             f"page: {json.dumps(result['page'], indent=1)}\n"
                             f"gateway requests: {json.dumps(result['requests'], indent=1)}\n"
                             f"browser errors: {result['errors']}")
        return result

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                assert self.process.stdin
                self.process.stdin.write(json.dumps({"action": "close"}) + "\n")
                self.process.stdin.close()
                self.process.wait(timeout=15)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait()
