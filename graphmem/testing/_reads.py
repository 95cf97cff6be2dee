"""Conformance tests of the store's reads: recall, hashes, export/import, validation, listing."""

from __future__ import annotations

import io
import json
import math
from typing import cast

import pytest

from graphmem.errors import (
    DimensionMismatch,
    ImportFormatError,
    InvalidInput,
    InvalidNamespace,
    InvalidVector,
    MemoryNotFound,
)
from graphmem.models import (
    AnyMemory,
    Edge,
    EdgeKind,
    MemoryKind,
    Namespace,
    Note,
    Task,
    content_hash,
)
from graphmem.stores.base import MemoryStore
from graphmem.testing.helpers import (
    HOSTILE_TEXTS,
    angled,
    assert_same_memory,
    chain,
    note,
    vec,
)


class ReadConformance:
    """Mixed into :class:`StoreConformance`; needs its fixtures."""

    # ---- recall ---------------------------------------------------------------------------

    def test_recall_ranks_by_cosine_best_first(
        self, store: MemoryStore, namespace: str, dim: int
    ) -> None:
        angles = {"n2": 0.6, "n0": 0.0, "n4": 1.2, "n1": 0.3, "n3": 0.9}
        store.upsert([note(namespace, i, i, angled(dim, a)) for i, a in angles.items()])
        hits = store.recall(namespace, vec(dim, 1), 3)
        assert [h.memory.id for h in hits] == ["n0", "n1", "n2"]
        for hit in hits:
            assert hit.sim == pytest.approx(math.cos(angles[hit.memory.id]), abs=1e-5)
            assert hit.memory.embedding is not None

    def test_recall_returns_what_there_is_when_k_exceeds_it(
        self, store: MemoryStore, namespace: str, dim: int
    ) -> None:
        store.upsert([note(namespace, i, i, vec(dim, 1, n)) for n, i in enumerate("abc")])
        assert len(store.recall(namespace, vec(dim, 1), 10)) == 3
        assert store.recall(namespace, vec(dim, 1), 0) == []
        assert store.recall(namespace + "-empty", vec(dim, 1), 5) == []

    def test_recall_is_not_crowded_out_by_other_namespaces(
        self, store: MemoryStore, namespace: str, dim: int
    ) -> None:
        crowd = namespace + "-crowd"
        store.upsert([note(crowd, f"c{i}", "close", vec(dim, 1, 0.001 * i)) for i in range(300)])
        mine = [note(namespace, f"m{i}", "far", vec(dim, 0.01, 1, i)) for i in range(5)]
        store.upsert(mine)
        hits = store.recall(namespace, vec(dim, 1), 5)
        assert sorted(h.memory.id for h in hits) == [f"m{i}" for i in range(5)]
        assert all(h.memory.namespace == namespace for h in hits)

    def test_recall_kind_filter_still_fills_k(
        self, store: MemoryStore, namespace: str, dim: int
    ) -> None:
        store.upsert([note(namespace, f"n{i}", "close", vec(dim, 1, 0.01 * i)) for i in range(40)])
        tasks = [
            Task(id=f"t{i}", namespace=namespace, text="t", key="t", embedding=vec(dim, 0.1, 1, i))
            for i in range(3)
        ]
        store.upsert(tasks)
        hits = store.recall(namespace, vec(dim, 1), 3, kinds=[MemoryKind.TASK])
        assert [h.memory.id for h in hits] == ["t0", "t1", "t2"]
        both = store.recall(namespace, vec(dim, 1), 50, kinds=[MemoryKind.TASK, MemoryKind.NOTE])
        assert len(both) == 43

    def test_recall_skips_obsolete_unless_asked(
        self, store: MemoryStore, namespace: str, dim: int
    ) -> None:
        old = note(namespace, "old", "old", vec(dim, 1))
        old.obsolete = True
        store.upsert([old, *(note(namespace, f"n{i}", "n", vec(dim, 1, i + 1)) for i in range(3))])
        default = store.recall(namespace, vec(dim, 1), 3)
        assert [h.memory.id for h in default] == ["n0", "n1", "n2"]
        with_old = store.recall(namespace, vec(dim, 1), 3, include_obsolete=True)
        assert [h.memory.id for h in with_old] == ["old", "n0", "n1"]

    def test_recall_min_sim_is_a_floor(self, store: MemoryStore, namespace: str, dim: int) -> None:
        angles = {"a": 0.0, "b": 0.5, "c": 1.0, "d": 1.5}
        store.upsert([note(namespace, i, i, angled(dim, a)) for i, a in angles.items()])
        hits = store.recall(namespace, vec(dim, 1), 10, min_sim=math.cos(0.75))
        assert [h.memory.id for h in hits] == ["a", "b"]
        assert store.recall(namespace, vec(dim, 1), 10, min_sim=1.5) == []

    def test_recall_rejects_bad_queries(self, store: MemoryStore, namespace: str, dim: int) -> None:
        store.upsert([note(namespace, "a", "a", vec(dim, 1))])
        with pytest.raises(DimensionMismatch):
            store.recall(namespace, [1.0] * (dim + 1), 3)
        with pytest.raises(InvalidVector):
            store.recall(namespace, [math.nan] * dim, 3)
        with pytest.raises(InvalidVector):
            store.recall(namespace, [0.0] * dim, 3)
        with pytest.raises(InvalidInput):
            store.recall(namespace, vec(dim, 1), -1)

    # ---- find_by_hash ---------------------------------------------------------------------

    def test_find_by_hash(self, store: MemoryStore, namespace: str, dim: int) -> None:
        h = content_hash("The spare key")
        keyed = note(namespace, "k", "The spare key", vec(dim, 1))
        keyed.content_hash = h
        store.upsert([keyed, note(namespace, "other", "x", vec(dim, 1))])
        found = store.find_by_hash(namespace, MemoryKind.NOTE, h)
        assert found is not None and found.id == "k"
        assert store.find_by_hash(namespace, MemoryKind.TASK, h) is None
        assert store.find_by_hash(namespace + "-other", MemoryKind.NOTE, h) is None
        assert store.find_by_hash(namespace, MemoryKind.NOTE, content_hash("nope")) is None

    # ---- export / import ------------------------------------------------------------------

    def test_export_import_round_trip_is_exact(
        self, store: MemoryStore, namespace: str, dim: int
    ) -> None:
        copy_ns = namespace + "-copy"
        notes = [
            note(namespace, f"h{i}", text, vec(dim, 1, i)) for i, text in enumerate(HOSTILE_TEXTS)
        ]
        notes[0].keywords = list(HOSTILE_TEXTS)
        nodes: list[AnyMemory] = list(notes)
        steps, edges = chain(namespace, "p", 3, dim)
        edges.append(
            Edge(
                namespace=namespace,
                kind=EdgeKind.LINKS_TO,
                src="h0",
                dst="h1",
                props={"reason": HOSTILE_TEXTS[1], "strength": 0.25, "ok": True, "n": None},
            )
        )
        store.upsert([*nodes, *steps], edges)
        store.update_utility(namespace, ["h1"], 1.0, 0.3, success=True)
        out = io.StringIO()
        lines = store.export_jsonl(out, namespace)
        assert lines == 1 + len(nodes) + len(steps) + len(edges)
        assert store.import_jsonl(io.StringIO(out.getvalue()), namespace=copy_ns) == (
            len(nodes) + len(steps),
            len(edges),
        )
        originals = list(store.iter_nodes(namespace))
        copies = list(store.iter_nodes(copy_ns))
        assert [m.id for m in copies] == [m.id for m in originals]
        for original, copied in zip(originals, copies, strict=True):
            assert copied.namespace == copy_ns
            assert_same_memory(copied, original, ignore=("namespace",))
        strip = [e.model_dump(exclude={"namespace"}) for e in store.iter_edges(namespace)]
        assert [e.model_dump(exclude={"namespace"}) for e in store.iter_edges(copy_ns)] == strip
        assert store.counts(copy_ns) == store.counts(namespace)

    @pytest.mark.parametrize(
        "bad",
        [
            "this is not json",
            "[1, 2, 3]",
            '{"type": "alien"}',
            '{"type": "header", "format": "other/9"}',
            '{"type": "node", "kind": "Note", "namespace": "NS", "id": "e", "content": ""}',
            '{"type": "node", "kind": "Note", "namespace": "NS", "id": "e", "content": "x", '
            '"embedding": [NaN, 1.0]}',
            '{"type": "node", "kind": "Note", "namespace": "NS", "id": "e", "content": "x", '
            '"embedding": "WRONG_DIM"}',
            '{"type": "node", "kind": "Nope", "namespace": "NS", "id": "e"}',
            '{"type": "node", "kind": "Note", "namespace": "bad ns!", "id": "e", "content": "x"}',
            '{"type": "edge", "namespace": "NS", "kind": "LINKS_TO", "src": "g", "dst": "ok"}',
            '{"type": "edge", "namespace": "NS", "kind": "TELEPORTS", "src": "ok", "dst": "ok"}',
        ],
    )
    def test_a_malformed_import_writes_nothing(
        self, store: MemoryStore, namespace: str, dim: int, bad: str
    ) -> None:
        store.check_dimension(dim)
        header = json.dumps({"type": "header", "format": "graphmem.jsonl/1", "dimension": dim})
        good = note(namespace, "ok", "fine", vec(dim, 1)).model_dump(mode="json")
        bad = bad.replace('"NS"', json.dumps(namespace))
        bad = bad.replace('"WRONG_DIM"', json.dumps([1.0] * (dim + 1)))
        with pytest.raises(ImportFormatError):
            store.import_jsonl([header, json.dumps({"type": "node", **good}), bad])
        assert list(store.iter_nodes(namespace)) == []

    # ---- schema and validation ------------------------------------------------------------

    def test_the_dimension_is_fixed(self, store: MemoryStore, namespace: str, dim: int) -> None:
        if store.dimension is None:
            store.upsert([note(namespace, "first", "first", vec(dim, 1))])
        assert store.dimension == dim
        store.check_dimension(dim)
        with pytest.raises(DimensionMismatch):
            store.check_dimension(dim + 1)
        with pytest.raises(DimensionMismatch):
            store.upsert([note(namespace, "wrong", "wrong", [1.0] * (dim + 1))])
        assert store.get_many(namespace, ["wrong"]) == []
        assert store.dimension == dim

    @pytest.mark.parametrize("bad", ["", "has space", "-leading", "x" * 200, "semi;colon"])
    def test_invalid_namespaces_are_refused_where_a_namespace_is_made(
        self, store: MemoryStore, namespace: str, dim: int, bad: str
    ) -> None:
        """A store takes a checked :class:`Namespace` on trust: a bad one is refused where a
        Namespace or a model is made, and an unchecked one handed to a store anyway finds
        nothing and changes nothing."""
        with pytest.raises(InvalidNamespace):
            Namespace(bad)
        with pytest.raises(InvalidNamespace):
            Note(namespace=bad, content="x")
        store.upsert([note(namespace, "a", "a", vec(dim, 1))])
        before = [m.model_dump() for m in store.iter_nodes(namespace)]
        assert store.get_many(bad, ["a"]) == []
        assert store.recall(bad, vec(dim, 1), 3) == []
        assert store.delete(bad, ["a"]) == []
        with pytest.raises(MemoryNotFound):
            store.update_utility(bad, ["a"], 1.0, 0.1)
        assert list(store.iter_nodes(bad)) == []
        assert [m.model_dump() for m in store.iter_nodes(namespace)] == before

    @pytest.mark.parametrize("bad", ["", "has space", "a/b", "x" * 200, "') DETACH DELETE n //"])
    def test_invalid_ids_are_rejected(
        self, store: MemoryStore, namespace: str, dim: int, bad: str
    ) -> None:
        store.upsert([note(namespace, "a", "a", vec(dim, 1))])
        with pytest.raises(InvalidInput):
            store.get(namespace, bad)
        with pytest.raises(InvalidInput):
            store.delete(namespace, [bad])
        with pytest.raises(InvalidInput):
            store.patch(namespace, bad, {"content": "x"})
        with pytest.raises(InvalidInput):
            store.update_utility(namespace, ["a", bad], 1.0, 0.1)
        assert store.get(namespace, "a").uses == 0

    # ---- listing --------------------------------------------------------------------------

    def test_namespaces_lists_the_non_empty_ones_sorted(
        self, store: MemoryStore, namespace: str, dim: int
    ) -> None:
        a, b = namespace + "-a", namespace + "-b"
        store.upsert([note(b, "x", "x", vec(dim, 1)), note(a, "y", "y", vec(dim, 1))])
        listed = store.namespaces()
        assert listed == sorted(listed)
        assert a in listed and b in listed
        store.delete(b, ["x"])
        assert b not in store.namespaces()
        assert a in store.namespaces()

    def test_namespaces_under_a_prefix_are_those_that_start_with_it(
        self, store: MemoryStore, namespace: str, dim: int
    ) -> None:
        names = [f"{namespace}/u1", f"{namespace}/u1/notes", f"{namespace}/u10", f"{namespace}-x"]
        store.upsert([note(ns, "m", "m", vec(dim, 1)) for ns in names])
        assert store.namespaces(f"{namespace}/u1") == sorted(names[:3])
        assert store.namespaces(f"{namespace}/u1/") == [f"{namespace}/u1/notes"]
        assert store.namespaces(namespace) == sorted(names)
        assert store.namespaces(f"{namespace}/u2") == []
        assert store.namespaces(f"{namespace}/u10", f"{namespace}-", f"{namespace}/u1/") == [
            f"{namespace}-x",
            f"{namespace}/u1/notes",
            f"{namespace}/u10",
        ]
        assert set(names) <= set(store.namespaces(""))
        assert set(names) <= set(store.namespaces(f"{namespace}/u2", ""))
        with pytest.raises(InvalidInput):
            store.namespaces(cast(str, 7))

    def test_counts_per_kind_and_edges(self, store: MemoryStore, namespace: str, dim: int) -> None:
        nodes, edges = chain(namespace, "p", 2, dim)
        store.upsert([*nodes, note(namespace, "n", "n", vec(dim, 1))], edges)
        counts = store.counts(namespace)
        assert counts == {
            "Note": 1,
            "Task": 0,
            "Procedure": 1,
            "Step": 2,
            "Tip": 0,
            "Episode": 0,
            "edges": 2,
        }
        assert store.counts(namespace + "-empty")["edges"] == 0

    def test_iteration_is_filtered_and_stable(
        self, store: MemoryStore, namespace: str, dim: int
    ) -> None:
        nodes, edges = chain(namespace, "p", 3, dim)
        store.upsert(
            [*nodes, *(note(namespace, f"n{i}", "n", vec(dim, 1)) for i in range(5))], edges
        )
        first = [m.id for m in store.iter_nodes(namespace)]
        assert first == [m.id for m in store.iter_nodes(namespace)]
        assert sorted(first) == sorted(["p", "p-s0", "p-s1", "p-s2", "n0", "n1", "n2", "n3", "n4"])
        steps = [m.id for m in store.iter_nodes(namespace, kinds=[MemoryKind.STEP])]
        assert sorted(steps) == ["p-s0", "p-s1", "p-s2"]
        edge_keys = [e.key for e in store.iter_edges(namespace)]
        assert edge_keys == [e.key for e in store.iter_edges(namespace)]
        assert sorted(edge_keys) == sorted(e.key for e in edges)
