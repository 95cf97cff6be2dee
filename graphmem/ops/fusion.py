"""Hybrid phase A: vector and keyword candidates fused into one pool (docs/design.md).

Phase A of :func:`graphmem.ops.retrieve.retrieve` with ``hybrid=True`` asks the store twice:
``recall`` for the k1 live memories most similar to the query's embedding, and ``recall_text``
for the ``text_k`` (default k1) that match its words best by BM25. Each list ranks its
memories 1, 2, …; reciprocal rank fusion (RRF) gives each memory
``vector_weight / (rrf_k + vector rank) + text_weight / (rrf_k + text rank)`` (a term for each
list it is in), the best k1 by that score form the pool, and phase B ranks the pool by
``(1-λ)·ẑ(fused) + λ·ẑ(Q)``. A memory that only the keywords find (an exact rare word, a name, a
number the embedding blurs) can therefore rank first, and one that only the vector finds still
competes. RRF reads ranks, not scores, so cosine and BM25 (whose scale differs between Lucene
and the embedded store's index, and from query to query) need no calibration.

>>> rrf([["a", "b"], ["c", "a"]], [1.0, 1.0], k=60)["a"] == 1 / 61 + 1 / 62
True
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from graphmem.config import RetrievalConfig
from graphmem.models import AnyMemory, Hit
from graphmem.ops.similarity import cosines
from graphmem.stores.base import MemoryStore

VectorCandidates = Callable[
    [MemoryStore, str, list[float], RetrievalConfig], list[tuple[AnyMemory, float]]
]
"""Phase A by vector alone: (store, namespace, query vector, config) → live (memory, sim)."""


def rrf(
    rankings: Sequence[Sequence[str]], weights: Sequence[float], k: int = 60
) -> dict[str, float]:
    """Reciprocal rank fusion: each id's Σ weight / (k + rank) over the rankings holding it
    (ranks from 1)."""
    fused: dict[str, float] = {}
    for ranking, weight in zip(rankings, weights, strict=True):
        for rank, item in enumerate(ranking, start=1):
            fused[item] = fused.get(item, 0.0) + weight / (k + rank)
    return fused


@dataclass
class FusedPool:
    """Phase A's pool: candidates (memory, cosine sim) best fused first, their fused scores,
    and each one's rank in the vector and keyword lists (1-based; absent: not in that list)."""

    candidates: list[tuple[AnyMemory, float]] = field(default_factory=list)
    fused: list[float] = field(default_factory=list)
    vector_rank: dict[str, int] = field(default_factory=dict)
    text_rank: dict[str, int] = field(default_factory=dict)

    def annotate(self, hits: Sequence[Hit]) -> list[Hit]:
        """``hits`` (of this pool) with their vector rank, text rank and fused score set."""
        fused = {m.id: f for (m, _), f in zip(self.candidates, self.fused, strict=True)}
        for hit in hits:
            memory_id = hit.memory.id
            hit.__dict__["vector_rank"] = self.vector_rank.get(memory_id)
            hit.__dict__["text_rank"] = self.text_rank.get(memory_id)
            hit.__dict__["fused"] = fused.get(memory_id)
        return list(hits)


def hybrid_candidates(
    store: MemoryStore,
    namespace: str,
    query: str,
    vector: list[float],
    cfg: RetrievalConfig,
    by_vector: VectorCandidates,
    *,
    one_statement: bool = True,
) -> FusedPool:
    """The fused pool of at most k1 live memories (see the module doc). The similarity floor
    applies to the vector list; a keyword candidate is kept whatever its cosine (reported).
    A store with ``recall_hybrid`` (Neo4j) answers both lists in one round trip (unless
    ``one_statement`` is false, which bench.speed_hybrid uses to time the other way); else a
    store whose ``parallel_reads`` is true (each read its own session) is asked for the keyword
    list in a worker thread while it answers the vector recall."""
    text_k = cfg.text_k if cfg.text_k is not None else cfg.k1
    kinds = list(cfg.kinds)
    both = getattr(store, "recall_hybrid", None) if one_statement else None
    if both is not None:
        recalled, found = both(
            namespace, vector, query, cfg.k1, text_k, kinds=kinds, min_sim=cfg.floor
        )
        live = [r for r in recalled if not r.superseded]
        if len(live) < cfg.k1 and len(recalled) == cfg.k1:
            # Superseded memories took places in the top k1: the vector path asks for more.
            vector_list = by_vector(store, namespace, vector, cfg)
        else:
            live.sort(key=lambda r: (-r.sim, r.memory.id))
            vector_list = [(r.memory, float(r.sim)) for r in live]
    elif getattr(store, "parallel_reads", False):
        # A server store answers the two channels at once: two round trips in the time of one.
        pending = _pool().submit(store.recall_text, namespace, query, text_k, kinds=kinds)
        try:
            vector_list = by_vector(store, namespace, vector, cfg)
        finally:
            found = pending.result()
    else:
        vector_list = by_vector(store, namespace, vector, cfg)
        found = store.recall_text(namespace, query, text_k, kinds=kinds)
    unknown = [r.memory.id for r in found if r.superseded is None]
    dropped = store.superseded(namespace, unknown) if unknown else set()
    text_list = [r.memory for r in found if not r.superseded and r.memory.id not in dropped]

    memories: dict[str, AnyMemory] = {}
    sims: dict[str, float] = {}
    for memory, sim in vector_list:
        memories[memory.id], sims[memory.id] = memory, sim
    text_only = [m for m in text_list if m.id not in memories]
    for memory, sim in zip(
        text_only, cosines(vector, [m.embedding for m in text_only]), strict=True
    ):
        memories[memory.id], sims[memory.id] = memory, sim
    vector_ids = [m.id for m, _ in vector_list]
    text_ids = [m.id for m in text_list]
    fused = rrf([vector_ids, text_ids], [cfg.vector_weight, cfg.text_weight], k=cfg.rrf_k)
    order = sorted(memories, key=lambda i: (-fused[i], -sims[i], i))[: cfg.k1]
    return FusedPool(
        candidates=[(memories[i], sims[i]) for i in order],
        fused=[fused[i] for i in order],
        vector_rank={i: r for r, i in enumerate(vector_ids, start=1)},
        text_rank={i: r for r, i in enumerate(text_ids, start=1)},
    )


_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    """The threads that run keyword recall beside vector recall (stores with parallel_reads)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=8, thread_name_prefix="graphmem-hybrid")
        return _POOL


__all__ = ["FusedPool", "hybrid_candidates", "rrf"]
