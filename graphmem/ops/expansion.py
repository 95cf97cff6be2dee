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

from graphmem.models import AnyMemory, EdgeKind
from graphmem.ops.similarity import cosines

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
