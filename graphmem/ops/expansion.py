"""Graph expansion of phase A: the graph adds candidates that the vector index ranked too low.

With ``RetrievalConfig.expand`` set, phase A's similarity candidates are joined by

- ``tasks``: the procedures that solved the query's *task cluster* (the ``cluster_k`` Task
  nodes nearest the query with similarity at least ``cluster_sim``, the cluster abstention
  pools; their SOLVED_BY edges), and
- ``links``: the LINKS_TO neighbours (both directions) of the ``expand_seeds`` best candidates,
  the links that ``evolve`` drew between related memories.

At most ``expand_k`` memories are added, nearest the query first; each keeps its cosine to the
query as its similarity, so phase B ranks it like any other candidate. Obsolete, superseded,
already present and off-kind memories are never added. Off by default: the measured effect is
in docs/design.md ("Graph expansion of phase A").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from graphmem.models import AnyMemory, EdgeKind

if TYPE_CHECKING:
    from graphmem.config import RetrievalConfig
    from graphmem.stores.base import MemoryStore, Recall


def expand_candidates(
    store: MemoryStore,
    namespace: str,
    vector: Sequence[float],
    candidates: Sequence[tuple[AnyMemory, float]],
    cfg: RetrievalConfig,
    cluster: Sequence[Recall],
) -> list[tuple[AnyMemory, float]]:
    """``candidates`` followed by the memories the graph adds (at most ``cfg.expand_k``);
    ``cluster`` is the query's task cluster (:func:`graphmem.ops.abstention.task_cluster`)."""
    if cfg.expand == "off" or cfg.expand_k == 0:
        return list(candidates)
    kinds = {str(k) for k in cfg.kinds}
    seen = {m.id for m, _ in candidates}
    found: dict[str, AnyMemory] = {}

    def offer(memory: AnyMemory) -> None:
        if memory.id in seen or memory.id in found or memory.obsolete:
            return
        if str(memory.kind) in kinds:
            found[memory.id] = memory

    if cfg.expand in ("tasks", "links+tasks"):
        for r in cluster:
            for _, memory in store.neighbours(
                namespace, r.memory.id, kinds=[EdgeKind.SOLVED_BY], direction="out"
            ):
                offer(memory)
    if cfg.expand in ("links", "links+tasks"):
        for memory, _ in candidates[: cfg.expand_seeds]:
            for _, other in store.neighbours(
                namespace, memory.id, kinds=[EdgeKind.LINKS_TO], direction="both"
            ):
                offer(other)
    if not found:
        return list(candidates)
    dropped = store.superseded(namespace, list(found))
    live = [m for i, m in found.items() if i not in dropped]
    scored = list(zip(live, cosines(vector, [m.embedding for m in live]), strict=True))
    scored.sort(key=lambda row: (-row[1], row[0].id))
    return [*candidates, *scored[: cfg.expand_k]]


def cosines(query: Sequence[float], vectors: Sequence[Sequence[float] | None]) -> list[float]:
    """:func:`cosine` of ``query`` with each of ``vectors`` (one matrix product for the
    well-formed ones).

    >>> [round(c, 4) for c in cosines([1.0, 0.0], [[2.0, 0.0], None, [0.0, 3.0], [1.0]])]
    [1.0, 0.0, 0.0, 0.0]
    """
    q = np.asarray(query, dtype=np.float64)
    width = len(q)
    rows = [i for i, v in enumerate(vectors) if v is not None and len(v) == width]
    out = [0.0] * len(vectors)
    if not rows or not np.isfinite(q).all():
        return out
    m = np.asarray([vectors[i] for i in rows], dtype=np.float64)
    with np.errstate(all="ignore"):
        norms = np.linalg.norm(m, axis=1) * float(np.linalg.norm(q))
        sims = (m @ q) / norms
    for i, sim, ok in zip(rows, sims.tolist(), np.isfinite(sims).tolist(), strict=True):
        # Rows that overflow or have no norm go the careful way.
        out[i] = float(np.clip(sim, -1.0, 1.0)) if ok else cosine(query, vectors[i])
    return out


def cosine(a: Sequence[float], b: Sequence[float] | None) -> float:
    """Cosine of two vectors, 0.0 when it is undefined (no vector, other width, zero norm).

    >>> round(cosine([1.0, 0.0], [1.0, 1.0]), 4)
    0.7071
    >>> cosine([1.0, 0.0], None)
    0.0
    """
    if b is None or len(a) != len(b):
        return 0.0
    va, vb = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if not (np.isfinite(va).all() and np.isfinite(vb).all()):
        return 0.0
    # Scaled to unit max-abs first so no product overflows.
    ma, mb = float(np.abs(va).max(initial=0.0)), float(np.abs(vb).max(initial=0.0))
    if ma == 0.0 or mb == 0.0:
        return 0.0
    va, vb = va / ma, vb / mb
    denom = float(np.linalg.norm(va) * np.linalg.norm(vb))
    return float(np.clip(float(va @ vb) / denom, -1.0, 1.0)) if denom > 0 else 0.0
