"""The CLI: help, stats, export/import round trip, one-line errors for user mistakes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from graphmem.models import Note
from graphmem.stores.embedded import EmbeddedStore


def cli(tmp_path: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHMEM_")}
    env["GRAPHMEM_STORE"] = str(tmp_path / "store")
    return subprocess.run(
        [sys.executable, "-m", "graphmem", *args],
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def seed_store(tmp_path: Path) -> list[Note]:
    notes = [
        Note(namespace="alpha", content="first note", embedding=[1.0, 0.0, 0.0, 0.0]),
        Note(namespace="alpha", content='second "quoted" note', embedding=[0.0, 1.0, 0.0, 0.0]),
        Note(namespace="beta", content="other tenant", embedding=[0.0, 0.0, 1.0, 0.0]),
    ]
    store = EmbeddedStore.open(tmp_path / "store")
    try:
        store.upsert(notes)
    finally:
        store.close()
    return notes


def test_help_lists_commands(tmp_path: Path) -> None:
    result = cli(tmp_path, "--help")
    assert result.returncode == 0
    for command in ("stats", "export", "import"):
        assert command in result.stdout


def test_stats_counts_per_namespace(tmp_path: Path) -> None:
    seed_store(tmp_path)
    result = cli(tmp_path, "stats", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["namespaces"]["alpha"]["Note"] == 2
    assert data["namespaces"]["beta"]["Note"] == 1


def test_export_import_round_trip_into_another_namespace(tmp_path: Path) -> None:
    notes = seed_store(tmp_path)
    out = tmp_path / "alpha.jsonl"
    assert cli(tmp_path, "export", str(out), "-n", "alpha").returncode == 0
    result = cli(tmp_path, "import", str(out), "-n", "gamma")
    assert result.returncode == 0, result.stderr
    store = EmbeddedStore.open(tmp_path / "store")
    try:
        copied = {m.content for m in store.iter_nodes("gamma") if isinstance(m, Note)}
    finally:
        store.close()
    assert copied == {n.content for n in notes if n.namespace == "alpha"}


@pytest.mark.parametrize(
    ("args", "stdin", "fragment"),
    [
        (("import", "/no/such/file.jsonl"), None, "no such file"),
        (("import", "-"), "{not json\n", "line 1"),
        (("import", "-"), '{"type": "node", "kind": "Note", "namespace": "a"}\n', "line 1"),
        (("stats", "-n", "bad namespace!"), None, "namespace"),
    ],
)
def test_user_mistakes_are_one_line_errors(
    tmp_path: Path, args: tuple[str, ...], stdin: str | None, fragment: str
) -> None:
    seed_store(tmp_path)
    before = cli(tmp_path, "stats", "--json").stdout
    result = cli(tmp_path, *args, stdin=stdin)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("graphmem: error:")
    assert fragment in lines[0]
    assert cli(tmp_path, "stats", "--json").stdout == before
