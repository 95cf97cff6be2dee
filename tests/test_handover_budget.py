"""One hand-over budget across kinds: K (and a token budget) filled from procedures and notes."""

from __future__ import annotations

import pytest

from graphmem import GraphMemory, HashingEmbedder
from graphmem.config import RetrievalConfig
from graphmem.models import MemoryKind, Note, Procedure
from graphmem.stores.base import MemoryStore

TASK = "water the garden plants"
BOTH = (MemoryKind.PROCEDURE, MemoryKind.NOTE, MemoryKind.TIP)


@pytest.fixture
def mem(store: MemoryStore, embedder: HashingEmbedder) -> GraphMemory:
    return GraphMemory(store, embedder=embedder)


def seeded(mem: GraphMemory, ns: str) -> tuple[str, str, str]:
    proc = mem.build(
        ns,
        {
            "task": TASK,
            "reward": 1.0,
            "success": True,
            "steps": [{"action": "take watering can"}, {"action": "water the garden plants"}],
        },
        granularity="script",
    ).procedure.id
    short = mem.add_note(ns, f"{TASK}: the tap is by the shed.").id
    long = mem.add_note(ns, f"{TASK}: " + "the hose leaks near the roses, " * 60).id
    return proc, short, long


def test_k_is_filled_from_every_kind_in_one_ranking(mem: GraphMemory, namespace: str) -> None:
    proc, short, long = seeded(mem, namespace)
    r = mem.retrieve(namespace, TASK, RetrievalConfig(k1=10, k2=3, kinds=BOTH))
    assert {h.memory.id for h in r.hits} == {proc, short, long}
    assert [h.rank for h in r.hits] == [0, 1, 2]
    assert any(isinstance(h.memory, Procedure) for h in r.hits)
    assert any(isinstance(h.memory, Note) for h in r.hits)
    text = r.as_prompt()
    assert "the tap is by the shed" in text and "take watering can" in text


def test_a_token_budget_passes_over_what_does_not_fit(mem: GraphMemory, namespace: str) -> None:
    proc, short, long = seeded(mem, namespace)
    cfg = RetrievalConfig(k1=10, k2=3, kinds=BOTH, max_tokens=120)
    r = mem.retrieve(namespace, TASK, cfg)
    assert {h.memory.id for h in r.hits} == {proc, short}
    (over,) = r.withheld
    assert over.memory.id == long and over.withheld and over.withheld.startswith("token budget")
    assert [h.rank for h in r.hits] == [0, 1]
    assert len(r.as_prompt()) // 4 <= 120 + 40  # the header and numbering are not budgeted
    # k2 still caps the hand-over, budget or not.
    one = mem.retrieve(namespace, TASK, cfg.model_copy(update={"k2": 1, "max_tokens": 10_000}))
    assert len(one.hits) == 1 and one.withheld == []
