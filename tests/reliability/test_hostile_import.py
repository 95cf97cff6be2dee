"""Hostile JSON Lines imports, through the store API and the CLI (import / export / stats).

A valid export is corrupted by one hostile line at a random position; the import must fail with
an ImportFormatError naming the line (a one-line ``graphmem: error:`` and exit 2 from the CLI)
and leave the store exactly as it was.
"""

from __future__ import annotations

import io
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import strategies as st

from graphmem import cli
from graphmem.errors import ImportFormatError, InvalidInput
from graphmem.models import Edge, EdgeKind, Note
from graphmem.stores.base import MemoryStore

from ._hostile import check_property, hostile_text, refused_cleanly, snapshot
from ._workers import DIM, backend_of

pytestmark = pytest.mark.reliability


def valid_export(store: MemoryStore, ns: str) -> list[str]:
    store.upsert(
        [
            Note(id="a", namespace=ns, content="first 'note'", embedding=[1.0] * DIM),
            Note(id="b", namespace=ns, content="second \x00 note", embedding=[0.5] * DIM),
        ],
        [Edge(namespace=ns, kind=EdgeKind.LINKS_TO, src="a", dst="b", props={"why": "x"})],
    )
    out = io.StringIO()
    store.export_jsonl(out, ns)
    return out.getvalue().splitlines()


def _node(ns: str, **changes: Any) -> str:
    record: dict[str, Any] = {"type": "node", "kind": "Note", "id": "c", "namespace": ns}
    record.update({"content": "c", "embedding": [1.0] * DIM}, **changes)
    return json.dumps({k: v for k, v in record.items() if v is not ...})


def corruptions(ns: str, lines: list[str]) -> st.SearchStrategy[str]:
    """One hostile line: not JSON, not an object, or a record that must not be imported."""
    return st.one_of(
        hostile_text.filter(lambda t: t.strip() and not t.strip().startswith("{")),
        st.sampled_from(lines).flatmap(
            lambda line: st.integers(1, len(line) - 1).map(lambda k: line[:k])
        ),
        st.one_of(st.integers(), st.lists(st.integers(), max_size=3), hostile_text).map(json.dumps),
        st.sampled_from(
            [
                _node(ns, embedding=[math.nan] * DIM),
                _node(ns, embedding=[1.0] * (DIM - 1)),
                _node(ns, embedding="1" * DIM),
                _node(ns, embedding=[0.0] * DIM),
                _node(ns, id="bad id"),
                _node(ns, id="x" * 200),
                _node("bad namespace!"),
                _node(ns, kind="Nope"),
                _node(ns, kind="`) DETACH DELETE n //"),
                _node(ns, q="high"),
                _node(ns, q=math.inf),
                _node(ns, uses=-1),
                _node(ns, content=""),
                _node(ns, content=" \n\t"),
                _node(ns, content=None),
                _node(ns, content=...),
                _node(ns, evil="field"),
                _node(ns, data="{not json"),
                json.dumps({"type": "edge", "namespace": ns, "kind": "LINKS_TO", "src": "a"}),
                json.dumps(
                    {"type": "edge", "namespace": ns, "kind": "LINKS_TO", "src": "a", "dst": "zz"}
                ),
                json.dumps(
                    {"type": "edge", "namespace": ns, "kind": "DROP", "src": "a", "dst": "b"}
                ),
                json.dumps(
                    {
                        "type": "edge",
                        "namespace": ns,
                        "kind": "NEXT",
                        "src": "a",
                        "dst": "b",
                        "props": {"bad key!": 1},
                    }
                ),
                json.dumps({"type": "header", "format": "other/9", "dimension": DIM}),
                json.dumps({"type": "header", "format": "graphmem.jsonl/1", "dimension": DIM + 1}),
                json.dumps({"type": "mystery"}),
                json.dumps({"no": "type"}),
            ]
        ),
    )


def test_a_corrupt_line_anywhere_imports_nothing(store: MemoryStore, namespace: str) -> None:
    lines = valid_export(store, f"{namespace}-src")
    strategy = st.tuples(corruptions(namespace, lines), st.integers(0, len(lines)), st.booleans())

    def check(case: tuple[str, int, bool]) -> None:
        bad, position, override = case
        corrupted = [*lines[:position], bad, *lines[position:]]
        target = f"{namespace}-dst" if override else None
        error = refused_cleanly(
            store, namespace, lambda: store.import_jsonl(corrupted, namespace=target)
        )
        assert isinstance(error, ImportFormatError), type(error)

    check_property(store, strategy, check)
    assert store.import_jsonl(lines, namespace=f"{namespace}-ok") == (2, 1)  # the file is fine


