"""The examples of README.md, docs/ and examples/*/README.md, as code to run.

Every fenced block whose language is `sh`, `bash` or `python` is an example: the doc examples
test (tests/integration/test_doc_examples.py) runs it as a reader would, in order, document by
document. A block that cannot run here says so in an HTML comment on the line right before its
fence, which the rendered Markdown does not show:

    <!-- example: skip=needs a real provider's key -->
    <!-- example: wait=2; expect=401 -->

- `skip=REASON`: not run; listed among the skipped tests with its reason. Only for what this
  machine cannot have: a real provider's key, a second machine, Docker, a browser app's own
  dev server, the test suite itself.
- `expect=TEXT`: the block's output (stdout and stderr) must hold TEXT (`|` between several).
  A block with `expect` may show a refusal: its curl commands are not made to fail on an HTTP
  error, as every other block's are.
- `wait=SECONDS`: run it that long after the previous block (a bound the text around it states,
  such as "within 2 s").
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNNABLE = {"sh": "sh", "bash": "sh", "shell": "sh", "python": "python"}
FENCE = re.compile(r"^(\s*)(`{3,})(\S*)\s*$")
MARKER = re.compile(r"^\s*<!--\s*example:(.*?)-->\s*$")


@dataclass(frozen=True)
class Example:
    document: str  # relative to the repository's root
    line: int  # of the opening fence, 1-based
    language: str  # "sh" or "python"
    code: str
    skip: str | None = None
    expect: tuple[str, ...] = ()
    wait: float = 0.0

    @property
    def name(self) -> str:
        return f"{self.document}:{self.line}"


def documents() -> list[Path]:
    """README.md, then docs/*.md, then examples/*/README.md: the order a reader meets them."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
            *sorted((ROOT / "examples").glob("*/README.md"))]


def _marker(text: str, where: str) -> dict[str, str]:
    """`key=value; key=value` of a marker comment (an unknown key is a mistake: refused)."""
    found: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(";"))):
        key, _, value = part.partition("=")
        key = key.strip()
        if key not in ("skip", "expect", "wait") or not value.strip():
            raise ValueError(f"{where}: unknown example marker {part!r}")
        found[key] = value.strip()
    return found


def examples(path: Path) -> list[Example]:
    """The runnable blocks of one document, with their markers."""
    lines = path.read_text("utf-8").splitlines()
    name = path.relative_to(ROOT).as_posix()
    found: list[Example] = []
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        indent, fence, language = opening.groups()
        start, body = index, []
        index += 1
        while index < len(lines) and lines[index].strip() != fence:
            body.append(lines[index][len(indent):] if lines[index].startswith(indent)
                        else lines[index])
            index += 1
        index += 1
        previous = lines[start - 1] if start > 0 else ""
        marked = MARKER.match(previous)
        marker = _marker(marked.group(1), f"{name}:{start}") if marked else {}
        if language not in RUNNABLE:
            if marked:
                raise ValueError(f"{name}:{start + 1}: a marker on a {language or 'plain'} "
                                 "block, which is not run")
            continue
        found.append(Example(
            name, start + 1, RUNNABLE[language], textwrap.dedent("\n".join(body)) + "\n",
            skip=marker.get("skip"),
            expect=tuple(e.strip() for e in marker["expect"].split("|")) if "expect" in marker
            else (),
            wait=float(marker.get("wait", 0))))
    return found


def all_examples() -> list[Example]:
    return [example for path in documents() for example in examples(path)]
