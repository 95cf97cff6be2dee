"""Conformance tests of consolidation (:mod:`graphmem.ops.consolidation`) over a store.

Consolidation is written once on the store primitives; these tests hold a store to what it
needs from them: a merged version written with pooled utility, the merged memories kept
(obsolete, superseded, every field and credit edge intact), nothing deleted, a second
consolidation a no-op, and a contradicted note no longer recalled.
"""

from __future__ import annotations

import math

from graphmem.config import ConsolidationConfig, MemoryConfig
from graphmem.embedding import HashingEmbedder
from graphmem.memory import GraphMemory
from graphmem.models import Edge, EdgeKind, MemoryKind, Namespace
from graphmem.ops.consolidation import consolidate, merged_id, pooled_utility
from graphmem.stores.base import MemoryStore


def _memory(store: MemoryStore, dim: int, *, enabled: bool = False) -> GraphMemory:
    # Any similarity makes a same-subject candidate: the suite's vectors may have 8 dimensions.
    settings = ConsolidationConfig(enabled=enabled, note_similarity=-1.0)
    config = MemoryConfig(consolidation=settings)
    return GraphMemory(store, embedder=HashingEmbedder(dim), config=config)


def _credit(mem: GraphMemory, namespace: str, memory_id: str, reward: float) -> None:
    episode = mem.start_episode(namespace, "an episode")
    edge = Edge(namespace=namespace, kind=EdgeKind.RETRIEVED, src=episode.id, dst=memory_id)
    mem.store.upsert([], [edge])
    mem.finish_episode(namespace, episode.id, reward, success=reward > 0.5)


class ConsolidationConformance:
    """Mixed into :class:`StoreConformance`; needs its fixtures."""

    def test_consolidation_merges_look_alikes_and_loses_nothing(
        self, store: MemoryStore, namespace: str, dim: int
    ) -> None:
        mem = _memory(store, dim)
        ids = []
        for fruit, rewards in (("red apple", (1.0, 0.0)), ("yellow potato", (1.0,))):
            steps = [{"action": f"take {fruit}"}, {"action": f"slice {fruit} with knife"}]
            built = mem.build(namespace, {"task": "make the salad", "steps": steps})
            ids.append(built.procedure.id)
            for reward in rewards:
                _credit(mem, namespace, built.procedure.id, reward)
        olds = store.get_many(namespace, ids)
        before = {m.id for m in store.iter_nodes(namespace)}
        edges_before = {e.key for e in store.iter_edges(namespace)}

        result = consolidate(mem, Namespace(namespace))

        new_id = merged_id(namespace, ids)
        assert [m.new_id for m in result.merges] == [new_id]
        new = store.get(namespace, new_id)
        q, n, uses, successes = pooled_utility(olds, mem.config)
        assert math.isclose(new.q, q, rel_tol=1e-9)
        assert (new.q_updates, new.uses, new.successes) == (n, uses, successes) == (3, 3, 2)
        assert {m.id for m in store.iter_nodes(namespace)} == before | {new_id}
        assert edges_before <= {e.key for e in store.iter_edges(namespace)}
        for old in olds:
            kept = store.get(namespace, old.id)
            assert kept.obsolete and (kept.q, kept.uses) == (old.q, old.uses)
            assert len(store.edges(namespace, old.id, kinds=[EdgeKind.RETRIEVED], direction="in"))
        assert store.superseded(namespace, ids) == set(ids)
        assert consolidate(mem, Namespace(namespace)).merges == []
        assert store.get(namespace, new_id).uses == 3

    def test_a_contradicted_note_is_no_longer_recalled(
        self, store: MemoryStore, namespace: str, dim: int
    ) -> None:
        mem = _memory(store, dim, enabled=True)
        tags = ["subject:house keys"]
        old = mem.add_note(namespace, "house keys are found in hall drawer", tags=tags)
        new = mem.add_note(namespace, "house keys are found in kitchen bowl", tags=tags)
        assert new.version == old.version + 1
        assert store.get(namespace, old.id).obsolete
        assert store.superseded(namespace, [old.id]) == {old.id}
        assert new.embedding is not None
        recalled = store.recall(namespace, new.embedding, 10, kinds=[MemoryKind.NOTE])
        assert [r.memory.id for r in recalled] == [new.id]
