"""GraphMemoryStore: LangGraph's BaseStore behaviour on both graphmem stores.

The expectations are ported from LangGraph's own store tests (langchain-ai/langgraph:
``libs/checkpoint/tests/test_store.py``, ``libs/checkpoint-sqlite/tests/test_store.py``,
``libs/checkpoint-postgres/tests/test_store.py``, ``test_inmemory_store_dotted_filters.py``):
batch order and op kinds, namespaces (validation, prefix / suffix / wildcards / max_depth /
pagination / segment boundaries / metacharacters), filters (operators, numbers, booleans,
dotted and odd keys, injection-looking values), vector search (auto-embedding, update, index
fields, index=False, filters, pagination, edge cases, scores, non-ASCII) and the async API.
Where graphmem differs on purpose (one vector per item; two-phase scores) the test says so.
"""

from __future__ import annotations

import asyncio
import math
import random
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langchain_core.embeddings import Embeddings
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchOp,
)

from graphmem.embedding import HashingEmbedder
from graphmem.errors import InvalidInput, InvalidNamespace
from graphmem.integrations.langgraph_store import (
    GraphMemoryStore,
    GraphSearchItem,
    escape_label,
    item_id,
)
from graphmem.memory import GraphMemory
from graphmem.stores.base import MemoryStore
from graphmem.stores.embedded import EmbeddedStore

DIMS = 384


