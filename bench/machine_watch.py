"""What else the machine did during a scenario: CPU by process, the listen queue, TCP drops.

A benchmark's wall-clock figures are only the gateway's if the gateway had its cores; on a
shared machine the database, Redis, the upstream, the readers and other jobs take their share,
and a reader that gets no CPU reports its own lateness as the gateway's. `MachineWatch` samples,
while a scenario runs:

- the CPU of every process on the machine (`/proc/<pid>/stat`), summed by role: the gateway,
  PostgreSQL, Redis, the upstream (`bench.paced`), the readers (this process's children), this
  process, and everything else (other jobs). In % of one core over the scenario's wall time;
- the accept queue of the gateway's listening socket, and of the upstream's (`ss -ltn`: Recv-Q
  of a listening socket is the connections the kernel has completed and the process has not
  yet accepted);
- the kernel's counters of listen-queue overflows and drops and SYN retransmits (`nstat`), whose
  growth would put whole seconds (1, 3, 7 s...) before the gateway sees a connection.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from pathlib import Path

TCP_COUNTERS = ("TcpExtListenOverflows", "TcpExtListenDrops", "TcpExtTCPSynRetrans")
TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: str) -> tuple[str, int, float] | None:
    """(command name, parent pid, CPU seconds) of a process, None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    name = text[text.index("(") + 1:text.rindex(")")]
    fields = text.rsplit(")", 1)[1].split()
    return name, int(fields[1]), (int(fields[11]) + int(fields[12])) / TICK


def _cmdline(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(
            errors="replace")
    except OSError:
        return ""


def postmaster_pid() -> int | None:
    """The pid of the PostgreSQL this benchmark started (`tests/support/engines`), if any."""
    from tests.support import engines

    if engines.ENGINES is None:
        return None
    try:
        return int((engines.ENGINES.postgres.dir / "data" / "postmaster.pid").read_text()
                   .split()[0])
    except (OSError, ValueError, IndexError):
        return None


def tcp_counters() -> dict[str, int]:
    try:
        out = subprocess.run(["nstat", "-az", *TCP_COUNTERS], capture_output=True, text=True,
                             timeout=5).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)", out, re.M)}


def accept_queue(port: int) -> int | None:
    """Connections waiting to be accepted on the listening socket of `port`."""
    try:
        out = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True,
                             text=True, timeout=2).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    queues = [int(line.split()[1]) for line in out.splitlines() if line.split()[1:2]]
    return max(queues, default=None)


class MachineWatch:
    """Start before a scenario and stop after it; `report()` gives the figures above."""

    def __init__(self, gateway_pid: int, ports: dict[str, int], interval: float = 0.2) -> None:
        self.gateway_pid, self.ports, self.interval = gateway_pid, ports, interval
        self.postmaster = postmaster_pid()
        self.first: dict[str, float] = {}  # pid -> CPU s when first seen (0 if born during)
        self.last: dict[str, tuple[str, float]] = {}  # pid -> (role, CPU s when last seen)
        self.queues: dict[str, list[int]] = {name: [] for name in ports}
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def role(self, pid: str, name: str, parent: int) -> str:
        if int(pid) == self.gateway_pid:
            return "gateway"
        if int(pid) == os.getpid():
            return "benchmark"
        if self.postmaster is not None and self.postmaster in (int(pid), parent):
            return "postgres"  # this benchmark's PostgreSQL, not another job's
        if parent == os.getpid():
            return ("redis" if name.startswith("redis") else
                    "upstream" if "bench.paced" in _cmdline(pid) else "readers")
        return "other"

    def sample(self, born: bool) -> None:
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            stat = _stat(pid)
            if stat is None:
                continue
            if pid not in self.last:
                self.first[pid] = 0.0 if born else stat[2]
                self.last[pid] = (self.role(pid, stat[0], stat[1]), stat[2])
            else:
                self.last[pid] = (self.last[pid][0], stat[2])

    def _run(self) -> None:
        while not self.stop_event.wait(self.interval):
            self.sample(born=True)
            for name, port in self.ports.items():
                queue = accept_queue(port)
                if queue is not None:
                    self.queues[name].append(queue)

    def start(self) -> MachineWatch:
        self.tcp_before = tcp_counters()
        self.sample(born=False)
        self.started = time.monotonic()
        self.thread.start()
        return self

    def stop(self) -> dict[str, object]:
        self.stop_event.set()
        self.thread.join()
        self.sample(born=True)
        wall = time.monotonic() - self.started
        tcp_after = tcp_counters()
        shares: dict[str, float] = {}
        for pid, (role, cpu) in self.last.items():
            shares[role] = shares.get(role, 0.0) + cpu - self.first[pid]
        return {
            "cpu_percent_by_role": {role: round(100 * cpu / wall, 1)
                                    for role, cpu in sorted(shares.items())},
            "accept_queue_max": {name: max(queue, default=None)
                                 for name, queue in self.queues.items()},
            "tcp": {name: tcp_after.get(name, 0) - self.tcp_before.get(name, 0)
                    for name in TCP_COUNTERS if name in tcp_after},
        }
