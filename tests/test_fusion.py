"""Adaptive fusion (graphmem.ops.fusion): the default never ranks a memory below both of its
channels on two crafted cases, on both stores; plain RRF at 1 : 1 loses one of them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from graphmem import GraphMemory
from graphmem.config import RetrievalConfig
from graphmem.embedding import HashingEmbedder, Matrix
from graphmem.errors import ConfigError
from graphmem.ops.fusion import adaptive_text_weight, keyword_peak
from graphmem.stores.base import MemoryStore

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
