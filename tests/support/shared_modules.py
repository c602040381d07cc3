"""Test modules shared out between pytest sessions that run the same suite at once.

CI runs the integration suite of each configuration in a stream of its own, and a stream whose
own work is done joins the others (`.ci/run`). With `GATEWAY_TEST_CLAIMS` naming a directory,
each test module runs in exactly one of the sessions: the first to reach it claims it (an
atomic `mkdir` in that directory); the others leave it out (at collection, when it is claimed
by then) or skip it (when another session got it meanwhile). Without the variable every module
is this session's, as for anyone running pytest by hand.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support import engines

CLAIMS_ENV = "GATEWAY_TEST_CLAIMS"
SKIPPED = "another CI stream runs this module"
_decided: dict[Path, bool] = {}


def _claim_path(module: Path) -> Path | None:
    directory = os.environ.get(CLAIMS_ENV)
    if not directory:
        return None
    name = f"{engines.backend()}-{module.as_posix().replace('/', '.')}"
    return Path(directory) / name


def taken_by_another(module: Path) -> bool:
    """Whether another session has claimed `module` already (without claiming it)."""
    claim = _claim_path(module)
    return claim is not None and module not in _decided and claim.exists()


def is_mine(module: Path) -> bool:
    """Whether this session runs `module`: claimed now if nobody has it yet."""
    if module not in _decided:
        claim = _claim_path(module)
        if claim is None:
            _decided[module] = True
        else:
            try:
                claim.mkdir()
                _decided[module] = True
            except FileExistsError:
                _decided[module] = False
    return _decided[module]


def leave_out_taken(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the items of modules another session has claimed already."""
    if not os.environ.get(CLAIMS_ENV):
        return
    taken = {path for path in {item.path for item in items} if taken_by_another(path)}
    if taken:
        config.hook.pytest_deselected(items=[i for i in items if i.path in taken])
        items[:] = [item for item in items if item.path not in taken]


def skip_unless_mine(item: pytest.Item) -> None:
    if not is_mine(item.path):
        pytest.skip(SKIPPED)
