"""The embedded store keeps each memory as a flat tuple of plain values (``stores._packed``), so
CPython's full garbage collections, which stop every thread, no longer visit the memories: with
pydantic models held, a collection at 100k memories took 300 ms and held queries up that long.
Packing must be lossless for every kind, and reads must hand out private models."""

from __future__ import annotations

import gc
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from graphmem.models import (
    CreditPolicy,
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
)
from graphmem.stores.embedded import EmbeddedStore
from graphmem.stores.embedded.packed import pack, unpack

NS = "packed"
PLUS_TWO = timezone(timedelta(hours=2))


def every_kind() -> list[object]:
    when = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=PLUS_TWO)
    return [
        Note(
            id="n1",
            namespace=NS,
            content="café ☕",
            keywords=["a", "b"],
            tags=["t"],
            context="ctx",
            category="cat",
            data='{"x": 1}',
            q=0.75,
            uses=3,
            successes=2,
            q_updates=3,
            created_at=when,
            obsolete=True,
            obsolete_reason="old",
        ),
        Task(id="t1", namespace=NS, text="do it", key="do", key_mode=KeyMode.QUERY),
        Procedure(
            id="p1",
            namespace=NS,
            task_text="cook",
            key="cook",
            granularity=Granularity.SCRIPT,
            script="1. cut",
            reward=0.5,
            success=True,
            n_steps=1,
            source_ref="ep-1",
        ),
        Step(id="s1", namespace=NS, procedure_id="p1", index=0, action="cut", thought="why"),
        Tip(id="tip1", namespace=NS, text="prefer knives", polarity=TipPolarity.AVOID),
        Episode(
            id="e1",
            namespace=NS,
            task_text="cook",
            status=EpisodeStatus.FINISHED,
            reward=1.0,
            success=True,
            finished_at=when,
            credit=CreditPolicy.USED,
        ),
        Episode(id="e2", namespace=NS, task_text="open one"),
    ]


@pytest.mark.parametrize("memory", every_kind(), ids=lambda m: type(m).__name__)
def test_packing_is_lossless_for_every_kind(memory: object) -> None:
    assert isinstance(memory, Note | Task | Procedure | Step | Tip | Episode)
    back = unpack(pack(memory))
    assert type(back) is type(memory)
    assert back.model_dump() == memory.model_dump()
    assert back.model_dump_json() == memory.model_dump_json()
    assert back.model_fields_set == memory.model_fields_set
    for name, value in memory.__dict__.items():
        assert type(getattr(back, name)) is type(value) or name in ("created_at", "updated_at")
    assert back.created_at.utcoffset() == memory.created_at.utcoffset()


def test_a_packed_memory_is_plain_data_the_collector_skips() -> None:
    for memory in every_kind():
        packed = pack(memory)  # type: ignore[arg-type]
        gc.collect()
        gc.collect()  # a tuple inside (a list field) is untracked in the first pass
        assert not gc.is_tracked(packed), packed


def test_stored_memories_add_next_to_no_tracked_objects() -> None:
    store = EmbeddedStore(None)
    store.upsert([Note(id="warm", namespace=NS, content="w", embedding=[1.0, 0.0])])
    gc.collect()
    before = len(gc.get_objects())
    n = 2000
    store.upsert(
        [
            Note(id=f"n{i}", namespace=NS, content=f"c{i}", tags=["x"], embedding=[1.0, i + 1.0])
            for i in range(n)
        ]
    )
    gc.collect()
    grown = len(gc.get_objects()) - before
    # Held as models this was about six per memory.
    assert grown < 0.2 * n, grown
    store.close()


def test_reads_hand_out_private_models() -> None:
    store = EmbeddedStore(None)
    store.upsert([Note(id="n", namespace=NS, content="c", tags=["a"], embedding=[1.0, 0.0])])
    got = store.get_many(NS, ["n"])[0]
    assert isinstance(got, Note)
    got.tags.append("changed")
    got.content = "changed"
    hit = store.recall(NS, [1.0, 0.0], 1)[0].memory
    assert isinstance(hit, Note)
    assert (hit.content, hit.tags, hit.embedding) == ("c", ["a"], [1.0, 0.0])
    hit.tags.append("again")
    assert store.get_many(NS, ["n"])[0].tags == ["a"]
    store.close()


