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


# Checked by strict mode itself, not only by the override in pyproject.toml that lists its flags
# for these packages (a flag a newer mypy adds to --strict would otherwise be missed). Its own
# cache: --strict applies to the libraries these import too, which the default run must not see.
STRICT_PACKAGES = ["gateway/runs", "gateway/backends"]


def test_the_strict_packages_pass_mypy_strict() -> None:
    result = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--cache-dir",
                             str(ROOT / ".mypy_cache" / "strict"), *STRICT_PACKAGES], cwd=ROOT,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
