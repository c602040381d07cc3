"""Every example of README.md, docs/ and examples/*/README.md runs as written: its shell and
Python blocks, in order, document by document, against a real gateway that `./scripts/serve`
started (tests/support/doc_runner.py says how, and what is rewritten: the port, nothing else).

A block that needs what this machine cannot have (a real provider's key, Docker, a second
machine, a browser app's dev server) is marked in its Markdown (`<!-- example: skip=... -->`,
tests/support/doc_examples.py) and shows here as a skipped test with that reason. So an example
cannot drift from the gateway again: the day it stops working, this fails, naming the document
and the line.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

from tests.support.doc_examples import ROOT, Example, all_examples
from tests.support.doc_runner import DocRunner

# One gateway and one database per document at most: the outcome cannot depend on the backend.
pytestmark = [pytest.mark.sqlite_only, pytest.mark.timeout(300)]

EXAMPLES = all_examples()


def checkout_changes() -> set[str]:
    """Files of the checkout that differ from the commit, or are new and not ignored."""
    listed = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"],
                            cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return set(listed.splitlines())


@pytest.fixture(scope="module")
def runner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DocRunner]:
    doc_runner = DocRunner(tmp_path_factory.mktemp("doc-examples"))
    doc_runner.checkout_before = checkout_changes()  # type: ignore[attr-defined]
    try:
        yield doc_runner
    finally:
        doc_runner.close()


@pytest.mark.parametrize("example", EXAMPLES, ids=[example.name for example in EXAMPLES])
def test_example_runs(example: Example, runner: DocRunner) -> None:
    if example.skip:
        pytest.skip(f"{example.name}: {example.skip}")
    runner.run(example)


def test_the_examples_leave_the_checkout_as_it_was(runner: DocRunner) -> None:
    """An example writes nothing into the repository (a reader's clone stays clean)."""
    assert checkout_changes() == runner.checkout_before  # type: ignore[attr-defined]


def test_only_what_cannot_run_here_is_skipped() -> None:
    skipped = {example.name: example.skip for example in EXAMPLES if example.skip}
    assert all(reason and len(reason) > 10 for reason in skipped.values()), skipped
    assert len(skipped) <= len(EXAMPLES) // 3, f"too many examples skipped: {skipped}"