def test_edges_pack_losslessly_and_untracked() -> None:
    from graphmem.models import Edge, EdgeKind
    from graphmem.stores.embedded.packed import pack_edge, unpack_edge

    edge = Edge(
        namespace=NS,
        kind=EdgeKind.RETRIEVED,
        src="e1",
        dst="n1",
        props={"rank": 0, "sim": 0.5, "used": True, "note": "x", "none": None},
        created_at=datetime(2026, 1, 2, tzinfo=PLUS_TWO),
    )
    packed = pack_edge(edge)
    back = unpack_edge(packed)
    assert back == edge
    assert back.model_dump_json() == edge.model_dump_json()
    assert type(back.kind) is EdgeKind
    for _ in range(3):  # each pass untracks one level of nesting (pairs, props, the edge)
        gc.collect()
    assert not gc.is_tracked(packed)


def test_edges_read_back_are_private() -> None:
    from graphmem.models import Edge, EdgeKind

    store = EmbeddedStore(None)
    store.upsert(
        [
            Note(id="a", namespace=NS, content="a", embedding=[1.0, 0.0]),
            Note(id="b", namespace=NS, content="b", embedding=[0.0, 1.0]),
        ],
        [Edge(namespace=NS, kind=EdgeKind.LINKS_TO, src="a", dst="b", props={"w": 1})],
    )
    got = store.edges(NS, "a")[0]
    got.props["w"] = 2
    assert store.edges(NS, "a")[0].props == {"w": 1}
    assert next(iter(store.iter_edges(NS))).props == {"w": 1}
    store.close()


def test_the_graph_keeps_adjacency_both_ways_and_untracked() -> None:
    from graphmem.stores.embedded.graph import PackedGraph

    g = PackedGraph()
    for i in ("a", "b", "c"):
        g.set_node(i, ("Note", 0, i))
    g.set_edge("a", "b", "LINKS_TO", ("e", "ab"))
    g.set_edge("a", "b", "LINKS_TO", ("e", "ab2"))  # replaced, not doubled
    g.set_edge("c", "b", "SUPERSEDES", ("e", "cb"))
    g.set_edge("b", "b", "LINKS_TO", ("e", "bb"))  # a loop
    assert g.out_edges("a") == [("e", "ab2")]
    assert sorted(g.in_edges("b")) == [("e", "ab2"), ("e", "bb"), ("e", "cb")]
    assert g.has_in_edge("b", "SUPERSEDES") and not g.has_in_edge("a", "SUPERSEDES")
    g.remove_node("b")
    assert "b" not in g and len(g) == 2
    assert g.out_edges("a") == [] and g.out_edges("c") == [] and list(g.edges()) == []
    assert g.successors("a") == [] and g.predecessors("b") == []
    g.set_edge("a", "c", "LINKS_TO", ("e", "ac"))
    assert g.successors("a") == [("c", "LINKS_TO")] and g.predecessors("c") == [("a", "LINKS_TO")]
    for _ in range(3):
        gc.collect()
    # Strings to tuples only: nothing in the graph for a full collection to walk.
    maps = (g._nodes, g._edges, g._succ, g._pred)
    assert not any(gc.is_tracked(m._old) or gc.is_tracked(m._new) for m in maps)


def test_a_settling_map_keeps_its_large_dict_untracked_while_it_grows() -> None:
    # New entries are tracked tuples until a collection has seen them; a dict holding one is
    # tracked, and only a full collection untracks it. The map moves entries into its large
    # dict only once they are untracked, so that dict is never tracked, even mid-ingest.
    from graphmem.stores.embedded.graph import SETTLE_EVERY, SettlingMap

    m: SettlingMap[tuple[str, str], tuple[str, ...]] = SettlingMap()
    n = 6 * SETTLE_EVERY
    for i in range(n):
        m[(f"k{i}", "x")] = ("v", str(i), ("nested", str(i)))
        if i % 500 == 0:
            gc.collect(0)  # what the interpreter does every few hundred allocations
        assert not gc.is_tracked(m._old)
    assert len(m._old) > n // 2 and len(m) == n
    assert len(m._old) + len(m._new) == n and not set(m._old) & set(m._new)
    settled = next(iter(m._old))
    m[settled] = ("v", "again")  # an overwrite of a settled key: now new, the old one gone
    assert m[settled] == ("v", "again") and settled in m._new and settled not in m._old
    assert m.get(("k1", "x")) == ("v", "1", ("nested", "1")) and m.get(("no", "x")) is None
    assert m.pop(("k2", "x")) == ("v", "2", ("nested", "2")) and m.pop(("k2", "x")) is None
    del m[("k3", "x")]
    assert ("k3", "x") not in m and len(m) == n - 2
    assert sorted(m) == sorted(k for k, _ in m.items()) and len(list(m.values())) == n - 2
    with pytest.raises(KeyError):
        m[("k3", "x")]


