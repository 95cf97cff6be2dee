"""Evolution you can see: refinement makes versions (EVOLVED_FROM, version + 1), consolidation
is order-independent, update keys its Task as build did, and offline reflection finds the step
a failure missed against a remembered success. On both stores."""

from __future__ import annotations

from typing import Any

import pytest

from graphmem import GraphMemory, HashingEmbedder
from graphmem.errors import InvalidInput
from graphmem.llm import fallbacks
from graphmem.models import Edge, EdgeKind, MemoryKind, Note, Task, TrajectoryStep
from graphmem.ops.build import revise_note
from graphmem.stores.base import MemoryStore
from showcase.textworld_agent import fact_lines, learn_facts_by_subject

MUG = "Put a clean mug in the coffee machine"
GOOD_MUG = ["go to cabinet 1", "take mug 1", "clean mug 1 with sink", "put mug 1 in coffee machine"]
BAD_MUG = ["go to cabinet 1", "take mug 1", "put mug 1 in coffee machine", "look"]


@pytest.fixture
def mem(store: MemoryStore, embedder: HashingEmbedder) -> GraphMemory:
    return GraphMemory(store, embedder=embedder)


def traj(task: str, actions: list[str], success: bool) -> dict[str, Any]:
    return {
        "task": task,
        "reward": 1.0 if success else 0.0,
        "success": success,
        "steps": [{"action": a, "observation": f"you {a}"} for a in actions],
    }


def game(*steps: tuple[str, str, float]) -> Any:
    return {
        "task": "twc tidy up",
        "steps": [{"action": a, "observation": o, "reward": r, "thought": ""} for a, o, r in steps],
    }


def chain(mem: GraphMemory, namespace: str, memory_id: str) -> list[str]:
    """Ids from ``memory_id`` back along EVOLVED_FROM, newest first."""
    out = [memory_id]
    while older := mem.store.edges(namespace, out[-1], kinds=[EdgeKind.EVOLVED_FROM]):
        out.append(older[0].dst)
    return out


def live_notes(mem: GraphMemory, namespace: str) -> list[Note]:
    return [
        m
        for m in mem.store.iter_nodes(namespace, [MemoryKind.NOTE])
        if isinstance(m, Note) and not m.obsolete
    ]


# ---- versions of notes -------------------------------------------------------------------


def test_revising_a_note_makes_a_version_chain(mem: GraphMemory, namespace: str) -> None:
    v1 = mem.add_note(namespace, "Tea: brew green tea at 80 degrees.")
    other = mem.add_note(namespace, "Coffee: grind the beans just before brewing.")
    link = {"reason": "both drinks", "strength": 0.4}
    mem.store.upsert(
        [], [Edge(namespace=namespace, kind=EdgeKind.LINKS_TO, src=other.id, dst=v1.id, props=link)]
    )
    v2 = revise_note(mem, namespace, [v1.id], f"{v1.content} 3 minutes.", change="the time")
    v3 = revise_note(mem, namespace, [v2.id], f"{v1.content} 2-3 minutes.", change="a range")
    assert (v1.version, v2.version, v3.version) == (1, 2, 3)
    assert chain(mem, namespace, v3.id) == [v3.id, v2.id, v1.id]
    (edge,) = mem.store.edges(namespace, v3.id, kinds=[EdgeKind.EVOLVED_FROM])
    assert edge.props["change"] == "a range" and "at" in edge.props
    for old, new in ((v1, v2), (v2, v3)):
        gone = mem.get(namespace, old.id)
        assert gone.obsolete and gone.obsolete_reason == f"evolved into {new.id}"
    assert not mem.store.edges(namespace, v3.id, kinds=[EdgeKind.SUPERSEDES], direction="both")
    (carried,) = mem.store.edges(namespace, v3.id, kinds=[EdgeKind.LINKS_TO], direction="in")
    assert carried.src == other.id and carried.props == link, "links follow the new version"
    hits = mem.retrieve(namespace, v1.content, kinds=(MemoryKind.NOTE,)).hits
    assert v3.id in {h.memory.id for h in hits} and not {v1.id, v2.id} & {h.memory.id for h in hits}
    hist = mem.history(namespace, v1.id)
    assert [v.version for v in hist.versions] == [1, 2, 3]
    assert "evolved from" in hist.render()
    # Nothing to revise: the same content is the same version.
    assert revise_note(mem, namespace, [v3.id], v3.content, change="none").id == v3.id
    with pytest.raises(InvalidInput, match="obsolete"):
        revise_note(mem, namespace, [v1.id], "Tea: anything", change="x")


