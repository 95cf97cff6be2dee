"""Consolidation: look-alike memories become one versioned memory that learns faster.

Written only on the :class:`~graphmem.stores.base.MemoryStore` primitives, so every store has
the same semantics. Three rules (:class:`~graphmem.config.ConsolidationConfig`):

1. **Procedures of one task cluster whose steps match merge.** A cluster: live procedures of
   the same granularity and step count whose keys are at least ``task_similarity`` similar
   (update's corrections never merge: their reward is not their own). Their step chains
   (:func:`graphmem.ops.build.procedure_chain`) match under ``step_match``:

   - ``exact``: the same actions once folded (:func:`fold_action`: case, punctuation,
     articles and spacing ignored);
   - ``skeleton``: the same after a consistent renaming of object phrases
     (:func:`procedure_signature`). Each action is cut into its verb (the first word), the
     literal words that give it its shape (prepositions, particles, directions:
     :data:`LITERAL_WORDS`) and object phrases (every run of other words); each distinct
     object phrase is numbered in order of first appearance in the whole procedure. Two
     procedures match when these numbered templates are equal, i.e. one procedure becomes the
     other by a one-to-one renaming of objects: ``take red apple / slice red apple with
     knife`` ≡ ``take yellow potato / slice yellow potato with knife`` (``take <0> / slice
     <0> with <1>``), but not ``take red apple / slice yellow potato with knife``.

2. **Notes with the same subject and content merge**: the same subject
   (:func:`note_key`: the ``subject:`` tag, else the one subject of all its fact lines, else
   none) and the same content once folded (lines folded as actions are, without dropping
   articles, and sorted, so fact order does not matter).

3. **A note that contradicts a live, older note of the same subject becomes its new
   version**: ``(new)-[:SUPERSEDES]->(old)`` and ``(new)-[:EVOLVED_FROM]->(old)``, the new
   note's ``version`` one above, the old one obsolete (retrieval no longer returns it). The
   deterministic rule (:func:`contradiction`) reads fact lines ``<subject> <relation>
   <value>`` with a relation of :data:`RELATIONS`: the same subject and relation with another
   value, or the same fact negated ("X belongs in Y" / "X does not belong in Y"), contradict.
   Optionally (``llm_contradiction``) the chat model judges same-subject pairs the rule finds
   compatible, through the LLM-with-fallback pattern (no model or a failed one: compatible).
   The new note keeps its own utility: credit earned by a contradicted claim is not evidence
   for its contradiction.

**A merge** writes, in one atomic ``upsert``, a new version holding the representative's
content (the successful one first, then the highest Q, the most uses, the newest) with
``version`` one above the highest merged one, ``source="consolidate"``, an id fixed by the
merged ids (:func:`merged_id`: two consolidations racing over the same memories write the
same node), ``EVOLVED_FROM {at, change, source}`` and ``SUPERSEDES {at, source}`` edges to
each merged memory, and the merged memories marked obsolete (``"consolidated into <id>"``).
Nothing is deleted: the old versions keep every field, their RETRIEVED edges (so
``q_history`` of an old version still reads its credit) and their version history; the
new version gets the content edges (tasks' SOLVED_BY, tips' ABOUT, LINKS_TO) of all of them
and the structure (DISTILLED_FROM, FIRST_STEP) of the representative.

**Pooled evidence** (:func:`pooled_utility`): uses, successes and Q updates add; Q is what
``Q ← Q + α(R − Q)`` from Q0 gives after all the merged memories' rewards, each memory's
rewards taken as its Q implies them. A memory with ``n`` updates keeps weight
``(1 − α)^n`` on Q0, so its mean reward is ``m = (Q − (1 − α)^n·Q0) / (1 − (1 − α)^n)``;
the pool's mean reward is the uses-weighted ``μ = Σ n_i·m_i / N`` with ``N = Σ n_i``, and

    Q_merged = (1 − α)^N · Q0 + (1 − (1 − α)^N) · μ

(the same implied-reward reading as retrieval's ``pool`` prior). Merging memories that each
earned only the reward r gives exactly the Q of one memory credited N times with r; a memory
never credited adds nothing. μ is clipped to the reward range, so Q stays within it.

Consolidating twice changes nothing the second time (merged memories are obsolete, and the
new version has no look-alike left). Two consolidations at once never both retire the same
memory: each write is conditioned on what it read (``upsert(..., expect_live=...)``: every
merged or contradicted memory still live, with the Q updates read), checked in the store's
own transaction; the one that finds another writer got there first reads again and decides
again (:data:`CONFLICT_ATTEMPTS` times at most). So uses are counted exactly once, and a credit
that lands between the read and the write is pooled too (the write is retried over it).

>>> from graphmem import GraphMemory, HashingEmbedder
>>> from graphmem.stores.embedded import EmbeddedStore
>>> mem = GraphMemory(EmbeddedStore.in_memory(), embedder=HashingEmbedder(64))
>>> a = mem.build("demo", {"task": "make the salad", "success": True, "reward": 1.0,
...     "steps": [{"action": "take red apple"}, {"action": "slice red apple with knife"}]})
>>> b = mem.build("demo", {"task": "make the salad", "success": True, "reward": 1.0,
...     "steps": [{"action": "take yellow potato"}, {"action": "slice yellow potato with knife"}]})
>>> [len(m.merged_ids) for m in consolidate(mem, "demo").merges]
[2]
>>> consolidate(mem, "demo").merges
[]
"""

