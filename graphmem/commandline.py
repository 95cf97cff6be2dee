"""What every graphmem command line shares: argument errors and error messages in one line.

The ``graphmem`` command (:mod:`graphmem.cli`) and the example runners
(:mod:`showcase.textworld_agent`) both use it, so it sits below them.
"""

from __future__ import annotations

import argparse
from typing import NoReturn

__all__ = ["OneLineParser", "one_line"]


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line, ``<command>: error: …``, exit 2.

    Sub-command parsers are made of the same class, so every command behaves alike; the line
    points at ``--help`` instead of printing the usage block.
    """

    command = "graphmem"

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.command}: error: {one_line(message)} (see `{self.prog} --help`)\n")


def one_line(text: str) -> str:
    """``text`` on one line: what an error line must be, whatever a message holds."""
    return " ".join(text.splitlines()).strip()
