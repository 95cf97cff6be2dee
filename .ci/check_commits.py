#!/usr/bin/env python3
"""Commit messages people can skim: a subject of at most 72 characters, then a blank line.

    .ci/check_commits.py                 check every commit after BASE up to HEAD
    .ci/check_commits.py --message FILE  check one message (as a commit-msg hook:
                                         ln -s ../../.ci/check_commits.py .git/hooks/commit-msg
                                         and it is called with the message file)

BASE is the last commit before the rule (7b0c4fa): the history before it is one-line messages of
up to 1,021 characters and stays as it is. Exit 0 when every message follows the rule, 1 with one
line per offender otherwise. ``tests/test_commit_messages.py`` runs the range check under
``./run test``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BASE = "7b0c4fa"
MAX_SUBJECT = 72
LANDED: dict[str, str] = {
    "5a73d0f": "a 74-character subject, committed in the same round the rule was written; "
    "main is not rewritten to mend it",
    "1064d95": "a 73-character subject (issue 54's word move), committed before the hook was "
    "linked in that checkout; others had committed on top when it was seen",
}
"""Commits after BASE that break the rule and are kept as they are, each with why."""


def problems(message: str) -> list[str]:
    """What is wrong with ``message`` (git's text: comment lines are dropped first)."""
    lines = [line for line in message.splitlines() if not line.startswith("#")]
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines or not lines[0].strip():
        return ["empty subject"]
    found = []
    if len(lines[0]) > MAX_SUBJECT:
        found.append(f"subject of {len(lines[0])} characters (at most {MAX_SUBJECT})")
    if len(lines) > 1 and lines[1].strip():
        found.append("no blank line after the subject")
    return found


def commits_after(base: str, root: Path) -> list[tuple[str, str]]:
    """(short hash, message) of every commit after ``base`` on HEAD, oldest first, less the
    ones listed in :data:`LANDED`."""
    out = subprocess.run(
        ["git", "log", "--reverse", "--format=%h%x00%B%x1e", f"{base}..HEAD"],
        cwd=root, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    found = []
    for record in out.split("\x1e"):
        record = record.lstrip("\n")
        if record:
            sha, _, message = record.partition("\x00")
            if not any(sha.startswith(k) or k.startswith(sha) for k in LANDED):
                found.append((sha, message))
    return found


def main(argv: list[str]) -> int:
    hook = len(argv) == 1 and not argv[0].startswith("-")
    if hook or (len(argv) == 2 and argv[0] == "--message"):
        text = Path(argv[-1]).read_text(encoding="utf-8")
        bad = [f"commit message: {p}" for p in problems(text)]
    elif not argv:
        root = Path(__file__).resolve().parent.parent
        bad = [f"{sha}: {p}" for sha, text in commits_after(BASE, root) for p in problems(text)]
    else:
        print(__doc__, file=sys.stderr)
        return 2
    for line in bad:
        print(line, file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
