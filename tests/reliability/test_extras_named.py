"""Every extra is named in the docs, and ``[all]`` holds every extra a user installs,
``[viz]`` (the HTML and PNG pictures) included (issue 55)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

pytestmark = pytest.mark.reliability

ROOT = Path(__file__).resolve().parents[2]


def test_the_docs_name_every_extra_and_all_holds_the_users_ones() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "optional-dependencies"
    ]
    docs = "\n".join(
        p.read_text(encoding="utf-8") for p in [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]
    )
    unnamed = [e for e in extras if f"[{e}]" not in docs]
    assert not unnamed, f"extras no document names: {unnamed}"
    (bundle,) = [d for d in extras["all"] if d.startswith("graphmem[")]
    in_all = set(re.findall(r"\[(.*)\]", bundle)[0].split(","))
    assert {"minilm", "neo4j", "langchain", "openai", "langgraph", "mcp", "viz"} <= in_all
