"""A procedure's chain of steps, read from any store (build, update, consolidation and the
agent flow all follow it)."""

from __future__ import annotations

from graphmem.models import Edge, EdgeKind, Namespace, Step
from graphmem.stores.base import MemoryStore


def procedure_chain(
    store: MemoryStore, namespace: Namespace, procedure_id: str, *, limit: int = 10_000
) -> tuple[list[Step], list[Edge]]:
    """A procedure's steps in order and the FIRST_STEP/NEXT edges joining them.

    Follows DISTILLED_FROM when the procedure has no chain of its own (a proceduralized
    script keeps its steps under the trajectory it was distilled from). Cycle-safe.
    """
    owner = procedure_id
    first = store.edges(namespace, owner, kinds=[EdgeKind.FIRST_STEP])
    if not first:
        for edge in store.edges(namespace, owner, kinds=[EdgeKind.DISTILLED_FROM]):
            first = store.edges(namespace, edge.dst, kinds=[EdgeKind.FIRST_STEP])
            if first:
                break
    chain: list[Edge] = []
    seen: set[str] = set()
    out = first
    while out and len(chain) < limit:
        edge = min(out, key=lambda e: e.dst)
        if edge.dst in seen:
            break
        seen.add(edge.dst)
        chain.append(edge)
        out = store.edges(namespace, edge.dst, kinds=[EdgeKind.NEXT])
    by_id = {m.id: m for m in store.get_many(namespace, [e.dst for e in chain])}
    steps = [s for e in chain if isinstance(s := by_id.get(e.dst), Step)]
    return steps, chain


__all__ = ["procedure_chain"]
