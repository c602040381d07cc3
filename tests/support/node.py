"""Run the Node conformance harness (tests/conformance) from Python tests.

The Tambo wire contract is defined by what the real JavaScript clients do, so
conformance tests drive `@tambo-ai/client` and `@ag-ui/client` in Node 20
against a running gateway and get back one JSON result.

Each helper has an ``a``-prefixed async twin. Use it when the gateway under
test is served on the test's own event loop: a blocking ``subprocess.run``
there would freeze the server the Node process is talking to.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

CONFORMANCE_DIR = Path(__file__).resolve().parent.parent / "conformance"


class NodeHarnessError(RuntimeError):
    """The Node harness itself failed (not a gateway behaviour to assert on)."""


def have_node() -> bool:
    """True if node and npm are on PATH (lets tests skip cleanly when they are not)."""
    return bool(shutil.which("node") and shutil.which("npm"))


def ensure_node_packages() -> Path:
    """Install the pinned npm packages if node_modules is missing or older than
    package-lock.json, and return the conformance directory.

    `npm ci` installs exactly the committed lock file. A file lock makes
    parallel test workers wait for one install instead of racing.
    """
    lock_file = CONFORMANCE_DIR / "package-lock.json"
    marker = CONFORMANCE_DIR / "node_modules" / ".package-lock.json"  # written by npm at install

    def fresh() -> bool:
        return marker.exists() and marker.stat().st_mtime >= lock_file.stat().st_mtime

    if fresh():
        return CONFORMANCE_DIR
    if not have_node():
        raise NodeHarnessError("node/npm not found on PATH")
    with open(Path(tempfile.gettempdir()) / "gateway-conformance-npm.lock", "w") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)
        if not fresh():
            proc = subprocess.run(
                ["npm", "ci", "--no-audit", "--no-fund"],
                check=False,
                cwd=CONFORMANCE_DIR,
                capture_output=True,
                text=True,
                timeout=300,
            )
            if proc.returncode != 0:
                raise NodeHarnessError(f"npm ci failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return CONFORMANCE_DIR


def _parse(kind: str, returncode: int, stdout: str, stderr: str) -> dict:
    """The last stdout line is the result; anything else is a harness failure."""
    output = f"\nstdout:\n{stdout[-2000:]}\nstderr:\n{stderr[-4000:]}"
    lines = [line for line in stdout.splitlines() if line.strip()]
    if returncode != 0 or not lines:
        raise NodeHarnessError(f"{kind} exited {returncode}{output}")
    try:
        return json.loads(lines[-1])
    except json.JSONDecodeError as exc:
        raise NodeHarnessError(f"{kind} printed no JSON line ({exc}){output}") from exc


def _scenario_cmd(name: str, gateway_url: str, timeout: float, env: dict) -> tuple[list[str], dict]:
    full_env = {
        **os.environ,
        **{k: str(v) for k, v in env.items()},
        "GATEWAY_URL": gateway_url,
        # Let Node report its own timeout (with partial results) before we kill it.
        "SCENARIO_TIMEOUT_MS": str(int(max(timeout - 5, timeout * 0.8) * 1000)),
    }
    return ["node", str(ensure_node_packages() / "run_scenario.mjs"), name], full_env


def run_scenario(name: str, gateway_url: str, timeout: float = 60, **env) -> dict:
    """Run ``node run_scenario.mjs <name>`` against ``gateway_url`` and return its JSON.

    A scenario in which the Tambo client threw comes back as a dict with a
    ``crash`` key (an outcome to assert on); the harness failing raises
    NodeHarnessError with stderr. ``_stderr`` holds the tail of Node's stderr
    (client warnings, logs) for assertion messages. Extra keyword arguments
    become environment variables of the Node process.
    """
    cmd, full_env = _scenario_cmd(name, gateway_url, timeout, env)
    try:
        proc = subprocess.run(
            cmd,
            check=False,
            cwd=CONFORMANCE_DIR,
            env=full_env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as exc:
        raise NodeHarnessError(
            f"scenario {name} timed out after {timeout}s\nstderr:\n{exc.stderr}"
        ) from exc
    result = _parse(f"run_scenario.mjs {name}", proc.returncode, proc.stdout, proc.stderr)
    result["_stderr"] = proc.stderr[-4000:]
    return result


async def arun_scenario(name: str, gateway_url: str, timeout: float = 60, **env) -> dict:
    """Async twin of run_scenario (does not block the event loop)."""
    cmd, full_env = _scenario_cmd(name, gateway_url, timeout, env)
    stdout, stderr, code = await _acommunicate(cmd, full_env, None, timeout)
    result = _parse(f"run_scenario.mjs {name}", code, stdout, stderr)
    result["_stderr"] = stderr[-4000:]
    return result


def _capture_args(url: str, body, headers, method: str, timeout: float) -> str:
    return json.dumps(
        {
            "url": url,
            "method": method,
            "headers": headers or {},
            "body": body,
            "timeoutMs": int(timeout * 1000),
        }
    )


def capture_and_verify(
    url: str, body, headers: dict | None = None, method: str = "POST", timeout: float = 60
) -> dict:
    """Fetch a run endpoint from Node and check the SSE with @ag-ui/client's verifier.

    Returns ``{status, events, ids, errors, warnings, verified, bodyText?}``
    (see agui_verify.mjs); ``errors == []`` means the stream is valid AG-UI 1.0.
    """
    args = _capture_args(url, body, headers, method, timeout)
    cmd = ["node", str(ensure_node_packages() / "capture.mjs")]
    try:
        proc = subprocess.run(
            cmd,
            check=False,
            cwd=CONFORMANCE_DIR,
            input=args,
            capture_output=True,
            text=True,
            timeout=timeout + 10,
        )
    except subprocess.TimeoutExpired as exc:
        raise NodeHarnessError(
            f"capture.mjs timed out after {timeout}s\nstderr:\n{exc.stderr}"
        ) from exc
    return _parse("capture.mjs", proc.returncode, proc.stdout, proc.stderr)


async def acapture_and_verify(
    url: str, body, headers: dict | None = None, method: str = "POST", timeout: float = 60
) -> dict:
    """Async twin of capture_and_verify (does not block the event loop)."""
    args = _capture_args(url, body, headers, method, timeout)
    cmd = ["node", str(ensure_node_packages() / "capture.mjs")]
    stdout, stderr, code = await _acommunicate(cmd, dict(os.environ), args, timeout + 10)
    return _parse("capture.mjs", code, stdout, stderr)


def run_agui_agent(plan: dict, timeout: float = 60) -> dict:
    """Run `HttpAgent` (@ag-ui/client 1.0) through the steps of ``plan`` (see agui_agent.mjs).

    Returns ``{threadId, runs: [{runId, events, error, outcome, pendingToolCallIds}], messages,
    state, warnings}``; a run whose stream failed HttpAgent's own verification has ``error``.
    """
    cmd = ["node", str(ensure_node_packages() / "agui_agent.mjs")]
    try:
        proc = subprocess.run(cmd, check=False, cwd=CONFORMANCE_DIR, input=json.dumps(plan),
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise NodeHarnessError(
            f"agui_agent.mjs timed out after {timeout}s\nstderr:\n{exc.stderr}") from exc
    result = _parse("agui_agent.mjs", proc.returncode, proc.stdout, proc.stderr)
    result["_stderr"] = proc.stderr[-4000:]
    return result


async def _acommunicate(
    cmd: list[str], env: dict, stdin: str | None, timeout: float
) -> tuple[str, str, int]:
    proc = await asyncio.create_subprocess_exec(
        *cmd,
        cwd=CONFORMANCE_DIR,
        env=env,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(
            proc.communicate(stdin.encode() if stdin is not None else None), timeout
        )
    except TimeoutError as exc:
        proc.kill()
        await proc.wait()
        raise NodeHarnessError(f"{cmd[-1]} timed out after {timeout}s") from exc
    return out.decode(), err.decode(), proc.returncode
