"""Fact updates: a newer note about the same thing ranks above the older one it updates.

Why and how, in full: docs/design.md §2.2.5 (and "Module notes", ``graphmem.ops.fact_updates``).

People restate facts as they change ("Ana lives in Porto." in March, "Ana moved to Lisbon last
month." in June). Both notes stay: the older one still answers "where did Ana live before?".
But a question about the present must see the newer one first, and similarity alone ranks the
two by wording, not by time. So when a note is written (``add_note``, ``add_notes``), the older
notes it updates are found and marked, and retrieval orders by it:

- **Detection (offline).** Two notes are statements of the same fact when both are short
  (``FactUpdatesConfig.max_words``), they share a subject — a name both capitalise, or both
  speak in the first person ("I", "my", "we") — and their similarity is at least
  ``min_similarity`` and within ``margin`` of the most similar note that shares the subject
  (two facts about Ana, her town and her job, are less alike than two versions of her town).
  Similarity alone cannot tell: versions of one fact are 0.50-0.65 alike under MiniLM, facts of
  different people up to 0.79. The later-stated one (``valid_at``, else ``created_at``) updates
  the earlier, whichever was written first, so a history imported out of order is read right.
  An evolution with a chat model may judge it too (``LinkChoice.updates``).
- **Marking.** ``(newer)-[:UPDATES {at, sim, subject, source}]->(older)`` and
  ``older.updated_by = newer.id`` — the most similar newer note when several update it; a chain
  (v1 → v2 → v3) is followed to its newest live version. Nothing is hidden: unlike SUPERSEDES,
  an updated note is still recalled.
- **Ranking** (:func:`newer_first`). Each retrieved note updated by another is placed right
  below its newest live version; that version moves up to just above it, or is pulled in when
  recall missed it (``Hit.newer_than`` says which hit it was placed above).

>>> from graphmem import GraphMemory, HashingEmbedder
>>> from graphmem.stores.embedded import EmbeddedStore
>>> mem = GraphMemory(EmbeddedStore.in_memory(), embedder=HashingEmbedder(64))
>>> old = mem.add_note("demo", "Ana lives in Porto.", valid_at="2024-03-01")
>>> new = mem.add_note("demo", "Ana lives in Lisbon now.", valid_at="2024-06-01")
>>> mem.get("demo", old.id).updated_by == new.id
True
>>> sorted(subjects("Ana's flat is in Porto. My sister lives there."))
['<speaker>', 'ana']
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from graphmem.config import FactUpdatesConfig
from graphmem.keywords import STOP_WORDS
from graphmem.models import (
    EVOLVED_INTO,
    AnyMemory,
    Edge,
    EdgeKind,
    Hit,
    MemoryKind,
    Namespace,
    Note,
    utcnow,
)
from graphmem.ops.similarity import cosine
from graphmem.stores.base import read_each

if TYPE_CHECKING:
    from graphmem.ops.context import MemoryContext
    from graphmem.stores.base import MemoryStore, Recall

log = logging.getLogger(__name__)

SPEAKER = "<speaker>"
"""The subject of a first-person statement: in one namespace, the same person."""

OWN_VERSIONS = frozenset({"distill", "revise", "evolve", "consolidate"})
"""Note sources whose versions graphmem keeps itself (EVOLVED_FROM, SUPERSEDES): not looked at."""

MAX_CHAIN = 8
"""Updates followed from a retrieved note towards its newest version (reads, at most)."""

_NOW = timedelta(seconds=5)
"""A ``valid_at`` this close to the time of writing is "now" (add_note's default)."""

_WORD = re.compile(r"[^\W\d_][\w'’-]*")
_SENTENCE = re.compile(r"[.!?;:\n]+(?:\s|$)")
_FIRST_PERSON_TEXT = "i me my mine myself i'm i've i'd i'll im ive we us our ours we're we've"
_FIRST_PERSON = frozenset(_FIRST_PERSON_TEXT.split())
_POSSESSIVE = ("'s", "’s", "'", "’")
_NOT_NAMES_TEXT = """
    today yesterday tomorrow tonight lately recently finally also actually well oh yeah hi
    hello hey thanks thank sure last next still anyway btw monday tuesday wednesday thursday
    friday saturday sunday january february march april june july august september october
    november december morning evening"""
_NOT_NAMES = frozenset(_NOT_NAMES_TEXT.split())
"""Capitalised words that start sentences or say when, not what a statement is about."""
_CHANGE_TEXT = """
    now nowadays currently current anymore instead since newly moved relocated settled changed
    switched replaced upgraded swapped started joined quit retired promoted hired sold became
    become renamed updated"""
_CHANGE_WORDS = frozenset(_CHANGE_TEXT.split())
_CHANGE_PHRASES = ("no longer", "these days", "not anymore", "any more")
_EVENT_TIMES = ("yesterday", "last night", "tonight", "this morning", "this afternoon", "other day")
"""A "new" thing on a day ("a new recipe yesterday") is an event, not a changed fact."""


def subjects(text: str) -> set[str]:
    """Who or what ``text`` states facts about, as far as rules can tell: in each sentence, the
    first word that is a first-person pronoun (:data:`SPEAKER`) or a capitalised word that is
    not a common one (a name: "Ana", "Porto"), lower-cased. Only the first: in "Ana moved to
    Porto" the fact is Ana's, and Porto is its value, which other people's facts may share. Two
    notes that share no subject are never two versions of one fact."""
    out: set[str] = set()
    for sentence in _SENTENCE.split(text):
        for word in _WORD.findall(sentence):
            lower = word.lower()
            if lower in _FIRST_PERSON:
                out.add(SPEAKER)
                break
            if not word[0].isupper():
                continue
            for tail in _POSSESSIVE:
                if lower.endswith(tail):
                    lower = lower[: -len(tail)]
                    break
            if len(lower) > 1 and lower not in STOP_WORDS and lower not in _NOT_NAMES:
                out.add(lower)
                break
    return out


def says_change(text: str) -> bool:
    """Whether ``text`` says that something changed or holds now ("moved to", "a new job",
    "no longer", "these days", ...): what a newer version of a fact says, where a second event
    of the same kind ("I watched a documentary about glaciers") does not."""
    lower = text.lower()
    words = set(_WORD.findall(lower))
    if words & _CHANGE_WORDS or any(p in lower for p in _CHANGE_PHRASES):
        return True
    return "new" in words and not any(t in lower for t in _EVENT_TIMES)


def stated_at(note: Note) -> datetime:
    """When the note's fact was stated: ``valid_at``, else when it was written."""
    return note.valid_at if note.valid_at is not None else note.created_at


def _may_pair(note: Note) -> bool:
    """Whether a just-written note can be one side of an update, before any read: the newer
    side says a change; a note stated before it was written (a history loaded with its
    dates) may be the older side of one written earlier. A note said now with no change in it
    is neither, and costs no recall."""
    stated_earlier = note.valid_at is not None and note.valid_at < note.created_at - _NOW
    return stated_earlier or says_change(note.content)


def _eligible(memory: AnyMemory, cfg: FactUpdatesConfig) -> bool:
    return (
        isinstance(memory, Note)
        and not memory.obsolete
        and memory.embedding is not None
        and len(memory.content.split()) <= cfg.max_words
    )


@dataclass(frozen=True)
class _Pair:
    newer: Note
    older: Note
    sim: float
    subject: str


def link_updates(mem: MemoryContext, namespace: Namespace, notes: Sequence[Note]) -> list[Edge]:
    """Find and mark the notes that ``notes`` (just written) update or are updated by; the
    UPDATES edges written. Off when ``mem.config.fact_updates.enabled`` is False; notes whose
    versions graphmem keeps itself (:data:`OWN_VERSIONS`) are passed over."""
    cfg = mem.config.fact_updates
    fresh = [
        n
        for n in notes
        if cfg.enabled
        and n.source not in OWN_VERSIONS
        and _eligible(n, cfg)
        and _may_pair(n)
        and subjects(n.content)
    ]
    if not fresh:
        return []
    found = _recall_each(mem.store, namespace, fresh, cfg)
    pairs: dict[tuple[str, str], _Pair] = {}
    for note, recalled in zip(fresh, found, strict=True):
        for pair in _pairs(note, recalled, cfg):
            pairs[(pair.newer.id, pair.older.id)] = pair
    return _write(mem, namespace, list(pairs.values()), "rules")


def judged_updates(
    mem: MemoryContext,
    namespace: Namespace,
    note: Note,
    judged: Sequence[tuple[AnyMemory, float, str]],
    by: str,
) -> list[Edge]:
    """Mark what a chat model judged (evolution's ``LinkChoice.newer_fact``): ``note`` and
    each ``(neighbour, sim, reason)`` state one fact at two times; the later-stated one
    (``note`` on a tie: it was said last) updates the other. The UPDATES edges written."""
    if not mem.config.fact_updates.enabled:
        return []
    pairs = []
    for other, sim, reason in judged:
        if not isinstance(other, Note) or other.id == note.id or other.obsolete:
            continue
        newer, older = (other, note) if stated_at(other) > stated_at(note) else (note, other)
        pairs.append(_Pair(newer=newer, older=older, sim=sim, subject=reason[:80]))
    return _write(mem, namespace, pairs, by)


def _write(
    mem: MemoryContext, namespace: Namespace, pairs: Sequence[_Pair], source: str
) -> list[Edge]:
    """An UPDATES edge for each pair, and each older note pointed at its most similar
    updater (:func:`mark`); the edges written."""
    if not pairs:
        return []
    now = utcnow().isoformat()
    edges = []
    best: dict[str, _Pair] = {}
    for p in pairs:
        props = {"at": now, "sim": round(p.sim, 4), "subject": p.subject, "source": source}
        edges.append(
            Edge(
                namespace=namespace,
                kind=EdgeKind.UPDATES,
                src=p.newer.id,
                dst=p.older.id,
                props=props,
            )
        )
        if p.older.id not in best or p.sim > best[p.older.id].sim:
            best[p.older.id] = p
    mark(mem.store, namespace, edges, {old: p.newer.id for old, p in best.items()})
    return edges


def mark(
    store: MemoryStore, namespace: Namespace, edges: Sequence[Edge], updater: dict[str, str]
) -> None:
    """Write UPDATES ``edges`` and point each older note at its updater (``updater``: older id
    → newer id), unless a more similar note already updates it. The edges go first: a crash
    between the two writes leaves an edge that ranks nothing, never a pointer without one."""
    store.upsert([], edges)
    sims = {(e.src, e.dst): float(e.props.get("sim") or 0.0) for e in edges}
    for older in store.get_many(namespace, list(updater)):
        newer = updater[older.id]
        if not isinstance(older, Note) or older.updated_by == newer:
            continue
        if older.updated_by is not None and _held_sim(store, namespace, older) >= sims.get(
            (newer, older.id), 0.0
        ):
            continue
        store.patch(namespace, older.id, {"updated_by": newer})
        log.info("note %s in ns=%s is updated by %s", older.id, namespace, newer)


def _held_sim(store: MemoryStore, namespace: Namespace, older: Note) -> float:
    """The similarity recorded on the UPDATES edge of ``older``'s current updater (-1: none)."""
    for edge in store.edges(namespace, older.id, kinds=[EdgeKind.UPDATES], direction="in"):
        if edge.src == older.updated_by:
            value = edge.props.get("sim")
            return float(value) if isinstance(value, int | float) else -1.0
    return -1.0


def _recall_each(
    store: MemoryStore, namespace: Namespace, notes: Sequence[Note], cfg: FactUpdatesConfig
) -> list[list[Recall]]:
    """Each note's nearest notes (itself among them), from several threads on a server
    (:func:`~graphmem.stores.base.read_each`)."""

    def near(note: Note) -> list[Recall]:
        assert note.embedding is not None
        return store.recall(
            namespace,
            note.embedding,
            cfg.neighbours + 1,
            kinds=[MemoryKind.NOTE],
            min_sim=cfg.min_similarity,
        )

    return read_each(store, near, notes)


def _pairs(note: Note, recalled: Sequence[Recall], cfg: FactUpdatesConfig) -> list[_Pair]:
    """The (newer, older) pairs of ``note`` and the recalled notes it shares a subject with,
    within ``cfg.margin`` of the most similar of them."""
    mine = subjects(note.content)
    when = stated_at(note)
    shared: list[tuple[Note, float, str]] = []
    for r in recalled:
        other = r.memory
        if other.id == note.id or r.superseded or not _eligible(other, cfg):
            continue
        assert isinstance(other, Note)
        common = mine & subjects(other.content)
        if common and stated_at(other) != when:
            shared.append((other, float(r.sim), min(common)))
    if not shared:
        return []
    top = max(sim for _, sim, _ in shared)
    out = []
    for other, sim, subject in shared:
        if sim < top - cfg.margin:
            continue
        newer, older = (note, other) if when > stated_at(other) else (other, note)
        if says_change(newer.content):
            out.append(_Pair(newer=newer, older=older, sim=sim, subject=subject))
    return out


# ---- retrieval ---------------------------------------------------------------------------


def newer_first(
    store: MemoryStore,
    namespace: Namespace,
    hits: Sequence[Hit],
    vector: Sequence[float],
    limit: int | None = None,
    margin: float | None = None,
) -> list[Hit]:
    """``hits`` with each updated note right below its newest live version (module doc): that
    version moves up, or joins when it was not among them (at most ``limit`` hits, default as
    many as given: the last give way). Hits that nothing updates keep their order. ``margin``:
    a newer version moves only when its similarity to the query is at least the updated hit's
    less this (None: always) — it must answer the query too."""
    if not any(isinstance(h.memory, Note) and h.memory.updated_by for h in hits):
        return list(hits)
    known: dict[str, AnyMemory] = {h.memory.id: h.memory for h in hits}
    _load_updaters(store, namespace, known)
    by_id = {h.memory.id: h for h in hits}
    out: list[Hit] = []
    placed: set[str] = set()

    def place(memory: AnyMemory, below: Hit | None) -> None:
        # Its newest version first (each in turn placed above what it updates), then itself.
        chain: list[AnyMemory] = [memory]
        while len(chain) <= MAX_CHAIN:
            up = _updater(chain[-1], known)
            if up is None or up.id in placed or any(m.id == up.id for m in chain):
                break
            if margin is not None and below is not None and _query_sim(up) < below.sim - margin:
                break
            chain.append(up)
        for i in range(len(chain) - 1, 0, -1):
            newer, older = chain[i], chain[i - 1]
            hit = by_id.get(newer.id) or _joined(newer, by_id.get(older.id) or below, vector)
            out.append(hit.model_copy(update={"newer_than": older.id}))
            placed.add(newer.id)
        if memory.id not in placed:
            out.append(by_id[memory.id])
            placed.add(memory.id)

    def _query_sim(memory: AnyMemory) -> float:
        hit = by_id.get(memory.id)
        if hit is not None:
            return hit.sim
        return cosine(vector, memory.embedding) if memory.embedding is not None else -1.0

    for hit in hits:
        if hit.memory.id not in placed:
            place(hit.memory, hit)
    keep = max(len(hits), limit or 0)
    return [h.model_copy(update={"rank": i}) for i, h in enumerate(out[:keep])]


def _updater(memory: AnyMemory, known: dict[str, AnyMemory]) -> Note | None:
    """The live note that updates ``memory`` (its updater's live version), None if none."""
    if not isinstance(memory, Note) or not memory.updated_by:
        return None
    target = _live(memory.updated_by, known)
    return target if isinstance(target, Note) and target.id != memory.id else None


def _replaced_by(memory: AnyMemory) -> str | None:
    """The id of the version that replaced an obsolete memory (it evolved, or was superseded);
    None for a live one, or one demoted with nothing in its place."""
    from graphmem.ops.obsolescence import SUPERSEDED_BY

    reason = (memory.obsolete_reason or "") if memory.obsolete else ""
    for prefix in (EVOLVED_INTO, SUPERSEDED_BY):
        if reason.startswith(prefix):
            return reason[len(prefix) :].strip()
    return None


def _live(memory_id: str, known: dict[str, AnyMemory]) -> AnyMemory | None:
    """``memory_id``'s memory, or the version that replaced it when it evolved or was
    superseded; None when gone or demoted."""
    seen: set[str] = set()
    memory = known.get(memory_id)
    while memory is not None and memory.obsolete and memory.id not in seen:
        seen.add(memory.id)
        replacement = _replaced_by(memory)
        if replacement is None:
            return None
        memory = known.get(replacement)
    return None if memory is None or memory.obsolete else memory


def _load_updaters(store: MemoryStore, namespace: Namespace, known: dict[str, AnyMemory]) -> None:
    """Read the updaters of the known notes (and their versions), a layer a read."""

    def wanted(m: AnyMemory) -> list[str]:
        ids = [m.updated_by] if isinstance(m, Note) and m.updated_by else []
        replacement = _replaced_by(m)
        return ids if replacement is None else [*ids, replacement]

    frontier = list(known.values())
    for _ in range(MAX_CHAIN):
        missing = list(dict.fromkeys(i for m in frontier for i in wanted(m) if i not in known))
        if not missing:
            return
        frontier = store.get_many(namespace, missing)
        known.update((m.id, m) for m in frontier)


def _joined(memory: AnyMemory, beside: Hit | None, vector: Sequence[float]) -> Hit:
    """A hit for a newer version recall did not bring: the score parts of the hit it joins
    above, its own similarity to the query."""
    sim = cosine(vector, memory.embedding) if memory.embedding is not None else 0.0
    if beside is None:
        return Hit(memory=memory, rank=0, sim=sim, q=memory.q, score=0.0)
    return beside.model_copy(
        update={
            "memory": memory,
            "sim": sim,
            "q": memory.q,
            "vector_rank": None,
            "text_rank": None,
            "expected": None,
            "withheld": None,
        }
    )


__all__ = [
    "OWN_VERSIONS",
    "SPEAKER",
    "judged_updates",
    "link_updates",
    "mark",
    "newer_first",
    "says_change",
    "stated_at",
    "subjects",
]
