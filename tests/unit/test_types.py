"""The code type-checks (mypy, configured in pyproject.toml [tool.mypy]): a call with the wrong
argument, a missing `None` check or a protocol a class no longer meets fails the suite."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_mypy_finds_nothing() -> None:
    result = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr


# What `mypy --strict` turns on that can be set per module (warn_unused_configs and
# warn_redundant_casts are global; check_untyped_defs and warn_unused_ignores are on globally).
STRICT_PER_MODULE = {"disallow_any_generics", "disallow_subclassing_any", "disallow_untyped_calls",
                     "disallow_untyped_defs", "disallow_incomplete_defs",
                     "disallow_untyped_decorators", "warn_return_any", "no_implicit_reexport",
                     "strict_equality", "extra_checks"}


def test_the_wire_formats_are_checked_strictly() -> None:
    """`gateway/protocol` is under every strict flag, so the run above is `mypy --strict` for
    it (run `mypy --strict gateway/protocol` to see the same)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert config["check_untyped_defs"] and config["warn_unused_ignores"]
    assert config["warn_redundant_casts"]
    [protocol] = [o for o in config["overrides"] if "gateway.protocol.*" in o["module"]]
    assert "gateway.protocol" in protocol["module"]
    assert {"gateway.runs.*", "gateway.backends.*", "gateway.engine.*"} <= set(protocol["module"])
    assert {flag for flag in STRICT_PER_MODULE if protocol.get(flag) is True} == STRICT_PER_MODULE


# Checked by strict mode itself, not only by the override in pyproject.toml that lists its flags
# for these packages (a flag a newer mypy adds to --strict would otherwise be missed). Its own
# cache: --strict applies to the libraries these import too, which the default run must not see.
STRICT_PACKAGES = ["gateway/protocol", "gateway/runs", "gateway/backends", "gateway/engine",
                   "gateway/client"]


def test_the_strict_packages_pass_mypy_strict() -> None:
    result = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--cache-dir",
                             str(ROOT / ".mypy_cache" / "strict"), *STRICT_PACKAGES], cwd=ROOT,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
