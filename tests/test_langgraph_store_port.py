"""LangGraph's own store tests, ported to :class:`GraphMemoryStore` in its DEFAULT configuration.

Source (read, then rewritten here in our words): langchain-ai/langgraph ``libs/checkpoint/tests/
test_store.py`` (InMemoryStore: namespaces, vectors, async), ``libs/checkpoint-postgres/tests/
test_store.py`` and ``libs/checkpoint-sqlite/tests/test_store.py`` (batches, search, filters,
namespace boundaries, index fields, scores). Every case runs on both graphmem stores (Neo4j when
``GRAPHMEM_NEO4J_URI`` is set). The only store argument a case passes is what LangGraph's case
passes to its own store (an ``index`` config); nothing graphmem-specific, no ``score=`` mode.

Not ported, because they test one implementation's internals rather than store behaviour:
``AsyncBatchedBaseStore`` mechanics (resilience, cancellation, call deduplication through a
mock), ``get_text_at_path`` (LangGraph's helper, which we call), Postgres' LIKE / regex and
SQLite's GLOB pattern builders, migration lists, and the TTL cases (this store declares
``supports_ttl = False``; a ``ttl`` raises NotImplementedError). SQLite-specific behaviour that
does not hold here is kept below as a strict ``xfail`` that says why.
"""

from __future__ import annotations

import asyncio
import math
import random
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

import pytest
from langchain_core.embeddings import Embeddings
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
from graphmem.integrations.langgraph_store import GraphMemoryStore
from graphmem.memory import GraphMemory
from graphmem.stores.base import MemoryStore

DIMS = 384  # the shared Neo4j test database's dimension


