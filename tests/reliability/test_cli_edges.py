"""The command line's last edges (issue 55): SQLite stores under ``store check --max-memories``
and ``store retain``; an empty ``GRAPHMEM_STORE`` refused; a positional NAMESPACE checked as
``--namespace`` is; ``--json`` answered in JSON when there is nothing to show."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from graphmem.cli import main
from graphmem.config import MemoryConfig
from graphmem.embedding import HashingEmbedder
from graphmem.memory import GraphMemory
from graphmem.stores.embedded import EmbeddedStore

pytestmark = pytest.mark.reliability


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """An embedded store in ``tmp_path/store`` as GRAPHMEM_STORE, no Neo4j, no LLM."""
    for name in ("GRAPHMEM_NEO4J_URI", "GRAPHMEM_LLM_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GRAPHMEM_STORE", str(tmp_path / "store"))
    return tmp_path / "store"


@pytest.mark.parametrize("durability", ["journal", "sqlite"])
def test_store_check_capacity_and_retain_take_either_durability(
    tmp_path: Path, durability: str, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "store"
    with EmbeddedStore.open(root, durability=durability) as store:  # type: ignore[arg-type]
        mem = GraphMemory(store, embedder=HashingEmbedder(16), config=MemoryConfig())
        for i in range(5):
            mem.add_note("a", f"note {i}")
    assert main(["store", "check", str(root), "--max-memories", "3"]) == 1
    assert "a: 5 live memories, capacity 3" in capsys.readouterr().out
    assert main(["store", "retain", str(root), "--max-memories", "3", "--policy", "fifo"]) == 0
    assert "a: 5 live, archived 2, 3 left" in capsys.readouterr().out
    assert main(["store", "check", str(root), "--max-memories", "3"]) == 0
    assert "within it" in capsys.readouterr().out


def test_store_retain_names_what_a_store_directory_holds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "empty").mkdir()
    assert main(["store", "retain", str(tmp_path / "empty"), "--max-memories", "3"]) == 2
    err = capsys.readouterr().err
    assert "holds no embedded graphmem store (no CURRENT file, no graphmem.sqlite)" in err


@pytest.mark.parametrize("value", ["", "  "])
def test_an_empty_graphmem_store_is_refused_and_makes_no_store(
    env: Path,
    value: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("GRAPHMEM_STORE", value)  # GRAPHMEM_STORE=$UNSET_VARIABLE
    for argv in (["stats"], ["store", "check"], ["history", "ns"]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "GRAPHMEM_STORE is set but empty" in err, err
    assert os.listdir(work) == []  # the working directory was not made a store


@pytest.mark.parametrize(
    "argv",
    [
        ["history", "{}"],
        ["history", "{}", "m1"],
        ["episode", "{}"],
        ["episode", "{}", "e1"],
        ["restore", "{}", "m1"],
    ],
)
@pytest.mark.parametrize("namespace", ["", "../../etc", "a b"])
def test_a_positional_namespace_is_checked_before_the_store_opens(
    env: Path, argv: list[str], namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [a.format(namespace) for a in argv]
    assert main(args) == 2, args
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "NAMESPACE" in err, err
    assert not env.exists()  # refused before anything was opened or created


def test_json_asked_with_nothing_to_show_is_still_json(
    env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with EmbeddedStore.open(env) as store:
        GraphMemory(store, embedder=HashingEmbedder(16)).add_note("ns", "a lonely note")
    assert main(["history", "ns", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"chains": [], "history": None}
    assert main(["episode", "ns", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) is None
    assert main(["history", "ns"]) == 0  # the text form says so in words
    assert "no version chains" in capsys.readouterr().out
