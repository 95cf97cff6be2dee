"""Writing notes: add one (A-MEM), or refine live notes into a new version.

Why and how, in full: docs/design.md §2.1 (``add_note``, ``revise_note``) and §2.1.1 (what
distillation writes through them).

>>> from graphmem import GraphMemory, HashingEmbedder
>>> from graphmem.stores.embedded import EmbeddedStore
>>> mem = GraphMemory(EmbeddedStore.in_memory(), embedder=HashingEmbedder(64))
>>> add_note(mem, "demo", "The descaler is under the sink.").version
1
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from graphmem.errors import EmptyContent, InvalidInput
from graphmem.llm import ops
from graphmem.llm.ops import producer
from graphmem.llm.usage import CallBudget
from graphmem.models import (
    Edge,
    EdgeKind,
    MemoryKind,
    Namespace,
    Note,
    check_id,
    check_unicode,
    content_hash,
    utcnow,
)

if TYPE_CHECKING:
    from graphmem.ops.context import MemoryContext

log = logging.getLogger(__name__)

_NOTE_EXTRACTED = ("keywords", "tags", "context", "category")
_NOTE_RESERVED = frozenset({"namespace", "content", "kind", "embedding", "content_hash"})
_VERSION_SET = frozenset(
    {"id", "version", "q", "q_updates", "uses", "successes", "obsolete", "obsolete_reason"}
)
"""Fields :func:`revise_note` sets on a new version (identity, lineage, carried utility)."""


def _consolidated(
    mem: MemoryContext, namespace: Namespace, memory_id: str, kind: MemoryKind
) -> str | None:
    """The hook of :mod:`graphmem.ops.consolidation` on a memory just written: the id of the
    version that holds it after consolidation, or None (off, or nothing merged)."""
    cfg = mem.config.consolidation
    if not cfg.enabled or kind not in cfg.kinds:
        return None
    from graphmem.ops.consolidation import consolidate_memory

    result = consolidate_memory(mem, namespace, memory_id, config=cfg)
    live = result.live_id(memory_id)
    return live if live != memory_id else None


def add_note(mem: MemoryContext, namespace: Namespace, content: str, **fields: Any) -> Note:
    """Store a note; keywords, tags, context and category not given are extracted.

    A note whose content (normalised) is already in the namespace is returned as it is, except
    that a demoted one is restored first: learning a retired fact again revives it.
    """
    if not isinstance(content, str):
        raise InvalidInput(f"note content must be a string, got {type(content).__name__}")
    if not content.strip():
        raise EmptyContent("content")
    check_unicode(content, "content")
    reserved = sorted(_NOTE_RESERVED & set(fields))
    if reserved:
        raise InvalidInput(f"add_note sets {', '.join(reserved)} itself; do not pass them")
    if "q" in fields:  # Q is bounded by the reward range; ranking and demotion rely on it
        fields = {**fields, "q": mem.config.check_q(fields["q"])}
    digest = content_hash("note", content)
    Note(namespace=namespace, content=content, content_hash=digest, **fields)  # validate first
    existing = mem.store.find_by_hash(namespace, MemoryKind.NOTE, digest)
    if isinstance(existing, Note):
        return _relearned(mem, namespace, existing)

    values = dict(fields)
    missing = [f for f in _NOTE_EXTRACTED if f not in values]
    by = producer(mem.llm)
    if missing:
        extracted = ops.note_fields(mem.llm, content, CallBudget(mem.config.max_llm_calls))
        by = extracted.created_by
        for name in missing:
            values[name] = getattr(extracted.value, name)
    values.setdefault("source", "note")
    values.setdefault("created_by", by)
    values.setdefault("q", mem.config.q0)
    values.setdefault("valid_at", utcnow())  # when it was said: the caller's, else now
    note = Note(namespace=namespace, content=content, content_hash=digest, **values)
    note.embedding = mem.embed(note.embed_text(), namespace=namespace)
    mem.store.upsert([note])
    merged = _consolidated(mem, namespace, note.id, MemoryKind.NOTE)
    if merged is not None:  # merged with notes of its subject and content: the live version
        note = _reread(mem, namespace, merged)
    elif mem.config.consolidation.enabled:  # a contradiction may have raised its version
        note = _reread(mem, namespace, note.id)
    return _with_updates(mem, namespace, note)


def _reread(mem: MemoryContext, namespace: Namespace, memory_id: str) -> Note:
    note = mem.store.get(namespace, memory_id)
    assert isinstance(note, Note)
    return note


def _with_updates(mem: MemoryContext, namespace: Namespace, note: Note) -> Note:
    """``note`` after :func:`graphmem.ops.fact_updates.link_updates` (read again when an older
    note told of a later time turned it into the older one)."""
    from graphmem.ops.fact_updates import link_updates

    edges = link_updates(mem, namespace, [note])
    return _reread(mem, namespace, note.id) if any(e.dst == note.id for e in edges) else note


def _relearned(mem: MemoryContext, namespace: Namespace, note: Note) -> Note:
    """A note learned again: a demoted one is restored (learning a fact again is evidence it
    holds); a superseded one stays as it is, since a newer version replaced it."""
    if not note.obsolete or mem.store.superseded(namespace, [note.id]):
        return note
    from graphmem.ops.obsolescence import SUPERSEDED_BY, restore_in

    if (note.obsolete_reason or "").startswith(SUPERSEDED_BY):
        return note
    log.info("note %s in ns=%s was learned again: restored from demotion", note.id, namespace)
    restored = restore_in(mem.store, namespace, note.id)
    assert isinstance(restored, Note)
    return restored


def revise_note(
    mem: MemoryContext,
    namespace: Namespace,
    note_ids: Sequence[str],
    content: str,
    *,
    change: str,
    **fields: Any,
) -> Note:
    """A new version of live note(s) holding ``content``: refinement, not replacement.

    The new note has ``version`` one above the highest of ``note_ids`` and an
    ``(new)-[:EVOLVED_FROM {at, change, source}]->(old)`` edge to each of them (several ids
    merge duplicates into one version); the old versions are kept, obsolete with the reason
    ``"evolved into <new id>"``, their RETRIEVED edges in place, while their LINKS_TO and
    incoming ABOUT edges are re-drawn on the new version. The new version carries the utility
    (q, uses, successes) of the first id: it holds what the agent found useful, refined.
    Keywords, tags, context and category not given are extracted from ``content``. One atomic
    write.

    Nothing changes when ``content`` is what the (single) note holds already; when another
    live note holds exactly ``content``, that note replaces the old ones (SUPERSEDES: a
    different memory) and is returned, after a demoted one is revived (as :func:`add_note`).

    >>> from graphmem import GraphMemory, HashingEmbedder
    >>> from graphmem.stores.embedded import EmbeddedStore
    >>> mem = GraphMemory(EmbeddedStore.in_memory(), embedder=HashingEmbedder(64))
    >>> old = mem.add_note("demo", "Tea: brew at 80 degrees.")
    >>> new = revise_note(mem, "demo", [old.id], "Tea: brew at 80 degrees, 3 minutes.",
    ...                   change="added the brewing time")
    >>> new.version, mem.get("demo", old.id).obsolete
    (2, True)
    """
    from graphmem.ops.evolve import EVOLVED_INTO, carried_edges, dedupe_edges
    from graphmem.ops.obsolescence import supersede

    if isinstance(note_ids, str) or not note_ids:
        raise InvalidInput("note_ids is a non-empty sequence of note ids")
    ids = list(dict.fromkeys(check_id(i) for i in note_ids))
    digest, values = _note_values(mem, namespace, content, fields)
    olds: list[Note] = []
    for memory_id in ids:
        old = mem.store.get(namespace, memory_id)
        if not isinstance(old, Note):
            raise InvalidInput(f"memory {memory_id!r} is a {old.kind}; only notes are revised")
        if old.obsolete:
            raise InvalidInput(
                f"note {memory_id!r} is obsolete ({old.obsolete_reason}); revise its live version"
            )
        olds.append(old)
    if len(olds) == 1 and olds[0].content_hash == digest:
        return olds[0]
    found = mem.store.find_by_hash(namespace, MemoryKind.NOTE, digest)
    if isinstance(found, Note) and found.id not in ids:
        holder = _relearned(mem, namespace, found)
        if not holder.obsolete:  # another live note already says exactly this
            for old in olds:
                supersede(mem, namespace, holder.id, old.id)
            return holder

    first = olds[0]
    values.setdefault("source", "revise")
    values.update({"q": first.q, "q_updates": first.q_updates})
    values.update({"uses": first.uses, "successes": first.successes})
    note = Note(
        namespace=namespace,
        content=content,
        content_hash=digest,
        version=max(o.version for o in olds) + 1,
        **values,
    )
    note.embedding = mem.embed(note.embed_text(), namespace=namespace)
    now = utcnow()
    reason = f"{EVOLVED_INTO}{note.id}"
    retired = [
        o.model_copy(update={"obsolete": True, "obsolete_reason": reason, "updated_at": now})
        for o in olds
    ]
    props: dict[str, Any] = {"at": now.isoformat(), "change": change, "source": note.source}
    edges = [
        Edge(namespace=namespace, kind=EdgeKind.EVOLVED_FROM, src=note.id, dst=o.id, props=props)
        for o in olds
    ]
    edges += carried_edges(mem, namespace, dict.fromkeys(ids, note.id))
    mem.store.upsert([*retired, note], dedupe_edges(edges))
    log.info("note %s in ns=%s: v%d evolved from %s", note.id, namespace, note.version, ids)
    return note


def _note_values(
    mem: MemoryContext, namespace: Namespace, content: str, fields: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    """The content hash and the fields of a new version with ``content``: checked, with the
    extracted fields filled in."""
    if not isinstance(content, str):
        raise InvalidInput(f"note content must be a string, got {type(content).__name__}")
    if not content.strip():
        raise EmptyContent("content")
    check_unicode(content, "content")
    reserved = sorted((_NOTE_RESERVED | _VERSION_SET) & set(fields))
    if reserved:
        raise InvalidInput(f"revise_note sets {', '.join(reserved)} itself; do not pass them")
    values = dict(fields)
    digest = content_hash("note", content)
    Note(namespace=namespace, content=content, content_hash=digest, **values)  # validate first
    missing = [f for f in _NOTE_EXTRACTED if f not in values]
    if missing:
        extracted = ops.note_fields(mem.llm, content, CallBudget(mem.config.max_llm_calls))
        values.setdefault("created_by", extracted.created_by)
        for name in missing:
            values[name] = getattr(extracted.value, name)
    values.setdefault("created_by", producer(mem.llm))
    return digest, values


__all__ = ["add_note", "revise_note"]
