"""The first run of a fresh clone (`scripts/_env.sh`): `./scripts/serve` and `./scripts/gateway`
install the gateway without the test tools, and say so before the download starts;
`./scripts/test` installs the test tools too; a second run asks uv nothing. Run on a copy of the
scripts with a stand-in `uv` that records what it is asked (no download here)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FAKE_UV = """#!/usr/bin/env bash
echo "uv $*" >> "$UV_LOG"
mkdir -p .venv/bin
printf '#!/usr/bin/env bash\\necho "gateway $*"\\n' > .venv/bin/gateway
chmod +x .venv/bin/gateway
"""


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """A checkout with the real scripts, its lock files, and a `uv` that only records."""
    shutil.copytree(ROOT / "scripts", tmp_path / "scripts")
    for name in ("uv.lock", "pyproject.toml"):
        shutil.copy(ROOT / name, tmp_path / name)
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "uv").write_text(FAKE_UV)
    (tools / "uv").chmod(0o755)
    return tmp_path


def run(clone: Path, *command: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{clone / 'tools'}{os.pathsep}{os.environ['PATH']}",
           "UV_LOG": str(clone / "uv.log")}
    return subprocess.run(list(command), cwd=clone, env=env, capture_output=True, text=True,
                          timeout=60, check=False)


def asked(clone: Path) -> list[str]:
    log = clone / "uv.log"
    return log.read_text().splitlines() if log.exists() else []


def test_the_gateway_installs_without_the_test_tools_and_says_so_first(clone: Path) -> None:
    first = run(clone, "./scripts/gateway", "--version")
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == "gateway --version"
    assert "installing the gateway's Python dependencies into .venv" in first.stderr
    assert "test tools are left out" in first.stderr
    assert asked(clone) == ["uv sync --frozen --quiet --no-dev --inexact"]

    again = run(clone, "./scripts/gateway", "keys", "list")
    assert again.stdout.strip() == "gateway keys list" and again.stderr == ""
    assert len(asked(clone)) == 1  # nothing changed: uv is not asked again


def test_the_test_command_adds_the_test_tools(clone: Path) -> None:
    run(clone, "./scripts/gateway", "--version")
    tests = run(clone, "bash", "-c", "source scripts/_env.sh && python_deps --dev")
    assert tests.returncode == 0, tests.stderr
    assert asked(clone)[-1] == "uv sync --frozen --quiet"
    (clone / "uv.lock").touch()  # a new lock: installed again, quietly (.venv exists)
    later = run(clone, "./scripts/gateway", "--version")
    assert asked(clone)[-1] == "uv sync --frozen --quiet --no-dev --inexact"
    assert "installing" not in later.stderr
