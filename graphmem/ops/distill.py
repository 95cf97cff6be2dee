"""Distil: what an episode taught, as notes that outlive it (Zettelkasten notes beside procedures).

A procedure keeps *how* one task was done; the facts an episode met on the way — where a thing
belongs, what a verb needs, which action earned or cost reward — hold for other tasks too.
``build`` and ``update`` pass every trajectory to a *distiller*, which returns
:class:`Knowledge`: a subject and the facts learned about it. Each subject has one live note,
``Facts about <subject>:`` followed by its facts, one a line:

- a subject seen for the first time gets a new note (tags ``distilled`` and ``subject:<s>``),
  linked (``LINKS_TO``, reason ``distilled``) to the procedure the episode was built into;
- a subject with a live note whose facts this episode changed gets a **new version** of it
  (:func:`graphmem.ops.build.revise_note`: ``EVOLVED_FROM``, version + 1, the old one kept and
  obsolete, its utility carried), never a second note;
- the note's ``data`` keeps the evidence: how many episodes taught each fact, and how often a
  fact was contradicted (a fact an episode retracts leaves the note; its count stays).

Distillers, first that applies: the one given to :class:`graphmem.GraphMemory`
(``distiller=``, any ``(Trajectory) -> Iterable[Knowledge]``, e.g. a domain's own fact
extractor); else the LLM layer (A-MEM-style note construction) with the deterministic rule of
:func:`graphmem.llm.fallbacks.knowledge` as its fallback: an action whose step earned reward
(``TrajectoryStep.reward`` > 0) is a fact about the thing it acted on, one that cost reward the
opposite. ``MemoryConfig.distill.enabled=False`` turns it off.

>>> from graphmem import GraphMemory, HashingEmbedder
>>> from graphmem.stores.embedded import EmbeddedStore
>>> mem = GraphMemory(EmbeddedStore.in_memory(), embedder=HashingEmbedder(64))
>>> built = mem.build("demo", {"task": "tidy the kitchen", "reward": 1.0, "success": True,
...     "steps": [{"action": "put red apple in fridge", "reward": 1.0}]})
>>> [n.content for n in built.notes]
['Facts about red apple:\\nput red apple in fridge: earned reward']
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import Field, field_validator

from graphmem.errors import InvalidInput
from graphmem.llm import ops
from graphmem.llm.usage import CallBudget
from graphmem.models import (
    Edge,
    EdgeKind,
    GraphmemModel,
    MemoryKind,
    Namespace,
    Note,
    Trajectory,
    check_unicode,
)
from graphmem.ops.obsolescence import SUBJECT_TAG

if TYPE_CHECKING:
    from graphmem.ops.context import MemoryContext

log = logging.getLogger(__name__)

FACTS_ABOUT = "Facts about"
"""First words of a distilled note: ``Facts about <subject>:``."""

DISTILLED_TAG = "distilled"
"""Tag of every note a distiller wrote."""

DISTILLED_LINK = "distilled"
"""``reason`` of the LINKS_TO edge from a distilled note to the procedure it came from."""

_SUBJECT_CANDIDATES = 10
"""Notes recalled by a subject's header to find its live note."""


class Knowledge(GraphmemModel):
    """What one episode taught about one subject."""

    subject: str = Field(description="What the facts are about (an item, a place, a verb).")
    facts: list[str] = Field(default_factory=list, description="Facts learned, one a line.")
    retracts: list[str] = Field(
        default_factory=list, description="Facts the episode showed wrong (they leave the note)."
    )
    tags: list[str] = Field(default_factory=list, description="Extra tags for the note.")

    @field_validator("subject")
    @classmethod
    def _subject(cls, v: str) -> str:
        v = " ".join(v.split())
        if not v:
            raise InvalidInput("a knowledge item needs a non-empty subject")
        if len(v) > 200:
            raise InvalidInput(f"a knowledge subject is at most 200 characters, got {len(v)}")
        check_unicode(v, "a knowledge subject")
        return v

    @field_validator("facts", "retracts")
    @classmethod
    def _lines(cls, v: list[str]) -> list[str]:
        for fact in v:  # refused here, before build writes anything, not when the note is
            check_unicode(fact, "a knowledge fact")
        return list(dict.fromkeys(" ".join(f.split()) for f in v if f and f.strip()))


