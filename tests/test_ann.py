"""The embedded store's approximate index: above ``ann_threshold`` (on by default) recall goes
through usearch candidates re-scored exactly, and must agree with the exact scan; filters,
deletes and updates hold on that path; below the threshold, and without the library, every
search is exact. The index is built by a background thread (a search meanwhile scans exactly and
never waits for it), saved beside the store and loaded on open, and ``store check`` verifies it
against the vectors."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from graphmem.models import Note, Task
from graphmem.stores.embedded import EmbeddedStore
from graphmem.stores.embedded import ann as _ann
from graphmem.stores.embedded import vectors as _vectors
from graphmem.stores.embedded.check import check_store, repair_store
from graphmem.stores.embedded.vectors import DEFAULT_ANN_THRESHOLD

pytest.importorskip("usearch")

DIM = 32
NS = "ann"


def clustered(n: int, seed: int = 0) -> np.ndarray:
    """Unit vectors around n/20 centres: a corpus with neighbourhoods, like real embeddings."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((max(1, n // 20), DIM))
    points = centres[rng.integers(0, len(centres), n)] + 0.3 * rng.standard_normal((n, DIM))
    return (points / np.linalg.norm(points, axis=1, keepdims=True)).astype(np.float32)


def fill(store: EmbeddedStore, vectors: np.ndarray, *, namespace: str = NS, start: int = 0) -> None:
    """Notes ``m<start>``…, every fifth a Task and every seventh obsolete."""
    memories: list[Note | Task] = []
    for i, v in enumerate(vectors, start):
        emb = [float(x) for x in v]
        if i % 5 == 0:
            memories.append(
                Task(id=f"m{i}", namespace=namespace, text=f"t{i}", key=f"t{i}", embedding=emb)
            )
        else:
            memories.append(
                Note(
                    id=f"m{i}",
                    namespace=namespace,
                    content=f"n{i}",
                    embedding=emb,
                    obsolete=i % 7 == 0,
                )
            )
    store.upsert(memories)


class Spy:
    """Counts the approximate index's searches (to tell which path answered)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        original = _ann.AnnGraph.candidates

        def counted(graph: _ann.AnnGraph, query: np.ndarray, count: int) -> np.ndarray:
            self.calls += 1
            return original(graph, query, count)

        monkeypatch.setattr(_ann.AnnGraph, "candidates", counted)


def hits(store: EmbeddedStore, query: np.ndarray, k: int, **kw: object) -> list[tuple[str, float]]:
    return [(r.memory.id, r.sim) for r in store.recall(NS, [float(x) for x in query], k, **kw)]  # type: ignore[arg-type]


def same(a: list[tuple[str, float]], b: list[tuple[str, float]]) -> None:
    """The exact ranking, up to what an approximate index may miss: the graph search (usearch
    builds it with several threads, so not always the same graph, and these test vectors are
    random, which no graph index handles well) may skip a quarter of the k true neighbours;
    every hit it returns carries its exact similarity, in exact order."""
    assert len(a) == len(b), (a, b)
    exact = dict(b)
    missed = [i for i, _ in b if i not in dict(a)]
    assert len(missed) <= max(1, len(b) // 4), f"the search missed {missed} ({a} vs {b})"
    for i, sim in a:
        if i in exact:
            assert sim == pytest.approx(exact[i], abs=1e-6), (i, a, b)
    assert [s for _, s in a] == sorted((s for _, s in a), reverse=True)


@pytest.fixture(params=["one block", "blocks of 64"])
def blocks(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Stores made in the test keep their vectors in one block, or in blocks of 64 rows."""
    if request.param == "blocks of 64":
        monkeypatch.setattr(_vectors, "BLOCK_ROWS", 64)
    return str(request.param)


@pytest.fixture
def pair(blocks: str) -> tuple[EmbeddedStore, EmbeddedStore, np.ndarray]:
    """An approximate and an exact store of the same 600 memories; with "blocks of 64" their
    rows span ten blocks, so every search, gather and graph step crosses blocks."""
    vectors = clustered(600)
    approx = EmbeddedStore(None, ann_threshold=100)
    exact = EmbeddedStore(None, ann_threshold=None)
    fill(approx, vectors)
    fill(exact, vectors)
    assert approx.wait_for_index(60)
    return approx, exact, clustered(30, seed=1)