class Chars(Embeddings):
    """Bag-of-characters embeddings: each character a fixed random direction (deterministic),
    a text the normalised frequency-weighted sum. Texts sharing characters are close."""

    def __init__(self, dims: int = DIMS) -> None:
        self.dims = dims
        self._directions: dict[str, list[float]] = {}

    def _direction(self, ch: str) -> list[float]:
        if ch not in self._directions:
            rng = random.Random(f"port:{ord(ch)}")
            self._directions[ch] = [rng.gauss(0.0, 1.0) for _ in range(self.dims)]
        return self._directions[ch]

    def _embed(self, text: str) -> list[float]:
        counts = Counter(text)
        if not counts:
            return [1.0] + [0.0] * (self.dims - 1)
        out = [0.0] * self.dims
        for ch, n in counts.items():
            for i, x in enumerate(self._direction(ch)):
                out[i] += n * x
        norm = math.sqrt(sum(x * x for x in out)) or 1.0
        return [x / norm for x in out]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._embed(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._embed(text)


def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


@pytest.fixture
def mem(store: MemoryStore) -> GraphMemory:
    return GraphMemory(store, embedder=HashingEmbedder(DIMS))


@pytest.fixture
def chars() -> Chars:
    return Chars()


@pytest.fixture
def new_store(mem: GraphMemory, namespace: str, chars: Chars) -> Any:
    """``new_store(fields=None, vectors=True)``: a store in the default configuration, with
    LangGraph's test index config when ``vectors`` (its own root, under this test's prefix)."""

    def make(fields: list[str] | None = None, *, vectors: bool = True) -> GraphMemoryStore:
        root = f"{namespace}-{uuid.uuid4().hex[:6]}"
        if not vectors:
            return GraphMemoryStore(mem, root=root)
        index: dict[str, Any] = {"dims": DIMS, "embed": chars}
        if fields is not None:
            index["fields"] = fields
        return GraphMemoryStore(mem, root=root, index=index)  # type: ignore[arg-type]

    return make


@pytest.fixture
def kv(new_store: Any) -> GraphMemoryStore:
    """The store as LangGraph's key-value cases open it: no index config."""
    store: GraphMemoryStore = new_store(vectors=False)
    return store


@pytest.fixture
def vs(new_store: Any) -> GraphMemoryStore:
    """The store as LangGraph's vector cases open it: ``index={"dims", "embed"}``."""
    store: GraphMemoryStore = new_store()
    return store


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def spaces(store: GraphMemoryStore, prefix: tuple[str, ...]) -> set[tuple[str, ...]]:
    return {item.namespace for item in store.search(prefix, limit=100)}


# ================================ namespaces (checkpoint) ================================

TREE = [
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


def test_list_namespaces_by_prefix_suffix_depth_and_page(kv: GraphMemoryStore) -> None:
    for i, ns in enumerate(TREE):
        kv.put(ns, f"id_{i}", {"data": f"value_{i:02d}"})
    ab = [("a", "b", "c"), ("a", "b", "d", "e"), ("a", "b", "d", "i"), ("a", "b", "f")]
    assert sorted(kv.list_namespaces(prefix=("a", "b"))) == ab
    f_end = [("a", "b", "f"), ("a", "c", "f"), ("b", "a", "f")]
    assert sorted(kv.list_namespaces(suffix=("f",))) == f_end
    assert sorted(kv.list_namespaces(prefix=("a",), suffix=("f",))) == f_end[:2]
    assert sorted(kv.list_namespaces(prefix=("a", "b"), max_depth=3)) == [
        ("a", "b", "c"),
        ("a", "b", "d"),
        ("a", "b", "f"),
    ]
    assert kv.list_namespaces(prefix=("a", "b"), limit=2) == ab[:2]
    assert kv.list_namespaces(prefix=("a", "b"), offset=2) == ab[2:]
    assert sorted(kv.list_namespaces(prefix=("a", "*", "f"))) == f_end[:2]
    assert sorted(kv.list_namespaces(suffix=("*", "f"))) == f_end
    assert kv.list_namespaces(prefix=("nonexistent",)) == []
    assert kv.list_namespaces(prefix=("users", "123")) == [("users", "123")]


def test_list_namespaces_with_wildcards(kv: GraphMemoryStore) -> None:
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
        kv.put(ns, f"id_{i}", {"data": i})
    assert sorted(kv.list_namespaces(prefix=("users", "*"))) == [
        ("users", "123"),
        ("users", "456"),
        ("users", "789", "settings"),
    ]
    assert kv.list_namespaces(suffix=("*", "preferences")) == [("guests", "456", "preferences")]
    assert kv.list_namespaces(prefix=("*", "users"), suffix=("*", "settings")) == []
    kv.put(("admin", "users", "settings", "789"), "foo", {"data": "some_val"})
    assert kv.list_namespaces(prefix=("*", "users"), suffix=("settings", "*")) == [
        ("admin", "users", "settings", "789")
    ]


def test_list_namespaces_pagination(kv: GraphMemoryStore) -> None:
    kv.batch([PutOp(("namespace", f"sub_{i:02d}"), f"id_{i:02d}", {"i": i}) for i in range(20)])
    for offset in (0, 5, 15):
        page = kv.list_namespaces(prefix=("namespace",), limit=5, offset=offset)
        assert page == [("namespace", f"sub_{i:02d}") for i in range(offset, offset + 5)]


def test_list_namespaces_max_depth(kv: GraphMemoryStore) -> None:
    for i, ns in enumerate(
        [("a", "b", "c", "d"), ("a", "b", "c", "e"), ("a", "b", "f"), ("a", "g"), ("h", "i", "j")]
    ):
        kv.put(ns, f"id_{i}", {"i": i})
    assert sorted(kv.list_namespaces(max_depth=2)) == [("a", "b"), ("a", "g"), ("h", "i")]


def test_list_namespaces_without_conditions(kv: GraphMemoryStore) -> None:
    spaces_ = [("a", "b"), ("c", "d"), ("e", "f", "g")]
    for i, ns in enumerate(spaces_):
        kv.put(ns, f"id_{i}", {"i": i})
    assert sorted(kv.list_namespaces()) == spaces_


def test_list_namespaces_of_an_empty_store(kv: GraphMemoryStore) -> None:
    assert kv.list_namespaces() == []


def test_invalid_namespaces_are_refused(kv: GraphMemoryStore) -> None:
    doc = {"foo": "bar"}
    for bad in [(), ("the", "thing.about"), ("some", "fun", ""), ("langgraph", "foo")]:
        with pytest.raises(InvalidNamespaceError):
            kv.put(bad, "foo", doc)
        with pytest.raises(InvalidNamespaceError):
            run(kv.aput(bad, "foo", doc))
    assert kv.list_namespaces() == []
    # "langgraph" is reserved only as the first label, and only through put().
    inner = ("foo", "langgraph", "foo")
    kv.put(inner, "bar", doc)
    got = kv.get(inner, "bar")
    assert got is not None and got.value == doc
    assert kv.search(inner, query="bar")[0].value == doc
    kv.delete(inner, "bar")
    assert kv.get(inner, "bar") is None
    run(kv.aput(inner, "bar", doc))
    assert run(kv.asearch(inner, query="bar"))[0].value == doc
    run(kv.adelete(inner, "bar"))
    assert run(kv.aget(inner, "bar")) is None
    reserved = ("langgraph", "foo")
    kv.batch([PutOp(reserved, "bar", doc)])
    assert kv.search(reserved)[0].value == doc
    kv.delete(reserved, "bar")
    assert kv.get(reserved, "bar") is None
    run(kv.abatch([PutOp(reserved, "bar", doc)]))
    got = run(kv.aget(reserved, "bar"))
    assert got is not None and got.value == doc
    # Ops handed to batch() directly are validated too.
    with pytest.raises(InvalidNamespaceError):
        kv.batch([PutOp(("a.b",), "k", doc)])


def test_identical_concurrent_reads_agree(kv: GraphMemoryStore) -> None:
    """(test_async_batch_store_deduplication, on the store's behaviour: the same reads issued
    together see the same thing.)"""

    async def scenario() -> None:
        await kv.aput(("test",), "doc1", {"foo": "bar"})
        await kv.aput(("test",), "doc2", {"foo": "baz"})
        gets = await asyncio.gather(*[kv.aget(("test",), "doc1") for _ in range(3)])
        assert all(g is not None and g.value == {"foo": "bar"} for g in gets)
        found = await asyncio.gather(
            *[kv.asearch(("test",), filter={"foo": "baz"}) for _ in range(3)]
        )
        assert all([i.key for i in f] == ["doc2"] for f in found)

    run(scenario())


# ================================ batches (postgres / sqlite) ================================


def test_batch_order(kv: GraphMemoryStore) -> None:
    kv.put(("test", "foo"), "key1", {"data": "value1"})
    kv.put(("test", "bar"), "key2", {"data": "value2"})
    first = kv.batch(
        [
            GetOp(("test", "foo"), "key1"),
            PutOp(("test", "bar"), "key2", {"data": "value2"}),
            SearchOp(("test",), {"data": "value1"}, 10, 0),
            ListNamespacesOp(None, None, 10, 0),
            GetOp(("test",), "key3"),
        ]
    )
    assert len(first) == 5
    assert isinstance(first[0], Item) and first[0].value == {"data": "value1"}
    assert first[0].key == "key1"
    assert first[1] is None
    assert isinstance(first[2], list) and len(first[2]) == 1
    assert isinstance(first[3], list) and len(first[3]) > 0
    assert first[4] is None
    second = kv.batch(
        [
            SearchOp(("test",), None, 5, 0),
            GetOp(("test", "bar"), "key2"),
            ListNamespacesOp(None, None, 5, 0),
            PutOp(("test",), "key3", {"data": "value3"}),
            GetOp(("test", "foo"), "key1"),
        ]
    )
    assert isinstance(second[0], list) and len(second[0]) >= 2
    assert isinstance(second[1], Item) and second[1].value == {"data": "value2"}
    assert second[1].key == "key2"
    assert isinstance(second[2], list) and len(second[2]) > 0
    assert second[3] is None
    assert isinstance(second[4], Item) and second[4].value == {"data": "value1"}


def test_large_batches_from_threads(vs: GraphMemoryStore) -> None:
    """LangGraph's ``test_pga_large_batches``: 10 threads put, get, list, search and delete the
    same keys at once; every call must succeed (issue 30: on Neo4j a search met nodes deleted
    under it and a put met a delete), and the keys end as the last writes left them."""
    ops: list[tuple[Any, ...]] = []
    for m in range(4):
        ns = ("test", "foo", "bar", "baz", str(m % 2))
        for i in range(12):
            key, value = f"key{i}", {"foo": f"bar{i}"}
            ops += [
                (vs.put, ns, key, value),
                (vs.get, ns, key),
                (vs.list_namespaces,),
                (vs.search, ("test",)),
                (partial(vs.search, query=f"bar{i}"), ("test",)),
                (vs.put, ns, key, None),
                (vs.put, ns, key, value),
            ]
    with ThreadPoolExecutor(max_workers=10) as pool:
        futures = [pool.submit(*op) for op in ops]
        errors = [f.exception() for f in futures if f.exception() is not None]
    assert not errors, f"{len(errors)} of {len(ops)} calls failed; first: {errors[0]!r}"
    for m in range(2):
        ns = ("test", "foo", "bar", "baz", str(m))
        for i in range(12):
            vs.put(ns, f"key{i}", {"foo": f"bar{i}"})
            got = vs.get(ns, f"key{i}")
            assert got is not None and got.value == {"foo": f"bar{i}"}
    assert len(vs.search(("test",), limit=100)) == 24


LARGE_BATCH_ROUNDS = 10  # LangGraph's M
LARGE_BATCH_KEYS = 100  # LangGraph's N: 10 x 100 x 6 = 6,000 coroutines


@pytest.mark.reliability
@pytest.mark.slow
def test_large_batches_async(kv: GraphMemoryStore, request: pytest.FixtureRequest) -> None:
    """LangGraph's ``test_large_batches_async``: 6,000 coroutines (put, get, list, search, put,
    delete of the same keys) in one ``gather``; every one must succeed. On Neo4j the last of
    them waited longer than the pool's 60 s acquisition timeout (issue 30); the async store now
    admits as many as its pool holds and queues the rest itself (without that, this test fails
    after 64 s). About 45 s on Neo4j, so opt-in; the default suite checks the same backpressure
    in small (tests/test_async_store.py, a pool of 3 and 600 coroutines)."""
    if "reliability" not in str(request.config.getoption("markexpr") or ""):
        pytest.skip("about a minute long: run with -m reliability")
    rounds, keys = LARGE_BATCH_ROUNDS, LARGE_BATCH_KEYS

    async def scenario() -> list[Any]:
        coros: list[Any] = []
        for m in range(rounds):
            ns = ("test", "foo", "bar", "baz", str(m % 2))
            for i in range(keys):
                key, value = f"key{i}", {"foo": f"bar{i}"}
                coros += [
                    kv.aput(ns, key, value),
                    kv.aget(ns, key),
                    kv.alist_namespaces(prefix=None, max_depth=m + 1),
                    kv.asearch(("test",)),
                    kv.aput(ns, key, value),
                    kv.adelete(ns, key),
                ]
        try:
            return list(await asyncio.gather(*coros, return_exceptions=True))
        finally:
            await kv.aclose()

    results = run(scenario())
    assert len(results) == rounds * keys * 6
    errors = [r for r in results if isinstance(r, BaseException)]
    assert not errors, f"{len(errors)} of {len(results)} failed; first: {errors[0]!r}"


def test_batch_get_ops(kv: GraphMemoryStore) -> None:
    kv.put(("test",), "key1", {"data": "value1"})
    kv.put(("test",), "key2", {"data": "value2"})
    got = kv.batch([GetOp(("test",), "key1"), GetOp(("test",), "key2"), GetOp(("test",), "key3")])
    assert [g.key if isinstance(g, Item) else g for g in got] == ["key1", "key2", None]


def test_batch_put_ops(kv: GraphMemoryStore) -> None:
    results = kv.batch(
        [
            PutOp(("test",), "key1", {"data": "value1"}),
            PutOp(("test",), "key2", {"data": "value2"}),
            PutOp(("test",), "key3", None),
        ]
    )
    assert results == [None, None, None]
    one, two = kv.get(("test",), "key1"), kv.get(("test",), "key2")
    assert one is not None and one.value == {"data": "value1"}
    assert two is not None and two.value == {"data": "value2"}
    assert kv.get(("test",), "key3") is None


def test_batch_search_ops(kv: GraphMemoryStore) -> None:
    kv.put(("test", "foo"), "key1", {"data": "value1", "tag": "a"})
    kv.put(("test", "bar"), "key2", {"data": "value2", "tag": "a"})
    kv.put(("test", "baz"), "key3", {"data": "value3", "tag": "b"})
    tagged, first_two, foo = kv.batch(
        [
            SearchOp(("test",), {"tag": "a"}, 10, 0),
            SearchOp(("test",), None, 2, 0),
            SearchOp(("test", "foo"), None, 10, 0),
        ]
    )
    assert isinstance(tagged, list) and isinstance(first_two, list) and isinstance(foo, list)
    assert len(tagged) == 2 and all(i.value["tag"] == "a" for i in tagged)
    assert len(first_two) == 2
    assert [i.namespace for i in foo] == [("test", "foo")]


def test_batch_list_namespaces_ops(kv: GraphMemoryStore) -> None:
    data = [
        (("test", "documents", "public"), "doc1"),
        (("test", "documents", "private"), "doc2"),
        (("test", "images", "public"), "img1"),
        (("prod", "documents", "public"), "doc3"),
    ]
    for ns, key in data:
        kv.put(ns, key, {"content": key})
    every, shallow, public = kv.batch(
        [
            ListNamespacesOp(None, None, 10, 0),
            ListNamespacesOp(None, 2, 10, 0),
            ListNamespacesOp((MatchCondition("suffix", ("public",)),), None, 10, 0),
        ]
    )
    assert isinstance(every, list) and isinstance(shallow, list) and isinstance(public, list)
    assert len(every) == len(data)
    assert shallow and all(len(ns) <= 2 for ns in shallow)
    assert len(public) == 3 and all(ns[-1] == "public" for ns in public)


# ================================ key-value semantics ================================


def test_basic_store_ops(kv: GraphMemoryStore) -> None:
    ns = ("test", "documents")
    kv.put(ns, "doc1", {"title": "Test Document", "content": "Hello, World!"})
    item = kv.get(ns, "doc1")
    assert item is not None and (item.namespace, item.key) == (ns, "doc1")
    assert item.value == {"title": "Test Document", "content": "Hello, World!"}
    kv.put(ns, "doc1", {"title": "Updated Document", "content": "Hello, Updated!"})
    updated = kv.get(ns, "doc1")
    assert updated is not None and updated.value["title"] == "Updated Document"
    assert updated.updated_at > item.updated_at
    assert updated.created_at == item.created_at
    assert kv.get(("test", "other_documents"), "doc1") is None
    kv.delete(ns, "doc1")
    assert kv.get(ns, "doc1") is None


def test_basic_operations_under_a_unique_prefix(kv: GraphMemoryStore) -> None:
    uid = uuid.uuid4().hex
    ns = (uid, "test", "documents")
    assert kv.search((uid,)) == []
    kv.put(ns, "doc1", {"title": "Test Document", "content": "Hello, World!"})
    item = kv.get(ns, "doc1")
    assert item is not None and item.created_at is not None and item.updated_at is not None
    kv.put(ns, "doc1", {"title": "Updated Test Document", "content": "Hello, LangGraph!"})
    again = kv.get(ns, "doc1")
    assert again is not None and again.updated_at >= item.updated_at
    assert again.value["content"] == "Hello, LangGraph!"
    assert kv.get((uid, "test", "other_documents"), "doc1") is None
    kv.put(ns, "doc2", {"title": "Another Document", "content": "Greetings!"})
    assert {i.key for i in kv.search((uid, "test"), limit=10)} == {"doc1", "doc2"}
    assert ns in kv.list_namespaces(prefix=(uid, "test"))
    kv.delete(ns, "doc1")
    kv.delete(ns, "doc2")
    assert kv.get(ns, "doc1") is None and kv.get(ns, "doc2") is None
    assert kv.search((uid, "test"), limit=10) == []


def test_list_namespaces_counts(kv: GraphMemoryStore) -> None:
    spaces_ = [
        (env, kind, access)
        for env in ("test", "prod")
        for kind in ("documents", "images")
        for access in ("public", "private")
        if not (env == "prod" and kind == "images")
    ]
    for ns in spaces_:
        kv.put(ns, "dummy", {"content": "dummy"})
    assert len(kv.list_namespaces()) == 6
    under_test = kv.list_namespaces(prefix=["test"])  # type: ignore[arg-type]
    assert len(under_test) == 4 and all(ns[0] == "test" for ns in under_test)
    public = kv.list_namespaces(suffix=["public"])  # type: ignore[arg-type]
    assert len(public) == 3 and all(ns[-1] == "public" for ns in public)
    assert all(len(ns) <= 2 for ns in kv.list_namespaces(max_depth=2))
    assert len(kv.list_namespaces(limit=3)) == 3
    for ns in spaces_:
        kv.delete(ns, "dummy")
    assert kv.list_namespaces() == []


def test_list_namespaces_deep_wildcards(kv: GraphMemoryStore) -> None:
    p = str(uuid.uuid4())
    spaces_ = [
        (p, "test", "documents", "public", p),
        (p, "test", "documents", "private", p),
        (p, "test", "images", "public", p),
        (p, "test", "images", "private", p),
        (p, "prod", "documents", "public", p),
        (p, "prod", "documents", "some", "nesting", "public", p),
        (p, "prod", "documents", "private", p),
    ]
    for ns in spaces_:
        kv.put(ns, "dummy", {"content": "dummy"})
    assert len(kv.list_namespaces(prefix=(p, "test"))) == 4
    assert len(kv.list_namespaces(prefix=(p, "test", "documents"))) == 2
    public = kv.list_namespaces(suffix=("public", p))
    assert len(public) == 4 and all(ns[-2] == "public" for ns in public)
    both = kv.list_namespaces(prefix=(p, "test"), suffix=("public", p))
    assert len(both) == 2 and all(ns[1] == "test" and ns[-2] == "public" for ns in both)
    docs = kv.list_namespaces(prefix=(p, "*", "documents"))
    assert len(docs) == 5 and all(ns[2] == "documents" for ns in docs)
    assert len(kv.list_namespaces(suffix=("*", "public", p))) == 4
    assert kv.list_namespaces(suffix=("some", "*", "public", p)) == [spaces_[5]]
    assert all(len(ns) <= 3 for ns in kv.list_namespaces(max_depth=3))
    cut = kv.list_namespaces(max_depth=4, prefix=(p, "*", "documents"))
    assert len(set(cut)) == len(cut) == 5
    assert len(kv.list_namespaces(prefix=(p,), limit=3)) == 3
    assert len(kv.list_namespaces(prefix=(p,), offset=3)) == len(spaces_) - 3
    assert set(kv.list_namespaces(prefix=(p,))) == set(spaces_)


def test_search_by_namespace_filter_and_page(kv: GraphMemoryStore) -> None:
    kv.put(("test", "docs"), "doc1", {"title": "First Doc", "author": "Alice", "tags": ["a"]})
    kv.put(("test", "docs"), "doc2", {"title": "Second Doc", "author": "Bob", "tags": ["b"]})
    kv.put(("test", "images"), "img1", {"title": "Image 1", "author": "Alice", "tags": ["c"]})
    assert len(kv.search(["test"])) == 3  # type: ignore[arg-type]
    docs = kv.search(["test", "docs"])  # type: ignore[arg-type]
    assert len(docs) == 2 and all(i.namespace == ("test", "docs") for i in docs)
    alice = kv.search(["test"], filter={"author": "Alice"})  # type: ignore[arg-type]
    assert len(alice) == 2 and all(i.value["author"] == "Alice" for i in alice)
    assert len(kv.search(["test"], limit=2)) == 2  # type: ignore[arg-type]
    assert len(kv.search(["test"], offset=2)) == 1  # type: ignore[arg-type]


def test_search_items_by_list_value_and_pages(kv: GraphMemoryStore) -> None:
    base = "test_search_items"
    rows = [
        ((base, "documents", "user1"), {"title": "Doc 1", "author": "John Doe", "tags": ["i"]}),
        ((base, "documents", "user2"), {"title": "Doc 2", "author": "Jane", "tags": ["draft"]}),
        ((base, "reports", "dep1"), {"title": "Report A", "author": "John Doe", "tags": ["f"]}),
        ((base, "reports", "dep2"), {"title": "Report B", "author": "Alice", "tags": ["draft"]}),
    ]
    for ns, value in rows:
        kv.put(ns, f"item_{ns[-1]}", value)
    assert {i.namespace[1] for i in kv.search((base, "documents"))} == {"documents"}
    assert len(kv.search((base, "reports"))) == 2
    first = {i.key for i in kv.search((base,), limit=2, offset=0)}
    second = {i.key for i in kv.search((base,), limit=2, offset=2)}
    assert len(first) == len(second) == 2 and first.isdisjoint(second)
    assert len(kv.search((base,))) == 4
    assert len(kv.search((base,), filter={"author": "John Doe"})) == 2
    drafts = kv.search((base,), filter={"tags": ["draft"]})
    assert len(drafts) == 2 and all("draft" in i.value["tags"] for i in drafts)


# ================================ namespace boundaries ================================


def test_search_prefix_stops_at_segment_boundaries(kv: GraphMemoryStore) -> None:
    for ns in [
        ("foo",),
        ("foo", "child"),
        ("foo", "child", "deep"),
        ("foobar",),
        ("foobar", "baz"),
        ("foo2",),
    ]:
        kv.put(ns, "k", {"v": 1})
    assert spaces(kv, ("foo",)) == {("foo",), ("foo", "child"), ("foo", "child", "deep")}
    assert spaces(kv, ("foobar",)) == {("foobar",), ("foobar", "baz")}
    assert spaces(kv, ("foo", "child")) == {("foo", "child"), ("foo", "child", "deep")}
    assert spaces(kv, ("foo2",)) == {("foo2",)}
    assert spaces(kv, ("fo",)) == set()


def test_search_with_an_empty_prefix_sees_everything(kv: GraphMemoryStore) -> None:
    for ns in [("a",), ("b", "c"), ("d", "e", "f")]:
        kv.put(ns, "k", {"v": 1})
    assert spaces(kv, ()) == {("a",), ("b", "c"), ("d", "e", "f")}


def test_search_treats_pattern_characters_literally(kv: GraphMemoryStore) -> None:
    for ns in [
        ("user_1",),
        ("user_1", "child"),
        ("userX1",),
        ("a%b",),
        ("axxb",),
        ("star*",),
        ("starX",),
    ]:
        kv.put(ns, "k", {"v": 1})
    assert spaces(kv, ("user_1",)) == {("user_1",), ("user_1", "child")}
    assert spaces(kv, ("a%b",)) == {("a%b",)}
    assert spaces(kv, ("star*",)) == {("star*",)}


def test_search_namespaces_are_case_sensitive(kv: GraphMemoryStore) -> None:
    kv.put(("Foo",), "k", {"v": "upper"})
    kv.put(("foo",), "k", {"v": "lower"})
    assert spaces(kv, ("foo",)) == {("foo",)}
    assert spaces(kv, ("Foo",)) == {("Foo",)}


def test_list_namespaces_stops_at_segment_boundaries(kv: GraphMemoryStore) -> None:
    for ns in [
        ("foo",),
        ("foo", "child"),
        ("foobar",),
        ("foobar", "baz"),
        ("uid", "users", "alice"),
        ("uid", "users", "malice"),
        ("uid", "a", "b", "alice"),
    ]:
        kv.put(ns, "k", {"v": 1})
    assert set(kv.list_namespaces(prefix=("foo",), limit=100)) == {("foo",), ("foo", "child")}
    assert set(kv.list_namespaces(suffix=("alice",), limit=100)) == {
        ("uid", "users", "alice"),
        ("uid", "a", "b", "alice"),
    }
    assert set(kv.list_namespaces(prefix=("uid", "*", "alice"), limit=100)) == {
        ("uid", "users", "alice")
    }
    assert len(kv.list_namespaces(prefix=("uid",), limit=100)) == 3


def test_labels_with_a_trailing_newline_are_distinct(kv: GraphMemoryStore) -> None:
    kv.put(("users", "alice"), "k", {"v": 1})
    kv.put(("users", "alice\n"), "k", {"v": 2})
    assert set(kv.list_namespaces(suffix=("alice",), limit=100)) == {("users", "alice")}
    assert set(kv.list_namespaces(prefix=("users", "alice"), limit=100)) == {("users", "alice")}


@pytest.mark.parametrize(
    ("label", "decoy"),
    [
        ("star*", "starX"),
        ("q?m", "qXm"),
        ("br[ack]et", "brXacXket"),
        ("user_1", "userX1"),
        ("a%b", "axxb"),
        ("plus+", "plusX"),
    ],
)
def test_list_namespaces_metacharacter_labels(kv: GraphMemoryStore, label: str, decoy: str) -> None:
    kv.put((label,), "k", {"v": 1})
    kv.put((decoy,), "k", {"v": 1})
    kv.put((label, "child"), "k", {"v": 1})
    assert set(kv.list_namespaces(prefix=(label,), limit=100)) == {(label,), (label, "child")}
    assert set(kv.list_namespaces(prefix=(label, "child"), limit=100)) == {(label, "child")}


# ================================ filters (sqlite) ================================


def test_filter_values_that_look_like_injection_match_nothing(kv: GraphMemoryStore) -> None:
    kv.put(("docs",), "doc1", {"access": "public", "title": "Public Document"})
    kv.put(("docs",), "doc2", {"access": "private", "title": "Private Document"})
    kv.put(("docs",), "doc3", {"access": "secret", "title": "Secret Document"})
    for hostile in [
        "public' OR '1'='1",
        "public'; --",
        "public' UNION SELECT * FROM store --",
        "public\x00' OR '1'='1",
        "''''",
        "public' OR 'א'='א",
    ]:
        assert kv.search(("docs",), filter={"access": hostile}) == []
    kv.put(("docs",), "doc4", {"title": "O'Brien's Document", "access": "public"})
    found = kv.search(("docs",), filter={"title": "O'Brien's Document"})
    assert [i.key for i in found] == ["doc4"]


def test_a_filter_key_that_looks_like_injection_reveals_nothing(kv: GraphMemoryStore) -> None:
    kv.put(("docs",), "public", {"access": "public", "data": "public info"})
    kv.put(("docs",), "private", {"access": "private", "data": "secret", "password": "123"})
    assert [i.key for i in kv.search(("docs",), filter={"access": "public"})] == ["public"]
    hostile = "access') = 'public' OR '1'='1' OR json_extract(value, '$."
    assert kv.search(("docs",), filter={hostile: "dummy"}) == []


@pytest.mark.xfail(
    strict=True,
    reason="SQLite-specific: SqliteStore splices filter keys into JSON paths, so it refuses "
    "keys outside its path alphabet ('Invalid filter key'). Here a key is only ever a dict "
    "lookup, so any string is a valid key and simply matches nothing (see the case above).",
)
def test_sqlite_refuses_odd_filter_keys(kv: GraphMemoryStore) -> None:
    kv.put(("docs",), "public", {"access": "public"})
    with pytest.raises(ValueError, match="Invalid filter key"):
        kv.search(("docs",), filter={"access') = 'public' OR '1'='1": "dummy"})


def test_numeric_filters(kv: GraphMemoryStore) -> None:
    for i, (price, qty) in enumerate([(10, 5), (20, 3), (30, 1)], start=1):
        kv.put(("items",), f"item{i}", {"price": price, "quantity": qty})
    above = kv.search(("items",), filter={"price": {"$gt": 15}})
    assert len(above) == 2 and all(r.value["price"] > 15 for r in above)
    assert len(kv.search(("items",), filter={"price": {"$lt": float("inf")}})) == 3
    assert len(kv.search(("items",), filter={"price": {"$gt": float("-inf")}})) == 3
    assert kv.search(("items",), filter={"price": {"$eq": float("nan")}}) == []
    assert len(kv.search(("items",), filter={"price": {"$lt": 10**100}})) == 3
    kv.put(("items",), "item4", {"price": -10, "quantity": 0})
    assert [r.key for r in kv.search(("items",), filter={"price": {"$lt": 0}})] == ["item4"]


def test_boolean_filters(kv: GraphMemoryStore) -> None:
    kv.put(("flags",), "flag1", {"active": True, "name": "Feature A"})
    kv.put(("flags",), "flag2", {"active": False, "name": "Feature B"})
    kv.put(("flags",), "flag3", {"active": True, "name": "Feature C"})
    on = kv.search(("flags",), filter={"active": True})
    assert len(on) == 2 and all(r.value["active"] is True for r in on)
    off = kv.search(("flags",), filter={"active": False})
    assert [r.key for r in off] == ["flag2"]


def test_filter_keys_with_hyphens_and_digits(kv: GraphMemoryStore) -> None:
    kv.put(("docs",), "hyphen", {"access-level": "public", "user": {"access-level": "nested"}})
    kv.put(("docs",), "digit", {"123abc": "ok", "user": {"123abc": "ok2"}})
    for key, value, expected in [
        ("access-level", "public", "hyphen"),
        ("user.access-level", "nested", "hyphen"),
        ("123abc", "ok", "digit"),
        ("user.123abc", "ok2", "digit"),
    ]:
        assert [r.key for r in kv.search(("docs",), filter={key: value})] == [expected]


# ================================ vectors ================================


def test_vector_store_keeps_its_index_config(vs: GraphMemoryStore, chars: Chars) -> None:
    assert vs.index_config is not None
    assert vs.index_config["dims"] == DIMS and vs.index_config["embed"] is chars


AUTO_DOCS = [
    ("doc1", {"text": "short text"}),
    ("doc2", {"text": "longer text document"}),
    ("doc3", {"text": "longest text document here"}),
    ("doc4", {"description": "text in description field"}),
    ("doc5", {"content": "text in content field"}),
    ("doc6", {"body": "text in body field"}),
]


def test_vector_insert_with_auto_embedding(vs: GraphMemoryStore) -> None:
    for key, value in AUTO_DOCS:
        vs.put(("test",), key, value)
    keys = [r.key for r in vs.search(("test",), query="long text")]
    assert "doc2" in keys and "doc3" in keys


def test_async_vector_insert_with_auto_embedding(vs: GraphMemoryStore) -> None:
    async def scenario() -> list[str]:
        for key, value in AUTO_DOCS:
            await vs.aput(("test",), key, value)
        return [r.key for r in await vs.asearch(("test",), query="long text")]

    keys = run(scenario())
    assert "doc2" in keys and "doc3" in keys


def _check_update(search: Any, put: Any) -> None:
    put("doc1", {"text": "zany zebra Xerxes"})
    put("doc2", {"text": "something about dogs"})
    put("doc3", {"text": "text about birds"})
    initial = search("Zany Xerxes")
    assert initial and initial[0].key == "doc1"
    before = initial[0].score
    assert before is not None
    put("doc1", {"text": "new text about dogs"})
    after = next((r.score for r in search("Zany Xerxes") if r.key == "doc1"), 0.0)
    assert after is not None and after < before
    for r in search("new text about dogs"):
        if r.key == "doc1":
            assert r.score is not None and r.score > after
    put("doc4", {"text": "new text about dogs"}, index=False)
    assert not any(r.key == "doc4" for r in search("new text about dogs", limit=3))


def test_vector_update_with_embedding(vs: GraphMemoryStore) -> None:
    _check_update(
        lambda q, **kw: vs.search(("test",), query=q, **kw),
        lambda k, v, **kw: vs.put(("test",), k, v, **kw),
    )


def test_async_vector_update_with_embedding(vs: GraphMemoryStore) -> None:
    _check_update(
        lambda q, **kw: run(vs.asearch(("test",), query=q, **kw)),
        lambda k, v, **kw: run(vs.aput(("test",), k, v, **kw)),
    )


FILTER_DOCS = [
    ("doc1", {"text": "red apple", "color": "red", "score": 4.5}),
    ("doc2", {"text": "red car", "color": "red", "score": 3.0}),
    ("doc3", {"text": "green apple", "color": "green", "score": 4.0}),
    ("doc4", {"text": "blue car", "color": "blue", "score": 3.5}),
]


def _check_filters(search: Any) -> None:
    red_apple = search("apple", {"color": "red"})
    assert len(red_apple) == 2 and red_apple[0].key == "doc1"
    red_car = search("car", {"color": "red"})
    assert len(red_car) == 2 and red_car[0].key == "doc2"
    high = search("bbbbluuu", {"score": {"$gt": 3.2}})
    assert len(high) == 3 and high[0].key == "doc4"
    assert [r.key for r in search("apple", {"score": {"$gte": 4.0}, "color": "green"})] == ["doc3"]


def test_vector_search_with_filters(vs: GraphMemoryStore) -> None:
    for key, value in FILTER_DOCS:
        vs.put(("test",), key, value)
    _check_filters(lambda q, f: vs.search(("test",), query=q, filter=f))
    # Postgres runs it with refresh_ttl both ways; the flag changes nothing without TTL.
    _check_filters(lambda q, f: vs.search(("test",), query=q, filter=f, refresh_ttl=False))


def test_async_vector_search_with_filters(vs: GraphMemoryStore) -> None:
    async def scenario() -> None:
        for key, value in FILTER_DOCS:
            await vs.aput(("test",), key, value)

    run(scenario())
    _check_filters(lambda q, f: run(vs.asearch(("test",), query=q, filter=f)))


def test_async_concurrent_writes_and_filtered_searches(vs: GraphMemoryStore) -> None:
    colors = ["red", "blue", "green", "yellow", "purple"]
    things = ["apple", "car", "house", "book", "phone"]
    scores = [3.0, 3.5, 4.0, 4.5, 5.0]
    docs = [
        (
            f"doc{i}",
            {
                "text": f"{colors[i % 5]} {things[i % 5]}",
                "color": colors[i % 5],
                "score": scores[i % 5],
                "index": i,
            },
        )
        for i in range(50)
    ]
    queries: list[tuple[str, dict[str, Any]]] = [
        ("apple", {"color": "red"}),
        ("car", {"color": "blue"}),
        ("house", {"color": "green"}),
        ("phone", {"score": {"$gt": 4.99}}),
        ("book", {"score": {"$lte": 3.5}}),
        ("apple", {"score": {"$gte": 3.0}, "color": "red"}),
        ("car", {"score": {"$lt": 5.1}, "color": "blue"}),
        ("house", {"index": {"$gt": 25}}),
        ("phone", {"index": {"$lte": 10}}),
    ]

    async def scenario() -> list[list[Any]]:
        # Each key's put, delete and put are issued in that order, so the last put wins.
        await asyncio.gather(*[vs.aput(("test",), k, v) for k, v in docs])
        await asyncio.gather(*[vs.adelete(("test",), k) for k, _ in docs])
        await asyncio.gather(*[vs.aput(("test",), k, v) for k, v in docs])
        return list(
            await asyncio.gather(*[vs.asearch(("test",), query=q, filter=f) for q, f in queries])
        )

    checks = {
        "$gt": lambda a, b: a > b,
        "$gte": lambda a, b: a >= b,
        "$lt": lambda a, b: a < b,
        "$lte": lambda a, b: a <= b,
    }
    for results, (query, filter_) in zip(run(scenario()), queries, strict=True):
        assert results, f"no results for {query!r} with {filter_}"
        for r in results:
            for field, want in filter_.items():
                if isinstance(want, dict):
                    assert all(checks[op](r.value[field], v) for op, v in want.items())
                else:
                    assert r.value[field] == want


def test_vector_search_pagination(vs: GraphMemoryStore) -> None:
    for i in range(5):
        vs.put(("test",), f"doc{i}", {"text": f"test document number {i}"})
    page1 = vs.search(("test",), query="test", limit=2)
    page2 = vs.search(("test",), query="test", limit=2, offset=2)
    assert len(page1) == len(page2) == 2 and page1[0].key != page2[0].key
    assert len(vs.search(("test",), query="test", limit=10)) == 5


def test_async_vector_search_pagination(vs: GraphMemoryStore) -> None:
    async def scenario() -> tuple[list[Any], list[Any], list[Any]]:
        for i in range(5):
            await vs.aput(("test",), f"doc{i}", {"text": f"test document number {i}"})
        return (
            await vs.asearch(("test",), query="test", limit=2),
            await vs.asearch(("test",), query="test", limit=2, offset=2),
            await vs.asearch(("test",), query="test", limit=10),
        )

    page1, page2, every = run(scenario())
    assert len(page1) == len(page2) == 2 and page1[0].key != page2[0].key
    assert len(every) == 5


def test_vector_search_edge_cases(vs: GraphMemoryStore) -> None:
    vs.put(("test",), "doc1", {"text": "test document"})
    for query in ["", None, "test " * 100, "test!@#$%^&*()"]:
        assert len(vs.search(("test",), query=query)) == 1


def test_non_ascii(vs: GraphMemoryStore) -> None:
    texts = ["这是中文", "これは日本語です", "이건 한국어야", "Это русский", "यह रूसी है"]
    for i, text in enumerate(texts, start=1):
        vs.put(("user_123", "memories"), str(i), {"text": text})
    for i, text in enumerate(texts, start=1):
        assert vs.search(("user_123", "memories"), query=text)[0].key == str(i)


# ---- one vector per indexed field, the best one scoring ----

DOC1 = {"key1": "xxx", "key2": "yyy", "key3": "zzz"}  # key0 missing: two vectors
DOC2 = {"key0": "uuu", "key1": "vvv", "key2": "www", "key3": "xxx"}  # three vectors


def test_embed_with_path(new_store: Any) -> None:
    store = new_store(fields=["key0", "key1", "key3"])
    store.put(("test",), "doc1", DOC1)
    store.put(("test",), "doc2", DOC2)
    best = store.search(("test",), query="xxx")  # doc1.key1 and doc2.key3 both match exactly
    assert len(best) == 2 and best[0].key != best[1].key
    top = best[0].score
    assert top == pytest.approx(best[1].score, abs=1e-5)
    assert best[0].score > 0.9 and best[1].score > 0.9
    for query, owner in [("uuu", "doc2"), ("zzz", "doc1")]:
        found = store.search(("test",), query=query)
        assert len(found) == 2 and found[0].key == owner and found[1].key != owner
        assert found[0].score > found[1].score
        assert found[0].score == pytest.approx(top, abs=1e-5)
    unindexed = store.search(("test",), query="www")  # only in the unindexed key2
    assert len(unindexed) == 2 and all(r.score < top and r.score < 0.9 for r in unindexed)


def test_embed_with_path_per_operation(new_store: Any) -> None:
    store = new_store(fields=["key17"])  # a default that matches nothing below
    doc3 = {"key0": "aaa", "key1": "bbb", "key2": "ccc", "key3": "ddd"}
    doc4 = {"key0": "eee", "key1": "bbb", "key2": "fff", "key3": "ggg"}
    store.put(("test",), "doc3", doc3, index=["key0", "key1"])
    store.put(("test",), "doc4", doc4, index=["key1", "key3"])
    for query, owner in [("aaa", "doc3"), ("ggg", "doc4")]:
        found = store.search(("test",), query=query)
        assert len(found) == 2 and found[0].key == owner and len({r.key for r in found}) == 2
        assert found[0].score > found[1].score
    shared = store.search(("test",), query="bbb")
    assert len(shared) == 2 and shared[0].key != shared[1].key
    assert shared[0].score == pytest.approx(shared[1].score, abs=1e-5)
    exact = store.search(("test",), query="aaa")[0].score
    assert all(r.score < 0.9 and r.score < exact for r in store.search(("test",), query="ccc"))
    store.put(("test",), "doc5", {"key0": "hhh", "key1": "iii"}, index=False)
    listed = store.search(("test",))
    assert len(listed) == 3 and all(r.score is None for r in listed)
    found = store.search(("test",), query="hhh")
    assert len(found) == 3
    assert next(r for r in found if r.key == "doc5").score is None


@pytest.mark.parametrize("query", ["aaa", "bbb", "ccc", "abcd", "poisson"])
def test_scores_are_cosine_similarities(new_store: Any, chars: Chars, query: str) -> None:
    store = new_store(fields=["key0"])
    store.put(("test",), "doc", {"key0": "aaa"}, index=["key0", "key1"])
    found = store.search((), query=query)
    expected = cosine(chars.embed_query(query), chars.embed_query("aaa"))
    assert len(found) == 1 and found[0].score == pytest.approx(expected, abs=1e-3)
