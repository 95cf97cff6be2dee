"""Inputs the CLI accepted with exit 0 and should refuse (issue 47): each is one line, exit 2,
and the store's files are byte for byte what they were."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from graphmem.embedding import HashingEmbedder
from graphmem.memory import GraphMemory
from graphmem.stores.embedded import EmbeddedStore


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    mem = GraphMemory(EmbeddedStore.open(path), embedder=HashingEmbedder())
    mem.add_note("realns", "The kettle is in the left cupboard.")
    mem.close()
    return path


def _files(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(path.iterdir()) if p.name != "lock"}


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["stats", "--namespace", ""], "--namespace is empty"),
        (["stats", "-n", ""], "--namespace is empty"),
        (["export", "-", "--namespace", ""], "--namespace is empty"),
        (["history", "realns", "--chains", "-2"], "must be at least 1, got -2"),
        (["history", "realns", "--chains", "0"], "must be at least 1, got 0"),
        (["reembed", "--namespace", "nosuchns", "--embedder", "hashing"], "'nosuchns'"),
        (["reembed", "-n", "realns", "-n", "typo", "--embedder", "hashing"], "no namespace 'typo'"),
        (["reembed", "--namespace", "", "--embedder", "hashing"], "--namespace is empty"),
    ],
)  # fmt: skip
def test_refused_in_one_line_changing_nothing(store_dir: Path, argv: list[str], says: str) -> None:
    before = _files(store_dir)
    env = {**os.environ, "GRAPHMEM_STORE": str(store_dir), "GRAPHMEM_EMBEDDER": "hashing"}
    env.pop("GRAPHMEM_NEO4J_URI", None)
    out = subprocess.run(
        [sys.executable, "-m", "graphmem", *argv],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert out.returncode == 2, (out.stdout, out.stderr)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("graphmem"), out.stderr
    assert says in lines[0], lines[0]
    assert out.stdout == ""
    assert _files(store_dir) == before