def test_recalled_copies_follow_every_write(tmp_path: Path) -> None:
    """The store keeps the floats of the embeddings it handed out last
    (``stores._recent_floats``); every kind of write, by this handle or by another on the same
    directory, shows in the next copy."""
    path = tmp_path / "store"
    with EmbeddedStore.open(path) as store, EmbeddedStore.open(path) as other:
        store.upsert(
            [Note(id="n", namespace=NS, content="first", tags=["a"], embedding=[1.0, 0.0])]
        )

        def recalled() -> Note:
            memory = store.recall(NS, [1.0, 0.0], 1)[0].memory
            assert isinstance(memory, Note)
            return memory

        assert recalled().content == "first"
        store.upsert([Note(id="n", namespace=NS, content="second", embedding=[1.0, 0.0])])
        assert (recalled().content, recalled().tags) == ("second", [])
        store.patch(NS, "n", {"tags": ["b"]})
        assert recalled().tags == ["b"]
        store.update_utility(NS, ["n"], 1.0, 0.5)
        assert recalled().q == 0.75
        store.set_embeddings(NS, {"n": [1.0, 1.0]})  # the vector alone changes
        assert recalled().embedding == [1.0, 1.0]
        store.delete(NS, ["n"])
        store.upsert([Note(id="n", namespace=NS, content="third", embedding=[1.0, 0.0])])
        assert recalled().content == "third"
        other.patch(NS, "n", {"content": "from the other handle"})
        assert recalled().content == "from the other handle"
        other.compact()
        other.set_embeddings(NS, {"n": [0.5, 0.0]})
        assert recalled().embedding == [0.5, 0.0]


def test_recalled_copies_are_private_and_bounded() -> None:
    from graphmem.stores.embedded.recent_floats import RecentFloats

    store = EmbeddedStore(None)
    store.upsert(
        [Note(id=f"n{i}", namespace=NS, content=f"c{i}", embedding=[1.0, i]) for i in range(5)]
    )
    first = store.recall(NS, [1.0, 0.0], 1)[0].memory
    assert first.embedding == [1.0, 0.0]
    assert isinstance(first, Note)
    first.embedding.append(9.0)
    first.keywords.append("changed")
    again = store.recall(NS, [1.0, 0.0], 1)[0].memory
    assert isinstance(again, Note)
    assert (again.embedding, again.keywords) == ([1.0, 0.0], [])
    assert again.embedding is not first.embedding

    kept = RecentFloats(limit=3)
    store._state.floats = kept
    store.recall(NS, [1.0, 0.0], 5)
    assert len(kept) == 3  # the oldest made way
    assert [m.id for m in store.iter_nodes(NS)] == [f"n{i}" for i in range(5)]
    assert len(kept) == 3  # a walk over every memory goes around them
    store.close()


def test_row_floats_are_numpys_floats() -> None:
    import numpy as np

    from graphmem.stores.embedded.vectors import row_floats

    rows = np.random.default_rng(7).standard_normal((4, 384)).astype(np.float32)
    rows[0, :4] = [1e-45, -3.4e38, 0.1, -0.0]  # a subnormal, the largest magnitude, -0.0
    for row in rows:
        got = row_floats(row)
        assert got == row.tolist()
        assert all(type(x) is float for x in got)


def test_kept_floats_stay_out_of_full_collections() -> None:
    """What the store keeps to hand embeddings out again is untracked once a collection has
    seen it: kept as lists, 1,024 embeddings added 17 ms to every full collection."""
    store = EmbeddedStore(None)
    store.upsert(
        [Note(id=f"n{i}", namespace=NS, content=f"c{i}", embedding=[1.0, i]) for i in range(20)]
    )
    store.recall(NS, [1.0, 0.0], 20)
    for _ in range(3):
        gc.collect()
    entries = list(store._state.floats._entries.values())
    assert len(entries) == 20
    assert not any(gc.is_tracked(entry) for entry in entries)
    store.close()
