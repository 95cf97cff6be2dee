"""A small, realistic memory graph to try the pictures and the Neo4j Browser queries on.

One task ("heat the soup") learned three ways: a failed attempt (now obsolete) with the tip its
failure produced, a corrected procedure that EVOLVED_FROM and SUPERSEDES it, and a script
DISTILLED_FROM the corrected trajectory; a second task; two linked notes; and two finished
episodes whose rewards moved the Q of what they retrieved. Built from the models directly, so it
needs no embedder or LLM.

>>> from graphmem.stores.embedded import EmbeddedStore
>>> store = EmbeddedStore.in_memory()
>>> ids = load_sample(store, "demo")
>>> store.counts("demo")["Step"]
7
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from graphmem.models import (
    AnyMemory,
    Edge,
    EdgeKind,
    Episode,
    EpisodeStatus,
    Granularity,
    KeyMode,
    Note,
    Procedure,
    Step,
    Task,
    Tip,
    TipPolarity,
    utcnow,
)
from graphmem.stores.base import MemoryStore


@dataclass(frozen=True)
class SampleIds:
    """Ids of the sample's landmark memories (for tests and the guide)."""

    task: str
    other_task: str
    failed: str
    fixed: str
    script: str
    tip: str
    note: str
    episode: str
    failed_episode: str


def _chain(
    namespace: str, proc: Procedure, actions: list[tuple[str, str, str]]
) -> tuple[list[AnyMemory], list[Edge]]:
    steps: list[AnyMemory] = []
    edges: list[Edge] = []
    prev: str | None = None
    for i, (thought, action, observation) in enumerate(actions):
        step = Step(
            namespace=namespace,
            id=f"{proc.id}-s{i}",
            procedure_id=proc.id,
            index=i,
            thought=thought,
            action=action,
            observation=observation,
            source="build",
        )
        kind = EdgeKind.FIRST_STEP if prev is None else EdgeKind.NEXT
        edges.append(Edge(namespace=namespace, kind=kind, src=prev or proc.id, dst=step.id))
        steps.append(step)
        prev = step.id
    return steps, edges


