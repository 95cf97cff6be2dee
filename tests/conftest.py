"""Shared fixtures: the parametrized ``store`` (embedded always, Neo4j when configured),
a fresh ``namespace`` per test, and the two embedders.

Neo4j runs are opt-in: set ``GRAPHMEM_NEO4J_URI`` (and ``GRAPHMEM_NEO4J_USER`` /
``GRAPHMEM_NEO4J_PASSWORD`` / ``GRAPHMEM_NEO4J_DATABASE``). All tests then share one database
whose vector index has :data:`NEO4J_TEST_DIMENSION` dimensions; each test writes only to
namespaces starting with its own ``namespace`` and those are deleted after it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from graphmem.embedding import HashingEmbedder, SentenceTransformerEmbedder
from graphmem.stores.base import MemoryStore
from graphmem.stores.embedded import EmbeddedStore
from graphmem.testing import unique_namespace

NEO4J_TEST_DIMENSION = 384
"""The one embedding dimension every test using the shared Neo4j database agrees on."""


@pytest.fixture(autouse=True)
def _logger_levels() -> Iterator[None]:
    """Benchmarks run in-process quiet the ``graphmem`` and ``py4j`` loggers (as their command
    lines should); put the levels back so a later test's ``caplog`` sees what it expects."""
    loggers = [logging.getLogger(name) for name in ("graphmem", "py4j", "graphmem.llm")]
    levels = [lg.level for lg in loggers]
    yield
    for lg, level in zip(loggers, levels, strict=True):
        lg.setLevel(level)


def _backends() -> list[Any]:
    """Both stores, always: the Neo4j variants carry the ``neo4j`` marker, which
    :func:`pytest_collection_modifyitems` turns into a skip with its reason when no server is
    configured, so ``pytest -ra`` shows what was not tested."""
    return ["embedded", pytest.param("neo4j", marks=pytest.mark.neo4j)]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without GRAPHMEM_NEO4J_URI every test marked ``neo4j`` (each needs a server) is
    skipped with the reason."""
    if os.environ.get("GRAPHMEM_NEO4J_URI"):
        return
    skip = pytest.mark.skip(reason="Neo4j test: GRAPHMEM_NEO4J_URI is not set")
    for item in items:
        if item.get_closest_marker("neo4j") is not None:
            item.add_marker(skip)


@pytest.fixture
def namespace() -> str:
    """A namespace no other test uses."""
    return unique_namespace()


@pytest.fixture(scope="session")
def neo4j_store() -> Iterator[MemoryStore]:
    """One connection to the configured Neo4j for the whole session, schema applied."""
    uri = os.environ.get("GRAPHMEM_NEO4J_URI")
    if not uri:
        pytest.skip("GRAPHMEM_NEO4J_URI is not set")
    from graphmem.stores.neo4j import Neo4jStore

    store = Neo4jStore.from_uri(
        uri,
        user=os.environ.get("GRAPHMEM_NEO4J_USER", "neo4j"),
        password=os.environ.get("GRAPHMEM_NEO4J_PASSWORD") or None,
        database=os.environ.get("GRAPHMEM_NEO4J_DATABASE") or None,
    )
    try:
        store.setup(NEO4J_TEST_DIMENSION)
        store.check_dimension(NEO4J_TEST_DIMENSION)
        yield store
    finally:
        store.close()


def drop_namespaces(store: MemoryStore, prefix: str) -> None:
    """Delete every memory of the namespaces ``prefix`` and ``prefix-…``, and their embedder
    records (deleting memories keeps a namespace's record)."""
    dropped = {prefix}
    for ns in store.namespaces():
        if ns == prefix or ns.startswith(prefix + "-"):
            dropped.add(ns)
            ids = [m.id for m in store.iter_nodes(ns)]
            for start in range(0, len(ids), 500):
                store.delete(ns, ids[start : start + 500])
    for ns in dropped:
        store.record_embedder(ns, None, replace=True)


@pytest.fixture(params=_backends())
def store(request: pytest.FixtureRequest, tmp_path: Path, namespace: str) -> Iterator[MemoryStore]:
    """A store to test against: a fresh embedded store in a temp directory, or the shared
    Neo4j database (cleaned of this test's namespaces afterwards)."""
    if request.param == "embedded":
        embedded = EmbeddedStore.open(tmp_path / "store")
        try:
            yield embedded
        finally:
            embedded.close()
        return
    shared: MemoryStore = request.getfixturevalue("neo4j_store")
    try:
        yield shared
    finally:
        drop_namespaces(shared, namespace)


@pytest.fixture
def embedder() -> HashingEmbedder:
    """A fast deterministic 384-dim embedder (no model)."""
    return HashingEmbedder(384)


@pytest.fixture(scope="session")
def minilm() -> SentenceTransformerEmbedder:
    """The real offline all-MiniLM-L6-v2 embedder, loaded once per session."""
    return SentenceTransformerEmbedder()
