"""Obsolescence: demote memories that keep failing, supersede replaced ones — never delete.

Why and how, in full: docs/design.md, "Module notes", ``graphmem.ops.obsolescence``.

>>> from graphmem import GraphMemory, HashingEmbedder
>>> from graphmem.stores.embedded import EmbeddedStore
>>> mem = GraphMemory(EmbeddedStore.in_memory(), embedder=HashingEmbedder(64))
>>> note = mem.add_note("demo", "The lift is on the left.")
>>> _ = mem.store.update_utility("demo", [note.id], 0.0, 0.9)
>>> [d.memory_id for d in demote(mem, "demo", config=ObsolescenceConfig(min_uses=1))] == [note.id]
True
>>> mem.get("demo", note.id).obsolete
True
>>> restore(mem, "demo", note.id).obsolete
False
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from graphmem.config import ObsolescenceConfig
from graphmem.errors import InvalidInput
from graphmem.models import (
    AnyMemory,
    Edge,
    EdgeKind,
    MemoryKind,
    Namespace,
    Note,
    Procedure,
    check_id,
    utcnow,
)

if TYPE_CHECKING:
    from graphmem.ops.context import MemoryContext
    from graphmem.stores.base import MemoryStore

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


def obsolescent(memory: AnyMemory, config: ObsolescenceConfig, below: float) -> bool:
    """True when ``memory`` is live, of a demotable kind, used enough and its Q below ``below``.

    ``below`` is ``config.threshold(...)`` for the memory's config. A Q that is not a number
    (an imported graph can hold anything) never demotes.
    """
    return (
        not memory.obsolete
        and memory.kind in config.kinds
        and memory.uses >= config.min_uses
        and memory.q < below
    )


def demotion_reason(memory: AnyMemory, below: float) -> str:
    return f"low utility: q {memory.q:.3f} < {below:g} after {memory.uses} uses"


def demote(
    mem: MemoryContext,
    namespace: Namespace,
    memory_ids: Sequence[str] | None = None,
    *,
    config: ObsolescenceConfig | None = None,
) -> list[Demotion]:
    """Demote the obsolescent memories among ``memory_ids`` (default: the whole namespace).

    Each is patched ``obsolete=True`` with its reason (logged at INFO); nothing is deleted and
    :func:`restore` undoes it. The threshold follows ``mem.config``'s Q0 and rewards
    (:meth:`ObsolescenceConfig.threshold`). ``config`` defaults to ``mem.config.obsolescence``
    (its ``enabled`` flag only governs the automatic call from ``update``; an explicit call
    always runs).

    The best live procedure of a task (its highest Q; the last one, if only one is left) is
    never demoted: demotion retires the alternatives that lost, and retiring the winner would
    leave retrieval nothing, or only worse, to return for that task, silently. Q is global, so
    a good procedure is also charged for failures of other tasks it was retrieved for; this
    keeps such a dragged-down winner. It is kept and a warning logged instead. "A task" is the
    procedures' task text (:func:`_task_key`).

    Notes get the same guard per subject (:func:`note_subject`: a ``subject:<name>`` tag): the
    best live note of a subject, and
    so the only one, is never demoted. A true fact is charged for failures it did not cause
    (the reward is the game's), and demoting it would delete what is known about its subject.
    Notes without a subject, tips and tasks have no such guard.
    """
    cfg = config if config is not None else mem.config.obsolescence
    below = cfg.threshold(mem.config)
    candidates: Iterable[AnyMemory]
    if memory_ids is None:
        candidates = mem.store.iter_nodes(namespace, kinds=list(cfg.kinds))
    else:
        if isinstance(memory_ids, str):
            raise InvalidInput("memory_ids is a sequence of ids, not one string")
        ids = list(dict.fromkeys(check_id(i) for i in memory_ids))
        candidates = mem.store.get_many(namespace, ids)
    chosen = [m for m in candidates if obsolescent(m, cfg, below)]
    out: list[Demotion] = []
    demoted: set[str] = set()
    for memory in chosen:
        reason = demotion_reason(memory, below)
        if isinstance(memory, Note) and memory.embedding is not None:
            subject = note_subject(memory)
            if subject is not None:
                rivals = _peers(mem, namespace, memory, memory.embedding, _subject_of, demoted)
                if _best({**rivals, memory.id: memory.q}) == memory.id:
                    log.warning(
                        "not demoting note %s in ns=%s (%s): it is the %s live note of "
                        "subject %.80r",
                        memory.id,
                        namespace,
                        reason,
                        f"best of {len(rivals) + 1}" if rivals else "only",
                        subject,
                    )
                    continue
        if isinstance(memory, Procedure) and memory.embedding is not None:
            rivals = _peers(mem, namespace, memory, memory.embedding, _task_key, demoted)
            if _best({**rivals, memory.id: memory.q}) == memory.id:
                log.warning(
                    "not demoting %s %s in ns=%s (%s): it is the %s live procedure of task "
                    "%.80r; restore or add a better procedure for that task",
                    memory.kind,
                    memory.id,
                    namespace,
                    reason,
                    f"best of {len(rivals) + 1}" if rivals else "last",
                    memory.task_text,
                )
                continue
        mem.store.patch(namespace, memory.id, {"obsolete": True, "obsolete_reason": reason})
        demoted.add(memory.id)
        log.info("demoted %s %s in ns=%s: %s", memory.kind, memory.id, namespace, reason)
        out.append(
            Demotion(
                memory_id=memory.id, kind=memory.kind, q=memory.q, uses=memory.uses, reason=reason
            )
        )
    return out


def _task_key(memory: AnyMemory) -> str | None:
    """Which task a procedure is for: its task text, whitespace and case folded (corrections
    and both granularities of one build carry the same text); None for other memories."""
    if not isinstance(memory, Procedure):
        return None
    return " ".join(memory.task_text.split()).lower()


def _subject_of(memory: AnyMemory) -> str | None:
    """A note's subject (:func:`note_subject`); None for other memories."""
    return note_subject(memory) if isinstance(memory, Note) else None


_RIVALS = 50
"""How many of a memory's nearest memories of its kind are looked at for others of its key."""


def _peers(
    mem: MemoryContext,
    namespace: Namespace,
    memory: AnyMemory,
    vector: Sequence[float],
    key_of: Callable[[AnyMemory], str | None],
    demoted: set[str],
) -> dict[str, float]:
    """The other memories of ``memory``'s kind with its key (``key_of``: a procedure's task, a
    note's subject) that retrieval can return, with their Q.

    They read alike, so a recall by ``memory``'s embedding (``vector``) finds them first
    (obsolete ones skipped), then superseded ones and those just ``demoted`` are dropped.
    Missing one only keeps a memory that could have gone.
    """
    key = key_of(memory)
    recalled = mem.store.recall(namespace, vector, _RIVALS, kinds=[MemoryKind(memory.kind)])
    rivals = {
        r.memory.id: r.memory.q
        for r in recalled
        if r.memory.id != memory.id
        and r.memory.id not in demoted
        and key is not None
        and key_of(r.memory) == key
    }
    for gone in mem.store.superseded(namespace, list(rivals)) if rivals else ():
        rivals.pop(gone, None)
    return rivals


SUBJECT_TAG = "subject:"
"""Prefix of a note tag naming what the note is about (``subject:fry``)."""


def note_subject(note: Note) -> str | None:
    """What a note is about, for the demotion guard: its ``subject:`` tag, folded; None
    without one. The subject is said explicitly: a note's text (a first line such as
    ``"TODO:"``) never makes one.

    >>> note_subject(Note(namespace="n", content="fry means cook in stove", tags=["subject:Fry"]))
    'fry'
    >>> note_subject(Note(namespace="n", content="TODO:\\nbuy milk")) is None
    True
    """
    for tag in note.tags:
        if tag.startswith(SUBJECT_TAG) and tag[len(SUBJECT_TAG) :].strip():
            return " ".join(tag[len(SUBJECT_TAG) :].split()).lower()
    return None


def _best(task: dict[str, float]) -> str:
    """The id of the highest-Q procedure (ties: the smallest id, so the choice is stable);
    a Q that is not a number counts as lowest."""
    return min(task, key=lambda i: (-task[i] if task[i] == task[i] else math.inf, i))


def restore(mem: MemoryContext, namespace: Namespace, memory_id: str) -> AnyMemory:
    """Undo a demotion: the memory is live again (``obsolete=False``, no reason), exactly as
    before it was demoted; its Q and uses are untouched.

    Restoring a live memory changes nothing. A superseded memory is refused (InvalidInput):
    its replacement's SUPERSEDES edge would still hide it. A restored memory whose Q stays
    low is demoted again after its next use that leaves Q below the threshold.
    """
    return restore_in(mem.store, namespace, memory_id)


def restore_in(store: MemoryStore, namespace: Namespace, memory_id: str) -> AnyMemory:
    """:func:`restore` on a bare store (the CLI has no embedder to build a GraphMemory)."""
    check_id(memory_id)
    memory = store.get(namespace, memory_id)
    if not memory.obsolete:
        return memory
    by = store.superseded(namespace, [memory_id])
    if by or (memory.obsolete_reason or "").startswith(SUPERSEDED_BY):
        raise InvalidInput(
            f"memory {memory_id!r} was superseded ({memory.obsolete_reason}); restore only "
            "undoes a demotion"
        )
    restored = store.patch(namespace, memory_id, {"obsolete": False, "obsolete_reason": None})
    log.info(
        "restored %s %s in ns=%s (was: %s)",
        memory.kind,
        memory_id,
        namespace,
        memory.obsolete_reason,
    )
    return restored


def supersede(mem: MemoryContext, namespace: Namespace, new_id: str, old_id: str) -> Supersession:
    """Record that ``new_id`` replaces ``old_id``: a SUPERSEDES edge, the old one obsolete.

    One atomic write. Raises MemoryNotFound for an unknown id and InvalidInput when the two are
    the same memory, of different kinds, or the replacement is itself obsolete.
    """
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
    mem: MemoryContext, namespace: Namespace, memory_ids: Sequence[str]
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
    "SUBJECT_TAG",
    "SUPERSEDED_BY",
    "Demotion",
    "Supersession",
    "demote",
    "note_subject",
    "obsolescent",
    "restore",
    "restore_in",
    "supersede",
    "validate_replacements",
]