from __future__ import annotations

import hashlib
import logging
import math
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from graphmem.config import ConsolidationConfig, MemoryConfig
from graphmem.errors import InvalidInput, WriteConflict
from graphmem.llm.ops import with_fallback
from graphmem.llm.schemas import LLMOutput
from graphmem.llm.usage import CallBudget
from graphmem.models import (
    CORRECTION_SOURCE,
    AnyMemory,
    Edge,
    EdgeKind,
    MemoryKind,
    Namespace,
    Note,
    Procedure,
    check_id,
    memory_from_dict,
    utcnow,
)
from graphmem.ops.abstention import implied_mean
from graphmem.ops.obsolescence import SUPERSEDED_BY, note_subject

if TYPE_CHECKING:
    from graphmem.ops.context import MemoryContext

log = logging.getLogger(__name__)

CONSOLIDATE_SOURCE = "consolidate"
"""``source`` of the versions consolidation writes, and of its edges."""

CONSOLIDATED_INTO = "consolidated into "
"""Prefix of ``obsolete_reason`` of a merged memory (the new version's id follows)."""

CONFLICT_ATTEMPTS = 5
"""How often one memory's consolidation reads again after another writer changed what it read
(each conflict means someone else's write landed: progress, so a few suffice)."""

ARTICLES = frozenset({"a", "an", "the", "some"})
"""Words an action's template ignores."""

LITERAL_WORDS = frozenset(
    {
        # prepositions and particles: they give an action its shape
        "in", "into", "on", "onto", "from", "to", "with", "at", "for", "of", "by", "under",
        "inside", "off", "out", "up", "down", "over", "around", "through", "using", "and",
        # directions: a route is content, not an object to rename
        "north", "south", "east", "west", "northeast", "northwest", "southeast", "southwest",
    }
)  # fmt: skip
"""Words that stay as they are in a skeleton (everything else after the verb is an object)."""

RELATIONS: tuple[tuple[str, str, bool], ...] = (
    ("does not belong in", "belongs in", False),
    ("doesn't belong in", "belongs in", False),
    ("do not belong in", "belongs in", False),
    ("belongs in", "belongs in", True),
    ("belong in", "belongs in", True),
    ("belongs on", "belongs on", True),
    ("is not found in", "is found in", False),
    ("are not found in", "is found in", False),
    ("is found in", "is found in", True),
    ("are found in", "is found in", True),
    ("is not located in", "is located in", False),
    ("is located in", "is located in", True),
    ("are located in", "is located in", True),
    ("is kept in", "is kept in", True),
    ("are kept in", "is kept in", True),
    ("is stored in", "is stored in", True),
    ("are stored in", "is stored in", True),
    ("lives in", "lives in", True),
    ("live in", "lives in", True),
    ("works at", "works at", True),
    ("means", "means", True),
    ("is not in", "is in", False),
    ("are not in", "is in", False),
    ("is in", "is in", True),
    ("are in", "is in", True),
)
"""Relations a fact line is read with: (phrase, the relation it asserts, positive?). Each
asserted relation holds one value per subject; longer phrases are tried first."""

