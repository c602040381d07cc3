"""The code passes the project's lint rules (pyproject.toml [tool.ruff.lint]): pyflakes errors,
import order and bugbear's likely bugs fail the suite, as they would a review."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_ruff_finds_nothing():
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "gateway", "tests", "bench"],
                            cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
