"""Fixtures of the reliability suite.

The parametrized ``store`` (embedded always, Neo4j when ``GRAPHMEM_NEO4J_URI`` is set) and
``namespace`` come from ``tests/conftest.py``. This file adds a GraphMemory over that store and a
*private* Neo4j server (own data directory, Bolt 17688 / HTTP 17475, auth on, random password)
for the tests that kill or probe a server: it never touches the shared test server. The private
server is opt-in like every Neo4j test (``GRAPHMEM_NEO4J_URI`` set) and also needs Java 17 and
the cached Neo4j jars (it never downloads them); otherwise those tests skip at once.
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from graphmem.config import MemoryConfig
from graphmem.embedding import HashingEmbedder
from graphmem.memory import GraphMemory
from graphmem.stores.base import MemoryStore

from ._workers import DIM

PRIVATE_BOLT_PORT = int(os.environ.get("GRAPHMEM_RELIABILITY_BOLT_PORT", "17688"))
PRIVATE_HTTP_PORT = int(os.environ.get("GRAPHMEM_RELIABILITY_HTTP_PORT", "17475"))


@pytest.fixture
def memory(store: MemoryStore) -> GraphMemory:
    """A GraphMemory over the parametrized store, with the fast 384-dim hashing embedder."""
    return GraphMemory(store, embedder=HashingEmbedder(DIM), config=MemoryConfig(alpha=0.1))


@dataclass
class PrivateServer:
    """A Neo4j server only this suite uses; ``password`` is random per session."""

    server: object  # graphmem.launcher.server.Neo4jServer (imported lazily)
    password: str

    @property
    def uri(self) -> str:
        return str(self.server.bolt_uri)  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def private_neo4j(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateServer]:
    """Start (once per session) a private auth-on Neo4j on separate ports, stop it at the end."""
    if not os.environ.get("GRAPHMEM_NEO4J_URI"):
        pytest.skip("GRAPHMEM_NEO4J_URI is not set (Neo4j tests are opt-in)")
    from graphmem.launcher.server import (
        Neo4jServer,
        Neo4jServerError,
        _port_in_use,
        default_home,
        find_java,
        jars_present,
    )

    if not jars_present(default_home()):
        pytest.skip("Neo4j jars are not cached (run `graphmem neo4j start` once)")
    try:
        find_java()
    except Neo4jServerError as e:
        pytest.skip(str(e))
    for port in (PRIVATE_BOLT_PORT, PRIVATE_HTTP_PORT):
        if _port_in_use("127.0.0.1", port):
            pytest.skip(f"port {port} is taken; set GRAPHMEM_RELIABILITY_BOLT/HTTP_PORT")
    data_dir: Path = tmp_path_factory.mktemp("private-neo4j")
    server = Neo4jServer(data_dir, bolt_port=PRIVATE_BOLT_PORT, http_port=PRIVATE_HTTP_PORT)
    password = "rel-" + secrets.token_hex(12)
    server.start(password, timeout=300)
    try:
        yield PrivateServer(server, password)
    finally:
        server.stop(timeout=30)
        shutil.rmtree(data_dir, ignore_errors=True)