_FOLD = re.compile(r"[^\w\s'-]+")
_VERSIONED = (EdgeKind.RETRIEVED, EdgeKind.EVOLVED_FROM, EdgeKind.SUPERSEDES)
_STRUCTURE = (EdgeKind.DISTILLED_FROM, EdgeKind.FIRST_STEP, EdgeKind.NEXT)


class Merge(BaseModel):
    """Look-alikes merged into one new version."""

    kind: str
    new_id: str
    merged_ids: list[str] = Field(description="The memories it replaces (now obsolete).")
    representative_id: str = Field(description="The merged memory whose content it holds.")
    rule: str = Field(description="Why they matched: the step rule, or 'same subject and content'.")
    q: float
    q_updates: int
    uses: int
    successes: int


class Contradiction(BaseModel):
    """A note that contradicted an older live note of its subject and became its version."""

    new_id: str
    old_id: str
    reason: str
    created_by: str = Field(default="fallback", description="The rule ('fallback') or the model.")


class ConsolidationResult(BaseModel):
    """What one consolidation did."""

    merges: list[Merge] = Field(default_factory=list)
    contradictions: list[Contradiction] = Field(default_factory=list)

    def live_id(self, memory_id: str) -> str:
        """The id that holds ``memory_id``'s content now: its merged version's, else its own."""
        for merge in self.merges:
            if memory_id in merge.merged_ids:
                return self.live_id(merge.new_id)
        return memory_id

    def extend(self, other: ConsolidationResult) -> None:
        self.merges += other.merges
        self.contradictions += other.contradictions


# ---- the rules ------------------------------------------------------------------------------


def fold_text(text: str) -> str:
    """Case, punctuation (but hyphens and apostrophes) and spacing folded."""
    return " ".join(_FOLD.sub(" ", text.lower()).split())


def fold_action(action: str) -> str:
    """An action folded for ``exact`` matching: :func:`fold_text` without articles.

    >>> fold_action("Put the Red Apple  in the fridge.")
    'put red apple in fridge'
    """
    return " ".join(w for w in fold_text(action).split() if w not in ARTICLES)


def action_template(action: str) -> tuple[list[str], list[str]]:
    """An action cut into its template and its object phrases (the ``<>`` slots of the
    template are where the objects go, in order).

    >>> action_template("slice the red apple with a knife")
    (['slice', '<>', 'with', '<>'], ['red apple', 'knife'])
    """
    words = fold_action(action).split()
    template: list[str] = words[:1]
    objects: list[str] = []
    run: list[str] = []

    def flush() -> None:
        if run:
            template.append("<>")
            objects.append(" ".join(run))
            run.clear()

    for word in words[1:]:
        if word in LITERAL_WORDS:
            flush()
            template.append(word)
        else:
            run.append(word)
    flush()
    return template, objects


def skeleton(actions: Iterable[str]) -> tuple[str, ...]:
    """The actions with each distinct object phrase numbered in order of first appearance:
    equal for two action lists exactly when one becomes the other by a one-to-one renaming
    of objects.

    >>> skeleton(["take red apple", "slice red apple with knife"])
    ('take <0>', 'slice <0> with <1>')
    >>> skeleton(["take yellow potato", "slice yellow potato with knife"])
    ('take <0>', 'slice <0> with <1>')
    """
    numbers: dict[str, int] = {}
    out: list[str] = []
    for action in actions:
        template, objects = action_template(action)
        it = iter(objects)
        words = [
            f"<{numbers.setdefault(next(it), len(numbers))}>" if w == "<>" else w for w in template
        ]
        out.append(" ".join(words))
    return tuple(out)


