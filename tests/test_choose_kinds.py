"""Utility chooses the kind per task cluster: a kind that does worse than no memory is withheld."""

from __future__ import annotations

import pytest

from graphmem import GraphMemory, HashingEmbedder
from graphmem.config import MemoryConfig, RetrievalConfig
from graphmem.models import MemoryKind, Note, Procedure
from graphmem.stores.base import MemoryStore

TASK = "cook the tomato soup"
BOTH = (MemoryKind.PROCEDURE, MemoryKind.NOTE)


def config(**changes: object) -> RetrievalConfig:
    base = RetrievalConfig(
        k1=10,
        k2=4,
        kinds=BOTH,
        utility_kinds=(MemoryKind.PROCEDURE, MemoryKind.NOTE, MemoryKind.TIP),
        choose_kinds=True,
    )
    return base.model_copy(update=changes)


@pytest.fixture
def mem(store: MemoryStore, embedder: HashingEmbedder) -> GraphMemory:
    return GraphMemory(store, embedder=embedder, config=MemoryConfig(retrieval=config()))


def played(mem: GraphMemory, ns: str, used_kind: type, reward: float, times: int) -> None:
    """``times`` episodes of TASK that used every memory of ``used_kind`` offered."""
    for _ in range(times):
        r = mem.retrieve(ns, TASK, config(choose_kinds=False), open_episode=True)
        assert r.episode_id is not None
        used = [h.memory.id for h in r.hits if isinstance(h.memory, used_kind)]
        assert used
        mem.finish_episode(ns, r.episode_id, reward, used=used)


def seeded(mem: GraphMemory, ns: str, *, note_reward: float) -> tuple[list[str], list[str]]:
    procs = [
        mem.build(
            ns,
            {
                "task": TASK,
                "reward": 1.0,
                "success": True,
                "steps": [{"action": f"take tomato {i}"}, {"action": "use stove"}],
            },
        ).procedure.id
        for i in range(2)
    ]
    notes = [mem.add_note(ns, f"{TASK}: the tomato soup needs salt ({i})").id for i in range(2)]
    played(mem, ns, Procedure, 0.0, 4)  # following the procedures fails here
    played(mem, ns, Note, note_reward, 4)
    for _ in range(4):  # and acting alone mostly wins
        mem.report_baseline(ns, TASK, 1.0, success=True)
    return procs, notes


def test_a_kind_worse_than_no_memory_is_withheld_for_the_cluster(
    mem: GraphMemory, namespace: str
) -> None:
    procs, notes = seeded(mem, namespace, note_reward=1.0)

    r = mem.retrieve(namespace, TASK)
    handed = {h.memory.id for h in r.hits}
    assert handed == set(notes)  # the notes that win here, and none of the procedures
    # Every procedure recalled is withheld (hybrid recall may add the trajectories the
    # scripts were distilled from), each with its kind's reason.
    assert set(procs) <= {h.memory.id for h in r.withheld}
    assert all(isinstance(h.memory, Procedure) for h in r.withheld)
    assert all(h.withheld and "kind Procedure" in h.withheld for h in r.withheld)
    assert r.baseline is not None and r.baseline_episodes == 4

    # Without the choice, the same query hands the procedures over.
    plain = mem.retrieve(namespace, TASK, config(choose_kinds=False))
    assert set(procs) & {h.memory.id for h in plain.hits} and not plain.withheld


def test_nothing_is_handed_over_where_no_kind_beats_acting_alone(
    mem: GraphMemory, namespace: str
) -> None:
    procs, notes = seeded(mem, namespace, note_reward=0.0)
    r = mem.retrieve(namespace, TASK)
    assert r.hits == []
    assert {*procs, *notes} <= {h.memory.id for h in r.withheld}


def test_an_episode_that_credits_nothing_teaches_the_baseline(
    mem: GraphMemory, namespace: str
) -> None:
    seeded(mem, namespace, note_reward=1.0)
    before = mem.retrieve(namespace, TASK).baseline_episodes
    episode = mem.start_episode(namespace, TASK)
    mem.finish_episode(namespace, episode.id, 1.0, used=[])
    assert mem.retrieve(namespace, TASK).baseline_episodes == before + 1
