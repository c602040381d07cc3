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


def test_all_of_gateway_is_checked_in_strict_mode_with_no_exemption() -> None:
    """The run above is `mypy --strict gateway`: strict mode is on for the whole run, and no
    override turns one of its flags off, or silences an error code, for a gateway module (only
    third-party modules may be configured apart: litellm is not read)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert config.get("strict") is True
    assert config["files"] == ["gateway"]
    flags = strict_flags()
    assert {"disallow_untyped_defs", "warn_return_any", "strict_equality"} <= flags
    assert not {flag for flag in flags if config.get(flag) is False}
    for override in config.get("overrides", []):
        modules = override["module"] if isinstance(override["module"], list) else [
            override["module"]]
        if any(module == "gateway" or module.startswith("gateway.") for module in modules):
            loosened = {k for k, v in override.items() if k in flags and v is False}
            assert not loosened and "disable_error_code" not in override, (modules, override)