def test_import_refuses_an_invalid_namespace_override(store: MemoryStore, namespace: str) -> None:
    lines = valid_export(store, f"{namespace}-src")
    for bad in ("", "a b", "-x", "x\n", "x" * 129, "../etc"):
        error = refused_cleanly(
            store, namespace, lambda b=bad: store.import_jsonl(lines, namespace=b)
        )
        assert isinstance(error, InvalidInput)


# ---- the CLI --------------------------------------------------------------------------------


@pytest.fixture
def cli_env(store: MemoryStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """Point the CLI at the test's store (the embedded directory, or the configured Neo4j)."""
    if backend_of(store) == "embedded":
        monkeypatch.delenv("GRAPHMEM_NEO4J_URI", raising=False)
        monkeypatch.setenv("GRAPHMEM_STORE", str(store.path))  # type: ignore[attr-defined]


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = cli.main(list(argv))
    _, err = capsys.readouterr()
    return code, err


def test_cli_import_of_a_corrupt_file_fails_in_one_line_and_imports_nothing(
    store: MemoryStore,
    namespace: str,
    cli_env: None,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    lines = valid_export(store, f"{namespace}-src")
    path = tmp_path / "in.jsonl"

    def check(case: tuple[str, int]) -> None:
        bad, position = case
        path.write_text("\n".join([*lines[:position], bad, *lines[position:]]) + "\n")
        before = snapshot(store, namespace)
        code, err = _run(capsys, "import", str(path), "--namespace", f"{namespace}-cli")
        assert code == 2, err
        assert err.startswith("graphmem: error: import line") and err.count("\n") == 1, err
        assert snapshot(store, namespace) == before

    check_property(
        store, st.tuples(corruptions(namespace, lines), st.integers(0, len(lines))), check
    )
    path.write_bytes(b"\xff\xfe\x00garbage\n")
    code, err = _run(capsys, "import", str(path))
    assert code == 2 and "not valid UTF-8" in err
    for missing in (tmp_path / "missing.jsonl", tmp_path):
        code, err = _run(capsys, "import", str(missing))
        assert code == 2 and err.count("\n") == 1, err


def test_cli_stats_export_and_import_refuse_hostile_namespaces(
    store: MemoryStore,
    namespace: str,
    cli_env: None,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    lines = valid_export(store, f"{namespace}-src")
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join(lines) + "\n")
    before = snapshot(store, namespace)
    for bad in ("a b", "x\n", "'); MATCH (n) DETACH DELETE n //", "-a", "ä"):
        for argv in (
            ["stats", f"--namespace={bad}"],
            ["export", str(tmp_path / "out.jsonl"), f"--namespace={bad}"],
            ["import", str(source), f"--namespace={bad}"],
        ):
            code, err = _run(capsys, *argv)
            assert code == 2 and err.startswith("graphmem: error: "), err
            assert "invalid namespace" in err, err
            assert err.count("\n") == 1
    assert snapshot(store, namespace) == before
    assert not (tmp_path / "out.jsonl").exists()
    code, _ = _run(capsys, "export", str(tmp_path / "out.jsonl"), "--namespace", f"{namespace}-src")
    assert code == 0
    assert (tmp_path / "out.jsonl").read_text().splitlines() == lines


def test_cli_export_to_an_unwritable_path_fails_in_one_line(
    store: MemoryStore, cli_env: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _run(capsys, "export", str(tmp_path / "no-such-dir" / "out.jsonl"))
    assert code == 2 and err.startswith("graphmem: error:") and err.count("\n") == 1


# ---- a failed import changes nothing, whatever fails and wherever -------------------------

HEADER = '{"type": "header", "format": "graphmem.jsonl/1", "dimension": %s}'
HOSTILE_DIMENSIONS = ('"abc"', "[1]", "1e400", "0", "-3", "100000000", "true", "1.5", "{}")
"""Header dimensions as they appear in the file (1e400 parses as infinity)."""
DEEP = "[" * 100_000 + "]" * 100_000
"""100k-deep JSON nesting: deeper than Python's recursion limit."""


def test_a_hostile_header_dimension_is_refused_and_fixes_nothing(
    store: MemoryStore, namespace: str
) -> None:
    dimension = store.dimension  # None on a fresh embedded store; the shared Neo4j has one
    node = _node(namespace)
    for raw in HOSTILE_DIMENSIONS:
        error = refused_cleanly(
            store, namespace, lambda r=raw: store.import_jsonl([HEADER % r, node])
        )
        assert isinstance(error, ImportFormatError) and error.line_no == 1, error
        assert "dimension" in str(error)
        assert store.dimension == dimension
    for lines in ([DEEP], [HEADER % DIM, node, DEEP], [_node(namespace, tags=[[["x"]] * 3])]):
        error = refused_cleanly(store, namespace, lambda x=lines: store.import_jsonl(x))
        assert isinstance(error, ImportFormatError) and error.line_no == len(lines), error
    assert store.dimension == dimension


def test_a_failed_import_leaves_an_empty_store_without_a_dimension(tmp_path: Path) -> None:
    """The header fixed the dimension before the file was validated: later adds all failed."""
    from graphmem.stores.embedded import EmbeddedStore

    store = EmbeddedStore.open(tmp_path / "empty")
    try:
        lines = [HEADER % 1024, _node("ns", embedding=[1.0] * 1024), "{not json"]
        with pytest.raises(ImportFormatError, match="line 3"):
            store.import_jsonl(lines)
        assert store.dimension is None
        with pytest.raises(ImportFormatError, match="line 2"):  # vectors must match the header
            store.import_jsonl([HEADER % 8, _node("ns", embedding=[1.0] * 4)])
        assert store.dimension is None and store.namespaces() == []
        store.upsert([Note(namespace="ns", content="later", embedding=[1.0, 0.0, 0.0])])
        assert store.dimension == 3
        # A header alone (an export of an empty store) still fixes the dimension once valid.
        empty = EmbeddedStore.open(tmp_path / "empty-2")
        try:
            assert empty.import_jsonl([HEADER % 5]) == (0, 0) and empty.dimension == 5
        finally:
            empty.close()
    finally:
        store.close()


def _many_notes(ns: str, n: int) -> list[str]:
    return [_node(ns, id=f"n{i}", content=f"note {i}", embedding=[1.0 + i] * DIM) for i in range(n)]


def _tip(ns: str, memory_id: str) -> str:
    return json.dumps(
        {"type": "node", "kind": "Tip", "namespace": ns, "id": memory_id, "text": "t"}
    )


def test_an_import_failing_at_line_602_writes_none_of_the_600_notes_before_it(
    store: MemoryStore, namespace: str
) -> None:
    store.check_dimension(DIM)
    target = f"{namespace}-big"
    lines = [HEADER % DIM, *_many_notes(target, 600), _tip(target, "n1")]
    error = refused_cleanly(store, namespace, lambda: store.import_jsonl(lines))
    assert isinstance(error, ImportFormatError) and error.line_no == 602, error
    assert "n1" in str(error)
    # Failing in the write itself (an id the store holds with another kind) is atomic too.
    store.upsert([Note(id="taken", namespace=target, content="a note")])
    clash = _tip(target, "taken")
    error = refused_cleanly(store, namespace, lambda: store.import_jsonl([*lines[:-1], clash]))
    assert "taken" in str(error)
    assert [m.id for m in store.iter_nodes(target)] == ["taken"]
    assert store.import_jsonl(lines[:-1]) == (600, 0)  # the same file without the bad line


def test_an_edge_to_an_unknown_memory_names_its_line(store: MemoryStore, namespace: str) -> None:
    lines = valid_export(store, f"{namespace}-src")
    bad = json.dumps(
        {"type": "edge", "namespace": f"{namespace}-src", "kind": "NEXT", "src": "a", "dst": "zz"}
    )
    error = refused_cleanly(store, namespace, lambda: store.import_jsonl([*lines, bad, lines[1]]))
    assert isinstance(error, ImportFormatError) and error.line_no == len(lines) + 1
    assert "'zz'" in str(error)


def _cli_env(store: MemoryStore) -> dict[str, str]:
    """The environment that points a ``graphmem`` subprocess at the test's store."""
    env = dict(os.environ)
    if backend_of(store) == "embedded":
        env.pop("GRAPHMEM_NEO4J_URI", None)
        env["GRAPHMEM_STORE"] = str(store.path)  # type: ignore[attr-defined]
    return env


@pytest.mark.slow
def test_the_real_cli_refuses_hostile_files_in_one_line_and_imports_nothing(
    store: MemoryStore, namespace: str, tmp_path: Path
) -> None:
    """``python -m graphmem import``: one ``graphmem: error:`` line, exit 2, the same export."""
    store.check_dimension(DIM)
    node = _node(f"{namespace}-cli")
    files = [*(HEADER % raw + "\n" + node for raw in ('"abc"', "[1]", "1e400")), DEEP]
    for i, text in enumerate(files):
        path = tmp_path / f"hostile-{i}.jsonl"
        path.write_text(text + "\n")
        before = snapshot(store, namespace)
        result = subprocess.run(
            [sys.executable, "-m", "graphmem", "import", str(path)],
            env=_cli_env(store),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert result.returncode == 2, result.stderr
        assert result.stderr.startswith("graphmem: error: import line 1:"), result.stderr
        assert result.stderr.count("\n") == 1, result.stderr
        assert snapshot(store, namespace) == before
