"""A JSON Patch's size bound (`runs/components/state.apply_patch`): tracked while the ops apply,
it refuses the op that makes the state too large, and only that: replacing a large value with
another of its size, again and again, stays within the limit."""

from __future__ import annotations

import pytest

from gateway.runs.components.state import ComponentStateError, apply_patch

LIMIT = 64 * 1024


def test_replacing_a_large_value_is_not_counted_twice() -> None:
    state = {"a": "y" * 40_000}
    patch = [{"op": "replace", "path": "/a", "value": "z" * 40_000}] * 20
    assert apply_patch(state, patch, LIMIT) == {"a": "z" * 40_000}


def test_the_op_that_passes_the_limit_is_named() -> None:
    patch = [{"op": "add", "path": "/a", "value": "y" * 20_000},
             {"op": "copy", "from": "/a", "path": "/b"},
             {"op": "copy", "from": "/a", "path": "/c"},
             {"op": "copy", "from": "/a", "path": "/d"}]
    with pytest.raises(ComponentStateError) as refused:
        apply_patch({}, patch, LIMIT)
    assert refused.value.code == "STATE_TOO_LARGE" and refused.value.details["index"] == 3
