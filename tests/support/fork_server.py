"""A fork server for the gateway processes the tests start: `gateway` imported once, forked per start.

Starting `python -m gateway serve` costs 4-7 s of CPU, nearly all of it importing the gateway
and litellm; the suites start dozens of processes. This module runs once per test session as
its own process (`python -m tests.support.fork_server SOCKET`): it imports what `gateway serve`
imports, loads litellm offline as the server does, and then, single-threaded and with no event
loop, forks a child for every start asked of it over a Unix socket. A child is what `exec`
would have given: a real OS process with its own pid, environment, argv, working directory
and log file, running `python -m gateway ...` (`runpy`, as `-m` does) and serving real loopback
HTTP; tests signal and kill it by pid. Its exit status comes back over the socket that asked
for it, so `ForkedProcess` answers `poll()`/`wait()` as `subprocess.Popen` does.

Only an environment the imports could not have read differently is forked: the same as the
fork server's apart from settings read when the app is made (`GATEWAY_*`, `OTEL_*`) and pytest's
`PYTEST_*`; anything else (`--workers` included) is started with `exec` as before (`can_fork`). When the test session
ends the server's stdin closes and it kills what is left; a child dies with the server
(`PR_SET_PDEATHSIG`), so a killed pytest leaves no gateway behind.
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
import select
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
# Read when the app is made, not when it is imported, or not by the gateway at all (pytest
# names the current test): a child may set them as it likes.
SETTINGS_PREFIXES = ("GATEWAY_", "OTEL_", "PYTEST_")
PR_SET_PDEATHSIG = 1


# What `load_litellm` sets unless it is set: a test process that has loaded litellm itself (the
# in-process gateways) has them, and a gateway process gets them either way.
LITELLM_DEFAULTS = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_MODE": "PRODUCTION"}
# What litellm writes into the environment itself, the first time it counts tokens (its
# tokenizers' directory, `litellm_core_utils/default_encoding.py`): the test process has it
# once an in-process gateway has counted, the fork server not; a child sets it as that did.
SET_BY_LITELLM = frozenset({"TIKTOKEN_CACHE_DIR"})


def comparable(env: dict[str, str]) -> dict[str, str]:
    """The part of an environment importing the gateway and litellm can read."""
    return {k: v for k, v in {**LITELLM_DEFAULTS, **env}.items()
            if not k.startswith(SETTINGS_PREFIXES) and k not in SET_BY_LITELLM}


# ---- the client side: the test process ----------------------------------------------------

class ForkedProcess:
    """A child of the fork server, handled as a `subprocess.Popen`: pid, poll, wait, signals."""

    def __init__(self, args: list[str], conn: socket.socket) -> None:
        self.args, self._conn, self._buffer = args, conn, b""
        self.returncode: int | None = None
        reply = self._line(None)
        if reply is None:
            raise RuntimeError("the fork server did not answer")
        self.pid: int = reply["pid"]

    def _line(self, timeout: float | None) -> dict[str, Any] | None:
        """The server's next message: `{"pid": ...}`, then `{"status": ...}` at the exit;
        None if none came within `timeout`; a SIGKILL status if the server is gone."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([self._conn], [], [], left)[0]:
                return None
            data = self._conn.recv(4096)
            if not data:
                return {"pid": -1, "status": -signal.SIGKILL}
            self._buffer += data
        line, self._buffer = self._buffer.split(b"\n", 1)
        return dict(json.loads(line))

    def _read_status(self, timeout: float | None) -> None:
        status = self._line(timeout)
        if status is not None:
            self.returncode = int(status["status"])
            self._conn.close()

    def poll(self) -> int | None:
        if self.returncode is None:
            self._read_status(0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self._read_status(timeout)
        if self.returncode is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class ForkServer:
    """The test session's fork server, started on first use."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="gateway-fork-server-"))
        self.socket_path = self.dir / "socket"
        self.log_path = self.dir / "server.log"
        self.env = dict(os.environ)
        self.said: set[str] = set()  # the variables a refused start has been warned of
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "tests.support.fork_server", str(self.socket_path)],
                cwd=ROOT, env=self.env, stdin=subprocess.PIPE, stdout=log,
                stderr=subprocess.STDOUT)

    def wait_ready(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.socket_path.exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the fork server did not start:\n"
                                   + self.log_path.read_text(errors="replace")[-5000:])
            time.sleep(0.05)

    def can_fork(self, args: list[str], env: dict[str, str]) -> bool:
        """Whether a fork gives what `exec` would: the imports saw the same environment (but
        for settings read later), and no `--workers` (their processes re-import `__main__`).
        A start refused for its environment is said once per variable (a warning in pytest's
        summary): each `exec` costs several seconds of CPU, unseen otherwise."""
        if "--workers" in args or self.process.poll() is not None:
            return False
        theirs, ours = comparable(env), comparable(self.env)
        differ = {k for k in theirs.keys() | ours.keys() if theirs.get(k) != ours.get(k)}
        for name in sorted(differ - self.said):
            warnings.warn(f"gateway processes are started with exec, not forked: {name} differs "
                          "from the fork server's environment", stacklevel=2)
        self.said |= differ
        return not differ

    def spawn(self, args: list[str], env: dict[str, str], cwd: Path, log: Path,
              stderr: Path | None = None) -> ForkedProcess:
        """`python -m gateway *args` in `cwd` with exactly `env`, stdout appended to `log`,
        stderr too or to `stderr`, stdin empty."""
        self.wait_ready()
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(str(self.socket_path))
        request = {"args": args, "env": env, "cwd": str(cwd), "log": str(log),
                   "stderr": str(stderr or log)}
        conn.sendall(json.dumps(request).encode() + b"\n")
        return ForkedProcess([sys.executable, "-m", "gateway", *args], conn)

    def stop(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()  # the server kills its children and exits
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


_server: ForkServer | None = None
_lock = threading.Lock()


def fork_server() -> ForkServer | None:
    """The session's fork server (started now if not yet), or None when it is turned off
    (`GATEWAY_TEST_FORK=0`: every process is started with `exec`)."""
    global _server
    if os.environ.get("GATEWAY_TEST_FORK", "1") == "0":
        return None
    with _lock:
        if _server is None:
            _server = ForkServer()
        return _server


def stop_fork_server() -> None:
    global _server
    if _server is not None:
        _server.stop()
        _server = None


# ---- the server side: its own process ------------------------------------------------------

def preload() -> None:
    """What `gateway serve` imports before it serves, done once here."""
    import gateway.app  # noqa: F401
    import gateway.cli.main  # noqa: F401
    from gateway.engine.models.adapters import load_litellm

    load_litellm()
    assert threading.active_count() == 1, "importing the gateway started a thread: no fork"


def run_child(request: dict[str, Any], inherited: list[int]) -> None:
    """In the forked child: become `python -m gateway ...` as asked, run it, and exit."""
    code = 1
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        for fd in inherited:
            os.close(fd)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        for fd, path in ((1, request["log"]), (2, request["stderr"])):
            opened = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            os.dup2(opened, fd)
            os.close(opened)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.path[0] = os.getcwd()  # as `-m` puts it first
        code = run_gateway(request["args"])
        if code < 0:  # ended by a signal it did not handle, as the interpreter ends then
            signal.signal(-code, signal.SIG_DFL)
            os.kill(os.getpid(), -code)
    finally:
        os._exit(code)


def run_gateway(args: list[str]) -> int:
    import atexit
    import runpy
    import traceback

    sys.argv = ["-m", *args]  # runpy puts the module's path first, as `-m` does
    code: int = 0
    try:
        runpy.run_module("gateway", run_name="__main__", alter_sys=True)
    except SystemExit as exit_:
        if exit_.code is None or isinstance(exit_.code, int):
            code = exit_.code or 0
        else:
            print(exit_.code, file=sys.stderr)
            code = 1
    except KeyboardInterrupt:
        code = -signal.SIGINT
    except BaseException:  # as the interpreter prints an uncaught one
        traceback.print_exc()
        code = 1
    threading._shutdown()  # type: ignore[attr-defined]  # what exiting the interpreter does
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    return code


class Server:
    """The fork server's loop: a request per connection; the child's exit status back on it."""

    def __init__(self, path: str) -> None:
        self.selector = selectors.DefaultSelector()
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(path + ".tmp")
        self.listener.listen(64)
        self.children: dict[int, tuple[int, socket.socket]] = {}  # pidfd: (pid, conn)
        self.selector.register(self.listener, selectors.EVENT_READ, "accept")
        self.selector.register(sys.stdin, selectors.EVENT_READ, "stdin")
        os.rename(path + ".tmp", path)  # ready

    def serve(self) -> None:
        while True:
            for key, _ in self.selector.select():
                if key.data == "stdin":
                    if not sys.stdin.buffer.read1(1):  # the test session is over
                        return self.kill_all()
                elif key.data == "accept":
                    self.fork(self.listener.accept()[0])
                else:
                    self.reap(key.fd)

    def inherited(self) -> list[int]:
        fds = [self.listener.fileno(), self.selector.fileno()]  # type: ignore[attr-defined]
        return fds + [fd for fd in self.children] + [c.fileno() for _, c in
                                                      self.children.values()]

    def fork(self, conn: socket.socket) -> None:
        request = json.loads(conn.makefile("rb").readline())
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            run_child(request, [*self.inherited(), conn.fileno()])
        pidfd = os.pidfd_open(pid)
        self.children[pidfd] = (pid, conn)
        self.selector.register(pidfd, selectors.EVENT_READ, "child")
        conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")

    def reap(self, pidfd: int) -> None:
        pid, conn = self.children.pop(pidfd)
        self.selector.unregister(pidfd)
        os.close(pidfd)
        _, status = os.waitpid(pid, 0)
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        try:
            conn.sendall(json.dumps({"status": code}).encode() + b"\n")
        except OSError:  # nobody is waiting for it any more
            pass
        conn.close()

    def kill_all(self) -> None:
        for pid, _ in self.children.values():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid, _ in self.children.values():
            os.waitpid(pid, 0)


def main(path: str) -> None:
    preload()
    gc.collect()
    gc.freeze()  # the children share the imported modules' pages instead of copying them
    server = Server(path)
    try:
        server.serve()
    finally:
        shutil.rmtree(Path(path).parent, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1])