Distiller = Callable[[Trajectory], Iterable[Knowledge]]
"""A domain's own distiller: the knowledge one trajectory holds."""


HOOK = "distiller"
"""``created_by`` of notes a :class:`GraphMemory`'s own distiller wrote."""


def distil(
    mem: MemoryContext, traj: Trajectory, budget: CallBudget | None = None
) -> tuple[list[Knowledge], str]:
    """The knowledge ``traj`` holds, from the memory's distiller, else the LLM layer (with its
    deterministic fallback); one item per subject, in order of first appearance; and who
    produced it (``created_by``)."""
    hook: Distiller | None = getattr(mem, "distiller", None)
    by = HOOK
    if hook is not None:
        items = list(hook(traj))
        for item in items:
            if not isinstance(item, Knowledge):
                raise InvalidInput(
                    f"a distiller returns Knowledge items, got {type(item).__name__}"
                )
    else:
        produced = ops.distill_knowledge(mem.llm, traj.task, traj.steps, traj.success, budget)
        by = produced.created_by
        items = [
            Knowledge(subject=k.subject, facts=k.facts, retracts=k.retracts)
            for k in produced.value.notes
        ]
    return _by_subject(items, mem.config.distill.max_subjects), by


def _by_subject(items: Sequence[Knowledge], limit: int) -> list[Knowledge]:
    """Items of one subject (folded) merged, at most ``limit`` subjects."""
    merged: dict[str, Knowledge] = {}
    for item in items:
        key = item.subject.casefold()
        if key in merged:
            old = merged[key]
            merged[key] = Knowledge(
                subject=old.subject,
                facts=[*old.facts, *item.facts],
                retracts=[*old.retracts, *item.retracts],
                tags=list(dict.fromkeys([*old.tags, *item.tags])),
            )
        elif len(merged) < limit:
            merged[key] = item
    return [k for k in merged.values() if k.facts or k.retracts]


def header(subject: str) -> str:
    """A distilled note's first line."""
    return f"{FACTS_ABOUT} {subject}:"


def note_facts(note: Note) -> list[str]:
    """The fact lines of a distilled note (every line after the header)."""
    return [line.strip() for line in note.content.splitlines()[1:] if line.strip()]


def subject_notes(mem: MemoryContext, namespace: Namespace, subject: str) -> list[Note]:
    """The live notes holding ``subject``'s facts, newest version first (one, unless an older
    release or a concurrent writer left two: the next revision merges them)."""
    first = header(subject)
    vector = mem.embed(first, namespace=namespace)
    found = mem.store.recall(namespace, vector, _SUBJECT_CANDIDATES, kinds=[MemoryKind.NOTE])
    notes = [
        r.memory
        for r in found
        if isinstance(r.memory, Note)
        and not r.memory.obsolete
        and r.memory.content.split("\n", 1)[0] == first
    ]
    return sorted(notes, key=lambda n: (-n.version, -n.uses, n.created_at, n.id))


