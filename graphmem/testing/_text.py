"""Conformance tests of keyword recall (``recall_text``) and hybrid phase A on it."""

from __future__ import annotations

import pytest

from graphmem.config import RetrievalConfig
from graphmem.models import Edge, EdgeKind, MemoryKind, Note, Task
from graphmem.ops.fusion import hybrid_candidates
from graphmem.ops.retrieve import _similar_candidates
from graphmem.stores.base import MemoryStore
from graphmem.testing.helpers import HOSTILE_TEXTS, angled, note, vec


def _filler(namespace: str, dim: int, n: int = 6) -> list[Note]:
    """Notes close to the first axis (the query's direction) with everyday words."""
    return [
        note(namespace, f"f{i}", f"the weather was nice on day {i}", angled(dim, 0.02 * i))
        for i in range(n)
    ]


class TextConformance:
    """Mixed into :class:`StoreConformance`; needs its fixtures."""

    def test_recall_text_finds_a_rare_token_the_vector_misses(
        self, store: MemoryStore, namespace: str, dim: int
    ) -> None:
        rare = note(namespace, "rare", "Invoice XQ-9931 was paid by Zoltan", vec(dim, 0, 1))
        store.upsert([*_filler(namespace, dim), rare])
        assert "rare" not in [r.memory.id for r in store.recall(namespace, vec(dim, 1), 3)]
        for query in ("who paid xq-9931?", "ZOLTAN", "9931"):
            found = store.recall_text(namespace, query, 3)
            assert [r.memory.id for r in found][:1] == ["rare"], query
            assert found[0].score > 0
            assert found[0].superseded is not True
            assert getattr(found[0].memory, "content", None) == rare.content
        assert store.recall_text(namespace, "nothing matches this", 3) == []

    def test_recall_text_ranks_best_first_and_cuts_at_k(
        self, store: MemoryStore, namespace: str, dim: int
    ) -> None:
        store.upsert(
            [
                note(namespace, "two", "amber falcon", vec(dim, 1)),
                note(namespace, "one", "amber lake", vec(dim, 1)),
                note(namespace, "none", "grey lake", vec(dim, 1)),
            ]
        )
        found = store.recall_text(namespace, "amber falcon", 5)
        assert [r.memory.id for r in found] == ["two", "one"]
        assert found[0].score > found[1].score
        assert [r.memory.id for r in store.recall_text(namespace, "amber falcon", 1)] == ["two"]
        assert store.recall_text(namespace, "amber", 0) == []

    def test_recall_text_keeps_to_namespace_kinds_and_live_memories(
        self, store: MemoryStore, namespace: str, dim: int
    ) -> None:
        other = namespace + "-other"
        store.upsert([note(other, f"o{i}", "quokka quokka quokka", vec(dim, 1)) for i in range(40)])
        task = Task(id="t", namespace=namespace, text="quokka", key="quokka", embedding=vec(dim, 1))
        gone = note(namespace, "gone", "quokka sighting", vec(dim, 1))
        gone = gone.model_copy(update={"obsolete": True})
        store.upsert([note(namespace, "mine", "a quokka sighting", vec(dim, 1)), task, gone])
        found = store.recall_text(namespace, "quokka", 10)
        assert sorted(r.memory.id for r in found) == ["mine", "t"]
        assert all(r.memory.namespace == namespace for r in found)
        notes = store.recall_text(namespace, "quokka", 10, kinds=[MemoryKind.NOTE])
        assert [r.memory.id for r in notes] == ["mine"]
        assert store.recall_text(namespace, "quokka", 10, kinds=[]) == []
        with_obsolete = store.recall_text(namespace, "quokka", 10, include_obsolete=True)
        assert sorted(r.memory.id for r in with_obsolete) == ["gone", "mine", "t"]

    def test_recall_text_follows_patch_delete_and_reembed(
        self, store: MemoryStore, namespace: str, dim: int
    ) -> None:
        store.upsert(
            [note(namespace, "a", "marmalade recipe", vec(dim, 1)), *_filler(namespace, dim)]
        )
        assert [r.memory.id for r in store.recall_text(namespace, "marmalade", 5)] == ["a"]
        store.patch(namespace, "a", {"content": "gooseberry recipe"})
        assert store.recall_text(namespace, "marmalade", 5) == []
        assert [r.memory.id for r in store.recall_text(namespace, "gooseberry", 5)] == ["a"]
        store.set_embeddings(namespace, {"a": vec(dim, 0, 1)})
        found = store.recall_text(namespace, "gooseberry", 5)
        assert [r.memory.id for r in found] == ["a"]
        assert found[0].memory.embedding == pytest.approx(vec(dim, 0, 1))
        assert store.recall(namespace, vec(dim, 0, 1), 1)[0].memory.id == "a"
        store.delete(namespace, ["a"])
        assert store.recall_text(namespace, "gooseberry", 5) == []
        assert "a" not in [r.memory.id for r in store.recall(namespace, vec(dim, 0, 1), 10)]

    def test_recall_text_reads_user_text_as_words_never_as_syntax(
        self, store: MemoryStore, namespace: str, dim: int
    ) -> None:
        store.upsert([note(namespace, "a", "release notes (v2) AND more", vec(dim, 1))])
        for query in [
            'AND OR NOT "',
            "*:*",
            "a:b OR (c",
            "\\",
            "~ ^ [x TO y]",
            "-",
            "?",
            *HOSTILE_TEXTS,
        ]:
            assert isinstance(store.recall_text(namespace, query, 3), list), query
        assert [r.memory.id for r in store.recall_text(namespace, "(v2)!", 3)] == ["a"]
        assert [r.memory.id for r in store.recall_text(namespace, "AND", 3)] == ["a"]

    def test_recall_text_flags_superseded_memories(
        self, store: MemoryStore, namespace: str, dim: int
    ) -> None:
        old = note(namespace, "old", "wombat count is 12", vec(dim, 1))
        new = note(namespace, "new", "wombat count is 13", vec(dim, 1))
        store.upsert(
            [old, new], [Edge(namespace=namespace, kind=EdgeKind.SUPERSEDES, src="new", dst="old")]
        )
        flags = {r.memory.id: r.superseded for r in store.recall_text(namespace, "wombat", 5)}
        assert flags.get("new") is not True
        if "old" in flags and flags["old"] is not None:
            assert flags["old"] is True

    def test_hybrid_pool_holds_both_channels_finds(
        self, store: MemoryStore, namespace: str, dim: int
    ) -> None:
        rare = note(namespace, "rare", "the locker code is 58213", vec(dim, 0, 1))
        store.upsert([*_filler(namespace, dim, 8), rare])
        cfg = RetrievalConfig(k1=4, kinds=(MemoryKind.NOTE,), fusion="rrf", lam=0.0)
        pool = hybrid_candidates(
            store, namespace, "locker code 58213", vec(dim, 1), cfg, _similar_candidates
        )
        ids = [m.id for m, _ in pool.candidates]
        assert len(ids) == 4
        # Each list's first: equal RRF scores (1/61), the tie going to the higher cosine. The
        # keyword one is beyond the vector list's top 4.
        assert ids[:2] == ["f0", "rare"]
        assert pool.text_rank["rare"] == 1 and "rare" not in pool.vector_rank
        assert pool.vector_rank["f0"] == 1 and "f0" not in pool.text_rank
        assert pool.candidates[1][1] == pytest.approx(0.0, abs=1e-6)  # its cosine, reported
        assert pool.fused == sorted(pool.fused, reverse=True)
        # The keyword channel keeps to the namespace and the kinds asked, like the vector one.
        store.upsert([note(namespace + "-x", "x", "locker code 58213", vec(dim, 1))])
        store.upsert(
            [Task(id="t", namespace=namespace, text="58213", key="58213", embedding=vec(dim, 1))]
        )
        pool = hybrid_candidates(store, namespace, "58213", vec(dim, 1), cfg, _similar_candidates)
        assert {m.namespace for m, _ in pool.candidates} == {namespace}
        assert {m.kind for m, _ in pool.candidates} == {"Note"}