def procedure_signature(
    mem: MemoryContext, namespace: Namespace, procedure: Procedure, step_match: str
) -> tuple[str, ...] | None:
    """What two procedures of one cluster must share to merge: their folded actions
    (``exact``) or their :func:`skeleton` (``skeleton``); None without steps."""
    from graphmem.ops.chains import procedure_chain

    steps, _ = procedure_chain(mem.store, namespace, procedure.id)
    if not steps:
        return None
    actions = [s.action for s in steps]
    return tuple(fold_action(a) for a in actions) if step_match == "exact" else skeleton(actions)


Fact = tuple[str, str, str, bool]
"""(subject, relation, value, positive)."""


def parse_fact(line: str) -> Fact | None:
    """A fact line read with :data:`RELATIONS`, or None.

    >>> parse_fact("Gray coat does not belong in the bath tub.")
    ('gray coat', 'belongs in', 'bath tub', False)
    """
    text = fold_action(line)
    for phrase, relation, positive in RELATIONS:
        head, sep, tail = f" {text} ".partition(f" {phrase} ")
        if sep and head.strip() and tail.strip():
            return head.strip(), relation, tail.strip(), positive
    return None


def note_facts(note: Note) -> list[Fact]:
    return [f for line in note.content.splitlines() if (f := parse_fact(line)) is not None]


def note_key(note: Note) -> str | None:
    """What a note is about: its ``subject:`` tag, else the one subject all its fact lines
    share, else None."""
    subject = note_subject(note)
    if subject is not None:
        return subject
    subjects = {f[0] for f in note_facts(note)}
    return subjects.pop() if len(subjects) == 1 else None


def note_content_key(note: Note) -> tuple[str | None, tuple[str, ...]]:
    """Subject and content folded: equal for notes that say the same of the same subject."""
    lines = sorted({fold_text(line) for line in note.content.splitlines()} - {""})
    return note_key(note), tuple(lines)


def contradiction(new: Note, old: Note) -> str | None:
    """Why ``new`` contradicts ``old`` by the deterministic rule, or None.

    >>> a = Note(namespace="n", content="gray coat belongs in wardrobe")
    >>> b = Note(namespace="n", content="gray coat belongs in bath tub")
    >>> contradiction(b, a)
    "'gray coat belongs in bath tub' contradicts 'gray coat belongs in wardrobe'"
    """
    olds = note_facts(old)
    for subject, relation, value, positive in note_facts(new):
        for o_subject, o_relation, o_value, o_positive in olds:
            if (subject, relation) != (o_subject, o_relation):
                continue
            clash = (positive and o_positive and value != o_value) or (
                positive != o_positive and value == o_value
            )
            if clash:
                said = _say(subject, relation, value, positive)
                return f"{said!r} contradicts {_say(o_subject, o_relation, o_value, o_positive)!r}"
    return None


def _say(subject: str, relation: str, value: str, positive: bool) -> str:
    if positive:
        return f"{subject} {relation} {value}"
    return f"{subject} not {relation} {value}"


class ContradictionVerdict(LLMOutput):
    """The chat model's judgement of two notes about one subject."""

    contradicts: bool = Field(description="True if both cannot hold at once.")
    reason: str = Field(default="", description="One short sentence.")


JUDGE_CONTRADICTION = (
    "You maintain an agent's long-term memory. Two notes are about the same subject. Decide "
    "whether they contradict each other: both cannot be true at the same time (the newer one "
    "then replaces the older). Notes that add detail, or say different compatible things, do "
    'not contradict. Reply with JSON: {"contradicts": true or false, "reason": "one sentence"}.'
)


