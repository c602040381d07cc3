"""docs/architecture.md lists every folder of `gateway/`, and only folders that exist: the map a
newcomer reads first matches the tree."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GATEWAY = ROOT / "gateway"


def listed_folders() -> set[str]:
    text = (ROOT / "docs" / "architecture.md").read_text("utf-8")
    layout = text.split("## Layout and import direction", 1)[1].split("```")[1]
    return set(re.findall(r"^(gateway/(?:[\w]+/)*)\s", layout, flags=re.M))


def tree_folders() -> set[str]:
    folders = {"gateway/"}
    for path in GATEWAY.rglob("*"):
        if path.is_dir() and "__pycache__" not in path.parts and "migrations" not in path.parts:
            folders.add(path.relative_to(ROOT).as_posix() + "/")
    return folders


def test_the_architecture_lists_every_folder_and_no_other() -> None:
    listed, tree = listed_folders(), tree_folders()
    assert len(listed) > 10, "the layout block of docs/architecture.md was not found"
    assert tree - listed == set(), f"folders missing from docs/architecture.md: {tree - listed}"
    assert listed - tree == set(), f"docs/architecture.md lists folders that do not exist: " \
                                   f"{listed - tree}"