def learn(
    mem: MemoryContext,
    namespace: Namespace,
    items: Sequence[Knowledge],
    *,
    source_ref: str | None = None,
    procedure_id: str | None = None,
    created_by: str = HOOK,
) -> list[Note]:
    """Merge ``items`` into their subjects' live notes (module doc); returns the notes written,
    in the order of ``items``: new notes and new versions (a note that only gained evidence is
    not among them: nothing a reader or evolution sees changed). A note's keywords and context
    come from the offline rules (no model call per note): the facts are the model's or the
    distiller's, ``created_by`` says whose."""
    from graphmem.llm import fallbacks
    from graphmem.ops.notes import add_note, revise_note

    out: list[Note] = []
    for item in items:
        older = subject_notes(mem, namespace, item.subject)
        known = list(dict.fromkeys(f for n in older for f in note_facts(n)))
        retracted = set(item.retracts) - set(item.facts)
        merged = sorted({*item.facts, *(f for f in known if f not in retracted)})
        evidence = _evidence(older, item, retracted & set(known))
        tags = list(dict.fromkeys([DISTILLED_TAG, SUBJECT_TAG + item.subject, *item.tags]))
        if not merged:  # every fact it held was retracted: the note stays as it was
            continue
        content = "\n".join([header(item.subject), *merged])
        data = json.dumps(evidence, sort_keys=True)
        fields: dict[str, Any] = {
            "tags": tags,
            "data": data,
            "keywords": fallbacks.note_fields(content).keywords,
            "context": f"What episodes taught about {item.subject}.",
            "category": "fact",
            "source": "distill",
            "source_ref": source_ref,
            "created_by": created_by,
        }
        if not older:
            note = add_note(mem, namespace, content, **fields)
        elif len(older) == 1 and set(merged) == set(known):
            mem.store.patch(namespace, older[0].id, {"data": data})  # evidence only
            continue
        else:
            added = sorted(set(merged) - set(known))
            dropped = sorted(set(known) - set(merged))
            change = "; ".join(
                [
                    *([f"learned {', '.join(added)}"] if added else []),
                    *([f"contradicted {', '.join(dropped)}"] if dropped else []),
                    *([f"merged {len(older)} notes"] if len(older) > 1 else []),
                ]
            )
            note = revise_note(
                mem,
                namespace,
                [n.id for n in older],
                content,
                change=f"distilled: {change or 'evidence'}",
                **fields,
            )
        if procedure_id is not None and not note.obsolete:
            mem.store.upsert(
                [],
                [
                    Edge(
                        namespace=namespace,
                        kind=EdgeKind.LINKS_TO,
                        src=note.id,
                        dst=procedure_id,
                        props={"reason": DISTILLED_LINK, "source": "distill"},
                    )
                ],
            )
        out.append(note)
    return out


def evidence(note: Note) -> dict[str, Any]:
    """A distilled note's evidence: ``episodes`` (how many taught it), ``support`` (episodes
    per fact), ``contradicted`` (retractions per fact); empty for other notes."""
    if note.data is None:
        return {}
    try:
        value = json.loads(note.data)
    except ValueError:
        return {}
    return value if isinstance(value, dict) and "support" in value else {}


def _evidence(older: Sequence[Note], item: Knowledge, retracted: set[str]) -> dict[str, Any]:
    support: dict[str, int] = {}
    contradicted: dict[str, int] = {}
    episodes = 0
    for note in older:
        ev = evidence(note)
        episodes = max(episodes, int(ev.get("episodes", 0)))
        for fact, n in dict(ev.get("support", {})).items():
            support[fact] = max(support.get(fact, 0), int(n))
        for fact, n in dict(ev.get("contradicted", {})).items():
            contradicted[fact] = max(contradicted.get(fact, 0), int(n))
    for fact in item.facts:
        support[fact] = support.get(fact, 0) + 1
    for fact in retracted:
        contradicted[fact] = contradicted.get(fact, 0) + 1
    return {
        "subject": item.subject,
        "episodes": episodes + 1,
        "support": support,
        "contradicted": contradicted,
    }


def distil_and_learn(
    mem: MemoryContext,
    namespace: Namespace,
    traj: Trajectory,
    *,
    source_ref: str | None,
    procedure_id: str | None,
    budget: CallBudget | None = None,
) -> list[Note]:
    """:func:`distil` then :func:`learn`: the notes ``traj`` taught ([] when distillation is
    off or it taught nothing)."""
    if not mem.config.distill.enabled or not traj.steps:
        return []
    items, by = distil(mem, traj, budget)
    if not items:
        return []
    notes = learn(
        mem, namespace, items, source_ref=source_ref, procedure_id=procedure_id, created_by=by
    )
    log.debug("distil ns=%s: %d subjects, %d notes", namespace, len(items), len(notes))
    return notes


__all__ = [
    "DISTILLED_TAG",
    "FACTS_ABOUT",
    "Distiller",
    "Knowledge",
    "distil",
    "distil_and_learn",
    "evidence",
    "header",
    "learn",
    "note_facts",
    "subject_notes",
]
