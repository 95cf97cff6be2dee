"""Evolve: A-MEM memory evolution — link a memory to its neighbours, refresh them as versions.

Why and how, in full: docs/design.md, "Module notes", ``graphmem.ops.evolve``.

>>> from graphmem import GraphMemory, HashingEmbedder
>>> from graphmem.stores.embedded import EmbeddedStore
>>> mem = GraphMemory(EmbeddedStore.in_memory(), embedder=HashingEmbedder(64))
>>> a = mem.add_note("demo", "Green tea is best brewed at 80 degrees.")
>>> b = mem.add_note("demo", "Brew green tea at 80 degrees, not boiling.")
>>> [link.dst for link in evolve(mem, "demo", b.id).links] == [a.id]
True
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from graphmem.config import EvolutionConfig
from graphmem.errors import InvalidInput
from graphmem.llm import ops
from graphmem.llm.schemas import Neighbour, NeighbourUpdate
from graphmem.llm.usage import CallBudget
from graphmem.models import (
    EVOLVED_INTO,
    AnyMemory,
    Edge,
    EdgeKind,
    MemoryKind,
    Namespace,
    Note,
    Procedure,
    Task,
    Tip,
    check_id,
    memory_from_dict,
    new_id,
    utcnow,
)

if TYPE_CHECKING:
    from graphmem.ops.context import MemoryContext

log = logging.getLogger(__name__)

EVOLVING_KINDS = (MemoryKind.NOTE, MemoryKind.PROCEDURE, MemoryKind.TIP, MemoryKind.TASK)
"""Kinds that evolve; Steps are reached through their procedure and Episodes are history."""


_JOINED = (EdgeKind.LINKS_TO, EdgeKind.EVOLVED_FROM, EdgeKind.SUPERSEDES, EdgeKind.DISTILLED_FROM)
_KEPT_ON_OLD = (EdgeKind.RETRIEVED, EdgeKind.EVOLVED_FROM, EdgeKind.SUPERSEDES)


class NeighbourSeen(BaseModel):
    """A neighbour shown to the link decision, with its similarity."""

    id: str
    sim: float


class NeighbourVersion(BaseModel):
    """A neighbour refreshed by evolution: ``new_id`` EVOLVED_FROM ``old_id`` (now obsolete)."""

    old_id: str
    new_id: str
    change: str


class EvolutionResult(BaseModel):
    """What one evolution did (or why it did nothing)."""

    memory_id: str
    neighbours: list[NeighbourSeen] = Field(default_factory=list)
    links: list[Edge] = Field(default_factory=list, description="LINKS_TO edges written.")
    versions: list[NeighbourVersion] = Field(default_factory=list)
    new_versions: list[AnyMemory] = Field(
        default_factory=list, description="The neighbours' new versions, as written."
    )
    updates: list[Edge] = Field(
        default_factory=list,
        description="UPDATES edges from the model's judgement that the memory and a neighbour "
        "state one fact at two times (graphmem.ops.fact_updates).",
    )
    llm_calls: int = Field(default=0, description="Chat-model requests made (retries included).")
    created_by: str = Field(default="fallback", description="Who decided: model or 'fallback'.")
    skipped: str | None = Field(default=None, description="Why nothing evolved.")


def evolve(
    mem: MemoryContext,
    namespace: Namespace,
    memory_id: str,
    *,
    config: EvolutionConfig | None = None,
) -> EvolutionResult:
    """Link ``memory_id`` to its neighbours and refresh them as new versions (module doc)."""
    check_id(memory_id)
    cfg = config if config is not None else mem.config.evolution
    memory = mem.store.get(namespace, memory_id)
    if memory.kind not in EVOLVING_KINDS:
        raise InvalidInput(f"memory {memory_id!r} is a {memory.kind}; {memory.kind}s do not evolve")
    result = EvolutionResult(memory_id=memory_id)
    if memory.obsolete:
        result.skipped = f"the memory is obsolete ({memory.obsolete_reason or 'no reason given'})"
        return result
    if memory.embedding is None:
        result.skipped = "the memory has no embedding (it is reached through another memory)"
        return result
    neighbours = _neighbours(mem, namespace, memory, cfg)
    result.neighbours = [NeighbourSeen(id=m.id, sim=sim) for m, sim in neighbours]
    if not neighbours:
        result.skipped = f"no {memory.kind} neighbour with similarity >= {cfg.min_similarity:g}"
        return result

    budget = CallBudget(cfg.max_llm_calls)
    decided = ops.decide_links(
        mem.llm,
        describe(memory),
        [_neighbour(m, sim) for m, sim in neighbours],
        budget=budget,
        threshold=cfg.link_threshold,
    )
    result.llm_calls = budget.used
    result.created_by = decided.created_by
    decisions = decided.value.restricted_to({m.id for m, _ in neighbours})

    by_id = {m.id: m for m, _ in neighbours}
    now = utcnow()
    retired: list[AnyMemory] = []
    fresh: list[AnyMemory] = []
    renamed: dict[str, str] = {}
    edges: list[Edge] = []
    for upd in decisions.updates:
        if len(fresh) >= cfg.max_updates:
            break
        if upd.id in renamed:
            continue  # one new version per neighbour: a second would fork it into two live notes
        old = by_id[upd.id]
        planned = _refreshed(mem, old, upd, memory.id, decided.created_by)
        if planned is None:
            continue
        new, change = planned
        renamed[old.id] = new.id
        fresh.append(new)
        retired.append(
            old.model_copy(
                update={
                    "obsolete": True,
                    "obsolete_reason": f"{EVOLVED_INTO}{new.id}",
                    "updated_at": now,
                }
            )
        )
        edges.append(
            Edge(
                namespace=namespace,
                kind=EdgeKind.EVOLVED_FROM,
                src=new.id,
                dst=old.id,
                props={
                    "at": now.isoformat(),
                    "change": change,
                    "source": "evolve",
                    "by": memory.id,
                },
            )
        )
        result.versions.append(NeighbourVersion(old_id=old.id, new_id=new.id, change=change))
    edges += carried_edges(mem, namespace, renamed)

    links = [
        Edge(
            namespace=namespace,
            kind=EdgeKind.LINKS_TO,
            src=memory.id,
            dst=renamed.get(choice.id, choice.id),
            props={"reason": choice.reason, "strength": choice.strength, "source": "evolve"},
        )
        for choice in decisions.links
    ]
    edges += links
    if retired or edges:
        mem.store.upsert([*retired, *fresh], dedupe_edges(edges))
    result.links = links
    result.new_versions = fresh
    if decided.by_model and isinstance(memory, Note):
        from graphmem.ops.fact_updates import judged_updates

        current = {m.id: m for m in fresh}
        sims = {m.id: sim for m, sim in neighbours}
        judged = [
            (current.get(renamed.get(c.id, c.id), by_id[c.id]), sims[c.id], c.reason)
            for c in decisions.links
            if c.newer_fact
        ]
        result.updates = judged_updates(mem, namespace, memory, judged, decided.created_by)
    log.info(
        "evolve %s %s ns=%s: %d neighbours, %d links, %d refreshed (%s, %d LLM calls)",
        memory.kind,
        memory.id,
        namespace,
        len(neighbours),
        len(links),
        len(fresh),
        decided.created_by,
        result.llm_calls,
    )
    return result


def evolve_many(
    mem: MemoryContext,
    namespace: Namespace,
    memory_ids: Sequence[str],
    *,
    config: EvolutionConfig | None = None,
) -> list[EvolutionResult]:
    """Evolve each memory in turn (a later one sees what an earlier one wrote).

    The hook for ``build(..., evolve=True)`` / ``add_note``: memories of kinds that do not
    evolve, and ids that are gone, are passed over.
    """
    out: list[EvolutionResult] = []
    for memory_id in dict.fromkeys(memory_ids):
        found = mem.store.get_many(namespace, [memory_id])
        if found and found[0].kind in EVOLVING_KINDS:
            out.append(evolve(mem, namespace, memory_id, config=config))
    return out


def describe(memory: AnyMemory) -> str:
    """The text of a memory shown to the link decision."""
    if isinstance(memory, Note):
        return memory.content
    if isinstance(memory, Procedure):
        return f"{memory.task_text}\n{memory.script}" if memory.script else memory.task_text
    if isinstance(memory, Tip):
        return memory.text
    if isinstance(memory, Task):
        return memory.text
    return memory.embed_text()


# ---- steps ---------------------------------------------------------------------------------


def _neighbours(
    mem: MemoryContext, namespace: Namespace, memory: AnyMemory, cfg: EvolutionConfig
) -> list[tuple[AnyMemory, float]]:
    """The nearest live same-kind memories not yet joined to ``memory``, best first."""
    if cfg.max_neighbours == 0:
        return []
    joined = {
        e.dst if e.src == memory.id else e.src
        for e in mem.store.edges(namespace, memory.id, kinds=list(_JOINED), direction="both")
    }
    assert memory.embedding is not None
    recalled = mem.store.recall(
        namespace,
        memory.embedding,
        cfg.max_neighbours + 1 + len(joined),
        kinds=[MemoryKind(memory.kind)],
        min_sim=cfg.min_similarity,
    )
    out = [
        (r.memory, float(r.sim))
        for r in recalled
        if r.memory.id != memory.id and r.memory.id not in joined and not r.memory.obsolete
    ]
    out.sort(key=lambda pair: (-pair[1], pair[0].id))
    return out[: cfg.max_neighbours]


def _neighbour(memory: AnyMemory, sim: float) -> Neighbour:
    context = memory.context if isinstance(memory, Note) else ""
    tags = list(memory.tags) if isinstance(memory, Note) else []
    return Neighbour(id=memory.id, text=describe(memory), sim=sim, context=context, tags=tags)


def _refreshed(
    mem: MemoryContext, old: AnyMemory, upd: NeighbourUpdate, by: str, created_by: str
) -> tuple[AnyMemory, str] | None:
    """The new version of ``old`` with the update's context/tags, or None if nothing changes."""
    if not isinstance(old, Note):
        log.debug("evolve: ignoring an update of %s %s (no context/tags)", old.kind, old.id)
        return None
    changes: dict[str, Any] = {}
    parts: list[str] = []
    if upd.context is not None and " ".join(upd.context.split()) not in ("", old.context):
        changes["context"] = " ".join(upd.context.split())
        parts.append(f"context: {changes['context']!r}")
    if upd.tags is not None and upd.tags != old.tags:
        changes["tags"] = list(upd.tags)
        parts.append(f"tags: {', '.join(upd.tags) or '(none)'}")
    if not changes:
        return None
    now = utcnow()
    data = old.model_dump()
    data.update(changes)
    data.update(
        {
            "id": new_id(),
            "version": old.version + 1,
            "created_at": now,
            "updated_at": now,
            "source": "evolve",
            "source_ref": by,
            "created_by": created_by,
            "obsolete": False,
            "obsolete_reason": None,
        }
    )
    new = memory_from_dict(data)  # validates; utility (q, uses, ...) carried over as decided
    new.embedding = mem.embed(new.embed_text(), namespace=old.namespace)
    return new, f"refreshed by {by}: " + "; ".join(parts)


