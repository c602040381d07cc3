"""The playground's JSON Patch (gateway/web/playground.js, `applyPatch`) cannot reach an
object's prototype: a `__proto__` path from a state delta is skipped, not applied."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parents[2] / "gateway" / "web" / "playground.js"


def apply(document: object, operations: list[dict]) -> dict:
    text = SOURCE.read_text("utf-8")
    unsafe = re.search(r"^const UNSAFE_KEYS = .*?;$", text, re.M)
    function = re.search(r"^function applyPatch\(.*?^}$", text, re.M | re.S)
    assert unsafe and function, "applyPatch and UNSAFE_KEYS are in playground.js"
    script = (unsafe.group() + "\n" + function.group() + "\n"
              f"const out = applyPatch({json.dumps(document)}, {json.dumps(operations)});\n"
              "console.log(JSON.stringify({out, polluted: ({}).polluted ?? null}));")
    result = subprocess.run(["node", "-e", script], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_prototype_paths_are_skipped_and_ordinary_ones_applied() -> None:
    result = apply({"rows": [1]}, [
        {"op": "add", "path": "/__proto__/polluted", "value": "yes"},
        {"op": "add", "path": "/constructor/prototype/polluted", "value": "yes"},
        {"op": "replace", "path": "/missing/deep", "value": 1},
        {"op": "add", "path": "/rows/-", "value": 2},
        {"op": "add", "path": "/pinned", "value": True},
    ])
    assert result == {"out": {"rows": [1, 2], "pinned": True}, "polluted": None}
