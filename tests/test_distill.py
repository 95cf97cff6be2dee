"""Distillation: every episode also becomes notes, one live note per subject, versioned."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

from graphmem import GraphMemory, HashingEmbedder
from graphmem.config import DistillConfig, MemoryConfig
from graphmem.errors import InvalidInput
from graphmem.models import EdgeKind, MemoryKind, Note, Trajectory
from graphmem.ops.distill import DISTILLED_TAG, Knowledge, evidence, note_facts
from graphmem.stores.base import MemoryStore


@pytest.fixture
def mem(store: MemoryStore, embedder: HashingEmbedder) -> GraphMemory:
    return GraphMemory(store, embedder=embedder)


def game(task: str, steps: list[tuple[str, float]], success: bool = True) -> dict[str, Any]:
    return {
        "task": task,
        "reward": 1.0 if success else 0.0,
        "success": success,
        "steps": [{"action": a, "observation": "ok", "reward": r} for a, r in steps],
    }


def live_notes(mem: GraphMemory, namespace: str) -> list[Note]:
    return [
        m
        for m in mem.store.iter_nodes(namespace, kinds=[MemoryKind.NOTE])
        if isinstance(m, Note) and not m.obsolete
    ]


def test_a_fact_learned_in_one_episode_is_offered_in_the_next_similar_one(
    mem: GraphMemory, namespace: str
) -> None:
    built = mem.build(
        namespace,
        game("tidy up the kitchen", [("take red apple", 0.0), ("put red apple in fridge", 1.0)]),
    )
    (note,) = built.notes
    assert note.content == "Facts about red apple:\nput red apple in fridge: earned reward"
    assert DISTILLED_TAG in note.tags and "subject:red apple" in note.tags
    # It links to the procedure it came from.
    links = mem.store.edges(namespace, note.id, kinds=[EdgeKind.LINKS_TO])
    assert [(e.dst, e.props["reason"]) for e in links] == [(built.procedure.id, "distilled")]
    # The next similar task is offered the fact beside the procedure, in one hand-over.
    r = mem.retrieve(namespace, "tidy up the kitchen", kinds=("Procedure", "Note"), k1=10, k2=5)
    assert note.id in {h.memory.id for h in r.hits}
    assert built.procedure.id in {h.memory.id for h in r.hits}
    assert "put red apple in fridge: earned reward" in r.as_prompt()


def test_a_distilled_note_is_versioned_never_duplicated(mem: GraphMemory, namespace: str) -> None:
    first = mem.build(namespace, game("clean the hall", [("put wet towel in basket", 1.0)]))
    again = mem.build(namespace, game("clean the bathroom", [("put wet towel in basket", 1.0)]))
    # The same fact again: no note written, one more episode of evidence on the same one.
    assert again.notes == [] and len(first.notes) == 1
    (note,) = live_notes(mem, namespace)
    assert note.id == first.notes[0].id
    assert note.version == 1 and evidence(note)["episodes"] == 2
    assert evidence(note)["support"] == {"put wet towel in basket: earned reward": 2}

    # A new fact about the subject, and one the episode shows wrong: a new version of it.
    third = mem.build(
        namespace,
        game(
            "clean the bedroom",
            [("put wet towel in basket", -1.0), ("put wet towel in washer", 1.0)],
            success=False,
        ),
    )
    (v2,) = third.notes
    assert v2.version == 2 and v2.id != note.id
    assert note_facts(v2) == [
        "put wet towel in basket: cost reward",
        "put wet towel in washer: earned reward",
    ]
    assert [n.id for n in live_notes(mem, namespace)] == [v2.id]
    (evolved,) = mem.store.edges(namespace, v2.id, kinds=[EdgeKind.EVOLVED_FROM])
    assert evolved.dst == note.id and "contradicted" in str(evolved.props["change"])
    ev = evidence(v2)
    assert ev["episodes"] == 3
    assert ev["contradicted"] == {"put wet towel in basket: earned reward": 1}
    old = mem.get(namespace, note.id)
    assert old.obsolete  # kept, as the older version


def test_a_failure_teaches_facts_too(mem: GraphMemory, namespace: str) -> None:
    out = mem.update(
        namespace,
        game("heat the soup", [("put soup in fridge", -1.0), ("look", 0.0)], success=False),
        strategy="adjustment",
    )
    assert out.built is None
    assert [n.content for n in out.notes] == ["Facts about soup:\nput soup in fridge: cost reward"]


def test_a_distiller_hook_replaces_the_offline_rule(
    store: MemoryStore, embedder: HashingEmbedder, namespace: str
) -> None:
    def rooms(traj: Trajectory) -> Iterable[Knowledge]:
        for step in traj.steps:
            if step.observation.startswith("In the "):
                place = step.observation[len("In the ") :].split(",")[0]
                yield Knowledge(subject=place, facts=[f"{place} holds {step.action[5:]}"])

    mem = GraphMemory(store, embedder=embedder, distiller=rooms)
    traj = {
        "task": "find the coin",
        "reward": 1.0,
        "success": True,
        "steps": [{"action": "take coin", "observation": "In the pantry, you take the coin."}],
    }
    (note,) = mem.build(namespace, traj).notes
    assert note.content == "Facts about pantry:\npantry holds coin"
    assert note.created_by == "distiller"


def test_a_bad_distiller_changes_nothing(
    store: MemoryStore, embedder: HashingEmbedder, namespace: str
) -> None:
    mem = GraphMemory(store, embedder=embedder, distiller=lambda t: ["not knowledge"])  # type: ignore[arg-type,list-item]
    with pytest.raises(InvalidInput, match="Knowledge items"):
        mem.build(namespace, game("tidy up", [("put mug in sink", 1.0)]))
    assert sum(mem.store.counts(namespace).values()) == 0

    def broken(traj: Trajectory) -> Iterable[Knowledge]:
        yield Knowledge(subject="mug", facts=["mug belongs in \ud800 sink"])

    mem.distiller = broken
    with pytest.raises(InvalidInput, match="not valid Unicode"):
        mem.build(namespace, game("tidy up", [("put mug in sink", 1.0)]))
    assert sum(mem.store.counts(namespace).values()) == 0


def test_distillation_can_be_turned_off(
    store: MemoryStore, embedder: HashingEmbedder, namespace: str
) -> None:
    mem = GraphMemory(
        store, embedder=embedder, config=MemoryConfig(distill=DistillConfig(enabled=False))
    )
    built = mem.build(namespace, game("tidy up", [("put mug in sink", 1.0)]))
    assert built.notes == [] and live_notes(mem, namespace) == []
