"""Streamed component props -> JSON Patch: every op applies to what the client has (the Tambo
reducer applies them with validation on), and the final props are exact, for any split."""

from __future__ import annotations

import json
import random

import jsonpatch
import pytest

from gateway.protocol import props_stream
from gateway.protocol.props_stream import PropsStream, diff_top_level, pointer

SAMPLES = [
    {"city": "Paris", "tempC": 21},
    {"title": "Quarterly \"numbers\"", "rows": [[1, 2], [3, {"x": None}]], "ok": True},
    {"a/b": 1, "c~d": {"nested": ["}", "]", ",", "\\"]}, "unicode": "caf\u00e9 \u2603"},
    {},
    {"empty": "", "list": [], "obj": {}, "neg": -1.5e3},
]


def stream(props: dict, sizes: list[int]) -> tuple[dict, list[list[dict]]]:
    text = json.dumps(props)
    s, doc, batches, pos = PropsStream(), {}, [], 0
    for size in sizes:
        if pos >= len(text):
            break
        ops = s.feed(text[pos:pos + size])
        pos += size
        doc = jsonpatch.apply_patch(doc, ops)  # raises if an op does not apply
        batches.append(ops)
    if pos < len(text):
        doc = jsonpatch.apply_patch(doc, s.feed(text[pos:]))
    return jsonpatch.apply_patch(doc, s.finish(props)), batches


@pytest.mark.parametrize("props", SAMPLES)
@pytest.mark.parametrize("seed", range(20))
def test_any_split_ends_with_exact_props(props: dict, seed: int):
    rng = random.Random(seed)
    final, _ = stream(props, [rng.randint(1, 7) for _ in range(400)])
    assert final == props


def test_partial_values_appear_while_streaming():
    _, batches = stream({"city": "Paris is a long name", "n": 1}, [1] * 60)
    values = [op.get("value") for ops in batches for op in ops if op["path"] == "/city"]
    assert values[0] != "Paris is a long name"
    assert values[-1] == "Paris is a long name"
    assert batches[0] == [] or batches[0][0]["op"] == "add"


def test_partial_parsing_work_is_linear(monkeypatch: pytest.MonkeyPatch):
    parsed_chars = []
    real = props_stream.partial_loads

    def counting(text: str):
        parsed_chars.append(len(text))
        return real(text)

    monkeypatch.setattr(props_stream, "partial_loads", counting)
    text = json.dumps({"body": "x" * 50_000, "tail": 1})
    s = PropsStream()
    for char in text:
        s.feed(char)
    # Re-parsing the growing member on every character would be ~1.25e9 characters.
    assert sum(parsed_chars) < 10 * len(text)


def test_pointer_escaping_and_diff():
    assert pointer("a/b~c") == "/a~1b~0c"
    assert diff_top_level({"a": 1, "b": 2}, {"b": 3, "c": 4}) == [
        {"op": "remove", "path": "/a"},
        {"op": "replace", "path": "/b", "value": 3},
        {"op": "add", "path": "/c", "value": 4},
    ]
