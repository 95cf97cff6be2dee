"""Update: the memory set after an episode, ``M(t+1) = U(M(t), E(t), τ_t)`` (Mem^p).

Why and how, in full: docs/design.md, "Module notes", ``graphmem.ops.update``.

>>> from graphmem import GraphMemory, HashingEmbedder
>>> from graphmem.stores.embedded import EmbeddedStore
>>> mem = GraphMemory(EmbeddedStore.in_memory(), embedder=HashingEmbedder(64))
>>> failed = {"task": "light the lamp", "success": False,
...           "steps": [{"action": "look"}, {"action": "press lamp"}]}
>>> out = mem.update("demo", failed, strategy="adjustment")
>>> out.built is None, out.tips[0].polarity.value
(True, 'avoid')
>>> mem.update("demo", failed, strategy="validation").skipped
'validation stores only successful trajectories'
"""

from __future__ import annotations

import logging
from itertools import pairwise
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from graphmem.config import UpdateStrategy
from graphmem.errors import InvalidInput
from graphmem.keywords import keyword_key
from graphmem.llm import ops
from graphmem.llm.ops import Produced, producer
from graphmem.llm.schemas import Reflection, Script
from graphmem.llm.usage import CallBudget
from graphmem.models import (
    CORRECTION_SOURCE,
    AnyMemory,
    Edge,
    EdgeKind,
    Episode,
    Granularity,
    KeyMode,
    MemoryKind,
    Namespace,
    Note,
    Procedure,
    Step,
    Task,
    Tip,
    TipPolarity,
    Trajectory,
    TrajectoryStep,
    check_id,
    content_hash,
    utcnow,
)
from graphmem.ops.build import BuildResult, build, procedure_chain, trajectory_hash
from graphmem.ops.distill import distil_and_learn
from graphmem.ops.episodes import credited_memory_ids
from graphmem.ops.obsolescence import Demotion, Supersession, demote, validate_replacements
from graphmem.ops.similarity import cosine

if TYPE_CHECKING:
    from graphmem.ops.context import MemoryContext

log = logging.getLogger(__name__)

VALIDATION_SKIP = "validation stores only successful trajectories"
NO_STEPS_SKIP = "the trajectory has no steps to build"


class Correction(BaseModel):
    """A corrected procedure written by adjustment, and what it corrects."""

    procedure: Procedure
    steps: list[Step]
    corrects: str = Field(description="Id of the failing procedure it EVOLVED_FROM.")
    change: str = Field(description="What changed (the EVOLVED_FROM edge's ``change``).")


class UpdateResult(BaseModel):
    """What one memory-set update did."""

    strategy: UpdateStrategy
    success: bool = Field(description="Whether the trajectory succeeded.")
    built: BuildResult | None = Field(default=None, description="The build, if one was made.")
    task: Task | None = Field(default=None, description="The Task a reflection is ABOUT.")
    reflection: Reflection | None = None
    reference_id: str | None = Field(
        default=None, description="The successful procedure the reflection compared against."
    )
    tips: list[Tip] = Field(default_factory=list)
    adjusted: list[Correction] = Field(default_factory=list)
    not_corrected: dict[str, str] = Field(
        default_factory=dict,
        description="Retrieved procedures given no corrected version, each with why.",
    )
    superseded: list[Supersession] = Field(default_factory=list)
    demoted: list[Demotion] = Field(
        default_factory=list,
        description="Memories demoted (each with its reason); GraphMemory.restore undoes one.",
    )
    skipped: str | None = Field(default=None, description="Why nothing was built or reflected.")
    notes: list[Note] = Field(
        default_factory=list,
        description="Notes distilled from the trajectory (graphmem.ops.distill), whether or "
        "not it was built: a failure teaches facts too.",
    )

    @property
    def adjusted_procedures(self) -> list[Procedure]:
        return [c.procedure for c in self.adjusted]

    @property
    def demoted_ids(self) -> list[str]:
        return [d.memory_id for d in self.demoted]


