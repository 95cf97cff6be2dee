"""Every relative link in the README, the CHANGELOG and docs/ points at a file of the repository,
and every ``#anchor`` into a Markdown file at one of its headings (as GitHub derives them)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def anchors(page: Path) -> set[str]:
    """GitHub's anchors for a Markdown file's headings: lower case, punctuation dropped,
    spaces as hyphens."""
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    found = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*$", text, re.M):
        found.add(re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-"))
    return found


def links(page: Path) -> list[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return [t for t in LINK.findall(text) if not re.match(r"[a-z]+:", t)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_resolve(page: Path) -> None:
    broken = []
    for target in links(page):
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        missing = not file.exists()
        if missing or (anchor and file.suffix == ".md" and anchor not in anchors(file)):
            broken.append(target)
    assert broken == []


def test_the_checker_sees_links_and_anchors() -> None:
    readme = links(ROOT / "README.md")
    assert "docs/benchmarks.md" in readme and len(readme) > 10
    assert "../scale.md#the-embedded-store" in links(ROOT / "docs" / "benchmarks" / "speed.md")
    assert "how-wide-the-vector-indexs-search-must-be" in anchors(ROOT / "docs" / "scale.md")
