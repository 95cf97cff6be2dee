"""The README is one screen people finish (issue 46): at most 12 KB, the set-up commands, the
install commands and the example on its first screen; everything else lives in docs/, whose
benchmark page keeps its table cells short (long text goes in the prose under each table)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from graphmem import GraphMemory

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
FIRST_SCREEN = 40
"""Lines a reader sees before scrolling."""
MAX_CELL = 300
"""Characters in a table cell of the benchmark pages (docs/benchmarks/)."""


def table_cells(text: str) -> list[str]:
    """Every cell of every Markdown table in ``text`` (fenced code left out)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    cells = []
    for line in text.splitlines():
        if line.startswith("|") and not re.fullmatch(r"[|\s:-]+", line):
            cells += [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
    return cells


def test_the_readme_is_at_most_12_kb() -> None:
    assert README.stat().st_size <= 12 * 1024, README.stat().st_size


def test_the_first_screen_has_set_up_install_and_an_example() -> None:
    first = "\n".join(README.read_text(encoding="utf-8").splitlines()[:FIRST_SCREEN])
    for command in ("./run demo", "./run test", "pip install -e .", ".whl"):
        assert command in first, command
    example = re.search(r"```python\n(.*?)```", first, re.S)
    assert example, "no complete Python example on the first screen"
    code = example.group(1)
    assert "GraphMemory" in code and ".retrieve(" in code and ".finish_episode(" in code
    assert len(code.strip().splitlines()) <= 10


def test_the_readme_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The example as printed, in a fresh directory: nothing in it is stale."""
    code = re.search(r"## Example\n\n```python\n(.*?)```", README.read_text("utf-8"), re.S)
    assert code
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    exec(compile(code.group(1), "README example", "exec"), namespace)
    memory = namespace["mem"]
    assert isinstance(memory, GraphMemory)
    memory.close()
    assert namespace["prompt"] and (tmp_path / "graphmem-data").is_dir()


def test_benchmark_table_cells_are_short() -> None:
    pages = sorted((ROOT / "docs" / "benchmarks").glob("*.md"))
    cells = [c for page in pages for c in table_cells(page.read_text(encoding="utf-8"))]
    assert len(pages) >= 4 and len(cells) > 20
    long = [c[:80] + "…" for c in cells if len(c) > MAX_CELL]
    assert not long, long


def test_readme_table_cells_are_short() -> None:
    cells = table_cells(README.read_text(encoding="utf-8"))
    assert cells and max(map(len, cells)) <= 60


def test_the_cell_reader_sees_cells() -> None:
    assert table_cells("| a | b |\n| --- | --- |\n| x \\| y | z |\n```\n| c |\n```\n") == [
        "a",
        "b",
        "x \\| y",
        "z",
    ]
