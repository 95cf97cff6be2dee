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
UNDOCUMENTED: dict[str, str] = {}
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


DESIGN_CITE = re.compile(
    r"docs/design\.md(?:\s+§(?P<section>\d+(?:\.\d+)*)"
    r"|,\s+\"Module notes\",\s+``(?P<module>[\w.]+)``"
    r"|(?:,\s+|\s+\(\")\"?(?P<name>[A-Z][\w ]+?)\"?[,)])"
)
"""How the code cites the design: ``docs/design.md §2.2``, ``docs/design.md, "Module notes",
``graphmem.x``…``, or a section by name (``docs/design.md, Retention``)."""


def design_citations() -> list[tuple[str, str, str]]:
    """(file, kind, what) for every citation of the design in the code."""
    found = []
    for folder in ("graphmem", "showcase", "bench", "flows", "tests"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            text = " ".join(path.read_text(encoding="utf-8").split())
            for m in DESIGN_CITE.finditer(text):
                kind = next(k for k in ("section", "module", "name") if m.group(k))
                found.append((path.relative_to(ROOT).as_posix(), kind, m.group(kind)))
    return found


def lost(citations: list[tuple[str, str, str]]) -> list[str]:
    """The citations the design does not answer: a § number or a module note missing from the
    index (docs/design.md), a section name that heads no design page."""
    index = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    pages = [p.read_text(encoding="utf-8") for p in (ROOT / "docs" / "design").glob("*.md")]
    headings = [h.lower() for text in pages for h in re.findall(r"^#+ (.+)$", text, re.M)]
    out = []
    for file, kind, what in citations:
        if kind == "section":
            ok = f"[§{what} " in index
        elif kind == "module":
            ok = f"[`{what}`](design/" in index
        else:
            ok = any(what.lower() in h for h in headings)
        if not ok:
            out.append(f"{file}: {kind} {what}")
    return out


def test_every_design_citation_in_the_code_finds_its_place() -> None:
    """The code cites the design as ``docs/design.md §N`` or by module note; the index maps
    each to its concept page."""
    citations = [c for c in design_citations() if c[0] != "tests/test_docs_pages.py"]
    assert len(citations) > 40
    assert lost(citations) == []


def test_a_citation_of_nothing_is_lost() -> None:
    text = 'docs/design.md §9.9 and docs/design.md, "Module notes", ``graphmem.nope``'
    found = [
        ("x.py", k, m.group(k))
        for m in DESIGN_CITE.finditer(text)
        for k in ("section", "module")
        if m.group(k)
    ]
    fake = [*found, ("x.py", "name", "Nowhere"), ("x.py", "section", "2.2")]
    assert lost(fake) == ["x.py: section 9.9", "x.py: module graphmem.nope", "x.py: name Nowhere"]
