"""What a command's module adds its parser to: `argparse`'s sub-parsers of `gateway`."""

from __future__ import annotations

import argparse
from typing import Protocol


class Commands(Protocol):
    """The sub-parsers action `gateway`'s parser made (`add_subparsers`), as the command
    modules use it: one parser per command, with its help line."""

    def add_parser(self, name: str, *, help: str | None = ...) -> argparse.ArgumentParser: ...