def test_ann_path_agrees_with_exact_search(pair, monkeypatch: pytest.MonkeyPatch) -> None:
    approx, exact, queries = pair
    spy = Spy(monkeypatch)
    for q in queries:
        same(hits(approx, q, 5), hits(exact, q, 5))
        same(hits(approx, q, 10, min_sim=0.5), hits(exact, q, 10, min_sim=0.5))
    assert spy.calls == 2 * len(queries)  # every one of them answered by the approximate path


def test_filters_hold_on_the_ann_path(pair, monkeypatch: pytest.MonkeyPatch) -> None:
    approx, exact, queries = pair
    spy = Spy(monkeypatch)
    for q in queries[:10]:
        tasks = hits(approx, q, 5, kinds=["Task"])
        same(tasks, hits(exact, q, 5, kinds=["Task"]))
        assert all(int(i[1:]) % 5 == 0 for i, _ in tasks)
        plain = hits(approx, q, 8)
        assert not any(int(i[1:]) % 7 == 0 and int(i[1:]) % 5 for i, _ in plain)
        same(hits(approx, q, 8, include_obsolete=True), hits(exact, q, 8, include_obsolete=True))
    assert spy.calls >= 20
    # Another namespace is searched on its own, and is below the threshold: exact.
    fill(approx, clustered(50, seed=2), namespace="other")
    assert approx.wait_for_index(60)
    calls = spy.calls
    found = approx.recall("other", [float(x) for x in queries[0]], 5)
    assert spy.calls == calls and all(r.memory.namespace == "other" for r in found)
    assert len(found) == 5


def test_narrow_filter_falls_back_to_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    """A kind the ANN candidates hardly hold: fewer than k survive, so the exact scan answers."""
    vectors = clustered(400)
    store = EmbeddedStore(None, ann_threshold=100)
    exact = EmbeddedStore(None, ann_threshold=None)
    for s in (store, exact):
        s.upsert(
            [
                Note(id=f"m{i}", namespace=NS, content=f"n{i}", embedding=[float(x) for x in v])
                for i, v in enumerate(vectors)
            ]
            + [
                Task(id=f"t{i}", namespace=NS, text="t", key="t", embedding=[float(x) for x in v])
                for i, v in enumerate(clustered(3, seed=9))
            ]
        )
    assert store.wait_for_index(60)
    q = clustered(1, seed=3)[0]
    got = hits(store, q, 5, kinds=["Task"])
    assert sorted(i for i, _ in got) == ["t0", "t1", "t2"]
    same(got, hits(exact, q, 5, kinds=["Task"]))


def test_deletes_and_updates_are_reflected(pair, monkeypatch: pytest.MonkeyPatch) -> None:
    approx, exact, queries = pair
    spy = Spy(monkeypatch)
    q = queries[0]
    top = hits(approx, q, 3)
    for s in (approx, exact):
        s.delete(NS, [top[0][0]])
    after = hits(approx, q, 3)
    assert top[0][0] not in [i for i, _ in after]
    same(after, hits(exact, q, 3))
    # Move a far memory onto the query: it must come first, with its exact similarity.
    far = next(i for i, _ in hits(approx, -q, 5) if int(i[1:]) % 5)  # a Note
    for s in (approx, exact):
        s.upsert([Note(id=far, namespace=NS, content="moved", embedding=[float(x) for x in q])])
    assert approx.wait_for_index(60)
    moved = hits(approx, q, 3)
    assert moved[0][0] == far and moved[0][1] == pytest.approx(1.0, abs=1e-6)
    same(moved, hits(exact, q, 3))
    # Marking it obsolete hides it at once.
    for s in (approx, exact):
        s.patch(NS, far, {"obsolete": True})
    hidden = hits(approx, q, 3)
    assert far not in [i for i, _ in hidden]
    same(hidden, hits(exact, q, 3))
    # Many removals (a freed row reused, tombstones piling up): still in step with exact.
    doomed = [f"m{i}" for i in range(1, 600, 2)]
    for s in (approx, exact):
        s.delete(NS, doomed)
        fill(s, clustered(100, seed=5)[:40])  # rows reused for m0..m39 updates and new ids
    assert approx.wait_for_index(60)
    for query in queries[:10]:
        same(hits(approx, query, 5), hits(exact, query, 5))
    assert spy.calls > 10


