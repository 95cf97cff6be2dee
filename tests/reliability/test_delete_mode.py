"""Retention's delete mode beside the rest (issue 55), on every store.

- A process killed (SIGKILL) right after the first store write of an eviction leaves no Task
  without a procedure: the memory, its parts and the Tasks it leaves alone go in one delete.
- A retrieval whose recalled memory another process deletes before the episode is written
  does not fail with MemoryNotFound: the episode is recorded with the memories still there.
- Eviction never deletes what an open episode was offered (the next in the order goes): the
  episode's credit lands on every memory it was handed, so an episode whose memories were all
  deleted can no longer finish crediting nothing and count as one played without memory.
"""

from __future__ import annotations

import os
import signal
from typing import Any

import pytest

from graphmem.config import MemoryConfig, RetentionConfig
from graphmem.embedding import HashingEmbedder
from graphmem.memory import GraphMemory
from graphmem.models import EdgeKind, MemoryKind
from graphmem.stores.base import MemoryStore

from ._workers import DIM, fork_all, open_store, store_spec

pytestmark = pytest.mark.reliability


def trajectory(i: int) -> dict[str, Any]:
    return {
        "task": f"put apple number {i} in the fridge",
        "success": True,
        "reward": 1.0,
        "steps": [{"action": f"take apple {i}"}, {"action": "open fridge"}],
    }


def orphan_tasks(store: MemoryStore, namespace: str) -> list[str]:
    return [
        t.id
        for t in store.iter_nodes(namespace, kinds=[MemoryKind.TASK])
        if not store.edges(namespace, t.id, kinds=[EdgeKind.SOLVED_BY], direction="out")
    ]


def test_a_kill_after_an_evictions_first_write_leaves_no_orphan_task(
    store: MemoryStore, namespace: str
) -> None:
    plain = GraphMemory(store, embedder=HashingEmbedder(DIM))
    first = plain.build(namespace, trajectory(0))
    plain.build(namespace, trajectory(1))
    assert orphan_tasks(store, namespace) == []
    spec = store_spec(store)
    retention = RetentionConfig(max_memories=1, policy="fifo", on_evict="delete")

    def evict_then_die(_: int) -> None:
        child = open_store(spec)
        real_delete = child.delete

        def delete_then_kill(ns: str, ids: Any) -> list[str]:
            gone = real_delete(ns, ids)  # durable: acknowledged by the store
            os.kill(os.getpid(), signal.SIGKILL)  # kill -9 before anything else is written
            return gone

        child.delete = delete_then_kill  # type: ignore[method-assign]
        mem = GraphMemory(
            child, embedder=HashingEmbedder(DIM), config=MemoryConfig(retention=retention)
        )
        mem.enforce_retention(namespace)

    assert fork_all(1, evict_then_die) == [-signal.SIGKILL]
    after = open_store(spec)
    try:
        assert after.get_many(namespace, [first.procedure.id, first.task.id]) == []
        assert orphan_tasks(after, namespace) == []
    finally:
        after.close()


def test_a_recalled_memory_deleted_before_the_episode_is_written_fails_nothing(
    store: MemoryStore, namespace: str
) -> None:
    mem = GraphMemory(store, embedder=HashingEmbedder(DIM))
    notes = [mem.add_note(namespace, f"the red key opens door {i}") for i in range(3)]
    other = open_store(store_spec(store))  # the evicting process
    real_upsert = store.upsert
    deleted: list[str] = []

    def delete_first(nodes: Any = (), edges: Any = (), **kwargs: Any) -> None:
        offers = [e for e in edges if e.kind is EdgeKind.RETRIEVED]
        if offers and not deleted:
            deleted.extend(other.delete(namespace, [offers[0].dst]))
        real_upsert(nodes, edges, **kwargs)

    store.upsert = delete_first  # type: ignore[method-assign]
    try:
        got = mem.retrieve(
            namespace, "red key door", kinds=("Note",), k1=3, k2=3, open_episode=True
        )
    finally:
        del store.upsert
        other.close()
    assert deleted and got.episode_id is not None
    offered = {e.dst for e in store.edges(namespace, got.episode_id, kinds=[EdgeKind.RETRIEVED])}
    assert offered == {n.id for n in notes} - set(deleted)
    outcome = mem.finish_episode(namespace, got.episode_id, 1.0)
    assert {m.id for m in outcome.updated} == offered


def test_an_open_episodes_memories_wait_for_its_credit(store: MemoryStore, namespace: str) -> None:
    plain = GraphMemory(store, embedder=HashingEmbedder(DIM))
    for i in range(3):
        plain.add_note(namespace, f"the red key opens door {i}")
    got = plain.retrieve(namespace, "red key door", kinds=("Note",), k1=3, k2=2, open_episode=True)
    offered = {h.memory.id for h in got.hits}
    assert got.episode_id is not None and len(offered) == 2
    retention = RetentionConfig(max_memories=2, policy="fifo", on_evict="delete")
    mem = GraphMemory(
        store, embedder=HashingEmbedder(DIM), config=MemoryConfig(retention=retention)
    )
    mem.add_note(namespace, "a note no episode was offered")  # 4 notes, capacity 2
    left = {m.id for m in store.iter_nodes(namespace, kinds=[MemoryKind.NOTE])}
    assert left == offered  # the two not offered went, the oldest first or not
    outcome = plain.finish_episode(namespace, got.episode_id, 1.0)
    assert {m.id for m in outcome.updated} == offered  # credited: not a no-memory episode
