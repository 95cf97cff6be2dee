"""The documentation stays navigable and true to the code (issue 54): no page over 40 KB, and
every module, source file or results file a page names exists in the checkout."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
MAX_PAGE = 40 * 1024
"""Bytes in one documentation page: a longer one is split by concept."""

DOTTED = re.compile(r"(?<![\w./-])((?:graphmem|showcase|bench)(?:\.[A-Za-z_]\w*)+)")
"""A module (or a module's attribute) named by its import path: ``graphmem.ops.retrieve``."""
PATH = re.compile(
    r"(?<![\w./-])((?:[\w-]+/)+[\w-]+\.(?:py|md|json|jsonl|cypher|toml|ya?ml|txt|html|grass|xml|conf))\b"
)
"""A file named by its path: ``graphmem/ops/retrieve.py``, ``stores/embedded/graph.py``."""
BARE = re.compile(r"(?<![\w/.-])([\w-]+\.py)\b")
"""A Python file named alone: ``journal.py``."""
FILE_SUFFIXES = {"sqlite", "jsonl", "json", "db", "log", "lock"}
"""Dotted names that are data files a store writes (``graphmem.sqlite``), not modules."""
NOT_IN_CHECKOUT = {"conf/neo4j.conf", "demo-out/chain.html"}
"""Paths the docs name that are made at run time: a local Neo4j's configuration under its own
home, the demo's output directory."""
BASES = (ROOT, ROOT / "graphmem", ROOT / "showcase", ROOT / "tests", ROOT / "docs")
"""Where a relative path in the docs may start: the checkout, or inside a package or tests/."""


def module_file(parts: list[str]) -> Path | None:
    path = ROOT.joinpath(*parts)
    if path.with_suffix(".py").is_file():
        return path.with_suffix(".py")
    if (path / "__init__.py").is_file():
        return path / "__init__.py"
    return None


def dotted_is_dead(name: str) -> bool:
    """True when no module has this import path, and its longest module prefix does not mention
    the next name either (``graphmem.testing.StoreConformance`` is an attribute, not a module)."""
    parts = name.split(".")
    if parts[-1] in FILE_SUFFIXES:
        return False
    known = len(parts)
    while known and module_file(parts[:known]) is None:
        known -= 1
    if known == 0:
        return True
    if known == len(parts):
        return False
    source = module_file(parts[:known])
    assert source is not None
    return re.search(rf"\b{re.escape(parts[known])}\b", source.read_text("utf-8")) is None


def path_is_dead(path: str) -> bool:
    if path in NOT_IN_CHECKOUT:
        return False
    return not any((base / path).exists() for base in BASES)


PYTHON_FILES = {p.name for p in ROOT.rglob("*.py") if ".git" not in p.parts}


def dead_names(text: str) -> list[str]:
    dead = [m for m in DOTTED.findall(text) if dotted_is_dead(m.rstrip("."))]
    dead += [m for m in PATH.findall(text) if path_is_dead(m)]
    dead += [m for m in BARE.findall(text) if m not in PYTHON_FILES]
    return dead


def label(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


@pytest.mark.parametrize("page", PAGES, ids=label)
def test_no_page_is_over_40_kb(page: Path) -> None:
    assert page.stat().st_size <= MAX_PAGE, f"{label(page)}: {page.stat().st_size} bytes"


@pytest.mark.parametrize("page", PAGES, ids=label)
def test_every_module_and_file_a_page_names_exists(page: Path) -> None:
    assert dead_names(page.read_text(encoding="utf-8")) == []


def test_the_checker_finds_dead_names() -> None:
    """Old names from before the store subpackages, and a results file that was renamed."""
    text = (
        "`graphmem.stores.embedded.store` and `graphmem.testing.StoreConformance` live;"
        " `graphmem.stores.embedded_store`, `graphmem.ops.nothing_here`, stores/embedded.py,"
        " bench/results/speed_async.md and sqlite_store.py do not; graphmem.sqlite is a file."
    )
    assert dead_names(text) == [
        "graphmem.stores.embedded_store",
        "graphmem.ops.nothing_here",
        "stores/embedded.py",
        "bench/results/speed_async.md",
        "sqlite_store.py",
    ]


def contents_and_sections(page: Path) -> tuple[list[str], list[str]]:
    """The anchors a page's **Contents** list links to (top level), and its ``##`` sections'."""
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.S | re.M)
    listed = text.split("**Contents**", 1)[1].split("\n## ", 1)[0]
    contents = re.findall(r"^- \[[^\]]*\]\(#([^)]+)\)", listed, re.M)
    sections = [
        re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-")
        for h in re.findall(r"^## (.+?)\s*$", text, re.M)
    ]
    return contents, sections


WITH_CONTENTS = [p for p in PAGES if "**Contents**" in p.read_text(encoding="utf-8")]


@pytest.mark.parametrize("page", WITH_CONTENTS, ids=label)
def test_a_contents_list_matches_the_sections(page: Path) -> None:
    assert contents_and_sections(page)[0] == contents_and_sections(page)[1]


def test_the_benchmark_pages_have_contents_lists() -> None:
    names = {label(p) for p in WITH_CONTENTS}
    wanted = {"docs/benchmarks.md", "docs/benchmarks/learning.md", "docs/benchmarks/speed.md"}
    assert wanted <= names


RESULTS = re.compile(r"bench/results/[\w.*/-]+")
"""A results file (or a glob of them) a page names, as a link or as a path."""
BENCHMARK_PAGES = [
    ROOT / "docs" / "benchmarks.md",
    *sorted((ROOT / "docs" / "benchmarks").glob("*.md")),
]
UNDOCUMENTED = {"ingest": "issue 53's batch ingest: its section comes with its results"}
"""Benchmarks no page names yet, each with why."""


@pytest.mark.parametrize("page", PAGES, ids=label)
def test_every_results_file_a_page_cites_exists(page: Path) -> None:
    cited = {m.rstrip(".") for m in RESULTS.findall(page.read_text(encoding="utf-8"))}
    missing = [c for c in sorted(cited) if not list(ROOT.glob(c))]
    assert missing == []


def test_the_benchmark_pages_cite_results() -> None:
    cited = {m for page in BENCHMARK_PAGES for m in RESULTS.findall(page.read_text("utf-8"))}
    assert len(cited) > 50


def test_every_benchmark_is_named_in_the_docs() -> None:
    """``python -m bench list``'s every benchmark has its command somewhere in docs/."""
    from bench.runner import benchmarks

    docs = "\n".join(page.read_text(encoding="utf-8") for page in PAGES)
    named = {
        name
        for name in benchmarks()
        if re.search(rf"bench\.{name}\b|bench/{name}\.py|bench run {name}\b", docs)
    }
    assert set(benchmarks()) - named == set(UNDOCUMENTED)