def judge_contradiction(
    mem: MemoryContext, subject: str, new: Note, old: Note, cfg: ConsolidationConfig
) -> tuple[str | None, str]:
    """The chat model's verdict on a same-subject pair (reason or None, and who decided)."""
    user = f"Subject: {subject}\n\nOlder note:\n{old.content}\n\nNewer note:\n{new.content}"
    budget = CallBudget(cfg.max_llm_calls)
    verdict = with_fallback(
        mem.llm,
        "judge_contradiction",
        lambda m: m.structured(
            "judge_contradiction", JUDGE_CONTRADICTION, user, ContradictionVerdict, budget
        ),
        lambda: ContradictionVerdict(contradicts=False),
    )
    if not verdict.value.contradicts:
        return None, verdict.created_by
    return (verdict.value.reason.strip() or "the model judged them contradictory"), (
        verdict.created_by
    )


def pooled_utility(
    memories: Sequence[AnyMemory], config: MemoryConfig
) -> tuple[float, int, int, int]:
    """(Q, q_updates, uses, successes) of one memory holding the evidence of ``memories``
    (module docstring: Q as ``Q ← Q + α(R − Q)`` from Q0 gives it after all their rewards,
    each memory's rewards taken as its Q implies them; the counts add).

    >>> from graphmem.config import MemoryConfig
    >>> cfg = MemoryConfig(alpha=0.5, q0=0.5)
    >>> one = Note(namespace="n", content="x", q=0.75, q_updates=1, uses=1, successes=1)
    >>> pooled_utility([one, one], cfg)  # two rewards of 1 from 0.5 with α = 0.5
    (0.875, 2, 2, 2)
    """
    alpha, q0 = config.alpha, config.q0
    n_total = sum(m.q_updates for m in memories)
    uses = sum(m.uses for m in memories)
    successes = sum(m.successes for m in memories)
    if n_total == 0:
        return math.fsum(m.q for m in memories) / len(memories), 0, uses, successes
    weighted = [
        m.q_updates * mean
        for m in memories
        if (mean := implied_mean(m.q, m.q_updates, q0, alpha)) is not None
    ]
    mu = min(config.reward_max, max(config.reward_min, math.fsum(weighted) / n_total))
    kept = (1.0 - alpha) ** n_total
    q = kept * q0 + (1.0 - kept) * mu
    return min(config.reward_max, max(config.reward_min, q)), n_total, uses, successes


def merged_id(namespace: str, memory_ids: Iterable[str]) -> str:
    """The id of the version merging ``memory_ids``: fixed by them, so two consolidations of
    the same memories write one node, not two live copies."""
    digest = hashlib.sha256("\x1f".join([namespace, *sorted(set(memory_ids))]).encode())
    return "c" + digest.hexdigest()[:31]


# ---- writing --------------------------------------------------------------------------------


def _representative(memories: Sequence[AnyMemory]) -> AnyMemory:
    def rank(m: AnyMemory) -> tuple[bool, float, int, str, str]:
        success = isinstance(m, Procedure) and m.success
        return success, m.q, m.uses, m.created_at.isoformat(), m.id

    return max(memories, key=rank)