def test_consolidation_evolves_a_subject_note_and_is_order_independent(
    mem: GraphMemory, namespace: str
) -> None:
    put = "You put the {0} in the {1}."
    (v1,) = learn_facts_by_subject(mem, namespace, game(("put mug in sink", "Wrong place.", -1.0)))
    (v2,) = learn_facts_by_subject(
        mem,
        namespace,
        game(
            ("put mug in cupboard", put.format("mug", "cupboard"), 1.0),
            ("put mug in sink", "Wrong place.", -1.0),
        ),
    )
    # The same two facts, learned again in the other order: no new version.
    assert (
        learn_facts_by_subject(
            mem,
            namespace,
            game(
                ("put mug in sink", "Wrong place.", -1.0),
                ("put mug in cupboard", put.format("mug", "cupboard"), 1.0),
            ),
        )
        == []
    )
    (v3,) = learn_facts_by_subject(mem, namespace, game(("put mug in shelf", "Wrong place.", -1.0)))
    assert chain(mem, namespace, v3) == [v3, v2, v1]
    assert [mem.get(namespace, i).version for i in (v1, v2, v3)] == [1, 2, 3]
    (live,) = live_notes(mem, namespace)
    assert live.id == v3 and fact_lines(live) == [
        "mug belongs in cupboard",
        "mug does not belong in shelf",
        "mug does not belong in sink",
    ]
    (edge,) = mem.store.edges(namespace, v2, kinds=[EdgeKind.EVOLVED_FROM])
    assert edge.props["change"] == "consolidated: learned mug belongs in cupboard"
    assert not [e for e in mem.store.iter_edges(namespace) if e.kind is EdgeKind.SUPERSEDES]
    assert len(mem.history(namespace, v1).versions) == 3


def test_consolidation_with_a_contradiction_is_a_version_too(
    mem: GraphMemory, namespace: str
) -> None:
    (v1,) = learn_facts_by_subject(
        mem, namespace, game(("put hat in hat rack", "You put the hat on the hat rack.", 1.0))
    )
    (v2,) = learn_facts_by_subject(
        mem, namespace, game(("put hat in hat rack", "Wrong place.", -1.0))
    )
    assert fact_lines(mem.get(namespace, v2)) == ["hat does not belong in hat rack"]
    (edge,) = mem.store.edges(namespace, v2, kinds=[EdgeKind.EVOLVED_FROM])
    assert edge.dst == v1 and "contradicted hat belongs in hat rack" in str(edge.props["change"])


# ---- update: Task keying, reflection, corrections ------------------------------------------


def _episode(mem: GraphMemory, namespace: str, query: str) -> str:
    retrieval = mem.retrieve(namespace, query, open_episode=True)
    assert retrieval.episode_id is not None and retrieval.hits
    mem.finish_episode(namespace, retrieval.episode_id, 0.0)
    return retrieval.episode_id


def test_update_finds_the_task_build_keyed_by_keywords(mem: GraphMemory, namespace: str) -> None:
    built = mem.build(
        namespace, traj(MUG, GOOD_MUG, True), granularity="proceduralized", key_mode="keywords"
    )
    assert mem.config.key_mode.value == "query"  # update's default differs from the build's
    episode = _episode(mem, namespace, MUG)
    out = mem.update(namespace, traj(MUG, BAD_MUG, False), episode_id=episode)
    tasks = [m for m in mem.store.iter_nodes(namespace, [MemoryKind.TASK]) if isinstance(m, Task)]
    assert [t.id for t in tasks] == [built.task.id], "one Task for one task text"
    assert out.task is not None and out.task.id == built.task.id
    about = mem.store.edges(namespace, out.tips[0].id, kinds=[EdgeKind.ABOUT])
    assert built.task.id in {e.dst for e in about}
    # The procedure was right (the attempt left it): no correction, and the result says why.
    assert out.adjusted == []
    assert built.procedure.id in out.not_corrected
    assert "the tip is the lesson" in out.not_corrected[built.procedure.id]


def test_a_task_without_a_build_still_gets_one_task(mem: GraphMemory, namespace: str) -> None:
    first = mem.update(namespace, traj(MUG, BAD_MUG, False))
    second = mem.update(namespace, traj(MUG, BAD_MUG[:2], False))
    assert first.task is not None and second.task is not None
    assert first.task.id == second.task.id
    assert mem.store.counts(namespace)["Task"] == 1