def update(
    mem: MemoryContext,
    namespace: Namespace,
    trajectory: Trajectory | dict[str, Any],
    *,
    strategy: UpdateStrategy | str = UpdateStrategy.ADJUSTMENT,
    episode_id: str | None = None,
) -> UpdateResult:
    """Update the memory set with ``trajectory`` under ``strategy``.

    ``episode_id`` names the episode the trajectory was played in: the memories its reward
    credits (every one it RETRIEVED, or, finished with ``credit="used"``, those it used) are
    what a reflection is about, what a success validates, and what demotion checks.
    """
    strat = _strategy(strategy)
    traj = _trajectory(trajectory)
    retrieved = _retrieved(mem, namespace, episode_id)
    result = UpdateResult(strategy=strat, success=traj.success)
    budget = CallBudget(mem.config.max_llm_calls)  # reflection and distillation share it

    if traj.success or strat is UpdateStrategy.VANILLA:
        if traj.steps:
            result.built = build(mem, namespace, traj)
        else:
            result.skipped = NO_STEPS_SKIP
    elif strat is UpdateStrategy.VALIDATION:
        result.skipped = VALIDATION_SKIP
    else:
        _adjust(mem, namespace, traj, retrieved, episode_id, result, budget)
    if result.built is not None:
        result.notes = result.built.notes
    elif traj.steps:  # not built: what the episode taught is still kept
        result.notes = distil_and_learn(
            mem,
            namespace,
            traj,
            source_ref=episode_id or _source_ref(traj),
            procedure_id=None,
            budget=budget,
        )

    used = [m.id for m in retrieved]
    if traj.success and used:
        result.superseded = validate_replacements(mem, namespace, used)
    if used and mem.config.obsolescence.enabled:
        result.demoted = demote(mem, namespace, used)
    log.info(
        "update ns=%s strategy=%s success=%s: built=%s tips=%d adjusted=%d demoted=%s",
        namespace,
        strat.value,
        traj.success,
        result.built is not None,
        len(result.tips),
        len(result.adjusted),
        result.demoted_ids or "none",
    )
    return result


# ---- adjustment ----------------------------------------------------------------------------


def _adjust(
    mem: MemoryContext,
    namespace: Namespace,
    traj: Trajectory,
    retrieved: list[AnyMemory],
    episode_id: str | None,
    result: UpdateResult,
    budget: CallBudget,
) -> None:
    """Reflect on a failed trajectory: a Tip, and corrected procedures (module docstring)."""
    cfg = mem.config.update
    procedures = [m for m in retrieved if isinstance(m, Procedure)]
    task, task_is_new = _task(mem, namespace, traj, procedures, budget)
    reference, reference_steps = _reference(mem, namespace, task)
    produced = ops.reflect(mem.llm, traj.task, traj.steps, reference_steps or None, budget)
    reflection = produced.value
    # Everything below is computed from what is in hand; the store is written once at the end.
    source_ref = episode_id or _source_ref(traj)
    nodes: list[AnyMemory] = [task] if task_is_new else []
    edges: list[Edge] = []

    tip, tip_is_new = _tip(mem, namespace, traj, reflection, produced, source_ref)
    if tip_is_new:
        nodes.append(tip)
    about: dict[str, Any] = {"source": "reflect"}
    if episode_id is not None:
        about["episode"] = episode_id
    if reflection.failed_step is not None:
        about["failed_step"] = reflection.failed_step
    for target in [task, *procedures[: cfg.max_tip_targets]]:
        edges.append(
            Edge(namespace=namespace, kind=EdgeKind.ABOUT, src=tip.id, dst=target.id, props=about)
        )

    corrections: list[Correction] = []
    for proc in procedures:
        if len(corrections) >= cfg.max_corrections:
            break
        planned = _corrected_steps(
            mem, namespace, proc, traj, reflection, produced, reference, reference_steps
        )
        if isinstance(planned, str):
            result.not_corrected[proc.id] = planned
            continue
        steps, success, reward, change = planned
        correction = _correction(
            mem, namespace, proc, steps, success, reward, change, tip, produced, source_ref
        )
        if isinstance(correction, str):
            result.not_corrected[proc.id] = correction
            continue
        corrections.append(correction)
        nodes += [correction.procedure, *correction.steps]
        edges += _correction_edges(namespace, correction, episode_id)

    mem.store.upsert(nodes, edges)
    result.task = task
    result.reflection = reflection
    result.reference_id = reference.id if reference is not None else None
    result.tips = [tip]
    result.adjusted = corrections
    log.debug(
        "adjustment ns=%s: tip %s (%s), %d corrections",
        namespace,
        tip.id,
        "new" if tip_is_new else "existing",
        len(corrections),
    )
    for proc_id, why in result.not_corrected.items():
        log.info("adjustment ns=%s: no corrected version of %s: %s", namespace, proc_id, why)