def merge(
    mem: MemoryContext, namespace: Namespace, memories: Sequence[AnyMemory], rule: str
) -> Merge | None:
    """Merge ``memories`` (live, one kind) into one new version; None when one of them is no
    longer live (another consolidation got there first). The write holds only if they are all
    still live with the Q updates read here: else WriteConflict, and nothing is written."""
    fresh = mem.store.get_many(namespace, [m.id for m in memories])
    if len(fresh) != len(memories) or any(m.obsolete for m in fresh):
        return None
    gone = mem.store.superseded(namespace, [m.id for m in fresh])
    if gone:
        return None
    ids = [m.id for m in fresh]
    rep = _representative(fresh)
    q, n, uses, successes = pooled_utility(fresh, mem.config)
    now = utcnow()
    new_id = merged_id(namespace, ids)
    data: dict[str, Any] = rep.model_dump()
    data.update(
        {
            "id": new_id,
            "version": max(m.version for m in fresh) + 1,
            "created_at": now,
            "updated_at": now,
            "source": CONSOLIDATE_SOURCE,
            "source_ref": rep.id,
            "obsolete": False,
            "obsolete_reason": None,
            "q": q,
            "q_updates": n,
            "uses": uses,
            "successes": successes,
        }
    )
    new = memory_from_dict(data)
    reason = f"{CONSOLIDATED_INTO}{new_id}"
    retired = [
        m.model_copy(update={"obsolete": True, "obsolete_reason": reason, "updated_at": now})
        for m in fresh
    ]
    change = f"consolidated {len(ids)} look-alikes ({rule}); content of {rep.id}"
    at = now.isoformat()
    edges: list[Edge] = []
    for m in fresh:
        edges.append(
            Edge(
                namespace=namespace,
                kind=EdgeKind.EVOLVED_FROM,
                src=new_id,
                dst=m.id,
                props={"at": at, "change": change, "source": CONSOLIDATE_SOURCE},
            )
        )
        edges.append(
            Edge(
                namespace=namespace,
                kind=EdgeKind.SUPERSEDES,
                src=new_id,
                dst=m.id,
                props={"at": at, "source": CONSOLIDATE_SOURCE},
            )
        )
    edges += _carried(mem, namespace, ids, rep.id, new_id)
    from graphmem.ops.evolve import dedupe_edges

    mem.store.upsert([*retired, new], dedupe_edges(edges), expect_live=fresh)
    log.info(
        "consolidated %d %ss in ns=%s into %s (v%d, q %.3f, %d uses): %s",
        len(ids),
        rep.kind,
        namespace,
        new_id,
        new.version,
        q,
        uses,
        rule,
    )
    return Merge(
        kind=rep.kind,
        new_id=new_id,
        merged_ids=ids,
        representative_id=rep.id,
        rule=rule,
        q=q,
        q_updates=n,
        uses=uses,
        successes=successes,
    )


def _carried(
    mem: MemoryContext, namespace: Namespace, ids: Sequence[str], rep_id: str, new_id: str
) -> list[Edge]:
    """The merged memories' content edges, re-drawn on the new version: incoming SOLVED_BY,
    ABOUT and both ways LINKS_TO of all of them; the representative's structure
    (DISTILLED_FROM, FIRST_STEP). RETRIEVED, EVOLVED_FROM and SUPERSEDES stay (history)."""
    renamed = dict.fromkeys(ids, new_id)
    out: list[Edge] = []
    for old_id in ids:
        for edge in mem.store.edges(namespace, old_id, direction="both"):
            if edge.kind in _VERSIONED:
                continue
            if edge.kind is EdgeKind.ABOUT and edge.dst != old_id:
                continue
            if edge.kind in _STRUCTURE and edge.src == old_id and old_id != rep_id:
                continue
            src, dst = renamed.get(edge.src, edge.src), renamed.get(edge.dst, edge.dst)
            if src == dst:
                continue
            out.append(
                Edge(namespace=namespace, kind=edge.kind, src=src, dst=dst, props=dict(edge.props))
            )
    return out


def supersede_contradicted(
    mem: MemoryContext, namespace: Namespace, new: Note, found: Sequence[Contradiction]
) -> None:
    """``new`` becomes the new version of each note it contradicts: one atomic write, which
    holds only if ``new`` and each of them are still live as read (else WriteConflict)."""
    olds = mem.store.get_many(namespace, [c.old_id for c in found])
    now = utcnow()
    at = now.isoformat()
    version = max([new.version - 1, *(o.version for o in olds)]) + 1
    updated = new.model_copy(update={"version": version, "updated_at": now})
    by_id = {c.old_id: c for c in found}
    retired = [
        o.model_copy(
            update={
                "obsolete": True,
                "obsolete_reason": f"{SUPERSEDED_BY}{new.id} (contradicted)",
                "updated_at": now,
            }
        )
        for o in olds
    ]
    edges: list[Edge] = []
    for o in olds:
        why = by_id[o.id].reason
        edges.append(
            Edge(
                namespace=namespace,
                kind=EdgeKind.SUPERSEDES,
                src=new.id,
                dst=o.id,
                props={"at": at, "source": CONSOLIDATE_SOURCE, "reason": why},
            )
        )
        edges.append(
            Edge(
                namespace=namespace,
                kind=EdgeKind.EVOLVED_FROM,
                src=new.id,
                dst=o.id,
                props={"at": at, "change": f"contradicts: {why}", "source": CONSOLIDATE_SOURCE},
            )
        )
    # The store keeps every utility field as it is: the new note's own, the old ones'.
    mem.store.upsert([*retired, updated], edges, expect_live=[new, *olds])
    log.info("note %s in ns=%s supersedes contradicted %s", new.id, namespace, list(by_id))


