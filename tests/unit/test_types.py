"""The code type-checks (mypy, configured in pyproject.toml [tool.mypy]): a call with the wrong
argument, a missing `None` check or a protocol a class no longer meets fails the suite."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(900)  # a cold run on a fresh clone: ~20 s CPU, several times that wall busy
def test_mypy_finds_nothing() -> None:
    result = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True,
                            text=True, timeout=850)
    assert result.returncode == 0, result.stdout + result.stderr


# Set globally in pyproject.toml: mypy takes them for the whole run only, or they apply to all.
STRICT_GLOBAL = {"warn_unused_configs", "warn_redundant_casts", "check_untyped_defs",
                 "warn_unused_ignores"}


def strict_flags() -> set[str]:
    """What `mypy --strict` turns on, as its `--help` lists it (so a flag a newer mypy adds to
    --strict is seen here), in the config file's spelling."""
    result = subprocess.run([sys.executable, "-m", "mypy", "--help"], capture_output=True,
                            text=True, timeout=60, check=True)
    found = re.search(r"--strict\s+Strict mode; enables the following flags:(.*?)\n  -",
                      result.stdout, re.S)
    assert found, "mypy --help no longer lists what --strict enables"
    listed = re.sub(r"-\s*\n\s*", "-", found.group(1))  # the help wraps inside flag names
    return {flag.replace("-", "_") for flag in re.findall(r"--([a-z-]+)", listed)}


def test_the_strict_packages_are_checked_under_every_strict_flag() -> None:
    """`gateway/protocol`, `runs`, `backends`, `engine`, `client`, `server`, `cli`, `openapi`,
    `observability` and the top-level modules are under every flag `mypy --strict` turns on,
    so the run above is `mypy --strict` for them (run `mypy --strict gateway/protocol` to see
    the same); the flags are read from mypy itself."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    flags = strict_flags()
    assert {"disallow_untyped_defs", "warn_return_any", "strict_equality"} <= flags
    assert all(config.get(flag) is True
               for flag in flags & (STRICT_GLOBAL - {"warn_unused_configs"}))
    [strict] = [o for o in config["overrides"] if "gateway.protocol.*" in o["module"]]
    assert {"gateway.protocol", "gateway.protocol.*", "gateway.runs.*", "gateway.backends.*",
            "gateway.engine.*", "gateway.client.*", "gateway.server.*", "gateway.cli.*",
            "gateway.openapi.*", "gateway.observability.*", "gateway", "gateway.__main__",
            "gateway.app", "gateway.config", "gateway.services"} <= set(strict["module"])
    assert {flag for flag in flags - STRICT_GLOBAL if strict.get(flag) is not True} == set()
