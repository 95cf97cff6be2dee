"""The Neo4j store: the memory graph in Neo4j 5.26 or later (needs the ``neo4j`` extra).

:class:`AsyncNeo4jStore` (async driver, ``async_store.py``) implements the contract's async
face with the operations of ``ops``; :class:`Neo4jStore` (blocking driver, ``store.py``) is its
blocking face, the same operations run on blocking sessions (``graphmem.stores.faces``). All
Cypher is constants in ``cypher``.
The stores load on first use, so ``cypher`` and the other driver-free modules import without the
extra; without it, asking for a store names the extra to install.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from graphmem.stores.neo4j.async_store import AsyncNeo4jStore
    from graphmem.stores.neo4j.store import Neo4jStore

__all__ = ["AsyncNeo4jStore", "Neo4jStore"]


def __getattr__(name: str) -> Any:
    if name == "Neo4jStore":
        from graphmem.stores.neo4j.store import Neo4jStore

        return Neo4jStore
    if name == "AsyncNeo4jStore":
        from graphmem.stores.neo4j.async_store import AsyncNeo4jStore

        return AsyncNeo4jStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
