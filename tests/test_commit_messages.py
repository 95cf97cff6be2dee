"""Every commit after 7b0c4fa has a subject of at most 72 characters and a blank second line, so
``git log --oneline`` can be skimmed (issue 46; the rule is ``.ci/check_commits.py``)."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _check() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "check_commits", ROOT / ".ci" / "check_commits.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


check = _check()


def _has_history() -> bool:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        return False
    base = subprocess.run(
        ["git", "cat-file", "-e", f"{check.BASE}^{{commit}}"], cwd=ROOT, capture_output=True
    )
    return base.returncode == 0


@pytest.mark.skipif(not _has_history(), reason="needs the git history back to 7b0c4fa")
def test_every_commit_after_the_base_follows_the_message_rule() -> None:
    bad = [
        f"{sha} {message.splitlines()[0][:60]!r}: {problem}"
        for sha, message in check.commits_after(check.BASE, ROOT)
        for problem in check.problems(message)
    ]
    assert not bad, "\n".join(bad)


def test_the_rule() -> None:
    assert check.problems("Short subject\n\nA body, as long\nas it likes.\n") == []
    assert check.problems("One line only\n") == []
    assert check.problems("x" * 72) == []
    assert check.problems("x" * 73) == ["subject of 73 characters (at most 72)"]
    assert check.problems("Subject\nbody glued on\n") == ["no blank line after the subject"]
    assert check.problems("# a comment git drops\n\n") == ["empty subject"]
    assert check.problems("Subject\n# comment\n\nbody\n") == []


def test_the_hook_form_reads_a_message_file(tmp_path: Path) -> None:
    good, bad = tmp_path / "good", tmp_path / "bad"
    good.write_text("Fix the thing\n\nWhy it was wrong.\n", encoding="utf-8")
    bad.write_text("y" * 80 + "\n", encoding="utf-8")
    assert check.main(["--message", str(good)]) == 0
    assert check.main([str(bad)]) == 1
