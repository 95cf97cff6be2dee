"""The wheel is the library (issue 46): built from a copy of the checkout with the showcase, the
flows and the benchmarks beside the package, as a clone has them, it lists ``graphmem`` only and
no game, agent, demo or sample-data module (what ``unzip -l`` of the wheel would show)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

BESIDE = ("graphmem", "showcase", "flows", "bench")
"""The checkout's Python folders, copied so that a packaging rule that picked one up would show."""

SHOWCASE_FILES = frozenset(p.name for p in (ROOT / "showcase").rglob("*.py")) - frozenset(
    p.name for p in (ROOT / "graphmem").rglob("*.py")
)
"""File names only the showcase's modules have (demo.py, textworld_agent.py, envs/textworld.py,
...); ``agents.py`` is not one: ``graphmem/agents.py`` holds the protocols a user implements."""

SHOWCASE_FOLDERS = ("showcase", "examples", "envs")
"""Folders that must not appear anywhere in the wheel."""

CHECKOUT_FOLDERS = ("showcase", "flows", "bench", "tests")
"""The checkout's own folders, which must not be top-level packages of the wheel."""


def forbidden(name: str) -> bool:
    """Whether the wheel entry ``name`` is a game, agent, demo or sample-data module."""
    parts = name.split("/")
    return (
        parts[0] in CHECKOUT_FOLDERS
        or any(p in SHOWCASE_FOLDERS for p in parts[:-1])
        or parts[-1] in SHOWCASE_FILES
    )


def test_the_check_knows_the_showcase() -> None:
    assert {"demo.py", "textworld_agent.py", "served_agent.py", "sample.py"} <= SHOWCASE_FILES
    assert {"textworld.py", "scienceworld.py", "metrics.py", "llm_actions.py"} <= SHOWCASE_FILES
    assert forbidden("graphmem/examples/demo.py") and forbidden("graphmem/viz/sample.py")
    assert forbidden("graphmem/envs/agents.py") and forbidden("showcase/envs/jvm.py")
    assert not forbidden("graphmem/agents.py") and not forbidden("graphmem/flows/agent.py")
    assert not forbidden("graphmem/viz/html.py") and forbidden("flows/server.py")


def test_the_packaging_rule_names_the_library_only() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert config["tool"]["setuptools"]["packages"]["find"]["include"] == ["graphmem*"]


def test_the_wheel_lists_no_game_agent_or_demo_module(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for folder in BESIDE:
        shutil.copytree(
            ROOT / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__", "results")
        )
    out = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "-w", str(out), str(src)],
        check=True, cwd=tmp_path, timeout=300, capture_output=True,
    )  # fmt: skip
    (wheel,) = out.glob("graphmem-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"graphmem", "graphmem-0.1.0.dist-info"}
    assert "graphmem/agents.py" in names and "graphmem/flows/agent.py" in names
    assert not [n for n in names if forbidden(n)]
