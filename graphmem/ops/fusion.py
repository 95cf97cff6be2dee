"""Hybrid phase A: vector and keyword candidates fused into one pool (docs/design.md).

Phase A of :func:`graphmem.ops.retrieve.retrieve` with ``hybrid=True`` (the default) asks the
store twice: ``recall`` for the k1 live memories most similar to the query's embedding, and
``recall_text`` for the ``text_k`` (default: k1, and at least :data:`PEAK_DEPTH`) that match its
words best by BM25. Each list ranks its memories 1, 2, …; reciprocal rank fusion (RRF) gives
each memory ``vector_weight / (rrf_k + vector rank) + w_text / (rrf_k + text rank)`` (a term
for each list it is in), the best k1 by that score form the pool, and phase B ranks the pool
by ``(1-λ)·ẑ(fused) + λ·ẑ(Q)``. A memory that only the keywords find (an exact rare word, a
name, a number the embedding blurs) can therefore rank first, and one that only the vector
finds still competes.

``fusion='adaptive'`` (the default) sets the keyword weight per query from how the keyword
list looks (:func:`adaptive_text_weight`): when the best BM25 score stands far above the
others (the query shares a rare word with few memories), the keywords count up to twice the
vector; when the scores are flat (the query's words are everyday words many memories hold,
as in a paraphrase), they count for nothing and the vector ranking stands. Plain RRF at 1 : 1
(``fusion='rrf'``) let look-alikes that share everyday words crowd out the right memory on
paraphrased questions (docs/benchmarks.md). Both read the keyword scores only as a ratio
within one query's list, so Lucene's and the embedded index's different scales need no
calibration.

>>> rrf([["a", "b"], ["c", "a"]], [1.0, 1.0], k=60)["a"] == 1 / 61 + 1 / 62
True
>>> adaptive_text_weight([9.0, 2.0, 1.5]), adaptive_text_weight([3.0, 2.9, 2.9, 2.8] * 3)
(2.0, 0.0)
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, cast

from graphmem.config import RetrievalConfig
from graphmem.models import AnyMemory, Hit
from graphmem.ops.similarity import cosines
from graphmem.stores.base import MemoryStore, TextRecall

VectorCandidates = Callable[
    [MemoryStore, str, list[float], RetrievalConfig], list[tuple[AnyMemory, float]]
]
"""Phase A by vector alone: (store, namespace, query vector, config) → live (memory, sim)."""


PEAK_DEPTH = 10
"""How many keyword scores :func:`keyword_peak` compares the best one with."""
PEAK_FLOOR = 1.2
"""A keyword peak at or below this gives the keyword list no weight."""
PEAK_SPAN = 0.5
"""How far above :data:`PEAK_FLOOR` the peak must rise for the keyword list to weigh 1."""
MAX_TEXT_WEIGHT = 2.0
"""The most the keyword list weighs (times ``text_weight``) under adaptive fusion."""


def keyword_peak(scores: Sequence[float], depth: int = PEAK_DEPTH) -> float:
    """The best keyword score over the mean of the best ``depth`` (a list shorter than that
    counts its missing places as 0: a word only one memory holds peaks at ``depth``); 0 for
    no match."""
    top = [max(0.0, float(x)) for x in scores[:depth]]
    if not top or top[0] <= 0.0:
        return 0.0
    return top[0] / (sum(top) / depth)


def adaptive_text_weight(scores: Sequence[float], base: float = 1.0) -> float:
    """``base`` times the keyword list's weight for one query under adaptive fusion:
    ``clip((keyword_peak − PEAK_FLOOR) / PEAK_SPAN, 0, MAX_TEXT_WEIGHT)``.

    Chosen on the dev seeds of the generated conversations (bench.protocol.RETRIEVAL_SPLITS)
    and LongMemEval-S, among floors 1.0-1.5, spans 0.5-4, caps 1-4 and depths 5 and 10
    (NDCG@10, dev seeds: session notes 0.569 under RRF 1 : 1 → 0.672, turn notes 0.823 →
    0.939, vector-only 0.944; LongMemEval-S 0.820 / 0.813, keyword-only 0.822 / 0.827), and
    reported on fresh held-out seeds (0.723 / 0.962 against vector-only 0.499 / 0.957 and
    keyword-only 0.652 / 0.638); docs/benchmarks.md has the table."""
    peak = keyword_peak(scores)
    return base * max(0.0, min(MAX_TEXT_WEIGHT, (peak - PEAK_FLOOR) / PEAK_SPAN))


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
    text_weight: float = 1.0
    """The keyword list's weight this query was fused with (adaptive fusion sets it)."""

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
    list in a worker thread while it answers the vector recall. Where the store offers it
    (``recall_text_ids``, ``recall_hybrid_ids``: both built-in stores), the keyword list comes
    as ids and scores, and only the keyword-only memories whose fused score can still place
    them in the pool are read afterwards (with the keywords weighed 0, none is): the pool is
    the same, and the memories the fusion drops are never copied out or decoded."""
    adaptive = cfg.fusion == "adaptive"
    text_k = cfg.text_k if cfg.text_k is not None else cfg.k1
    if adaptive and cfg.text_k is None:
        text_k = max(text_k, PEAK_DEPTH)  # the peak compares the best with the next ones
    kinds = list(cfg.kinds)
    # The keyword list without its memories where the store offers it (both built-in stores):
    # only the few keyword-only memories that can still enter the pool are read afterwards.
    by_ids = getattr(store, "recall_text_ids", None)
    both, ids = None, False
    if one_statement:
        both = getattr(store, "recall_hybrid_ids", None)
        ids = both is not None
        if both is None:
            both = getattr(store, "recall_hybrid", None)
    if both is not None:
        recalled, answered = both(
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
        ids = by_ids is not None
        pending = _pool().submit(by_ids or store.recall_text, namespace, query, text_k, kinds=kinds)
        try:
            vector_list = by_vector(store, namespace, vector, cfg)
        finally:
            answered = pending.result()
    else:
        ids = by_ids is not None
        vector_list = by_vector(store, namespace, vector, cfg)
        answered = (by_ids or store.recall_text)(namespace, query, text_k, kinds=kinds)
    found = _text_hits(store, namespace, answered, ids)
    # A memory without an embedding is not meant to be recalled (a proceduralized build's
    # DISTILLED_FROM trajectory): vector recall cannot find it, so keywords do not either.
    text_list = [hit for hit in found if hit.recallable]

    memories: dict[str, AnyMemory] = {}
    sims: dict[str, float] = {}
    for memory, sim in vector_list:
        memories[memory.id], sims[memory.id] = memory, sim
    vector_ids = [m.id for m, _ in vector_list]
    text_ids = [hit.id for hit in text_list]
    text_weight = cfg.text_weight
    if adaptive:
        text_weight = adaptive_text_weight([hit.score for hit in found], cfg.text_weight)
    fused = rrf([vector_ids, text_ids], [cfg.vector_weight, text_weight], k=cfg.rrf_k)
    # A list of weight 0 adds no candidates: with the keywords weighed 0 the pool is the
    # vector recall's, as without hybrid.
    kept = [i for i in vector_ids if fused[i] > 0.0]
    text_only = [hit for hit in text_list if hit.id not in memories]
    entering = [hit for hit in text_only if fused[hit.id] > 0.0]
    if not kept and not entering:
        kept, entering = vector_ids, text_only
    if 0 < cfg.k1 < len(kept) + len(entering):
        # Only a keyword-only memory whose fused score reaches the k1-th best can be in the
        # pool: only those are read (when the store did not send them) and get a cosine.
        scores = sorted([fused[i] for i in kept] + [fused[h.id] for h in entering], reverse=True)
        entering = [hit for hit in entering if fused[hit.id] >= scores[cfg.k1 - 1]]
    missing = [hit.id for hit in entering if hit.memory is None]
    read = {m.id: m for m in store.get_many(namespace, missing)} if missing else {}
    arrived = [  # a memory deleted since the keyword search is left out
        m
        for hit in entering
        if (m := hit.memory if hit.memory is not None else read.get(hit.id)) is not None
    ]
    for memory, sim in zip(arrived, cosines(vector, [m.embedding for m in arrived]), strict=True):
        memories[memory.id], sims[memory.id] = memory, sim
    order = sorted(kept + [m.id for m in arrived], key=lambda i: (-fused[i], -sims[i], i))
    order = order[: cfg.k1]
    return FusedPool(
        candidates=[(memories[i], sims[i]) for i in order],
        fused=[fused[i] for i in order],
        vector_rank={i: r for r, i in enumerate(vector_ids, start=1)},
        text_rank={i: r for r, i in enumerate(text_ids, start=1)},
        text_weight=text_weight,
    )


@dataclass(frozen=True)
class _TextHit:
    """One keyword match: its memory id, BM25 score, whether vector recall could return it
    (live: not superseded, with an embedding) and the memory when the store sent it."""

    id: str
    score: float
    recallable: bool
    memory: AnyMemory | None


def _text_hits(store: MemoryStore, namespace: str, answered: Any, ids: bool) -> list[_TextHit]:
    """The keyword list as hits: ``recall_text_ids``'s (id, score, recallable) rows as they
    are (``ids``), or ``recall_text``'s, the superseded flags the store left open read in one
    call."""
    if ids:
        return [_TextHit(i, float(score), bool(ok), None) for i, score, ok in answered]
    found = cast(Sequence[TextRecall], answered)
    unknown = [r.memory.id for r in found if r.superseded is None]
    dropped = store.superseded(namespace, unknown) if unknown else set()
    return [
        _TextHit(
            r.memory.id,
            r.score,
            not r.superseded and r.memory.id not in dropped and r.memory.embedding is not None,
            r.memory,
        )
        for r in found
    ]


_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    """The threads that run keyword recall beside vector recall (stores with parallel_reads)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=8, thread_name_prefix="graphmem-hybrid")
        return _POOL


__all__ = [
    "FusedPool",
    "adaptive_text_weight",
    "hybrid_candidates",
    "keyword_peak",
    "rrf",
]