# ---- finding look-alikes --------------------------------------------------------------------


def _live(
    mem: MemoryContext, namespace: Namespace, memories: Sequence[AnyMemory]
) -> list[AnyMemory]:
    """The live ones among ``memories`` (not obsolete, not superseded)."""
    alive = [m for m in memories if not m.obsolete]
    gone = mem.store.superseded(namespace, [m.id for m in alive]) if alive else set()
    return [m for m in alive if m.id not in gone]


def _near(
    mem: MemoryContext, namespace: Namespace, memory: AnyMemory, k: int, floor: float
) -> list[AnyMemory]:
    assert memory.embedding is not None
    recalled = mem.store.recall(
        namespace, memory.embedding, k + 1, kinds=[MemoryKind(memory.kind)], min_sim=floor
    )
    others = [r.memory for r in recalled if r.memory.id != memory.id]
    return _live(mem, namespace, others)


def _mergeable(memory: AnyMemory) -> bool:
    if memory.obsolete or memory.embedding is None:
        return False
    return isinstance(memory, Note) or (
        isinstance(memory, Procedure) and memory.source != CORRECTION_SOURCE
    )


def procedure_lookalikes(
    mem: MemoryContext, namespace: Namespace, procedure: Procedure, cfg: ConsolidationConfig
) -> list[AnyMemory]:
    """Live procedures of ``procedure``'s task cluster whose steps match its steps."""
    near = _near(mem, namespace, procedure, cfg.max_candidates, cfg.task_similarity)
    near = [
        p
        for p in near
        if isinstance(p, Procedure)
        and _mergeable(p)
        and p.granularity == procedure.granularity
        and p.n_steps == procedure.n_steps
    ]
    if not near:
        return []
    signature = procedure_signature(mem, namespace, procedure, cfg.step_match)
    if signature is None:
        return []
    return [
        p
        for p in near
        if isinstance(p, Procedure)
        and procedure_signature(mem, namespace, p, cfg.step_match) == signature
    ]


def note_lookalikes(
    mem: MemoryContext, namespace: Namespace, note: Note, cfg: ConsolidationConfig
) -> list[AnyMemory]:
    """Live notes with ``note``'s subject and content (folded)."""
    key = note_content_key(note)
    near = _near(mem, namespace, note, cfg.max_candidates, cfg.note_similarity)
    return [n for n in near if isinstance(n, Note) and note_content_key(n) == key]


def contradicted(
    mem: MemoryContext, namespace: Namespace, note: Note, cfg: ConsolidationConfig
) -> list[Contradiction]:
    """The live notes older than ``note``, of its subject, that it contradicts."""
    subject = note_key(note)
    if subject is None:
        return []
    near = _near(mem, namespace, note, cfg.max_candidates, cfg.note_similarity)
    out: list[Contradiction] = []
    for old in near:
        if not isinstance(old, Note) or note_key(old) != subject:
            continue
        if (old.created_at, old.id) >= (note.created_at, note.id):
            continue  # only a newer note replaces an older one
        reason = contradiction(note, old)
        by = "fallback"
        if reason is None and cfg.llm_contradiction and mem.llm is not None:
            reason, by = judge_contradiction(mem, subject, note, old, cfg)
        if reason is not None:
            out.append(Contradiction(new_id=note.id, old_id=old.id, reason=reason, created_by=by))
    return out


# ---- entry points ---------------------------------------------------------------------------


