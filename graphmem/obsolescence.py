"""Obsolescence: demote memories that keep failing, supersede replaced ones — never delete.

A demoted memory is marked ``obsolete`` with a reason: retrieval skips it, the graph keeps it
(``get`` and ``history`` still show it, with every edge it had). Two ways to become obsolete:

- *demotion* (Mem^p "Remove(M_obso)", made reversible): after at least ``min_uses`` uses its Q is
  still below ``q_below`` (:class:`~graphmem.config.ObsolescenceConfig`);
- *supersession*: a replacement proved itself (``(new)-[:SUPERSEDES {at}]->(old)``), and the old
  one is marked obsolete with the reason ``"superseded by <new id>"``.

Only an explicit ``GraphMemory.delete`` removes memories (and the orphans they leave).

>>> from graphmem import GraphMemory, HashingEmbedder
>>> from graphmem.stores.embedded import EmbeddedStore
>>> mem = GraphMemory(EmbeddedStore.in_memory(), embedder=HashingEmbedder(64))
>>> note = mem.add_note("demo", "The lift is on the left.")
>>> _ = mem.store.update_utility("demo", [note.id], 0.0, 0.9)
>>> [d.memory_id for d in demote(mem, "demo", config=ObsolescenceConfig(min_uses=1))] == [note.id]
True
>>> mem.get("demo", note.id).obsolete
True
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from graphmem.config import ObsolescenceConfig
from graphmem.errors import InvalidInput
from graphmem.models import (
    AnyMemory,
    Edge,
    EdgeKind,
    check_id,
    check_namespace,
    utcnow,
)

if TYPE_CHECKING:
    from graphmem.memory import GraphMemory

log = logging.getLogger(__name__)

SUPERSEDED_BY = "superseded by "
"""Prefix of ``obsolete_reason`` for a superseded memory (the replacement's id follows)."""


class Demotion(BaseModel):
    """One memory demoted for a persistently low Q."""

    memory_id: str
    kind: str
    q: float
    uses: int
    reason: str = Field(description="The obsolete_reason written on the memory.")


class Supersession(BaseModel):
    """A replacement that proved itself: ``new`` SUPERSEDES ``old`` (now obsolete)."""

    new_id: str
    old_id: str
    reason: str


def obsolescent(memory: AnyMemory, config: ObsolescenceConfig) -> bool:
    """True when ``memory`` is live, of a demotable kind, used enough and still low in Q."""
    return (
        not memory.obsolete
        and memory.kind in config.kinds
        and memory.uses >= config.min_uses
        and memory.q < config.q_below
    )


def demotion_reason(memory: AnyMemory, config: ObsolescenceConfig) -> str:
    return f"low utility: q {memory.q:.3f} < {config.q_below:g} after {memory.uses} uses"


def demote(
    mem: GraphMemory,
    namespace: str,
    memory_ids: Sequence[str] | None = None,
    *,
    config: ObsolescenceConfig | None = None,
) -> list[Demotion]:
    """Demote the obsolescent memories among ``memory_ids`` (default: the whole namespace).

    Each is patched ``obsolete=True`` with its reason; nothing is deleted. Returns what was
    demoted. ``config`` defaults to ``mem.config.obsolescence`` (its ``enabled`` flag only
    governs the automatic call from ``update``; an explicit call always runs).
    """
    check_namespace(namespace)
    cfg = config if config is not None else mem.config.obsolescence
    candidates: Iterable[AnyMemory]
    if memory_ids is None:
        candidates = mem.store.iter_nodes(namespace, kinds=list(cfg.kinds))
    else:
        if isinstance(memory_ids, str):
            raise InvalidInput("memory_ids is a sequence of ids, not one string")
        ids = list(dict.fromkeys(check_id(i) for i in memory_ids))
        candidates = mem.store.get_many(namespace, ids)
    chosen = [m for m in candidates if obsolescent(m, cfg)]
    out: list[Demotion] = []
    for memory in chosen:
        reason = demotion_reason(memory, cfg)
        mem.store.patch(namespace, memory.id, {"obsolete": True, "obsolete_reason": reason})
        log.info("demoted %s %s in ns=%s: %s", memory.kind, memory.id, namespace, reason)
        out.append(
            Demotion(
                memory_id=memory.id, kind=memory.kind, q=memory.q, uses=memory.uses, reason=reason
            )
        )
    return out


def supersede(mem: GraphMemory, namespace: str, new_id: str, old_id: str) -> Supersession:
    """Record that ``new_id`` replaces ``old_id``: a SUPERSEDES edge, the old one obsolete.

    One atomic write. Raises MemoryNotFound for an unknown id and InvalidInput when the two are
    the same memory, of different kinds, or the replacement is itself obsolete.
    """
    check_namespace(namespace)
    check_id(new_id)
    check_id(old_id)
    if new_id == old_id:
        raise InvalidInput("a memory cannot supersede itself")
    new = mem.store.get(namespace, new_id)
    old = mem.store.get(namespace, old_id)
    if new.kind != old.kind:
        raise InvalidInput(f"a {new.kind} cannot supersede a {old.kind}")
    if new.obsolete:
        raise InvalidInput(f"memory {new_id!r} is obsolete and cannot supersede another")
    reason = f"{SUPERSEDED_BY}{new_id}"
    now = utcnow()
    edge = Edge(
        namespace=namespace,
        kind=EdgeKind.SUPERSEDES,
        src=new_id,
        dst=old_id,
        props={"at": now.isoformat()},
    )
    retired = old.model_copy(
        update={"obsolete": True, "obsolete_reason": reason, "updated_at": now}
    )
    # Node and edge in one upsert: never a SUPERSEDES edge without the old one marked, or the
    # reverse. The store keeps the old memory's utility (only update_utility moves it).
    mem.store.upsert([retired], [edge])
    log.info("%s %s supersedes %s in ns=%s", new.kind, new_id, old_id, namespace)
    return Supersession(new_id=new_id, old_id=old_id, reason=reason)


def validate_replacements(
    mem: GraphMemory, namespace: str, memory_ids: Sequence[str]
) -> list[Supersession]:
    """After a successful episode: each of ``memory_ids`` that was written as a correction of
    a still-live memory (``EVOLVED_FROM`` it) and now has the higher Q supersedes it."""
    out: list[Supersession] = []
    retired: set[str] = set()  # the snapshot below predates supersessions made in this loop
    for memory in mem.store.get_many(namespace, list(dict.fromkeys(memory_ids))):
        if memory.obsolete or memory.id in retired:
            continue
        origins = mem.store.edges(namespace, memory.id, kinds=[EdgeKind.EVOLVED_FROM])
        for old in mem.store.get_many(namespace, [e.dst for e in origins]):
            if old.obsolete or old.kind != memory.kind or memory.q <= old.q:
                continue
            out.append(supersede(mem, namespace, memory.id, old.id))
            retired.add(old.id)
    return out


__all__ = [
    "SUPERSEDED_BY",
    "Demotion",
    "Supersession",
    "demote",
    "obsolescent",
    "supersede",
    "validate_replacements",
]
