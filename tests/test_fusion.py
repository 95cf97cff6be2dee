"""Adaptive fusion (graphmem.ops.fusion): the default never ranks a memory below both of its
channels on two crafted cases, on both stores; plain RRF at 1 : 1 loses one of them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import numpy as np
import pytest

from graphmem import GraphMemory
from graphmem.config import RetrievalConfig
from graphmem.embedding import HashingEmbedder, Matrix
from graphmem.errors import ConfigError
from graphmem.models import Edge, EdgeKind
from graphmem.ops.fusion import (
    PEAK_DEPTH,
    FusedPool,
    adaptive_text_weight,
    hybrid_candidates,
    keyword_peak,
    rrf,
)
from graphmem.ops.retrieve import _similar_candidates as _similar
from graphmem.ops.similarity import cosine
from graphmem.stores.base import MemoryStore
from graphmem.testing import note, vec

DIM = 384


class Planted:
    """Vectors chosen per text (unit axis mixes); other texts fall back to hashing."""

    name = "planted-test"
    dimension = DIM

    def __init__(self, vectors: dict[str, Sequence[float]]) -> None:
        self.vectors = vectors
        self.other = HashingEmbedder(DIM)

    def embed(self, texts: Sequence[str]) -> Matrix:
        rows = []
        for text in texts:
            if text in self.vectors:
                v = np.zeros(DIM, dtype=np.float32)
                v[: len(self.vectors[text])] = self.vectors[text]
                rows.append(v / np.linalg.norm(v))
            else:
                rows.append(self.other.embed([text])[0])
        return np.stack(rows).astype(np.float32)


BARE: dict[str, Any] = {"keywords": [], "tags": [], "context": "", "category": ""}


def _ranks(mem: GraphMemory, namespace: str, query: str, target: str) -> dict[str, int | None]:
    out: dict[str, int | None] = {}
    for name, over in (
        ("vector", {"hybrid": False}),
        ("rrf", {"fusion": "rrf"}),
        ("default", {}),
    ):
        hits = mem.retrieve(namespace, query, kinds=("Note",), k1=5, k2=5, lam=0.0, **over).hits
        ids = [h.memory.id for h in hits]
        out[name] = ids.index(target) if target in ids else None
    found = [r.memory.id for r in mem.store.recall_text(namespace, query, 10)]
    out["keywords"] = found.index(target) if target in found else None
    return out


def test_a_paraphrase_keeps_the_vectors_answer(store: MemoryStore, namespace: str) -> None:
    """The query shares only everyday words with look-alikes (flat BM25 scores) and none
    with the right note, which the vector finds first: the default keeps it first."""
    query = "what did I get for my week at the lake"
    target = "adopted a young cat"
    looks = [f"my week at the lake was {w}" for w in ("long", "short", "wet", "dry", "cold")]
    looks += [f"the lake in week {i} was calm for my neighbour" for i in range(7)]
    vectors: dict[str, Sequence[float]] = {query: [1.0], target: [0.9, 0.3]}
    for i, text in enumerate(looks):
        vectors[text] = [0.4] + [0.0] * (2 + i) + [0.9]
    mem = GraphMemory(store, embedder=Planted(vectors))
    note = mem.add_note(namespace, target, **BARE)
    mem.add_notes(namespace, [{"content": t, **BARE} for t in looks])
    ranks = _ranks(mem, namespace, query, note.id)
    assert ranks["vector"] == 0 and ranks["keywords"] is None
    assert ranks["rrf"] != 0  # 1 : 1 lets a look-alike that both lists hold overtake it
    assert ranks["default"] == 0


def test_a_rare_word_lifts_what_only_the_keywords_find(store: MemoryStore, namespace: str) -> None:
    query = "ferry booking QZ7781"
    target = "reference QZ7781 confirmed"
    others = [f"a pleasant afternoon number {i}" for i in range(8)]
    vectors: dict[str, Sequence[float]] = {query: [1.0], target: [0.05, 1.0]}
    for i, text in enumerate(others):
        vectors[text] = [0.8] + [0.0] * (2 + i) + [0.6]
    mem = GraphMemory(store, embedder=Planted(vectors))
    note = mem.add_note(namespace, target, **BARE)
    mem.add_notes(namespace, [{"content": t, **BARE} for t in others])
    ranks = _ranks(mem, namespace, query, note.id)
    assert ranks["keywords"] == 0 and ranks["vector"] != 0
    assert ranks["default"] == 0


def test_keyword_weight_follows_the_peak() -> None:
    assert keyword_peak([]) == 0.0 and keyword_peak([0.0, 0.0]) == 0.0
    assert keyword_peak([5.0]) == pytest.approx(10.0)  # one match: the rarest case
    assert adaptive_text_weight([2.0] * 10) == 0.0  # flat: everyday words
    assert adaptive_text_weight([5.0]) == 2.0
    assert adaptive_text_weight([5.0], base=0.5) == 1.0
    middle = adaptive_text_weight([4.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0])
    assert 0.0 < middle < 2.0


def test_hybrid_is_on_by_default_and_yields_to_graph_expansion() -> None:
    assert RetrievalConfig().hybrid and RetrievalConfig().fusion == "adaptive"
    expanded = RetrievalConfig(expand="tasks")
    assert not expanded.hybrid
    assert RetrievalConfig(**{**expanded.model_dump(exclude_unset=True), "expand": "off"}).hybrid
    with pytest.raises(ConfigError, match="expand and hybrid"):
        RetrievalConfig(expand="tasks", hybrid=True)


class _WithoutIds:
    """A store with its keyword answers by id (``recall_text_ids``, ``recall_hybrid_ids``)
    hidden: hybrid recall then reads every keyword match's memory, as it did before them."""

    def __init__(self, store: MemoryStore) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        if name in ("recall_text_ids", "recall_hybrid_ids"):
            raise AttributeError(name)
        return getattr(self._store, name)


