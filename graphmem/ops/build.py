"""Build: turn a trajectory into procedural memory (Mem^p ``m = B(τ, r)``), and notes (A-MEM).

Why and how, in full: docs/design.md, "Module notes", ``graphmem.ops.build``.

>>> from graphmem import GraphMemory, HashingEmbedder
>>> from graphmem.stores.embedded import EmbeddedStore
>>> mem = GraphMemory(EmbeddedStore.in_memory(), embedder=HashingEmbedder(64))
>>> result = mem.build("demo", {"task": "heat the soup", "reward": 1.0, "success": True,
...     "steps": [{"action": "open fridge"}, {"action": "take soup"}, {"action": "use stove"}]})
>>> [p.granularity.value for p in result.procedures], len(result.steps)
(['proceduralized', 'trajectory'], 3)
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from itertools import pairwise
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, Field

from graphmem.errors import EmptyContent, InvalidInput
from graphmem.keywords import keyword_key
from graphmem.llm import ops
from graphmem.llm.ops import Produced, producer
from graphmem.llm.usage import CallBudget
from graphmem.models import (
    AnyMemory,
    Edge,
    EdgeKind,
    Granularity,
    KeyMode,
    MemoryKind,
    Namespace,
    Note,
    Procedure,
    Step,
    Task,
    Trajectory,
    check_id,
    check_unicode,
    content_hash,
    utcnow,
)
from graphmem.ops.chains import procedure_chain as procedure_chain  # re-exported
from graphmem.ops.distill import distil, learn

if TYPE_CHECKING:
    from graphmem.ops.context import MemoryContext

log = logging.getLogger(__name__)

NEAR_DUPLICATE_CANDIDATES = 5
"""How many recalled procedures are checked against the near-duplicate threshold."""

NEAR_DUPLICATE = "near-duplicate"

_E = TypeVar("_E", Granularity, KeyMode)

_NOTE_EXTRACTED = ("keywords", "tags", "context", "category")
_NOTE_RESERVED = frozenset({"namespace", "content", "kind", "embedding", "content_hash"})
_VERSION_SET = frozenset(
    {"id", "version", "q", "q_updates", "uses", "successes", "obsolete", "obsolete_reason"}
)
"""Fields :func:`revise_note` sets on a new version (identity, lineage, carried utility)."""


class BuildResult(BaseModel):
    """What one build wrote (or, when ``deduplicated``, what was already there)."""

    task: Task
    procedures: list[Procedure] = Field(
        description="The retrievable procedure first, then its DISTILLED_FROM trajectory if any."
    )
    steps: list[Step] = Field(description="The step chain in order.")
    edges: list[Edge]
    deduplicated: bool = Field(
        default=False, description="True if an identical trajectory was stored already."
    )
    notes: list[Note] = Field(
        default_factory=list,
        description="Notes distilled from the trajectory (graphmem.ops.distill): new notes, "
        "new versions, or notes that gained evidence.",
    )
    near_duplicates: list[str] = Field(
        default_factory=list, description="Procedures linked LINKS_TO as near-duplicates."
    )
    consolidated_into: str | None = Field(
        default=None,
        description="The version now holding the procedure when consolidation merged it with "
        "look-alikes (MemoryConfig.consolidation); None when it stands alone.",
    )

    @property
    def procedure(self) -> Procedure:
        """The retrievable procedure of this build."""
        return self.procedures[0]


def trajectory_hash(trajectory: Trajectory) -> str:
    """Content hash of the normalised task and steps (reward and metadata excluded)."""
    parts = [x for s in trajectory.steps for x in (s.thought, s.action, s.observation)]
    return content_hash("trajectory", trajectory.task, *parts)


def build(
    mem: MemoryContext,
    namespace: Namespace,
    trajectory: Trajectory | dict[str, Any],
    *,
    granularity: Granularity | str | None = None,
    key_mode: KeyMode | str | None = None,
) -> BuildResult:
    """Store ``trajectory`` as procedural memory at ``granularity`` with a ``key_mode`` key."""
    traj = _as_trajectory(trajectory)
    # The reward reaches prompts and the procedure's record: the range finish_episode holds.
    mem.config.check_reward(traj.reward)
    gran = _enum(Granularity, granularity, mem.config.granularity, "granularity")
    mode = _enum(KeyMode, key_mode, mem.config.key_mode, "key_mode")
    if not traj.steps:
        raise InvalidInput("a trajectory needs at least one step to build procedural memory")

    digest = trajectory_hash(traj)
    existing = mem.store.find_by_hash(namespace, MemoryKind.PROCEDURE, digest)
    if isinstance(existing, Procedure):
        log.info("build: identical trajectory already stored as %s", existing.id)
        return _existing(mem, namespace, existing)

    # Every model call happens here, before anything is written.
    budget = CallBudget(mem.config.max_llm_calls)
    keywords: Produced[list[str]] | None = None
    if mode is KeyMode.KEYWORDS:
        keywords = ops.task_keywords(mem.llm, traj.task, budget)
    script = None
    if gran is not Granularity.TRAJECTORY:
        script = ops.distill_script(mem.llm, traj.task, traj.steps, traj.success, budget)
    key = (keyword_key(keywords.value) if keywords else "") or traj.task
    knowledge, distilled_by = distil(mem, traj, budget) if mem.config.distill.enabled else ([], "")
    vector = mem.embed(key, namespace=namespace)

    verbatim = producer(mem.llm)
    key_by = [keywords] if keywords else []
    source_ref = _source_ref(traj, digest)
    common: dict[str, Any] = {
        "namespace": namespace,
        "source": "build",
        "source_ref": source_ref,
        "q": mem.config.q0,
    }
    proc_fields: dict[str, Any] = {
        **common,
        "task_text": traj.task,
        "key": key,
        "reward": traj.reward,
        "success": traj.success,
        "n_steps": len(traj.steps),
    }
    top = Procedure(
        **proc_fields,
        granularity=gran,
        script=script.value.text() if script else None,
        content_hash=digest,
        embedding=vector,
        created_by=_created_by(verbatim, *key_by, *([script] if script else [])),
    )
    procedures = [top]
    if gran is Granularity.PROCEDURALIZED:
        procedures.append(
            Procedure(
                **proc_fields,
                granularity=Granularity.TRAJECTORY,
                created_by=_created_by(verbatim, *key_by),
            )
        )
    chain_owner = procedures[-1]
    steps = [
        Step(
            **common,
            procedure_id=chain_owner.id,
            index=i,
            thought=s.thought,
            action=s.action,
            observation=s.observation,
            created_by=verbatim,
        )
        for i, s in enumerate(traj.steps)
    ]

    task, task_is_new = _task(mem, namespace, traj, key, mode, vector, common, key_by, verbatim)
    edges = _solved_by(namespace, task, procedures)
    if len(procedures) == 2:
        edges.append(_edge(namespace, EdgeKind.DISTILLED_FROM, top.id, procedures[1].id))
    edges.append(_edge(namespace, EdgeKind.FIRST_STEP, chain_owner.id, steps[0].id))
    edges += [_edge(namespace, EdgeKind.NEXT, a.id, b.id) for a, b in pairwise(steps)]

    near = mem.store.recall(
        namespace,
        vector,
        NEAR_DUPLICATE_CANDIDATES,
        kinds=[MemoryKind.PROCEDURE],
        min_sim=mem.config.dedupe_threshold,
    )
    for hit in near:
        edges.append(
            Edge(
                namespace=namespace,
                kind=EdgeKind.LINKS_TO,
                src=top.id,
                dst=hit.memory.id,
                props={"reason": NEAR_DUPLICATE, "strength": round(min(1.0, hit.sim), 6)},
            )
        )

    nodes: list[AnyMemory] = [*([task] if task_is_new else []), *procedures, *steps]
    mem.store.upsert(nodes, edges)
    log.debug("build: %s procedure %s with %d steps", gran.value, top.id, len(steps))
    consolidated = _consolidated(mem, namespace, top.id, MemoryKind.PROCEDURE)
    notes = learn(
        mem,
        namespace,
        knowledge,
        source_ref=source_ref,
        procedure_id=consolidated or top.id,
        created_by=distilled_by,
    )
    return BuildResult(
        task=task,
        procedures=procedures,
        steps=steps,
        edges=edges,
        near_duplicates=[h.memory.id for h in near],
        consolidated_into=consolidated,
        notes=notes,
    )


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
        live = mem.store.get(namespace, merged)
        assert isinstance(live, Note)
        return live
    if mem.config.consolidation.enabled:  # a contradiction may have raised its version
        again = mem.store.get(namespace, note.id)
        assert isinstance(again, Note)
        return again
    return note


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


# ---- helpers -------------------------------------------------------------------------------


def _as_trajectory(trajectory: Trajectory | dict[str, Any]) -> Trajectory:
    if isinstance(trajectory, Trajectory):
        return trajectory
    if isinstance(trajectory, dict):
        return Trajectory(**trajectory)
    raise InvalidInput(f"a trajectory is a Trajectory or a dict, got {type(trajectory).__name__}")


def _enum(cls: type[_E], value: _E | str | None, default: _E, what: str) -> _E:
    if value is None:
        return default
    try:
        return cls(value)
    except ValueError:
        choices = ", ".join(m.value for m in cls)
        raise InvalidInput(f"unknown {what} {value!r}; choose one of {choices}") from None


def _edge(namespace: Namespace, kind: EdgeKind, src: str, dst: str) -> Edge:
    return Edge(namespace=namespace, kind=kind, src=src, dst=dst)


def _created_by(verbatim: str, *produced: Produced[Any]) -> str:
    """'fallback' if any model-derived field fell back, else the model; verbatim if none."""
    if not produced:
        return verbatim
    for p in produced:
        if not p.by_model:
            return p.created_by
    return produced[0].created_by


def _source_ref(traj: Trajectory, digest: str) -> str:
    for name in ("source_ref", "episode_id", "id"):
        value = traj.metadata.get(name)
        if value is not None and str(value).strip():
            return str(value)
    return f"trajectory:{digest}"


def _task(
    mem: MemoryContext,
    namespace: Namespace,
    traj: Trajectory,
    key: str,
    mode: KeyMode,
    vector: list[float],
    common: dict[str, Any],
    key_by: list[Produced[list[str]]],
    verbatim: str,
) -> tuple[Task, bool]:
    """The Task node for this attempt: the existing one for the same task text, else a new one."""
    digest = content_hash("task", mode.value, traj.task)
    found = mem.store.find_by_hash(namespace, MemoryKind.TASK, digest)
    if isinstance(found, Task):
        return found, False
    task = Task(
        **common,
        text=traj.task,
        key=key,
        key_mode=mode,
        content_hash=digest,
        embedding=vector,
        created_by=_created_by(verbatim, *key_by),
    )
    return task, True


def _solved_by(namespace: Namespace, task: Task, procedures: Sequence[Procedure]) -> list[Edge]:
    """``(task)-[:SOLVED_BY {reward, success}]->(procedure)`` for each of ``procedures``."""
    return [
        Edge(
            namespace=namespace,
            kind=EdgeKind.SOLVED_BY,
            src=task.id,
            dst=p.id,
            props={"reward": p.reward, "success": p.success},
        )
        for p in procedures
    ]


def _existing(mem: MemoryContext, namespace: Namespace, proc: Procedure) -> BuildResult:
    """The memories of an earlier identical build, as a BuildResult."""
    store = mem.store
    procedures = [proc]
    edges = store.edges(namespace, proc.id, kinds=[EdgeKind.DISTILLED_FROM])
    procedures += [
        m for m in store.get_many(namespace, [e.dst for e in edges]) if isinstance(m, Procedure)
    ]
    steps, chain = procedure_chain(store, namespace, proc.id)
    solved: list[Edge] = []
    task: Task | None = None
    for p in procedures:
        for edge, other in store.neighbours(
            namespace, p.id, kinds=[EdgeKind.SOLVED_BY], direction="in"
        ):
            if isinstance(other, Task):
                solved.append(edge)
                task = task or other
    links = [
        e
        for e in store.edges(namespace, proc.id, kinds=[EdgeKind.LINKS_TO])
        if e.props.get("reason") == NEAR_DUPLICATE
    ]
    if task is None:
        # The task node was deleted explicitly; give the procedure a task again.
        task = Task(
            namespace=namespace,
            text=proc.task_text,
            key=proc.key,
            key_mode=KeyMode.QUERY if proc.key == proc.task_text else KeyMode.KEYWORDS,
            source="build",
            source_ref=proc.source_ref,
            created_by=proc.created_by,
            q=mem.config.q0,
            embedding=mem.embed(proc.key, namespace=namespace),
        )
        solved = _solved_by(namespace, task, procedures)
        store.upsert([task], solved)
    return BuildResult(
        task=task,
        procedures=procedures,
        steps=steps,
        edges=[*solved, *edges, *chain, *links],
        deduplicated=True,
        near_duplicates=[e.dst for e in links],
    )
