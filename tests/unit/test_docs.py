"""The repository explains itself: README and docs/ point only inside it, at things that exist,
and the settings reference is the one generated from the code. The why of a speed mechanism is
a decision record (docs/decisions/), not a figure or a pointer to the benchmarks' notes in the
code; bench/README.md is an index."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gateway.config import Settings
from gateway.openapi.settings_report import REFERENCE_PATH, reference_markdown

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", ROOT / "bench" / "README.md",
             *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "docs" / "decisions").glob("*.md"))]
DECISIONS = sorted((ROOT / "docs" / "decisions").glob("[0-9][0-9][0-9][0-9]-*.md"))
LINK = re.compile(r"\]\(([^)\s]+)\)")
# A backticked repository path: a top-level directory of ours, then a file with an extension or
# a directory with a trailing slash (`gateway/demo` is a model name, not a path).
REPO_PATH = re.compile(r"`((?:gateway|tests|docs|examples|bench|scripts|schemas|openapi)/"
                       r"[\w./-]*(?:\.\w+|/))`")


def test_settings_reference_is_generated_from_the_code() -> None:
    checked_in = (ROOT / REFERENCE_PATH).read_text("utf-8")
    assert checked_in == reference_markdown(), (
        f"{REFERENCE_PATH} differs from gateway/config.py; run `gateway openapi` and commit it")


def test_every_setting_explains_itself() -> None:
    undocumented = [name for name, field in Settings.model_fields.items()
                    if not (field.description or "").strip()]
    assert not undocumented, f"give these settings a Field(description=...): {undocumented}"
    reference = (ROOT / REFERENCE_PATH).read_text("utf-8")
    for name in Settings.model_fields:
        assert f"`GATEWAY_{name.upper()}`" in reference or name == "tools_module"
    assert "`GATEWAY_TOOLS`" in reference


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_links_stay_inside_the_repository_and_exist(document: Path) -> None:
    text = document.read_text("utf-8")
    for target in LINK.findall(text):
        if re.match(r"^(https?:|mailto:|#)", target):
            continue
        resolved = (document.parent / target.split("#")[0]).resolve()
        assert resolved.is_relative_to(ROOT), f"{document.name} links outside: {target}"
        assert resolved.exists(), f"{document.name} links to a missing file: {target}"
    outside = re.findall(r"(?<![.\w])\.\./[\w.-]+|/work/|shared/DESIGN", text)
    assert not outside, f"{document.name} names paths outside the repository: {outside}"



@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_named_paths_exist(document: Path) -> None:
    missing = [path for path in REPO_PATH.findall(document.read_text("utf-8"))
               if not (ROOT / path).exists()]
    assert not missing, f"{document.name} names paths that do not exist: {missing}"


def test_no_gateway_module_points_at_the_benchmarks_notes() -> None:
    pointing = sorted(path.relative_to(ROOT).as_posix()
                      for path in (ROOT / "gateway").rglob("*.py")
                      if "bench/README" in path.read_text("utf-8"))
    assert not pointing, (f"{pointing} point at bench/README.md: say the contract and the "
                          "invariant, and put the measurement in a decision record "
                          "(docs/decisions/)")


def test_the_benchmarks_readme_is_an_index() -> None:
    lines = (ROOT / "bench" / "README.md").read_text("utf-8").splitlines()
    assert len(lines) < 200, f"bench/README.md has {len(lines)} lines: an index, not the results"
    scripts = sorted(path.stem for path in (ROOT / "bench").glob("*.py") if path.stem != "__init__")
    text = "\n".join(lines)
    unlisted = [name for name in scripts if f"`{name}.py`" not in text]
    assert not unlisted, f"bench/README.md does not list {unlisted}"


@pytest.mark.parametrize("record", DECISIONS, ids=lambda p: p.name)
def test_a_decision_record_says_what_how_much_and_when_to_remove_it(record: Path) -> None:
    text = record.read_text("utf-8")
    for part in ("**Where.**", "**What.**", "**Measured.**", "**Reproduce.**", "**Remove it when**"):
        assert part in text, f"{record.name} has no {part}"
    index = (ROOT / "docs" / "decisions" / "README.md").read_text("utf-8")
    assert f"]({record.name})" in index, f"docs/decisions/README.md does not list {record.name}"


def test_shell_examples_call_the_gateway_as_a_fresh_clone_can() -> None:
    """`gateway` is not on a fresh clone's PATH: the documents' shell examples call
    `./scripts/gateway` (inside a container, `docker compose exec ... gateway` is the image's).
    Every example's marker parses (tests/support/doc_examples.py)."""
    from tests.support.doc_examples import all_examples

    bare = re.compile(r"(?:^|[;&|(]\s*|\$\()(?:[A-Z_]+=\S+\s+)*gateway\s")
    found = []
    for example in all_examples():
        if example.language != "sh" or example.skip:
            continue
        for line in example.code.splitlines():
            if bare.search(line.split("#")[0]) and "exec" not in line:
                found.append(f"{example.name}: {line.strip()}")
    assert not found, "use ./scripts/gateway: " + "; ".join(found)