def _reference(
    store: MemoryStore, namespace: str, query: str, vector: list[float], cfg: RetrievalConfig
) -> tuple[Any, ...]:
    """The pool as the module doc defines it, from both lists read whole (every keyword
    match's memory): the fused order, cosines to 9 places, fused scores and ranks."""
    vector_list = _similar(store, namespace, vector, cfg)
    adaptive = cfg.fusion == "adaptive"
    text_k = max(cfg.k1, PEAK_DEPTH) if adaptive else cfg.k1
    found = store.recall_text(namespace, query, text_k, kinds=list(cfg.kinds))
    gone = store.superseded(namespace, [r.memory.id for r in found])
    text = [r.memory for r in found if r.memory.id not in gone and r.memory.embedding is not None]
    weight = adaptive_text_weight([r.score for r in found]) if adaptive else cfg.text_weight
    vector_ids, text_ids = [m.id for m, _ in vector_list], [m.id for m in text]
    fused = rrf([vector_ids, text_ids], [cfg.vector_weight, weight])
    sims = {m.id: sim for m, sim in vector_list}
    for m in text:
        sims.setdefault(m.id, cosine(vector, m.embedding))
    kept = [i for i in sims if fused[i] > 0.0] or list(sims)
    order = sorted(kept, key=lambda i: (-fused[i], -sims[i], i))[: cfg.k1]
    ranks = ({i: r for r, i in enumerate(ids, start=1)} for ids in (vector_ids, text_ids))
    return ([(i, round(sims[i], 9)) for i in order], [fused[i] for i in order], *ranks, weight)


def _pool(pool: FusedPool) -> tuple[Any, ...]:
    return (
        [(m.id, round(sim, 9)) for m, sim in pool.candidates],
        pool.fused,
        pool.vector_rank,
        pool.text_rank,
        pool.text_weight,
    )


def test_the_pool_is_the_fusion_of_both_whole_lists(store: MemoryStore, namespace: str) -> None:
    """Hybrid recall reads only the keyword-only memories that can enter its pool (none when
    the keywords weigh 0), from keyword matches answered as ids where the store can: the pool
    is the fusion of both lists read whole, with superseded, obsolete and unembedded matches
    and ties at the cut; and the same from a store that answers only ``recall_text``."""
    words = ["amber", "falcon", "harbour", "ferry", "lantern", "copper", "meadow", "quartz"]
    memories = [
        note(
            namespace,
            f"n{i:02d}",
            " ".join(words[(i * j) % len(words)] for j in range(1, 2 + i % 5)),
            None if i % 11 == 5 else vec(DIM, 1.0, (i % 7) / 3, (i % 4) / 2, i / 40),
        )
        for i in range(40)
    ]
    memories[3].__dict__["obsolete"] = True
    memories.append(note(namespace, "rare", "invoice QZ7781 paid", vec(DIM, 0.1, 1.0)))
    superseded = [Edge(namespace=namespace, kind=EdgeKind.SUPERSEDES, src="n01", dst="n02")]
    store.upsert(memories, superseded)
    plain = cast(MemoryStore, _WithoutIds(store))
    assert not hasattr(plain, "recall_text_ids") and hasattr(store, "recall_text_ids")
    query_vector = vec(DIM, 1.0, 0.5)
    none = {"fusion": "rrf", "vector_weight": 0.0, "text_weight": 0.0, "floor": 0.9}  # by cosine
    entered = 0
    for query in ["amber falcon", "QZ7781 ferry", "harbour copper meadow quartz", "unknown"]:
        found = store.recall_text(namespace, query, 12)
        assert cast(Any, store).recall_text_ids(namespace, query, 12) == [
            (r.memory.id, r.score, not r.superseded and r.memory.embedding is not None)
            for r in found
        ]
        for over in [
            {},
            {"fusion": "rrf"},
            {"fusion": "rrf", "vector_weight": 0.0},
            {"k1": 3},
            none,
        ]:
            cfg = RetrievalConfig(**{"k1": 8, "kinds": ("Note",), **over})
            want = _reference(store, namespace, query, query_vector, cfg)
            for s, one_statement in [(store, True), (store, False), (plain, True)]:
                pool = hybrid_candidates(
                    s, namespace, query, query_vector, cfg, _similar, one_statement=one_statement
                )
                assert _pool(pool) == want, (query, over, one_statement)
                entered += sum(1 for m, _ in pool.candidates if m.id not in pool.vector_rank)
    assert entered >= 20  # keyword-only memories were read into pools, several at a time
