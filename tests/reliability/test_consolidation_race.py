"""Two consolidations at once never count a use twice, on every store.

The race of issue 55: consolidator A reads look-alikes ``a`` and ``b`` and is paused just before
its write; meanwhile a third look-alike ``c`` is added and consolidator B merges all three into
a new version (uses ``a + b + c``). Without a conditional write A then wrote a second merged
version over ``a`` and ``b``, and the live memories held their uses twice (12 → 24). Each merge
is now written only if what it read is still live and uncredited since (``expect_live``), so A
reads again, finds ``a`` consolidated, and writes nothing.

Then the free-running version: an adder and two consolidators in separate processes, at random
moments, over several rounds; after a final sweep the live notes hold exactly the uses that
were credited.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from graphmem.config import MemoryConfig
from graphmem.embedding import HashingEmbedder
from graphmem.memory import GraphMemory
from graphmem.models import AnyMemory, MemoryKind, Namespace, Note
from graphmem.ops.consolidation import consolidate_memory
from graphmem.stores.base import MemoryStore
from graphmem.stores.embedded import EmbeddedStore

from ._workers import DIM, fork_all, open_store, store_spec

pytestmark = pytest.mark.reliability

SUBJECT = ["subject:gray coat"]
SAYINGS = [  # one subject and content, folded alike: consolidation's note rule merges them
    "gray coat belongs in wardrobe",
    "Gray coat belongs in wardrobe.",
    "GRAY COAT belongs in wardrobe!",
    "gray coat  belongs in Wardrobe",
    "Gray Coat belongs in wardrobe;",
    "gray coat belongs in wardrobe...",
]


@pytest.fixture(params=["journal", "sqlite", pytest.param("neo4j", marks=pytest.mark.neo4j)])
def handles(
    request: pytest.FixtureRequest, tmp_path: Path, namespace: str
) -> Iterator[Callable[[], MemoryStore]]:
    """Connections to one store, each with its own files and locks or driver: the first call
    gives the test's store, every later one a new connection. All closed after the test (the
    shared Neo4j one stays open, cleaned of this test's namespaces)."""
    first: MemoryStore
    if request.param == "neo4j":
        first = request.getfixturevalue("neo4j_store")
    else:
        first = EmbeddedStore.open(tmp_path / "store", durability=request.param)
    spec = store_spec(first)
    given: list[MemoryStore] = []

    def connect() -> MemoryStore:
        store = open_store(spec) if given else first
        given.append(store)
        return store

    try:
        yield connect
    finally:
        for store in given:
            if store is not first or request.param != "neo4j":
                store.close()
        if request.param == "neo4j":
            from tests.conftest import drop_namespaces

            drop_namespaces(first, namespace)
        else:
            first.close()


def memory_over(store: MemoryStore) -> GraphMemory:
    return GraphMemory(store, embedder=HashingEmbedder(DIM), config=MemoryConfig(alpha=0.1))


def live_notes(store: MemoryStore, namespace: str) -> list[AnyMemory]:
    nodes = [m for m in store.iter_nodes(namespace, kinds=[MemoryKind.NOTE]) if not m.obsolete]
    gone = store.superseded(namespace, [m.id for m in nodes])
    return [m for m in nodes if m.id not in gone]


def add(mem: GraphMemory, namespace: str, text: str, uses: int) -> Note:
    note = mem.add_note(namespace, text, tags=SUBJECT)
    for _ in range(uses):
        mem.store.update_utility(namespace, [note.id], 1.0, 0.1, success=True)
    return note


def credited_note(mem: GraphMemory, namespace: str, text: str, uses: int) -> None:
    """A look-alike that arrives with its uses, in one write (as an import does): a credit
    made after it is merged would land on the old version, which no sweep can pool."""
    vector = [float(x) for x in mem.embedder.embed([text])[0]]
    note = Note(
        namespace=namespace,
        content=text,
        tags=SUBJECT,
        embedding=vector,
        uses=uses,
        q_updates=uses,
        successes=uses,
        q=0.9,
    )
    mem.store.upsert([note], keep_utility=False)


