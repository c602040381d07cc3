"""The code type-checks (mypy, configured in pyproject.toml [tool.mypy]): a call with the wrong
argument, a missing `None` check or a protocol a class no longer meets fails the suite."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_mypy_finds_nothing() -> None:
    result = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_engine_passes_mypy_strict() -> None:
    """`gateway/engine` is held to `mypy --strict` (its flags are in pyproject.toml for the run
    above too, so the two cannot disagree)."""
    result = subprocess.run([sys.executable, "-m", "mypy", "--strict", "gateway/engine"],
                            cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