def test_threshold_boundary(monkeypatch: pytest.MonkeyPatch) -> None:
    spy = Spy(monkeypatch)
    vectors = clustered(400)
    store = EmbeddedStore(None, ann_threshold=400)
    fill(store, vectors[:399])
    q = vectors[1]
    hits(store, q, 3)
    assert spy.calls == 0  # 399 rows: exact
    fill(store, vectors[399:], start=399)
    assert store.wait_for_index(60)
    assert hits(store, q, 1)[0][0] == "m1"
    assert spy.calls == 1  # 400 rows: approximate
    store.delete(NS, [f"m{i}" for i in range(200, 400)])
    hits(store, q, 3)
    assert spy.calls == 1  # below half the threshold: the graph is dropped, exact again


def test_store_works_without_the_library(pair, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "usearch", None)  # makes `import usearch…` fail
    monkeypatch.setitem(sys.modules, "usearch.index", None)
    _ann._load.cache_clear()
    try:
        assert not _ann.available()
        spy = Spy(monkeypatch)
        vectors = clustered(300, seed=8)
        store = EmbeddedStore(None, ann_threshold=10)
        exact = EmbeddedStore(None, ann_threshold=None)
        fill(store, vectors)
        fill(exact, vectors)
        assert store.wait_for_index(1)  # nothing to wait for
        for q in clustered(5, seed=1):
            assert hits(store, q, 5) == hits(exact, q, 5)  # the very same exact scan
        assert spy.calls == 0
    finally:
        _ann._load.cache_clear()  # forget the failed import (the modules come back after)


def test_bad_threshold_is_refused() -> None:
    from graphmem.errors import InvalidInput

    for bad in (0, -5, 1.5, True):
        with pytest.raises(InvalidInput):
            EmbeddedStore(None, ann_threshold=bad)  # type: ignore[arg-type]


# ---- on by default, in the background, saved and checked ------------------------------------


def test_the_index_is_on_by_default_above_the_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    import inspect

    default = inspect.signature(EmbeddedStore).parameters["ann_threshold"].default
    assert default == DEFAULT_ANN_THRESHOLD
    assert inspect.signature(EmbeddedStore.open).parameters["ann_threshold"].default == default
    assert EmbeddedStore.in_memory()._ann_threshold == DEFAULT_ANN_THRESHOLD
    # The default threshold's behaviour, at a size a test can fill: the first search past it
    # goes through the graph once it is built, and agrees with the exact scan.
    spy = Spy(monkeypatch)
    vectors = clustered(600)
    store = EmbeddedStore(None, ann_threshold=600)
    fill(store, vectors[:599])
    vectors_of = store._state.spaces[NS].vectors
    assert vectors_of is not None and store.wait_for_index(5) and not vectors_of.ann_active
    fill(store, vectors[599:], start=599)
    assert vectors_of.ann_active
    assert store.wait_for_index(60)
    exact = EmbeddedStore(None, ann_threshold=None)
    fill(exact, vectors)
    for q in clustered(10, seed=4):
        same(hits(store, q, 5), hits(exact, q, 5))
    assert spy.calls == 10


class Gate:
    """Holds the builder inside its next graph insertion until released."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.inserted = 0
        original = _ann.AnnGraph.put

        def gated(graph: _ann.AnnGraph, keys: np.ndarray, vectors: np.ndarray, **kw: int) -> None:
            self.entered.set()
            assert self.release.wait(60)
            self.inserted += int(keys.size)
            original(graph, keys, vectors, **kw)

        monkeypatch.setattr(_ann.AnnGraph, "put", gated)


def test_a_search_during_a_build_does_not_wait_for_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The builder is held mid-step (holding the index lock): searches and writes go on, the
    searches exactly; once released the graph catches up and answers."""
    gate = Gate(monkeypatch)
    spy = Spy(monkeypatch)
    vectors = clustered(400)
    store = EmbeddedStore(None, ann_threshold=100)
    exact = EmbeddedStore(None, ann_threshold=None)
    fill(exact, vectors)
    fill(store, vectors)
    assert gate.entered.wait(60)  # the builder is inside a step now, and stays there
    queries = clustered(5, seed=1)
    for q in queries:
        assert hits(store, q, 5) == hits(exact, q, 5)  # the exact scan answered at once
    fill(store, clustered(10, seed=7), start=400)  # a write does not wait either
    fill(exact, clustered(10, seed=7), start=400)
    assert spy.calls == 0 and not store.wait_for_index(0.05)
    gate.release.set()
    assert store.wait_for_index(60)
    assert gate.inserted >= 410
    for q in queries:
        same(hits(store, q, 5), hits(exact, q, 5))
    assert spy.calls == len(queries)