def test_offline_reflection_finds_the_missing_step_against_a_remembered_success(
    mem: GraphMemory, namespace: str
) -> None:
    good = mem.build(namespace, traj(MUG, GOOD_MUG, True))
    failed = ["go to cabinet 2", "take mug 2", "put mug 2 in coffee machine", "look"]
    out = mem.update(namespace, traj(MUG, failed, False), strategy="adjustment")
    assert out.reference_id == good.procedure.id
    assert out.reflection is not None
    assert out.reflection.polarity == "prefer" and out.reflection.failed_step == 2
    assert "'clean mug 1 with sink' after 'take mug 2'" in out.reflection.tip
    assert "look" not in out.reflection.tip, "the trailing look is not the failure"


def test_a_failed_procedure_gets_a_corrected_version(mem: GraphMemory, namespace: str) -> None:
    failing = mem.update(namespace, traj(MUG, BAD_MUG, False), strategy="vanilla").built
    assert failing is not None
    good = mem.build(namespace, traj(MUG, GOOD_MUG, True))
    episode = _episode(mem, namespace, MUG)
    retrieved = (
        {m.id for m in mem.get_episode_memories(namespace, episode)}
        if hasattr(mem, "get_episode_memories")
        else set()
    )
    del retrieved
    out = mem.update(namespace, traj(MUG, BAD_MUG, False), episode_id=episode)
    fixes = {c.corrects: c for c in out.adjusted}
    assert failing.procedure.id in fixes, out.not_corrected
    fix = fixes[failing.procedure.id]
    assert fix.procedure.version == failing.procedure.version + 1
    (edge,) = mem.store.edges(namespace, fix.procedure.id, kinds=[EdgeKind.EVOLVED_FROM])
    assert edge.dst == failing.procedure.id and good.procedure.id in str(edge.props["change"])
    versions = mem.history(namespace, failing.procedure.id).versions
    assert [v.version for v in versions] == [1, 2]


# ---- the fallback alone ------------------------------------------------------------------


def _steps(*actions: str) -> list[TrajectoryStep]:
    return [TrajectoryStep(action=a) for a in actions]


def test_fallback_reflection_aligns_rather_than_compares_positions() -> None:
    good = _steps("go to cabinet 1", "take mug 1", "clean mug 1 with sink", "put mug 1 in machine")
    shifted = _steps("look", "go to cabinet 1", "take mug 1", "put mug 1 in machine")
    found = fallbacks.reflect("make coffee", shifted, good)
    assert "do 'clean mug 1 with sink' after 'take mug 1'" in found.tip
    wrong = _steps("go to cabinet 1", "take mug 1", "wipe mug 1", "put mug 1 in machine")
    found = fallbacks.reflect("make coffee", wrong, good)
    assert "at step 3, do 'clean mug 1 with sink' instead of 'wipe mug 1'" in found.tip
    extra = _steps(*(s.action for s in good), "drop mug 1")
    found = fallbacks.reflect("make coffee", extra, good)
    assert found.polarity == "avoid" and "'drop mug 1' (step 5)" in found.tip
    same = fallbacks.reflect("make coffee", good, good)
    assert "did not work" in same.tip, "same steps: the no-reference rule answers"


def test_no_correction_back_to_an_earlier_version(mem: GraphMemory, namespace: str) -> None:
    from graphmem.llm.ops import Produced
    from graphmem.models import Procedure
    from graphmem.ops.update import _corrected_steps, _reference

    first = mem.build(namespace, traj(MUG, GOOD_MUG, True)).procedure
    later = Procedure(
        namespace=namespace,
        task_text=MUG,
        key=first.key,
        granularity="script",
        script="1. go to cabinet 1",
        version=2,
        success=True,  # a correction written from another success, as in the demo
        embedding=first.embedding,
    )
    evolved = Edge(namespace=namespace, kind=EdgeKind.EVOLVED_FROM, src=later.id, dst=first.id)
    mem.store.upsert([later], [evolved])
    task = mem.update(namespace, traj(MUG, BAD_MUG, False)).task
    assert task is not None
    reference, steps = _reference(mem, namespace, task)
    assert reference is not None and reference.id == first.id
    reflection = fallbacks.reflect(MUG, _steps(*BAD_MUG), steps)
    from graphmem.models import Trajectory

    why = _corrected_steps(
        mem,
        namespace,
        later,
        Trajectory(**traj(MUG, BAD_MUG, False)),
        reflection,
        Produced(reflection, fallbacks.FALLBACK),
        reference,
        steps,
    )
    assert isinstance(why, str) and "earlier version" in why