def _task(
    mem: MemoryContext,
    namespace: Namespace,
    traj: Trajectory,
    procedures: list[Procedure],
    budget: CallBudget,
) -> tuple[Task, bool]:
    """The Task the failed attempt is about, the one ``build`` keyed for this task text.

    First the task a retrieved procedure of this very task hangs off (SOLVED_BY), then the
    Task of this text under any key mode (the configured one first: ``build`` may have been
    given another ``key_mode``), else a new one keyed as ``build`` would key it by default.
    """
    text = _norm(traj.task)
    for proc in procedures:
        if _norm(proc.task_text) != text:
            continue
        for _, other in mem.store.neighbours(
            namespace, proc.id, kinds=[EdgeKind.SOLVED_BY], direction="in"
        ):
            if isinstance(other, Task) and _norm(other.text) == text:
                return other, False
    mode = mem.config.key_mode
    for each in [mode, *(m for m in KeyMode if m is not mode)]:
        digest = content_hash("task", each.value, traj.task)
        found = mem.store.find_by_hash(namespace, MemoryKind.TASK, digest)
        if isinstance(found, Task):
            return found, False
    digest = content_hash("task", mode.value, traj.task)
    created_by = producer(mem.llm)
    key = traj.task
    if mode is KeyMode.KEYWORDS:
        keywords = ops.task_keywords(mem.llm, traj.task, budget)
        key = keyword_key(keywords.value) or traj.task
        created_by = keywords.created_by
    task = Task(
        namespace=namespace,
        text=traj.task,
        key=key,
        key_mode=mode,
        content_hash=digest,
        embedding=mem.embed(key, namespace=namespace),
        source="reflect",
        source_ref=_source_ref(traj),
        created_by=created_by,
        q=mem.config.q0,
    )
    return task, True


def _reference(
    mem: MemoryContext, namespace: Namespace, task: Task
) -> tuple[Procedure | None, list[TrajectoryStep]]:
    """The best successful live procedure of a similar task, with its steps.

    Among the procedures recalled by the task's key at least ``reference_floor`` similar: one
    of this very task first, then the most similar (a look-alike task's steps transfer best),
    then the highest learned Q.
    """
    cfg = mem.config.update
    if cfg.reference_k == 0:
        return None, []
    vector = (
        task.embedding if task.embedding is not None else mem.embed(task.key, namespace=namespace)
    )
    recalled = mem.store.recall(
        namespace,
        vector,
        cfg.reference_k,
        kinds=[MemoryKind.PROCEDURE],
        min_sim=cfg.reference_floor,
    )
    candidates = [
        (hit.memory, hit.sim)
        for hit in recalled
        if isinstance(hit.memory, Procedure) and hit.memory.success and not hit.memory.obsolete
    ]
    if candidates:
        gone = set(mem.store.superseded(namespace, [p.id for p, _ in candidates]))
        candidates = [(p, sim) for p, sim in candidates if p.id not in gone]
    text = _norm(task.text)
    candidates.sort(key=lambda c: (_norm(c[0].task_text) != text, -c[1], -c[0].q, c[0].id))
    for proc, _ in candidates:
        steps, _ = procedure_chain(mem.store, namespace, proc.id)
        if steps:
            return proc, [_as_step(s) for s in steps]
    return None, []


def _tip(
    mem: MemoryContext,
    namespace: Namespace,
    traj: Trajectory,
    reflection: Reflection,
    produced: Produced[Reflection],
    source_ref: str,
) -> tuple[Tip, bool]:
    """The Tip for this reflection: an identical live one if stored already, else a new one."""
    polarity = TipPolarity(reflection.polarity)
    digest = content_hash("tip", polarity.value, reflection.tip)
    found = mem.store.find_by_hash(namespace, MemoryKind.TIP, digest)
    if isinstance(found, Tip) and not found.obsolete:
        return found, False
    tip = Tip(
        namespace=namespace,
        text=reflection.tip,
        polarity=polarity,
        task_text=traj.task,
        source="reflect",
        source_ref=source_ref,
        created_by=produced.created_by,
        q=mem.config.q0,
        content_hash=digest,
    )
    tip.embedding = mem.embed(tip.embed_text(), namespace=namespace)
    return tip, True


_Planned = tuple[list[TrajectoryStep], bool, float, str]