def test_the_index_is_saved_and_loaded_on_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, blocks: str
) -> None:
    root = tmp_path / "s"
    vectors = clustered(300)
    with EmbeddedStore.open(root, ann_threshold=100) as store:
        fill(store, vectors[:200])
        store.compact()  # saved at the start of the new generation once in step...
        fill(store, vectors[200:], start=200)
        assert store.wait_for_index(60)
    # ...and again on close, at the end of the log.
    files = list(root.glob("ann-*.usearch"))
    assert len(files) == 1
    # Another writer, with no index of its own, adds to the log after that.
    with EmbeddedStore.open(root, ann_threshold=None) as other:
        fill(other, clustered(20, seed=4), start=300)
    exact = EmbeddedStore(None, ann_threshold=None)
    fill(exact, vectors)
    fill(exact, clustered(20, seed=4), start=300)
    gate = Gate(monkeypatch)
    gate.release.set()
    spy = Spy(monkeypatch)
    with EmbeddedStore.open(root, ann_threshold=100) as store:
        assert store.wait_for_index(60)
        assert gate.inserted == 20  # only what was written after the save: nothing rebuilt
        for q in clustered(5, seed=6):
            same(hits(store, q, 5), hits(exact, q, 5))
        assert spy.calls == 5
    report = check_store(root)
    assert report.intact and not report.index_problems and len(report.indexes) == 1


def test_store_check_catches_a_damaged_or_wrong_index(tmp_path: Path, blocks: str) -> None:
    from graphmem.cli import main as cli_main

    root = tmp_path / "s"
    vectors = clustered(300)
    with EmbeddedStore.open(root, ann_threshold=100) as store:
        fill(store, vectors)
        assert store.wait_for_index(60)
    (path,) = root.glob("ann-*.usearch")
    assert check_store(root).indexes and cli_main(["store", "check", str(root)]) == 0
    # A graph that lacks a memory and holds another's vector in place of one: well-formed,
    # but not the vectors.
    header, body = _ann.read_file(path)
    graph = _ann.AnnGraph.from_bytes(body, DIM)
    keys = np.asarray([_ann.key_of("m1"), _ann.key_of("m2")], dtype=np.uint64)
    graph.remove(keys[:1])
    graph.put(keys[1:], vectors[3:4])
    good = path.read_bytes()
    _ann.write_file(path, {k: v for k, v in header.items() if k != "crc32"}, graph.to_bytes())
    report = check_store(root)
    assert report.intact and path in report.index_problems
    assert "1 of 300 vectors are missing" in report.index_problems[path]
    assert "1 vectors differ" in report.index_problems[path]
    assert cli_main(["store", "check", str(root)]) == 1
    # A flipped byte: damaged.
    data = bytearray(good)
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    report = check_store(root)
    assert "damaged" in report.index_problems[path] and "checksum" in report.index_problems[path]
    # Opening ignores it and rebuilds in the background; the results are right meanwhile.
    exact = EmbeddedStore(None, ann_threshold=None)
    fill(exact, vectors)
    with EmbeddedStore.open(root, ann_threshold=100) as store:
        q = clustered(1, seed=5)[0]
        same(hits(store, q, 5), hits(exact, q, 5))
        assert store.wait_for_index(60)
        same(hits(store, q, 5), hits(exact, q, 5))
    assert not check_store(root).index_problems  # the close saved the rebuilt graph
    # A repair deletes a bad file.
    path.write_bytes(bytes(data))
    result = repair_store(root)
    assert result.removed_indexes == [path] and not path.exists()


