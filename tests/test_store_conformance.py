"""The store conformance suite (graphmem.testing) on every configured store, plus property
tests of the export/import round trip on the embedded store."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import drop_namespaces
from hypothesis import given, settings
from hypothesis import strategies as st

from graphmem.models import Edge, EdgeKind, Note
from graphmem.stores.base import MemoryStore
from graphmem.stores.embedded import EmbeddedStore
from graphmem.stores.embedded.store import Durability
from graphmem.stores.faces import ThreadedStore
from graphmem.testing import LoopBackedStore, StoreConformance, assert_same_memory, vec


@pytest.fixture(scope="module")
def neo4j_async(neo4j_store: MemoryStore) -> Iterator[LoopBackedStore]:
    """AsyncNeo4jStore on the shared database, awaited on an event loop in another thread."""
    from graphmem.stores.neo4j import Neo4jStore

    assert isinstance(neo4j_store, Neo4jStore)
    store = LoopBackedStore(neo4j_store.open_async)
    try:
        yield store
    finally:
        store.shutdown()


@pytest.fixture(
    params=[
        "embedded",
        "embedded-sqlite",
        "embedded-async",
        pytest.param("neo4j", marks=pytest.mark.neo4j),
        pytest.param("neo4j-async", marks=pytest.mark.neo4j),
    ]
)
def store(request: pytest.FixtureRequest, tmp_path: Path, namespace: str) -> Iterator[MemoryStore]:
    """conftest.py's ``store``, with the embedded store in both of its durabilities and Neo4j
    through both of its faces: the blocking Neo4jStore and AsyncNeo4jStore (on a loop).
    ``embedded-async`` is the embedded store through both adapters of stores/faces.py, there
    and back (ThreadedStore, then LoopBackedStore): the derived faces, checked without a
    server."""
    if request.param == "embedded-async":
        there_and_back = LoopBackedStore(lambda: ThreadedStore(EmbeddedStore.open(tmp_path / "s")))
        try:
            yield there_and_back
        finally:
            there_and_back.shutdown()
        return
    if request.param.startswith("embedded"):
        durability: Durability = "sqlite" if request.param == "embedded-sqlite" else "journal"
        with EmbeddedStore.open(tmp_path / "store", durability=durability) as embedded:
            yield embedded
        return
    shared: MemoryStore = request.getfixturevalue("neo4j_store")
    face: MemoryStore = (
        shared if request.param == "neo4j" else request.getfixturevalue("neo4j_async")
    )
    try:
        yield face
    finally:
        drop_namespaces(shared, namespace)


class TestStoreConformance(StoreConformance):
    """Runs on the ``store`` fixture above: the embedded store on its journal and on SQLite, and
    when a Neo4j is set, Neo4jStore and AsyncNeo4jStore."""


text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=200
).filter(lambda s: s.strip() != "")


@settings(max_examples=40, deadline=None)
@given(
    contents=st.lists(text, min_size=1, max_size=5),
    keywords=st.lists(st.text(max_size=30), max_size=4),
    reason=st.text(max_size=50),
)
def test_export_import_round_trip_of_arbitrary_text(
    contents: list[str], keywords: list[str], reason: str
) -> None:
    store = EmbeddedStore.in_memory()
    notes = [
        Note(id=f"n{i}", namespace="src", content=c, keywords=keywords, embedding=vec(8, 1, i))
        for i, c in enumerate(contents)
    ]
    edges = [
        Edge(namespace="src", kind=EdgeKind.LINKS_TO, src="n0", dst=n.id, props={"reason": reason})
        for n in notes
    ]
    store.upsert(notes, edges)
    out = io.StringIO()
    store.export_jsonl(out, "src")
    assert store.import_jsonl(io.StringIO(out.getvalue()), namespace="dst") == (
        len(notes),
        len(edges),
    )
    for original in notes:
        assert_same_memory(store.get("dst", original.id), original, ignore=("namespace",))
    assert [e.props for e in store.iter_edges("dst")] == [e.props for e in store.iter_edges("src")]