def sample_graph(namespace: str) -> tuple[list[AnyMemory], list[Edge], SampleIds]:
    """The sample's memories and edges, not yet stored."""
    ns = namespace
    t0 = utcnow() - timedelta(hours=2)
    task = Task(
        namespace=ns,
        id="task-soup",
        text="Heat the soup in the kitchen",
        key="heat soup kitchen",
        key_mode=KeyMode.KEYWORDS,
        q=0.35,
        q_updates=1,
        uses=1,
    )
    other = Task(
        namespace=ns,
        id="task-tea",
        text="Make a cup of tea",
        key="make tea",
        key_mode=KeyMode.KEYWORDS,
    )
    failed = Procedure(
        namespace=ns,
        id="proc-soup-v1",
        task_text=task.text,
        key=task.key,
        granularity=Granularity.TRAJECTORY,
        reward=0.0,
        success=False,
        n_steps=2,
        q=0.35,
        q_updates=1,
        uses=1,
        obsolete=True,
        obsolete_reason="superseded by proc-soup-v2",
        created_at=t0,
        source="build",
    )
    fixed = Procedure(
        namespace=ns,
        id="proc-soup-v2",
        task_text=task.text,
        key=task.key,
        granularity=Granularity.TRAJECTORY,
        reward=1.0,
        success=True,
        n_steps=4,
        q=0.692,
        q_updates=2,
        uses=2,
        successes=2,
        version=2,
        source="adjustment",
    )
    script = Procedure(
        namespace=ns,
        id="proc-soup-script",
        task_text=task.text,
        key=task.key,
        granularity=Granularity.SCRIPT,
        reward=1.0,
        success=True,
        q=0.65,
        q_updates=1,
        uses=1,
        successes=1,
        source="build",
        script="1. Find the pot. 2. Pour the soup into the pot. 3. Turn the stove on. "
        "4. Wait until it simmers.",
    )
    tea = Procedure(
        namespace=ns,
        id="proc-tea",
        task_text=other.text,
        key=other.key,
        granularity=Granularity.PROCEDURALIZED,
        reward=1.0,
        success=True,
        n_steps=1,
        script="Boil water, steep the tea bag for three minutes.",
    )
    tip = Tip(
        namespace=ns,
        id="tip-soup-stove",
        text="Turn the stove on before waiting; soup does not heat on a cold stove.",
        polarity=TipPolarity.AVOID,
        task_text=task.text,
        q=0.65,
        q_updates=1,
        uses=1,
        source="reflect",
    )
    note = Note(
        namespace=ns,
        id="note-stove",
        content="The stove knob is left of the sink.",
        keywords=["stove", "kitchen"],
        tags=["location"],
        context="Where the stove is.",
    )
    moved = Note(
        namespace=ns,
        id="note-stove-2",
        content="The stove knob is right of the sink since the kitchen was redone.",
        keywords=["stove", "kitchen"],
        tags=["location"],
        context="Where the stove is now.",
        valid_at=datetime(2026, 3, 2, tzinfo=UTC),
    )
    note = note.model_copy(
        update={"valid_at": datetime(2026, 1, 5, tzinfo=UTC), "updated_by": moved.id}
    )
    note2 = Note(
        namespace=ns,
        id="note-pot",
        content="Pots are in the cupboard under the stove.",
        keywords=["pot", "kitchen"],
        tags=["location"],
        context="Where pots are.",
    )

    nodes: list[AnyMemory] = [task, other, failed, fixed, script, tea, tip, note, moved, note2]
    edges: list[Edge] = []
    for proc, actions in (
        (
            failed,
            [
                ("The soup must be hot.", "pour soup into pot", "The pot holds soup."),
                ("Wait for it.", "wait", "Nothing happens; the soup stays cold."),
            ],
        ),
        (
            fixed,
            [
                ("Need a pot.", "take pot from cupboard", "You take the pot."),
                ("Fill it.", "pour soup into pot", "The pot holds soup."),
                ("Heat source.", "turn on stove", "The stove is on."),
                ("Wait for it.", "wait", "The soup simmers."),
            ],
        ),
        (tea, [("", "boil water and steep tea", "A cup of tea.")]),
    ):
        steps, chain = _chain(ns, proc, actions)
        nodes.extend(steps)
        edges.extend(chain)

    def edge(kind: EdgeKind, src: str, dst: str, **props: str | float | int | bool) -> Edge:
        return Edge(namespace=ns, kind=kind, src=src, dst=dst, props=props)

    edges += [
        edge(EdgeKind.SOLVED_BY, task.id, failed.id, reward=0.0),
        edge(EdgeKind.SOLVED_BY, task.id, fixed.id, reward=1.0),
        edge(EdgeKind.SOLVED_BY, task.id, script.id, reward=1.0),
        edge(EdgeKind.SOLVED_BY, other.id, tea.id, reward=1.0),
        edge(EdgeKind.DISTILLED_FROM, script.id, fixed.id),
        edge(EdgeKind.ABOUT, tip.id, failed.id),
        edge(EdgeKind.ABOUT, tip.id, task.id),
        edge(EdgeKind.EVOLVED_FROM, fixed.id, failed.id, change="turn the stove on first"),
        edge(EdgeKind.SUPERSEDES, fixed.id, failed.id),
        edge(
            EdgeKind.LINKS_TO, note.id, note2.id, reason="both locate kitchen things", strength=0.8
        ),
        edge(EdgeKind.LINKS_TO, fixed.id, note.id, reason="uses the stove", strength=0.6),
        edge(EdgeKind.UPDATES, moved.id, note.id, subject="stove", sim=0.82, source="rules"),
    ]

    failed_ep = Episode(
        namespace=ns,
        id="ep-soup-1",
        task_text=task.text,
        status=EpisodeStatus.FINISHED,
        reward=0.0,
        success=False,
        finished_at=t0 + timedelta(minutes=5),
        source="retrieve",
    )
    good_ep = Episode(
        namespace=ns,
        id="ep-soup-2",
        task_text=task.text,
        status=EpisodeStatus.FINISHED,
        reward=1.0,
        success=True,
        finished_at=t0 + timedelta(minutes=50),
        source="retrieve",
    )
    nodes += [failed_ep, good_ep]
    edges += [
        edge(
            EdgeKind.RETRIEVED,
            failed_ep.id,
            failed.id,
            rank=1,
            sim=0.91,
            q=0.5,
            z_sim=0.7,
            z_q=0.0,
            score=0.35,
            explored=False,
            q_after=0.35,
            alpha=0.3,
        ),
        edge(
            EdgeKind.RETRIEVED,
            failed_ep.id,
            task.id,
            rank=2,
            sim=0.88,
            q=0.5,
            z_sim=-0.7,
            z_q=0.0,
            score=-0.35,
            explored=False,
            q_after=0.35,
            alpha=0.3,
        ),
        edge(
            EdgeKind.RETRIEVED,
            good_ep.id,
            fixed.id,
            rank=1,
            sim=0.9,
            q=0.56,
            z_sim=0.9,
            z_q=1.1,
            score=1.0,
            explored=False,
            used=True,
            q_after=0.692,
            alpha=0.3,
        ),
        edge(
            EdgeKind.RETRIEVED,
            good_ep.id,
            script.id,
            rank=2,
            sim=0.86,
            q=0.5,
            z_sim=0.2,
            z_q=0.1,
            score=0.15,
            explored=False,
            q_after=0.65,
            alpha=0.3,
        ),
        edge(
            EdgeKind.RETRIEVED,
            good_ep.id,
            tip.id,
            rank=3,
            sim=0.8,
            q=0.5,
            z_sim=-1.1,
            z_q=-1.2,
            score=-1.15,
            explored=False,
            q_after=0.65,
            alpha=0.3,
        ),
    ]
    ids = SampleIds(
        task=task.id,
        other_task=other.id,
        failed=failed.id,
        fixed=fixed.id,
        script=script.id,
        tip=tip.id,
        note=note.id,
        episode=good_ep.id,
        failed_episode=failed_ep.id,
    )
    return nodes, edges, ids


def load_sample(store: MemoryStore, namespace: str) -> SampleIds:
    """Write the sample into ``namespace`` (utility statistics included) and return its ids."""
    nodes, edges, ids = sample_graph(namespace)
    store.upsert(nodes, edges, keep_utility=False)
    return ids