def consolidate_memory(
    mem: MemoryContext,
    namespace: Namespace,
    memory_id: str,
    *,
    config: ConsolidationConfig | None = None,
) -> ConsolidationResult:
    """Consolidate one memory just written with its look-alikes (the hook of ``build`` and
    ``add_note``): merge it with the live procedures of its cluster whose steps match, or the
    live notes of its subject and content; then, for a note, supersede the older live notes
    of its subject it contradicts. Kinds ``config.kinds`` leaves out are passed over.

    A write another writer made stale (:class:`~graphmem.errors.WriteConflict`) is decided
    again from a fresh read, from the merged version on once a merge is written."""
    check_id(memory_id)
    cfg = config if config is not None else mem.config.consolidation
    result = ConsolidationResult()
    target = memory_id
    for _ in range(CONFLICT_ATTEMPTS):
        try:
            _consolidate_one(mem, namespace, target, cfg, result)
            return result
        except WriteConflict as e:
            log.info("consolidating %s in ns=%s: %s; reading again", target, namespace, e)
            if result.merges:
                target = result.merges[-1].new_id
    log.warning(
        "consolidating %s in ns=%s: other writers kept changing it (%d tries); left for the "
        "next sweep",
        memory_id,
        namespace,
        CONFLICT_ATTEMPTS,
    )
    return result


def _consolidate_one(
    mem: MemoryContext,
    namespace: Namespace,
    memory_id: str,
    cfg: ConsolidationConfig,
    result: ConsolidationResult,
) -> None:
    """One try of :func:`consolidate_memory`, adding what it wrote to ``result``."""
    found = mem.store.get_many(namespace, [memory_id])
    if not found or not _mergeable(found[0]) or found[0].kind not in cfg.kinds:
        return
    memory = found[0]
    if _live(mem, namespace, [memory]) == []:
        return
    if isinstance(memory, Procedure):
        alike = procedure_lookalikes(mem, namespace, memory, cfg)
        rule = f"same task cluster, steps match ({cfg.step_match})"
    else:
        assert isinstance(memory, Note)
        alike = note_lookalikes(mem, namespace, memory, cfg)
        rule = "same subject and content"
    live: AnyMemory = memory
    if alike:
        merged = merge(mem, namespace, [memory, *alike], rule)
        if merged is not None:
            result.merges.append(merged)
            live = mem.store.get(namespace, merged.new_id)
    if isinstance(live, Note) and cfg.contradictions:
        found_c = contradicted(mem, namespace, live, cfg)
        if found_c:
            supersede_contradicted(mem, namespace, live, found_c)
            result.contradictions += found_c


def consolidate(
    mem: MemoryContext,
    namespace: Namespace,
    *,
    config: ConsolidationConfig | None = None,
) -> ConsolidationResult:
    """Sweep a namespace: every live procedure and note, oldest first, is consolidated as
    :func:`consolidate_memory` does (``config.enabled`` only governs the automatic hook; an
    explicit sweep always runs). Running it again changes nothing."""
    cfg = config if config is not None else mem.config.consolidation
    kinds = [k for k in (MemoryKind.PROCEDURE, MemoryKind.NOTE) if k in cfg.kinds]
    if not kinds:
        raise InvalidInput("consolidation.kinds names neither Procedure nor Note")
    result = ConsolidationResult()
    memories = [m for m in mem.store.iter_nodes(namespace, kinds=kinds) if _mergeable(m)]
    memories.sort(key=lambda m: (m.created_at, m.id))
    done: set[str] = set()
    for memory in memories:
        if memory.id in done:
            continue
        step = consolidate_memory(mem, namespace, memory.id, config=cfg)
        for m in step.merges:
            done.update(m.merged_ids)
        for c in step.contradictions:
            done.add(c.old_id)
        result.extend(step)
    return result


__all__ = [
    "CONSOLIDATED_INTO",
    "CONSOLIDATE_SOURCE",
    "ConsolidationResult",
    "Contradiction",
    "Merge",
    "action_template",
    "consolidate",
    "consolidate_memory",
    "contradiction",
    "merge",
    "merged_id",
    "note_key",
    "parse_fact",
    "pooled_utility",
    "procedure_signature",
    "skeleton",
]