def carried_edges(mem: MemoryContext, namespace: Namespace, renamed: dict[str, str]) -> list[Edge]:
    """The old versions' edges that describe their content, re-drawn on the new versions.

    ``renamed`` maps each old id to its new version's id (several old ids may map to one new
    version when versions merge; an edge between two of them is dropped, not made a loop).
    """
    out: list[Edge] = []
    for old_id in renamed:
        for edge in mem.store.edges(namespace, old_id, direction="both"):
            if edge.kind in _KEPT_ON_OLD:
                continue
            if edge.kind is EdgeKind.ABOUT and edge.dst != old_id:
                continue  # a tip's own ABOUT edges (tips have no context to refresh anyway)
            src, dst = renamed.get(edge.src, edge.src), renamed.get(edge.dst, edge.dst)
            if src == dst:
                continue
            out.append(
                Edge(namespace=namespace, kind=edge.kind, src=src, dst=dst, props=dict(edge.props))
            )
    return out


def dedupe_edges(edges: list[Edge]) -> list[Edge]:
    """Later edges with the same identity merge their props into earlier ones."""
    merged: dict[tuple[str, str, str, str], Edge] = {}
    for edge in edges:
        before = merged.get(edge.key)
        merged[edge.key] = (
            edge
            if before is None
            else before.model_copy(update={"props": {**before.props, **edge.props}})
        )
    return list(merged.values())


__all__ = [
    "EVOLVED_INTO",
    "EVOLVING_KINDS",
    "EvolutionResult",
    "NeighbourSeen",
    "NeighbourVersion",
    "carried_edges",
    "dedupe_edges",
    "describe",
    "evolve",
    "evolve_many",
]
