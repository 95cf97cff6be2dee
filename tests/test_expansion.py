"""Graph expansion of phase A (issue 45, opt-in: ``RetrievalConfig.expand``): the procedures of
the query's task cluster and the LINKS_TO neighbours of the best candidates join the pool that
phase B ranks. Through the public API, on the embedded store and on Neo4j when
``GRAPHMEM_NEO4J_URI`` is set."""

from __future__ import annotations

from typing import Any

import pytest

from graphmem import GraphMemory, HashingEmbedder, MemoryKind, RetrievalConfig
from graphmem.errors import ConfigError
from graphmem.models import Edge, EdgeKind
from graphmem.stores.base import MemoryStore

TASK = "cook a meal in the kitchen: check the cookbook"
STEPS = [
    ["open fridge", "take carrot", "slice carrot", "cook carrot with stove", "eat meal"],
    ["open fridge", "take apple", "roast apple with oven", "eat meal"],
    ["open fridge", "take potato", "fry potato with stove", "eat meal"],
]
PROC = RetrievalConfig(k1=1, k2=10, kinds=(MemoryKind.PROCEDURE,), floor=-1.0)
NOTES = RetrievalConfig(k1=1, k2=5, kinds=(MemoryKind.NOTE,), floor=-1.0)


def _trajectory(steps: list[str]) -> dict[str, Any]:
    return {
        "task": TASK,
        "steps": [{"action": a, "observation": "ok"} for a in steps],
        "reward": 1.0,
        "success": True,
    }


def _procedures(mem: GraphMemory, namespace: str) -> list[str]:
    """The procedures of three won games of one task (each game's trajectory and its distilled
    script: six, all SOLVED_BY the one Task node)."""
    for steps in STEPS:
        mem.build(namespace, _trajectory(steps))
    return [m.id for m in mem.store.iter_nodes(namespace, kinds=[MemoryKind.PROCEDURE])]


def _notes(mem: GraphMemory, namespace: str) -> tuple[str, str, str]:
    """A note near the query, one far from it linked to it, one far and unlinked."""
    near = mem.add_note(namespace, "the blue key opens the cellar door").id
    linked = mem.add_note(namespace, "bring a lamp: the stairs below are dark").id
    other = mem.add_note(namespace, "the market sells bread on sundays").id
    mem.store.upsert(
        edges=[Edge(namespace=namespace, kind=EdgeKind.LINKS_TO, src=near, dst=linked)]
    )
    return near, linked, other


def _ids(found: Any) -> list[str]:
    return [h.memory.id for h in found.hits]


def test_off_by_default_adds_nothing(store: MemoryStore, namespace: str) -> None:
    mem = GraphMemory(store, embedder=HashingEmbedder(384))
    _procedures(mem, namespace)
    assert RetrievalConfig().expand == "off"
    assert len(mem.retrieve(namespace, TASK, PROC).hits) == 1


def test_tasks_add_the_clusters_procedures(store: MemoryStore, namespace: str) -> None:
    mem = GraphMemory(store, embedder=HashingEmbedder(384))
    ids = _procedures(mem, namespace)
    found = mem.retrieve(namespace, TASK, PROC, expand="tasks")
    assert sorted(_ids(found)) == sorted(ids)
    # Each keeps its own similarity to the query (not a made-up one).
    for hit in found.hits:
        assert hit.sim == pytest.approx(
            float(_cos(mem.embed(TASK), mem.get(namespace, hit.memory.id).embedding)), abs=1e-5
        )


def test_expansion_runs_beside_epsilon_exploration(store: MemoryStore, namespace: str) -> None:
    """ε-greedy draws from a random stream; that must not switch expansion off."""
    mem = GraphMemory(store, embedder=HashingEmbedder(384))
    ids = _procedures(mem, namespace)
    found = mem.retrieve(namespace, TASK, PROC, expand="tasks", epsilon=1e-12, seed=3)
    assert not found.explored
    assert sorted(_ids(found)) == sorted(ids)


def test_expand_k_caps_what_is_added(store: MemoryStore, namespace: str) -> None:
    mem = GraphMemory(store, embedder=HashingEmbedder(384))
    _procedures(mem, namespace)
    assert len(mem.retrieve(namespace, TASK, PROC, expand="tasks", expand_k=1).hits) == 2
    assert len(mem.retrieve(namespace, TASK, PROC, expand="tasks", expand_k=0).hits) == 1


def test_obsolete_and_superseded_procedures_are_not_added(
    store: MemoryStore, namespace: str
) -> None:
    mem = GraphMemory(store, embedder=HashingEmbedder(384))
    ids = _procedures(mem, namespace)
    first = _ids(mem.retrieve(namespace, TASK, PROC))[0]
    rest = [i for i in ids if i != first]
    for memory_id in rest[:-1]:
        store.patch(namespace, memory_id, {"obsolete": True})
    store.upsert(
        edges=[Edge(namespace=namespace, kind=EdgeKind.SUPERSEDES, src=first, dst=rest[-1])]
    )
    assert _ids(mem.retrieve(namespace, TASK, PROC, expand="tasks")) == [first]


def test_links_add_the_neighbours_of_the_best(store: MemoryStore, namespace: str) -> None:
    mem = GraphMemory(store, embedder=HashingEmbedder(384))
    near, linked, other = _notes(mem, namespace)
    query = "which key opens the cellar door"
    assert _ids(mem.retrieve(namespace, query, NOTES)) == [near]
    found = _ids(mem.retrieve(namespace, query, NOTES, expand="links"))
    assert sorted(found) == sorted([near, linked])
    assert other not in found
    # The link is followed from either end.
    back = "a lamp for the dark stairs below"
    assert _ids(mem.retrieve(namespace, back, NOTES)) == [linked]
    assert sorted(_ids(mem.retrieve(namespace, back, NOTES, expand="links"))) == sorted(
        [near, linked]
    )


def test_expansion_keeps_to_the_kinds_asked_for(store: MemoryStore, namespace: str) -> None:
    mem = GraphMemory(store, embedder=HashingEmbedder(384))
    near, linked, _ = _notes(mem, namespace)
    ids = _procedures(mem, namespace)
    store.upsert(edges=[Edge(namespace=namespace, kind=EdgeKind.LINKS_TO, src=near, dst=ids[0])])
    found = _ids(mem.retrieve(namespace, "which key opens the cellar door", NOTES, expand="links"))
    assert ids[0] not in found and sorted(found) == sorted([near, linked])


def test_expansion_and_hybrid_are_refused_together() -> None:
    with pytest.raises((ConfigError, ValueError), match="expand and hybrid"):
        RetrievalConfig(expand="tasks", hybrid=True)


def _cos(a: list[float], b: Any) -> float:
    from graphmem.ops.similarity import cosine

    return cosine(a, b)