class CharacterEmbeddings(Embeddings):
    """Character-frequency embeddings through fixed random projections (deterministic)."""

    def __init__(self, dims: int = DIMS, seed: int = 42) -> None:
        self.dims = dims
        self._seed = seed
        self._proj: dict[str, list[float]] = {}

    def _projection(self, ch: str) -> list[float]:
        if ch not in self._proj:
            rng = random.Random(f"{self._seed}:{ord(ch)}")
            self._proj[ch] = [rng.gauss(0, 1 / math.sqrt(self.dims)) for _ in range(self.dims)]
        return self._proj[ch]

    def _one(self, text: str) -> list[float]:
        counts = Counter(text)
        total = sum(counts.values())
        if not total:
            return [1.0] + [0.0] * (self.dims - 1)
        vec = [0.0] * self.dims
        for ch, n in counts.items():
            for i, p in enumerate(self._projection(ch)):
                vec[i] += n / total * p
        norm = math.sqrt(sum(x * x for x in vec)) or 1.0
        return [x / norm for x in vec]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._one(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._one(text)


def _cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


@pytest.fixture
def mem(store: MemoryStore, embedder: HashingEmbedder) -> GraphMemory:
    return GraphMemory(store, embedder=embedder)


@pytest.fixture
def lg(mem: GraphMemory, namespace: str) -> GraphMemoryStore:
    # "<namespace>-lg/..." keeps every graphmem namespace under this test's prefix (cleanup).
    return GraphMemoryStore(mem, root=f"{namespace}-lg")


@pytest.fixture
def chars() -> CharacterEmbeddings:
    return CharacterEmbeddings()


@pytest.fixture
def vs(mem: GraphMemory, namespace: str, chars: CharacterEmbeddings) -> GraphMemoryStore:
    """A store indexing the whole value with character embeddings, ranked by similarity."""
    return GraphMemoryStore(
        mem, root=f"{namespace}-vs", index={"dims": DIMS, "embed": chars}, score="similarity"
    )


# ---- mapping ----


def test_labels_and_keys_map_one_to_one(lg: GraphMemoryStore) -> None:
    odd = ("a b", "a/b", "é", "x:y@z-1_2", "%2f", "tab\tnew\nline")
    for label in odd:
        assert "." not in label and escape_label(label) != escape_label(label + " ")
    for i, label in enumerate(odd):
        lg.put((label,), f"key {i}/ü", {"i": i})
    assert sorted(lg.list_namespaces()) == sorted((label,) for label in odd)
    for i, label in enumerate(odd):
        item = lg.get((label,), f"key {i}/ü")
        assert item is not None and item.value == {"i": i} and item.key == f"key {i}/ü"
    assert item_id("k") != item_id("k ") and item_id("k") == item_id("k")


def test_long_namespaces_work_like_short_ones(lg: GraphMemoryStore, mem: GraphMemory) -> None:
    """Labels too long to spell out in a graphmem namespace are hashed, and read back."""
    chinese = "用户偏好设置记录" * 2  # 16 characters: 144 once escaped
    long_ns = ("users", chinese, "memories")
    deep = tuple(f"level{i}" for i in range(40))
    lg.put(long_ns, "pref", {"text": "likes green tea"})
    lg.put(deep, "k", {"text": "deep"})
    lg.put(("users", "short"), "k", {"text": "short"})
    assert len(escape_label(chinese)) > 128
    graph_ns = lg.graph_namespace(long_ns)
    assert len(graph_ns) <= 128 and "/.long/" in graph_ns
    item = lg.get(long_ns, "pref")
    assert (
        item is not None and item.namespace == long_ns and item.value["text"] == "likes green tea"
    )
    assert sorted(lg.list_namespaces()) == sorted([long_ns, deep, ("users", "short")])
    assert lg.list_namespaces(prefix=("users", chinese)) == [long_ns]
    assert lg.list_namespaces(suffix=("memories",)) == [long_ns]
    assert {i.namespace for i in lg.search(("users",))} == {long_ns, ("users", "short")}
    assert [i.key for i in lg.search(("users", chinese), query="tea")] == ["pref"]
    # A fresh store object (no cache) reads the labels back from the items.
    again = GraphMemoryStore(mem, root=lg.root)
    assert sorted(again.list_namespaces(prefix=("level0",))) == [deep]
    lg.delete(long_ns, "pref")
    assert lg.get(long_ns, "pref") is None and long_ns not in lg.list_namespaces()
    assert lg.list_namespaces() != []


def test_a_search_under_a_prefix_lists_only_the_namespaces_under_it(
    lg: GraphMemoryStore, mem: GraphMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user's search (or namespace listing) reads the namespaces under the user's prefix (and
    the hashed ones), not every namespace in the graph: on Neo4j listing them all scans every
    memory per query."""
    chinese = "用户偏好设置记录" * 2
    for user in ("u1", "u10", "u2"):
        lg.put(("users", user), "tea", {"text": f"{user} likes green tea"})
    lg.put(("users", "u1", "notes"), "tea", {"text": "u1 noted oolong"})
    lg.put(("users", "u1", chinese), "tea", {"text": "u1 long tea"})
    lg.put(("users", "u10", chinese), "tea", {"text": "u10 long tea"})
    asked: list[str] = []
    listing = mem.store.namespaces

    def spy(*prefixes: str) -> list[str]:
        asked.extend(prefixes)
        return listing(*prefixes)

    monkeypatch.setattr(mem.store, "namespaces", spy)
    found = lg.search(("users", "u1"), query="tea", limit=10)
    assert sorted(i.namespace for i in found) == sorted(
        [("users", "u1"), ("users", "u1", "notes"), ("users", "u1", chinese)]
    )
    assert asked == [f"{lg.root}/users/u1", f"{lg.root}/.long/"]
    asked.clear()
    assert {i.namespace for i in lg.search(("users",), limit=10)} == {
        ("users", "u1"),
        ("users", "u10"),
        ("users", "u2"),
        ("users", "u1", "notes"),
        ("users", "u1", chinese),
        ("users", "u10", chinese),
    }
    assert asked == [f"{lg.root}/users", f"{lg.root}/.long/"]
    asked.clear()
    assert lg.list_namespaces(prefix=("users", "u1"), max_depth=3) == sorted(
        [("users", "u1"), ("users", "u1", "notes"), ("users", "u1", chinese)]
    )
    assert asked == [f"{lg.root}/users/u1", f"{lg.root}/.long/"]


def test_bad_values_change_nothing(lg: GraphMemoryStore) -> None:
    lg.put(("docs",), "ok", {"v": 1})
    with pytest.raises(InvalidInput):
        lg.put(("docs",), "nan", {"v": float("nan")})
    with pytest.raises(InvalidInput):
        lg.put(("docs",), "obj", {"v": object()})
    assert [i.key for i in lg.search(("docs",))] == ["ok"]
    with pytest.raises(NotImplementedError):
        lg.put(("docs",), "ttl", {"v": 1}, ttl=5)


def test_foreign_notes_are_not_items(lg: GraphMemoryStore, mem: GraphMemory) -> None:
    lg.put(("docs",), "k", {"v": 1})
    graph_ns = lg.graph_namespace(("docs",))
    mem.add_note(graph_ns, "a note written by graphmem itself")
    assert [i.key for i in lg.search(("docs",))] == ["k"]
    assert [i.key for i in lg.search(("docs",), query="note written")] == ["k"]


# ---- batch (ported from the sqlite / postgres suites) ----


def test_batch_order(lg: GraphMemoryStore) -> None:
    lg.put(("test", "foo"), "key1", {"data": "value1"})
    lg.put(("test", "bar"), "key2", {"data": "value2"})
    results = lg.batch(
        [
            GetOp(("test", "foo"), "key1"),
            PutOp(("test", "bar"), "key2", {"data": "value2"}),
            SearchOp(("test",), {"data": "value1"}, 10, 0),
            ListNamespacesOp(None, None, 10, 0),
            GetOp(("test",), "key3"),
        ]
    )
    assert len(results) == 5
    assert isinstance(results[0], Item) and results[0].value == {"data": "value1"}
    assert results[0].key == "key1" and results[0].namespace == ("test", "foo")
    assert results[1] is None
    assert isinstance(results[2], list) and [i.key for i in results[2]] == ["key1"]
    assert isinstance(results[3], list)
    assert ("test", "foo") in results[3] and ("test", "bar") in results[3]
    assert results[4] is None

    again = lg.batch(
        [
            SearchOp(("test",), None, 5, 0),
            GetOp(("test", "bar"), "key2"),
            ListNamespacesOp(None, None, 5, 0),
            PutOp(("test",), "key3", {"data": "value3"}),
            GetOp(("test", "foo"), "key1"),
        ]
    )
    assert isinstance(again[0], list) and len(again[0]) >= 2
    assert isinstance(again[1], Item) and again[1].value == {"data": "value2"}
    assert again[3] is None
    assert isinstance(again[4], Item) and again[4].value == {"data": "value1"}
    item3 = lg.get(("test",), "key3")
    assert item3 is not None and item3.value == {"data": "value3"}


def test_batch_reads_see_earlier_puts_and_last_put_wins(lg: GraphMemoryStore) -> None:
    results = lg.batch(
        [
            PutOp(("t",), "k", {"v": 1}),
            PutOp(("t",), "k", {"v": 2}),
            GetOp(("t",), "k"),
            PutOp(("t",), "k", None),
            GetOp(("t",), "k"),
        ]
    )
    assert isinstance(results[2], Item) and results[2].value == {"v": 2}
    assert results[4] is None


def test_batch_get_put_search_list_ops(lg: GraphMemoryStore) -> None:
    assert lg.batch(
        [
            PutOp(("test",), "key1", {"data": "value1"}),
            PutOp(("test",), "key2", {"data": "value2"}),
            PutOp(("test",), "key3", None),
        ]
    ) == [None, None, None]
    got = lg.batch([GetOp(("test",), "key1"), GetOp(("test",), "key2"), GetOp(("test",), "k3")])
    assert [g.key if isinstance(g, Item) else None for g in got] == ["key1", "key2", None]

    for ns, key, value in [
        (("s", "foo"), "key1", {"data": "value1", "tag": "a"}),
        (("s", "bar"), "key2", {"data": "value2", "tag": "a"}),
        (("s", "baz"), "key3", {"data": "value3", "tag": "b"}),
    ]:
        lg.put(ns, key, value)
    found = lg.batch(
        [
            SearchOp(("s",), {"tag": "a"}, 10, 0),
            SearchOp(("s",), None, 2, 0),
            SearchOp(("s", "foo"), None, 10, 0),
        ]
    )
    assert isinstance(found[0], list) and isinstance(found[1], list)
    assert isinstance(found[2], list)
    assert len(found[0]) == 2 and all(i.value["tag"] == "a" for i in found[0])
    assert len(found[1]) == 2
    assert [i.namespace for i in found[2]] == [("s", "foo")]

    for ns in [("t", "documents", "public"), ("t", "documents", "private"), ("p", "d", "public")]:
        lg.put(ns, "doc", {"content": "x"})
    listed = lg.batch(
        [
            ListNamespacesOp(None, None, 100, 0),
            ListNamespacesOp(None, 2, 100, 0),
            ListNamespacesOp((MatchCondition("suffix", ("public",)),), None, 100, 0),
        ]
    )
    assert isinstance(listed[0], list) and isinstance(listed[1], list)
    assert isinstance(listed[2], list)
    assert len(listed[0]) == 7
    assert all(len(ns) <= 2 for ns in listed[1])
    assert sorted(listed[2]) == [("p", "d", "public"), ("t", "documents", "public")]


# ---- basic operations ----


def test_basic_store_ops(lg: GraphMemoryStore) -> None:
    namespace = ("test", "documents")
    lg.put(namespace, "doc1", {"title": "Test Document", "content": "Hello, World!"})
    item = lg.get(namespace, "doc1")
    assert item is not None and item.namespace == namespace and item.key == "doc1"
    assert item.value == {"title": "Test Document", "content": "Hello, World!"}
    lg.put(namespace, "doc1", {"title": "Updated", "content": "Hello, LangGraph!"})
    updated = lg.get(namespace, "doc1")
    assert updated is not None and updated.value["title"] == "Updated"
    assert updated.updated_at >= item.updated_at and updated.created_at == item.created_at
    assert lg.get(("test", "other_documents"), "doc1") is None
    lg.delete(namespace, "doc1")
    assert lg.get(namespace, "doc1") is None
    lg.delete(namespace, "never-there")  # deleting a missing key is not an error
    assert lg.search(("test",)) == []


def test_namespace_validation(lg: GraphMemoryStore) -> None:
    doc = {"foo": "bar"}
    for bad in [(), ("the", "thing.about"), ("some", "fun", ""), ("langgraph", "foo")]:
        with pytest.raises(InvalidNamespaceError):
            lg.put(bad, "foo", doc)
    with pytest.raises(InvalidNamespaceError):
        lg.batch([GetOp(("a.b",), "k")])
    # The same errors are graphmem's InvalidNamespace (one line, one error root), on every
    # method, sync and async, and nothing is written.
    for call in (
        lambda: lg.put(("a.b",), "k", doc),
        lambda: lg.get(("",), "k"),
        lambda: lg.search(("a.b",)),
        lambda: lg.delete(("a", ""), "k"),
        lambda: lg.list_namespaces(prefix=("a.b",)),
        lambda: asyncio.run(lg.aput(("langgraph",), "k", doc)),
        lambda: asyncio.run(lg.asearch(("a.b",))),
        lambda: lg.batch([GetOp(("a.b",), "k")]),
    ):
        with pytest.raises(InvalidNamespace) as info:
            call()
        assert isinstance(info.value, InvalidNamespaceError) and "\n" not in str(info.value)
    lg.put(("foo", "langgraph", "foo"), "bar", doc)
    got = lg.get(("foo", "langgraph", "foo"), "bar")
    assert got is not None and got.value == doc
    assert lg.search(("foo", "langgraph", "foo"))[0].value == doc
    lg.delete(("foo", "langgraph", "foo"), "bar")
    assert lg.get(("foo", "langgraph", "foo"), "bar") is None
    # Past the public API the reserved root label is allowed, as in LangGraph's stores.
    lg.batch([PutOp(("langgraph", "foo"), "bar", doc)])
    got = lg.get(("langgraph", "foo"), "bar")
    assert got is not None and got.value == doc


# ---- list_namespaces ----


def test_list_namespaces_basic(lg: GraphMemoryStore) -> None:
    namespaces = [
        ("a", "b", "c"),
        ("a", "b", "d", "e"),
        ("a", "b", "d", "i"),
        ("a", "b", "f"),
        ("a", "c", "f"),
        ("b", "a", "f"),
        ("users", "123"),
        ("users", "456", "settings"),
        ("admin", "users", "789"),
    ]
    for i, ns in enumerate(namespaces):
        lg.put(ns, f"id_{i}", {"data": f"value_{i:02d}"})
    assert lg.list_namespaces(prefix=("a", "b")) == [
        ("a", "b", "c"),
        ("a", "b", "d", "e"),
        ("a", "b", "d", "i"),
        ("a", "b", "f"),
    ]
    assert lg.list_namespaces(suffix=("f",)) == [("a", "b", "f"), ("a", "c", "f"), ("b", "a", "f")]
    assert lg.list_namespaces(prefix=("a",), suffix=("f",)) == [("a", "b", "f"), ("a", "c", "f")]
    assert lg.list_namespaces(prefix=("a", "b"), max_depth=3) == [
        ("a", "b", "c"),
        ("a", "b", "d"),
        ("a", "b", "f"),
    ]
    assert lg.list_namespaces(prefix=("a", "b"), limit=2) == [("a", "b", "c"), ("a", "b", "d", "e")]
    assert lg.list_namespaces(prefix=("a", "b"), offset=2) == [
        ("a", "b", "d", "i"),
        ("a", "b", "f"),
    ]
    assert lg.list_namespaces(prefix=("a", "*", "f")) == [("a", "b", "f"), ("a", "c", "f")]
    assert lg.list_namespaces(suffix=("*", "f")) == [
        ("a", "b", "f"),
        ("a", "c", "f"),
        ("b", "a", "f"),
    ]
    assert lg.list_namespaces(prefix=("nonexistent",)) == []
    assert lg.list_namespaces(prefix=("users", "123")) == [("users", "123")]
    assert lg.list_namespaces(max_depth=2) == sorted({ns[:2] for ns in namespaces})


def test_list_namespaces_wildcards_and_pagination(lg: GraphMemoryStore) -> None:
    for i, ns in enumerate(
        [
            ("users", "123"),
            ("users", "456"),
            ("users", "789", "settings"),
            ("admin", "users", "789"),
            ("guests", "123"),
            ("guests", "456", "preferences"),
        ]
    ):
        lg.put(ns, f"id_{i}", {"data": i})
    assert lg.list_namespaces(prefix=("users", "*")) == [
        ("users", "123"),
        ("users", "456"),
        ("users", "789", "settings"),
    ]
    assert lg.list_namespaces(suffix=("*", "preferences")) == [("guests", "456", "preferences")]
    assert lg.list_namespaces(prefix=("*", "users"), suffix=("*", "settings")) == []

    for i in range(20):
        lg.put(("namespace", f"sub_{i:02d}"), f"id_{i:02d}", {"data": i})
    for offset in (0, 5, 15):
        assert lg.list_namespaces(prefix=("namespace",), limit=5, offset=offset) == [
            ("namespace", f"sub_{i:02d}") for i in range(offset, offset + 5)
        ]


def test_list_namespaces_deep_wildcards(lg: GraphMemoryStore) -> None:
    p = "pref"
    namespaces = [
        (p, "test", "documents", "public", p),
        (p, "test", "documents", "private", p),
        (p, "test", "images", "public", p),
        (p, "test", "images", "private", p),
        (p, "prod", "documents", "public", p),
        (p, "prod", "documents", "some", "nesting", "public", p),
        (p, "prod", "documents", "private", p),
    ]
    for ns in namespaces:
        lg.put(ns, "dummy", {"content": "dummy"})
    assert len(lg.list_namespaces(prefix=(p, "test"))) == 4
    assert len(lg.list_namespaces(prefix=(p, "test", "documents"))) == 2
    assert len(lg.list_namespaces(suffix=("public", p))) == 4
    assert len(lg.list_namespaces(prefix=(p, "test"), suffix=("public", p))) == 2
    assert len(lg.list_namespaces(prefix=(p, "*", "documents"))) == 5
    assert len(lg.list_namespaces(suffix=("*", "public", p))) == 4
    assert lg.list_namespaces(suffix=("some", "*", "public", p)) == [namespaces[5]]
    assert all(len(ns) <= 3 for ns in lg.list_namespaces(max_depth=3))
    deep = lg.list_namespaces(max_depth=4, prefix=(p, "*", "documents"))
    assert len(set(deep)) == len(deep) == 5
    assert len(lg.list_namespaces(prefix=(p,), limit=3)) == 3
    assert len(lg.list_namespaces(prefix=(p,), offset=3)) == len(namespaces) - 3
    assert set(lg.list_namespaces(prefix=(p,))) == set(namespaces)


def test_list_namespaces_segment_boundaries_and_metacharacters(lg: GraphMemoryStore) -> None:
    for ns in [
        ("foo",),
        ("foo", "child"),
        ("foobar",),
        ("foobar", "baz"),
        ("uid", "users", "alice"),
        ("uid", "users", "malice"),
        ("uid", "a", "b", "alice"),
        ("users", "alice\n"),
    ]:
        lg.put(ns, "k", {"v": 1})
    assert set(lg.list_namespaces(prefix=("foo",))) == {("foo",), ("foo", "child")}
    assert set(lg.list_namespaces(suffix=("alice",))) == {
        ("uid", "users", "alice"),
        ("uid", "a", "b", "alice"),
    }
    assert lg.list_namespaces(prefix=("uid", "*", "alice")) == [("uid", "users", "alice")]
    pairs = [("star*", "starX"), ("q?m", "qXm"), ("br[ack]et", "brXacXket"), ("a%b", "axxb")]
    for label, decoy in pairs:
        lg.put((label,), "k", {"v": 1})
        lg.put((decoy,), "k", {"v": 1})
        lg.put((label, "child"), "k", {"v": 1})
    for label, _ in pairs:
        assert set(lg.list_namespaces(prefix=(label,))) == {(label,), (label, "child")}


def test_list_namespaces_empty(lg: GraphMemoryStore) -> None:
    assert lg.list_namespaces() == []


# ---- search without a query (filters, pagination, ordering) ----


def test_search_filters_and_pagination(lg: GraphMemoryStore) -> None:
    data = [
        (("test", "docs"), "doc1", {"title": "First", "author": "Alice", "tags": ["important"]}),
        (("test", "docs"), "doc2", {"title": "Second", "author": "Bob", "tags": ["draft"]}),
        (("test", "images"), "img1", {"title": "Image 1", "author": "Alice", "tags": ["final"]}),
    ]
    for ns, key, value in data:
        lg.put(ns, key, value)
    assert len(lg.search(("test",))) == 3
    docs = lg.search(("test", "docs"))
    assert len(docs) == 2 and all(i.namespace == ("test", "docs") for i in docs)
    alice = lg.search(("test",), filter={"author": "Alice"})
    assert sorted(i.key for i in alice) == ["doc1", "img1"]
    assert [i.key for i in lg.search(("test",), filter={"tags": ["draft"]})] == ["doc2"]
    first, second = lg.search(("test",), limit=2), lg.search(("test",), offset=2)
    assert len(first) == 2 and len(second) == 1
    assert {i.key for i in first}.isdisjoint({i.key for i in second})
    assert {i.key for i in lg.search((), limit=100)} == {"doc1", "doc2", "img1"}


def test_search_orders_newest_first(lg: GraphMemoryStore) -> None:
    for key in ("a", "b", "c"):
        lg.put(("o",), key, {"v": key})
    lg.put(("o",), "a", {"v": "a2"})
    assert [i.key for i in lg.search(("o",))] == ["a", "c", "b"]
    assert all(isinstance(i, GraphSearchItem) and i.score is None for i in lg.search(("o",)))


def test_filter_operators_and_safety(lg: GraphMemoryStore) -> None:
    for key, price in [("item1", 10), ("item2", 20), ("item3", 30), ("item4", -10)]:
        lg.put(("items",), key, {"price": price})
    keys = lambda f: sorted(i.key for i in lg.search(("items",), filter=f))  # noqa: E731
    assert keys({"price": {"$gt": 15}}) == ["item2", "item3"]
    assert keys({"price": {"$gte": 20, "$lt": 30}}) == ["item2"]
    assert keys({"price": {"$lte": 10}}) == ["item1", "item4"]
    assert keys({"price": {"$ne": 10}}) == ["item2", "item3", "item4"]
    assert keys({"price": {"$eq": 30}}) == ["item3"]
    assert len(keys({"price": {"$lt": float("inf")}})) == 4
    assert len(keys({"price": {"$gt": float("-inf")}})) == 4
    assert keys({"price": {"$eq": float("nan")}}) == []
    assert len(keys({"price": {"$lt": 10**100}})) == 4
    assert keys({"price": {"$lt": 0}}) == ["item4"]
    assert keys({"price": {"$gt": "a"}}) == []  # numbers and strings never compare
    with pytest.raises(InvalidInput, match="operator"):
        lg.search(("items",), filter={"price": {"$regex": "1"}})

    lg.put(("flags",), "f1", {"active": True, "n": 1})
    lg.put(("flags",), "f2", {"active": False, "n": 0})
    assert [i.key for i in lg.search(("flags",), filter={"active": True})] == ["f1"]
    assert [i.key for i in lg.search(("flags",), filter={"active": False})] == ["f2"]
    assert [i.key for i in lg.search(("flags",), filter={"n": True})] == []  # 1 is not true

    lg.put(("docs",), "hyphen", {"access-level": "public", "user": {"access-level": "nested"}})
    lg.put(("docs",), "digit", {"123abc": "ok", "user": {"123abc": "ok2"}})
    lg.put(("docs",), "quote", {"title": "O'Brien's Document", "access": "public"})
    find = lambda f: [i.key for i in lg.search(("docs",), filter=f)]  # noqa: E731
    assert find({"access-level": "public"}) == ["hyphen"]
    assert find({"user.access-level": "nested"}) == ["hyphen"]
    assert find({"123abc": "ok"}) == ["digit"]
    assert find({"user.123abc": "ok2"}) == ["digit"]
    assert find({"user": {"access-level": "nested"}}) == ["hyphen"]
    assert find({"title": "O'Brien's Document"}) == ["quote"]
    for hostile in ["public' OR '1'='1", "public'; --", "x' UNION MATCH (n) DETACH DELETE n //"]:
        assert find({"access": hostile}) == []
    assert find({"missing": {"$ne": 1}}) == ["quote", "digit", "hyphen"]


def test_search_prefix_stops_at_segment_boundaries(lg: GraphMemoryStore) -> None:
    for ns in [("foo",), ("foo", "child"), ("foo", "child", "deep"), ("foobar",), ("Foo",)]:
        lg.put(ns, "k", {"v": 1})

    def found(prefix: tuple[str, ...]) -> set[tuple[str, ...]]:
        return {i.namespace for i in lg.search(prefix, limit=100)}

    assert found(("foo",)) == {("foo",), ("foo", "child"), ("foo", "child", "deep")}
    assert found(("foobar",)) == {("foobar",)}
    assert found(("fo",)) == set()
    assert found(("Foo",)) == {("Foo",)}


# ---- semantic search ----


def test_vector_insert_with_auto_embedding(vs: GraphMemoryStore) -> None:
    docs = [
        ("doc1", {"text": "short text"}),
        ("doc2", {"text": "longer text document"}),
        ("doc3", {"text": "longest text document here"}),
        ("doc4", {"description": "text in description field"}),
        ("doc5", {"content": "text in content field"}),
        ("doc6", {"body": "text in body field"}),
    ]
    for key, value in docs:
        vs.put(("test",), key, value)
    keys = [r.key for r in vs.search(("test",), query="long text")]
    assert "doc2" in keys and "doc3" in keys


def test_vector_update_changes_the_embedding(vs: GraphMemoryStore) -> None:
    vs.put(("test",), "doc1", {"text": "zany zebra Xerxes"})
    vs.put(("test",), "doc2", {"text": "something about dogs"})
    vs.put(("test",), "doc3", {"text": "text about birds"})
    initial = vs.search(("test",), query="Zany Xerxes")
    assert initial[0].key == "doc1"
    before = initial[0].score
    assert before is not None
    vs.put(("test",), "doc1", {"text": "new text about dogs"})
    after = next(r.score for r in vs.search(("test",), query="Zany Xerxes") if r.key == "doc1")
    assert after is not None and after < before
    vs.put(("test",), "doc4", {"text": "new text about dogs"}, index=False)
    top3 = vs.search(("test",), query="new text about dogs", limit=3)
    assert len(top3) == 3 and not any(r.key == "doc4" for r in top3)
    # Not indexed, still found without a query and after the ranked items when there is room.
    assert "doc4" in {r.key for r in vs.search(("test",))}
    tail = vs.search(("test",), query="new text about dogs", limit=10)
    assert tail[-1].key == "doc4" and tail[-1].score is None


def test_vector_search_with_filters(vs: GraphMemoryStore) -> None:
    docs = [
        ("doc1", {"text": "red apple", "color": "red", "score": 4.5}),
        ("doc2", {"text": "red car", "color": "red", "score": 3.0}),
        ("doc3", {"text": "green apple", "color": "green", "score": 4.0}),
        ("doc4", {"text": "blue car", "color": "blue", "score": 3.5}),
    ]
    for key, value in docs:
        vs.put(("test",), key, value)
    results = vs.search(("test",), query="apple", filter={"color": "red"})
    assert [r.key for r in results][:1] == ["doc1"] and len(results) == 2
    results = vs.search(("test",), query="car", filter={"color": "red"})
    assert [r.key for r in results][:1] == ["doc2"] and len(results) == 2
    results = vs.search(("test",), query="bbbbluuu", filter={"score": {"$gt": 3.2}})
    assert len(results) == 3 and results[0].key == "doc4"
    results = vs.search(("test",), query="apple", filter={"score": {"$gte": 4.0}, "color": "green"})
    assert [r.key for r in results] == ["doc3"]


def test_filter_widens_the_recall(vs: GraphMemoryStore) -> None:
    """A filter that rejects most near matches still fills the page from further away."""
    for i in range(30):
        vs.put(("many",), f"near{i}", {"text": f"apple pie {i}", "keep": False})
    vs.put(("many",), "far", {"text": "zzz qqq", "keep": True})
    results = vs.search(("many",), query="apple pie", filter={"keep": True}, limit=1)
    assert [r.key for r in results] == ["far"]


def test_vector_search_pagination_and_edge_cases(vs: GraphMemoryStore) -> None:
    for i in range(5):
        vs.put(("test",), f"doc{i}", {"text": f"test document number {i}"})
    page1 = vs.search(("test",), query="test", limit=2)
    page2 = vs.search(("test",), query="test", limit=2, offset=2)
    assert len(page1) == 2 and len(page2) == 2
    assert {r.key for r in page1}.isdisjoint({r.key for r in page2})
    assert len(vs.search(("test",), query="test", limit=10)) == 5
    for query in ["", None, "test " * 100, "test!@#$%^&*()", "   "]:
        assert len(vs.search(("test",), query=query)) == 5


def test_index_fields_per_put(vs: GraphMemoryStore, mem: GraphMemory, namespace: str) -> None:
    """``index=[...]`` picks the embedded fields; graphmem embeds them as one joined text."""
    vs.put(("test",), "doc3", {"key0": "aaa", "key1": "bbb", "key2": "ccc"}, index=["key0"])
    vs.put(("test",), "doc4", {"key0": "eee", "key1": "bbb", "key2": "ggg"}, index=["key2"])
    assert vs.search(("test",), query="aaa")[0].key == "doc3"
    assert vs.search(("test",), query="ggg")[0].key == "doc4"
    graph_ns = vs.graph_namespace(("test",))
    assert mem.get(graph_ns, item_id("doc3")).content == "aaa"  # type: ignore[union-attr]
    fielded = GraphMemoryStore(
        mem, root=f"{namespace}-f", index={"embed": vs.embeddings, "fields": ["title", "tags[*]"]}
    )
    fielded.put(("d",), "k", {"title": "Soup", "tags": ["hot", "red"], "body": "ignored"})
    content = mem.get(fielded.graph_namespace(("d",)), item_id("k")).content  # type: ignore[union-attr]
    assert content == "Soup\nhot\nred"


def test_similarity_scores_are_cosines(vs: GraphMemoryStore, chars: CharacterEmbeddings) -> None:
    vs.put(("test",), "doc", {"key0": "aaa"}, index=["key0"])
    for query in ["aaa", "bbb", "abcd", "poisson"]:
        results = vs.search((), query=query)
        expected = _cosine(chars.embed_query(query), chars.embed_query("aaa"))
        assert len(results) == 1 and results[0].score == pytest.approx(expected, abs=1e-3)


def test_non_ascii(vs: GraphMemoryStore) -> None:
    texts = ["这是中文", "これは日本語です", "이건 한국어야", "Это русский", "यह रूसी है"]
    for i, text in enumerate(texts, start=1):
        vs.put(("user_123", "memories"), str(i), {"text": text})
    for i, text in enumerate(texts, start=1):
        assert vs.search(("user_123", "memories"), query=text)[0].key == str(i)


def test_two_phase_scores_and_learned_utility(lg: GraphMemoryStore, mem: GraphMemory) -> None:
    """By default score is the similarity; the two-phase parts ride along, and the opt-in
    ``score="two_phase"`` ranks by them, so a higher Q lifts an item (λ > 0)."""
    lg.put(("kb",), "tea", {"text": "green tea is brewed at 80 degrees"})
    lg.put(("kb",), "tea2", {"text": "green tea brewing temperature"})
    lg.put(("kb",), "car", {"text": "the car needs new tyres"})
    results = lg.search(("kb",), query="green tea brewing temperature")
    assert results[0].key == "tea2"
    assert isinstance(results[0], GraphSearchItem)
    parts = results[0].parts
    assert set(parts) >= {"sim", "q", "z_sim", "z_q", "two_phase", "two_phase_rank", "memory_id"}
    assert results[0].score == pytest.approx(parts["sim"])
    assert [r.score for r in results] == sorted((r.score for r in results), reverse=True)
    assert parts["two_phase"] == pytest.approx(
        (1 - parts["lam"]) * parts["z_sim"] + parts["lam"] * parts["z_q"]
    )
    assert results[0].dict()["parts"] == parts
    graph_ns = lg.graph_namespace(("kb",))
    for _ in range(10):
        mem.store.update_utility(graph_ns, [item_id("tea")], 1.0, 0.3)
        mem.store.update_utility(graph_ns, [item_id("tea2")], 0.0, 0.3)
    # Similarity ignores what was learned...
    assert lg.search(("kb",), query="green tea brewing temperature")[0].key == "tea2"
    # ...two-phase ranking uses it, and reports its own score.
    utility_first = GraphMemoryStore(mem, root=lg.root, lam=1.0, score="two_phase")
    ranked = utility_first.search(("kb",), query="green tea brewing temperature")
    assert ranked[0].key == "tea"
    assert isinstance(ranked[0], GraphSearchItem) and ranked[0].parts["q"] > 0.9
    assert ranked[0].score == pytest.approx(ranked[0].parts["two_phase"])
    assert ranked[0].parts["two_phase_rank"] == 0
    # A re-put keeps what the item has learned.
    lg.put(("kb",), "tea", {"text": "green tea is brewed at 80 degrees (edited)"})
    assert mem.get(graph_ns, item_id("tea")).q > 0.9


def test_custom_embed_must_match_the_store_dimension(mem: GraphMemory, namespace: str) -> None:
    mem.embed("fix the store's dimension")
    with pytest.raises(InvalidInput):
        GraphMemoryStore(
            mem, root=f"{namespace}-d", index={"dims": 8, "embed": CharacterEmbeddings(8)}
        )


class SlowEmbeddings(CharacterEmbeddings):
    """Character embeddings that take ``delay`` seconds per call (a remote embedder)."""

    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        time.sleep(self.delay)
        return super().embed_documents(texts)


def test_threads_share_one_store_without_waiting_for_each_other(
    mem: GraphMemory, namespace: str
) -> None:
    """No process-wide lock: threads' operations overlap (here, their 0.3 s embedding calls),
    and what each wrote is there afterwards, intact."""
    slow = GraphMemoryStore(
        mem, root=f"{namespace}-t", index={"dims": DIMS, "embed": SlowEmbeddings(0.3)}
    )
    errors: list[BaseException] = []

    def work(t: int) -> None:
        try:
            slow.put(("t", str(t)), "k", {"text": f"thread {t}", "t": t})
            got = slow.get(("t", str(t)), "k")
            assert got is not None and got.value["t"] == t
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    assert not errors
    assert elapsed < 8 * 0.3 / 2, f"8 puts took {elapsed:.2f} s: serialised"
    assert sorted(int(i.value["t"]) for i in slow.search(("t",), limit=20)) == list(range(8))


# ---- async, graphs, persistence ----


def test_async_api(lg: GraphMemoryStore) -> None:
    async def scenario() -> None:
        docs = [(f"doc{i}", {"text": f"colour {i % 3}", "i": i}) for i in range(12)]
        await asyncio.gather(*[lg.aput(("a",), k, v) for k, v in docs])
        await asyncio.gather(*[lg.adelete(("a",), k) for k, _ in docs[:4]])
        got = await lg.aget(("a",), "doc5")
        assert got is not None and got.value["i"] == 5
        assert await lg.aget(("a",), "doc0") is None
        found = await lg.asearch(("a",), filter={"i": {"$gte": 10}})
        assert sorted(r.key for r in found) == ["doc10", "doc11"]
        ranked = await lg.asearch(("a",), query="colour 2", limit=3)
        assert len(ranked) == 3 and all(r.score is not None for r in ranked)
        assert await lg.alist_namespaces() == [("a",)]

    asyncio.run(scenario())


def test_compiled_graph_uses_the_store(lg: GraphMemoryStore) -> None:
    class State(TypedDict, total=False):
        user: str
        answer: str

    def remember(state: State, runtime: Runtime[None]) -> dict[str, Any]:
        assert runtime.store is not None
        runtime.store.put(("users", state["user"]), "pref", {"text": "likes jasmine tea"})
        return {}

    def recall(state: State, runtime: Runtime[None]) -> dict[str, Any]:
        assert runtime.store is not None
        hits = runtime.store.search(("users", state["user"]), query="what tea?")
        return {"answer": hits[0].value["text"]}

    graph = (
        StateGraph(State)
        .add_node("remember", remember)
        .add_node("recall", recall)
        .add_edge(START, "remember")
        .add_edge("remember", "recall")
        .add_edge("recall", END)
        .compile(store=lg)
    )
    assert graph.invoke({"user": "u1"})["answer"] == "likes jasmine tea"


@pytest.fixture
def reopened(tmp_path: Path) -> Iterator[tuple[Path, HashingEmbedder]]:
    yield tmp_path / "persist", HashingEmbedder(64)


def test_items_survive_reopening_the_embedded_store(
    reopened: tuple[Path, HashingEmbedder],
) -> None:
    path, emb = reopened
    with GraphMemory(EmbeddedStore.open(path), embedder=emb) as m1:
        GraphMemoryStore(m1).put(("u",), "k", {"text": "kept"})
    with GraphMemory(EmbeddedStore.open(path), embedder=emb) as m2:
        again = GraphMemoryStore(m2)
        item = again.get(("u",), "k")
        assert item is not None and item.value == {"text": "kept"}
        assert [r.key for r in again.search(("u",), query="kept")] == ["k"]