def test_an_index_of_another_log_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A saved graph is used only on the history it was saved from: here the log it reflects
    was cut back (as a repair would) and written again differently."""
    root = tmp_path / "s"
    with EmbeddedStore.open(root, ann_threshold=100) as store:
        fill(store, clustered(150))
        wal = store._journal.wal_path()  # type: ignore[union-attr]
        cut = wal.stat().st_size
        fill(store, clustered(50, seed=2), start=150)
        assert store.wait_for_index(60)
    with open(wal, "r+b") as f:
        f.truncate(cut)
    with EmbeddedStore.open(root, ann_threshold=None) as other:
        fill(other, clustered(60, seed=3), start=150)
    report = check_store(root)
    assert report.intact and "another log" in next(iter(report.index_problems.values()))
    gate = Gate(monkeypatch)
    gate.release.set()
    with EmbeddedStore.open(root, ann_threshold=100) as store:
        assert store.wait_for_index(60)
    assert gate.inserted == 210  # built from scratch
    assert not check_store(root).index_problems


def test_the_setting_names_the_threshold(tmp_path: Path) -> None:
    from graphmem.errors import ConfigError
    from graphmem.settings import ANN_THRESHOLD, Settings

    assert ANN_THRESHOLD == DEFAULT_ANN_THRESHOLD
    assert Settings.from_env({}).ann_threshold == DEFAULT_ANN_THRESHOLD
    assert Settings.from_env({"GRAPHMEM_ANN_THRESHOLD": "off"}).ann_threshold is None
    settings = Settings.from_env({"GRAPHMEM_ANN_THRESHOLD": "500", "GRAPHMEM_STORE": str(tmp_path)})
    assert settings.ann_threshold == 500
    with settings.open_store() as store:
        assert isinstance(store, EmbeddedStore) and store._ann_threshold == 500
    for bad in ("0", "-3", "many", "1.5"):
        with pytest.raises(ConfigError, match="GRAPHMEM_ANN_THRESHOLD"):
            Settings.from_env({"GRAPHMEM_ANN_THRESHOLD": bad})


def test_a_large_exact_scan_ranks_as_numpy() -> None:
    """Past one block (``BLOCK_ROWS``) the exact scan multiplies block by block: same results."""
    vectors = clustered(_vectors.BLOCK_ROWS + 500)
    store = EmbeddedStore(None, ann_threshold=None)
    store.upsert(
        [
            Note(id=f"m{i}", namespace=NS, content=f"n{i}", embedding=[float(x) for x in v])
            for i, v in enumerate(vectors)
        ]
    )
    assert len(store._state.spaces[NS].vectors._blocks) == 2  # type: ignore[union-attr]
    for q in clustered(5, seed=11):
        sims = vectors @ (q / np.linalg.norm(q))
        want = np.argsort(-sims)[:10]
        got = hits(store, q, 10)
        assert [i for i, _ in got] == [f"m{i}" for i in want]
        assert [s for _, s in got] == pytest.approx(sims[want].tolist(), abs=1e-5)


def test_a_filter_few_rows_pass_scores_them_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """A kind that few rows hold (a task cluster's Task nodes among many memories) is searched
    by gathering its rows, in both blocks, without the full scan: the same results as numpy."""
    vectors = clustered(_vectors.BLOCK_ROWS + 500)
    task = {i for i in range(len(vectors)) if i % 9 == 0}
    store = EmbeddedStore(None, ann_threshold=None)
    store.upsert(
        [
            Task(id=f"m{i}", namespace=NS, text="t", key="t", embedding=[float(x) for x in v])
            if i in task
            else Note(id=f"m{i}", namespace=NS, content=f"n{i}", embedding=[float(x) for x in v])
            for i, v in enumerate(vectors)
        ]
    )
    scans: list[int] = []
    scan = _vectors.VectorIndex._scan
    monkeypatch.setattr(
        _vectors.VectorIndex, "_scan", lambda self, u, n: scans.append(n) or scan(self, u, n)
    )
    rows = np.array(sorted(task))
    for q in clustered(5, seed=12):
        sims = vectors[rows] @ (q / np.linalg.norm(q))
        want = rows[np.argsort(-sims)[:10]]
        got = hits(store, q, 10, kinds=["Task"])
        assert [i for i, _ in got] == [f"m{i}" for i in want]
        assert [s for _, s in got] == pytest.approx(np.sort(sims)[::-1][:10].tolist(), abs=1e-5)
        best = np.sort(sims)[::-1]
        floor = float(best[3] + best[4]) / 2  # between the 4th and the 5th
        assert len(store.recall(NS, [float(x) for x in q], 10, kinds=["Task"], min_sim=floor)) == 4
    assert scans == []
    hits(store, clustered(1, seed=13)[0], 10)  # an unfiltered search still scans
    assert scans


EXIT_SCRIPT = """
import numpy as np
from graphmem.models import Note
from graphmem.stores.embedded import EmbeddedStore

rng = np.random.default_rng(0)
store = EmbeddedStore(None, ann_threshold=100)
vectors = rng.standard_normal((6000, 64)).astype("float32")
for lo in range(0, 6000, 1000):
    store.upsert([
        Note(id=f"n{i}", namespace="ns", content=f"note {i}", embedding=vectors[i].tolist())
        for i in range(lo, lo + 1000)
    ])
print("done", flush=True)
"""


def test_a_script_that_exits_while_the_index_is_built_exits_cleanly(tmp_path: Path) -> None:
    # The builder thread is a daemon; killed inside usearch's native code at interpreter exit it
    # aborted the process (exit status 134, "terminate called without an active exception").
    # Now an exit waits for the step under way. The script never closes its store.
    import subprocess

    script = tmp_path / "exit_mid_build.py"
    script.write_text(EXIT_SCRIPT)
    for _ in range(3):
        done = subprocess.run(
            [sys.executable, str(script)], capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout.strip() == "done"
        assert "terminate called" not in done.stderr


def test_rows_grow_in_blocks_that_never_move() -> None:
    # The first block doubles up to block_rows; after that each growth adds a block and leaves
    # the others where they are (nothing copied under the write lock). Freed rows are reused in
    # whichever block they are; every vector survives; search spans the blocks.
    index = _vectors.VectorIndex(8, capacity=4, block_rows=64)
    rng = np.random.default_rng(1)
    rows = rng.standard_normal((300, 8)).astype(np.float32)
    for i, row in enumerate(rows[:64]):
        index.put(f"m{i}", row, "Note", False)
    assert [len(b) for b in index._blocks] == [64]
    first = index._blocks[0]
    for i, row in enumerate(rows[64:130], 64):
        index.put(f"m{i}", row, "Note", False)
    second = index._blocks[1]
    for i, row in enumerate(rows[130:], 130):
        index.put(f"m{i}", row, "Task" if i % 3 else "Note", i % 11 == 0)
    assert [len(b) for b in index._blocks] == [64] * 5 and index._capacity == 320
    assert index._blocks[0] is first and index._blocks[1] is second
    for gone in ("m3", "m70", "m200"):
        index.remove(gone)
    index.put("new", rows[5] * 2, "Note", False)  # takes a freed row, not a new one
    assert index._used == 300
    kept = {f"m{i}": row for i, row in enumerate(rows)} | {"new": rows[5] * 2}
    for gone in ("m3", "m70", "m200"):
        del kept[gone]
        assert index.get(gone) is None
    for memory_id, row in kept.items():
        got = index.get(memory_id)
        assert got is not None and np.array_equal(got, row)
    ids = list(kept)
    matrix = np.stack([kept[i] for i in ids])
    sims = (matrix @ rows[7]) / np.linalg.norm(matrix, axis=1) / np.linalg.norm(rows[7])
    order = sorted(range(len(ids)), key=lambda j: (-sims[j], ids[j]))
    query = rows[7] / np.linalg.norm(rows[7])
    found = index.search(query, 20, include_obsolete=True)
    assert [i for i, _ in found] == [ids[j] for j in order[:20]]
    assert [s for _, s in found] == pytest.approx([float(sims[j]) for j in order[:20]], abs=1e-5)
    tasks = index.search(query, 300, kinds=["Task"])
    assert {i for i, _ in tasks} == {
        i
        for i in kept
        if i.startswith("m") and int(i[1:]) >= 130 and int(i[1:]) % 3 and int(i[1:]) % 11
    }
    assert not index._blocks[-1][300 - 256 :].any()  # rows never handed out stay empty
    for picked in (rng.choice(300, 7), rng.choice(300, 250), np.zeros(0, dtype=np.int64)):
        want = np.stack([index._blocks[r // 64][r % 64] for r in picked] or [np.zeros(8)])
        assert np.array_equal(index._gather(picked), want[: len(picked)])