def test_a_paused_consolidator_never_writes_a_second_version_over_merged_memories(
    handles: Callable[[], MemoryStore], namespace: str
) -> None:
    store_a, store_b = handles(), handles()
    assert store_a is not store_b
    mem_a, mem_b = memory_over(store_a), memory_over(store_b)
    a = add(mem_b, namespace, SAYINGS[0], 5)
    add(mem_b, namespace, SAYINGS[1], 7)

    paused, go = threading.Event(), threading.Event()
    real_upsert = store_a.upsert

    def pausing_upsert(nodes: Any = (), edges: Any = (), **kwargs: Any) -> None:
        if any(getattr(n, "obsolete", False) for n in nodes) and not paused.is_set():
            paused.set()  # A has read a and b as live and is about to retire them
            assert go.wait(120)
        real_upsert(nodes, edges, **kwargs)

    store_a.upsert = pausing_upsert  # type: ignore[method-assign]
    errors: list[BaseException] = []

    def consolidator_a() -> None:
        try:
            consolidate_memory(mem_a, Namespace(namespace), a.id)
        except BaseException as e:
            errors.append(e)

    thread = threading.Thread(target=consolidator_a)
    thread.start()
    try:
        assert paused.wait(120), "consolidator A never reached its write"
        add(mem_b, namespace, SAYINGS[2], 0)  # a look-alike arrives
        merged = mem_b.consolidate(namespace)  # B merges all three
        assert [len(m.merged_ids) for m in merged.merges] == [3]
    finally:
        go.set()
        thread.join(120)
    assert not thread.is_alive() and not errors, errors

    kept = [m for m in store_b.iter_nodes(namespace, kinds=[MemoryKind.NOTE]) if not m.obsolete]
    assert sum(m.uses for m in kept) == 12, [(m.id, m.uses) for m in kept]  # not 24
    live = live_notes(store_b, namespace)
    assert [(m.id, m.uses) for m in live] == [(merged.merges[0].new_id, 12)]
    assert sum(m.uses for m in live_notes(store_a, namespace)) == 12
    assert mem_b.consolidate(namespace).merges == []


ROUNDS = 6


def lookalike_uses(seed: int) -> list[int]:
    return [1 + (seed + i) % 3 for i in range(3)]


def free_worker(spec: dict[str, Any], namespace: str, role: int, seed: int) -> None:
    """Role 0 adds look-alikes (each credited a few times); roles 1 and 2 sweep, at random."""
    rng = random.Random(seed * 10 + role)
    store = open_store(spec)
    try:
        mem = memory_over(store)
        if role == 0:
            for i, uses in enumerate(lookalike_uses(seed)):
                credited_note(mem, namespace, SAYINGS[2 + i], uses)
                time.sleep(rng.uniform(0, 0.05))
        else:
            for _ in range(3):
                time.sleep(rng.uniform(0, 0.05))
                mem.consolidate(namespace)
    finally:
        store.close()


@pytest.mark.parametrize("round_", range(ROUNDS))
def test_free_running_consolidators_and_an_adder_count_every_use_once(
    handles: Callable[[], MemoryStore], namespace: str, round_: int
) -> None:
    store = handles()
    ns = f"{namespace}-r{round_}"
    mem = memory_over(store)
    add(mem, ns, SAYINGS[0], 3)
    add(mem, ns, SAYINGS[1], 4)
    spec = store_spec(store)
    seed = round_ * 7919 + os.getpid() % 1000
    codes = fork_all(3, lambda role: free_worker(spec, ns, role, seed))
    assert codes == [0, 0, 0]
    mem.consolidate(ns)  # whatever the workers left unmerged
    live = live_notes(store, ns)
    credited = 3 + 4 + sum(lookalike_uses(seed))
    assert len(live) == 1 and live[0].uses == credited, [(m.id, m.uses) for m in live]
