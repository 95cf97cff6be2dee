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

from graphmem.errors import InvalidInput
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
    content_hash,
)
from graphmem.ops.chains import procedure_chain as procedure_chain  # re-exported
from graphmem.ops.distill import distil, learn
from graphmem.ops.notes import _consolidated
from graphmem.ops.notes import add_note as add_note  # re-exported
from graphmem.ops.notes import revise_note as revise_note  # re-exported

if TYPE_CHECKING:
    from graphmem.ops.context import MemoryContext

log = logging.getLogger(__name__)

NEAR_DUPLICATE_CANDIDATES = 5
"""How many recalled procedures are checked against the near-duplicate threshold."""

NEAR_DUPLICATE = "near-duplicate"

_E = TypeVar("_E", Granularity, KeyMode)


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
