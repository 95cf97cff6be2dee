"""docs/flows.md stays true (issue 47): its tables list exactly the keys of the flows' state
types and of a hit, its composition example runs, and the excerpt shown is the example's."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import get_type_hints

import pytest

from graphmem.flows.state import BuildState, EvolveState, HitRecord, RetrieveState, UpdateState

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "flows.md"
EXAMPLE = ROOT / "docs" / "examples" / "compose_flows.py"


def _table_keys(heading: str) -> set[str]:
    """The first column of the table under ``heading`` (a markdown heading's exact text)."""
    text = DOC.read_text(encoding="utf-8")
    start = text.index(heading)
    section = text[start : text.find("\n#", start + len(heading))]
    return set(re.findall(r"^\| `(\w+)` \|", section, re.M))


@pytest.mark.parametrize(
    ("heading", "state"),
    [
        ("### `build_retrieve_graph` (`RetrieveState`)", RetrieveState),
        ("### `build_update_graph` (`UpdateState`)", UpdateState),
        ("### `build_build_graph` (`BuildState`)", BuildState),
        ("### `build_evolve_graph` (`EvolveState`)", EvolveState),
        ("## A hit", HitRecord),
    ],
)
def test_the_tables_list_every_key(heading: str, state: type) -> None:
    assert _table_keys(heading) == set(get_type_hints(state)), heading


def test_the_composition_example_runs() -> None:
    lines = EXAMPLE.read_text(encoding="utf-8").splitlines()
    assert len([line for line in lines if line.strip()]) <= 45  # a short example
    out = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert out.returncode == 0, out.stderr[-3000:]
    first, second = out.stdout.strip().splitlines()
    assert first.startswith("Procedure ") and "sim " in first
    assert second.startswith("Q after the reward: {") and ": 0.55}" in second


def test_the_excerpt_is_the_examples_code() -> None:
    text = DOC.read_text(encoding="utf-8")
    block = text[text.index("```python", text.index("## Composing them")) :].split("```")[1]
    example = EXAMPLE.read_text(encoding="utf-8")
    for line in block.splitlines()[1:]:
        assert line in example, line