def _corrected_steps(
    mem: MemoryContext,
    namespace: Namespace,
    proc: Procedure,
    traj: Trajectory,
    reflection: Reflection,
    produced: Produced[Reflection],
    reference: Procedure | None,
    reference_steps: list[TrajectoryStep],
) -> _Planned | str:
    """(steps, success, reward, change) of the correction of ``proc``, or why there is none
    (module docstring)."""
    if produced.by_model and reflection.corrected_steps:
        steps = [TrajectoryStep(action=a) for a in reflection.corrected_steps]
        return steps, True, 0.0, f"corrected steps from reflection by {produced.created_by}"
    earlier = reference is not None and reference.id in _ancestors(mem, namespace, proc.id)
    # A version of a procedure keeps to its own task cluster: another task's steps would make
    # it a procedure of that task.
    foreign = reference is not None and not same_task_cluster(mem, proc, reference)
    if (
        reference is not None
        and reference_steps
        and not earlier
        and not foreign
        and not _same_source(mem, namespace, proc, reference)
    ):
        return reference_steps, True, reference.reward, f"steps of successful {reference.id}"
    if not proc.success and reflection.failed_step:
        cut = traj.steps[: reflection.failed_step]
        failed = (
            traj.steps[reflection.failed_step] if reflection.failed_step < len(traj.steps) else None
        )
        what = f": '{_flat(failed.action)}' failed" if failed is not None else ""
        return cut, False, traj.reward, f"cut after step {len(cut)}{what}"
    if foreign and reference is not None:
        return (
            f"the successful reference {reference.id} solved another task "
            f"('{_flat(reference.task_text)[:60]}'): a version keeps to its own task cluster"
        )
    if earlier:
        return (
            "the successful procedure the attempt was compared with is an earlier version of it: "
            "a correction would only undo one"
        )
    if reference is not None and reference_steps:
        return (
            "it is the successful procedure the attempt was compared with: the attempt left its "
            "steps, so the tip is the lesson"
        )
    if proc.success:
        return "no successful procedure of a similar task differs from it to correct it from"
    return "the reflection located no step to cut the failed attempt at"


def same_task_cluster(mem: MemoryContext, proc: Procedure, other: Procedure) -> bool:
    """Whether ``other`` solved a task of ``proc``'s task cluster: the same task text, or keys
    at least ``RetrievalConfig.cluster_sim`` similar. A procedure's new version takes steps
    only from its own cluster: another task's steps would make it a procedure of that task."""
    if _norm(proc.task_text) == _norm(other.task_text):
        return True
    if proc.embedding is None or other.embedding is None:
        return False
    return cosine(proc.embedding, other.embedding) >= mem.config.retrieval.cluster_sim


def _ancestors(
    mem: MemoryContext, namespace: Namespace, memory_id: str, limit: int = 50
) -> set[str]:
    """The earlier versions of a memory (EVOLVED_FROM, any depth up to ``limit``) and the
    trajectories they were distilled from (not its own: see :func:`_same_source`)."""
    found: set[str] = set()
    frontier = [memory_id]
    while frontier and len(found) < limit:
        current = frontier.pop()
        kinds = [EdgeKind.EVOLVED_FROM]
        if current != memory_id:
            kinds.append(EdgeKind.DISTILLED_FROM)
        for edge in mem.store.edges(namespace, current, kinds=kinds):
            if edge.dst not in found and edge.dst != memory_id:
                found.add(edge.dst)
                if edge.kind is EdgeKind.EVOLVED_FROM:
                    frontier.append(edge.dst)
    return found


def _same_source(
    mem: MemoryContext, namespace: Namespace, proc: Procedure, other: Procedure
) -> bool:
    """True when ``other`` is ``proc`` or the trajectory ``proc`` was distilled from."""
    if proc.id == other.id:
        return True
    distilled = mem.store.edges(namespace, proc.id, kinds=[EdgeKind.DISTILLED_FROM])
    return any(e.dst == other.id for e in distilled)


def _correction(
    mem: MemoryContext,
    namespace: Namespace,
    proc: Procedure,
    steps: list[TrajectoryStep],
    success: bool,
    reward: float,
    change: str,
    tip: Tip,
    produced: Produced[Reflection],
    source_ref: str,
) -> Correction | str:
    """A new version of ``proc`` with ``steps``, or why not (it would change nothing, or the
    same correction exists)."""
    actions = [_flat(s.action) for s in steps if s.action.strip()]
    if not actions:
        return "the corrected steps would be empty"
    own, _ = procedure_chain(mem.store, namespace, proc.id)
    if [_norm(a) for a in actions] == [_norm(s.action) for s in own]:
        return "the correction would repeat its own steps: the tip is the lesson"
    digest = content_hash("adjusted", proc.key, *actions)
    same = mem.store.find_by_hash(namespace, MemoryKind.PROCEDURE, digest)
    if same is not None:
        return f"the same correction was written before ({same.id})"
    script = Script(
        steps=actions,
        notes=f"corrected after a failed attempt at '{_flat(proc.task_text)}': {tip.text}",
    )
    corrected = Procedure(
        namespace=namespace,
        task_text=proc.task_text,
        key=proc.key,
        granularity=Granularity.SCRIPT,
        script=script.text(),
        reward=reward,
        success=success,
        n_steps=len(steps),
        version=proc.version + 1,
        source=CORRECTION_SOURCE,
        source_ref=source_ref,
        created_by=produced.created_by,
        q=mem.config.q0,
        content_hash=digest,
        embedding=proc.embedding
        if proc.embedding is not None
        else mem.embed(proc.key, namespace=namespace),
    )
    chain = [
        Step(
            namespace=namespace,
            procedure_id=corrected.id,
            index=i,
            thought=s.thought,
            action=s.action,
            observation=s.observation,
            source=CORRECTION_SOURCE,
            source_ref=source_ref,
            created_by=produced.created_by,
            q=mem.config.q0,
        )
        for i, s in enumerate(steps)
        if s.action.strip()
    ]
    return Correction(procedure=corrected, steps=chain, corrects=proc.id, change=change)


def _correction_edges(
    namespace: Namespace, correction: Correction, episode_id: str | None
) -> list[Edge]:
    proc, steps = correction.procedure, correction.steps
    props: dict[str, Any] = {"at": utcnow().isoformat(), "change": correction.change}
    props["source"] = CORRECTION_SOURCE
    if episode_id is not None:
        props["episode"] = episode_id
    edges = [
        Edge(
            namespace=namespace,
            kind=EdgeKind.EVOLVED_FROM,
            src=proc.id,
            dst=correction.corrects,
            props=props,
        ),
        Edge(namespace=namespace, kind=EdgeKind.FIRST_STEP, src=proc.id, dst=steps[0].id),
    ]
    edges += [
        Edge(namespace=namespace, kind=EdgeKind.NEXT, src=a.id, dst=b.id)
        for a, b in pairwise(steps)
    ]
    return edges


# ---- helpers -------------------------------------------------------------------------------


def _strategy(strategy: UpdateStrategy | str) -> UpdateStrategy:
    try:
        return UpdateStrategy(strategy)
    except ValueError:
        choices = ", ".join(s.value for s in UpdateStrategy)
        raise InvalidInput(
            f"unknown update strategy {strategy!r}; choose one of {choices}"
        ) from None


def _trajectory(trajectory: Trajectory | dict[str, Any]) -> Trajectory:
    if isinstance(trajectory, Trajectory):
        return trajectory
    if isinstance(trajectory, dict):
        return Trajectory(**trajectory)
    raise InvalidInput(f"a trajectory is a Trajectory or a dict, got {type(trajectory).__name__}")


def _retrieved(mem: MemoryContext, namespace: Namespace, episode_id: str | None) -> list[AnyMemory]:
    """The memories the episode's reward credits (all it retrieved, or those it used when it
    finished crediting by use), in rank order (MemoryNotFound for no episode)."""
    if episode_id is None:
        return []
    check_id(episode_id)
    episode = mem.store.get(namespace, episode_id)
    if not isinstance(episode, Episode):
        raise InvalidInput(f"memory {episode_id!r} is a {episode.kind}, not an Episode")
    return mem.store.get_many(namespace, credited_memory_ids(mem.store, episode))


def _source_ref(traj: Trajectory) -> str:
    for name in ("source_ref", "episode_id", "id"):
        value = traj.metadata.get(name)
        if value is not None and str(value).strip():
            return str(value)
    return f"trajectory:{trajectory_hash(traj)}"


def _as_step(step: Step) -> TrajectoryStep:
    return TrajectoryStep(thought=step.thought, action=step.action, observation=step.observation)


def _flat(text: str) -> str:
    return " ".join(text.split())


def _norm(text: str) -> str:
    return _flat(text).lower()


__all__ = ["Correction", "UpdateResult", "update"]
