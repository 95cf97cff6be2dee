"""The Neo4j store for async code: the same graph, operations and guarantees as
:class:`~graphmem.stores.neo4j.Neo4jStore`, awaited on ``neo4j.AsyncDriver``.

Why and how, in full: docs/design.md, "Module notes", ``graphmem.stores.neo4j.async_store``.

>>> async def main() -> None:
...     async with await AsyncNeo4jStore.from_uri("neo4j://127.0.0.1:7687", "neo4j", "pw") as store:
...         hits = await store.recall("agent-1", vector, k=5)
>>> asyncio.run(main())  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from graphmem.extras import needs_extra

with needs_extra("neo4j", "the async Neo4j store"):
    import neo4j
    from neo4j.exceptions import DriverError, Neo4jError

    from graphmem.errors import ConfigError, StoreError
    from graphmem.models import MemoryKind
    from graphmem.stores.base import AsyncMemoryStore, Recall, TextRecall
    from graphmem.stores.neo4j import embedders, fulltext, ops
    from graphmem.stores.neo4j.tx import (
        AsyncSession,
        Session,
        reason,
        retry_window,
    )
    from graphmem.stores.neo4j.uri import check_neo4j_uri, redact_uri


class AsyncNeo4jStore(ops.Neo4jBase, AsyncMemoryStore):
    """The memory graph in Neo4j, for asyncio; see the module docstring.

    The driver is injected and stays the caller's (``close`` leaves it open); use
    :meth:`from_uri` (or :meth:`Neo4jStore.open_async`) to let the store own one.
    """

    def __init__(
        self,
        driver: neo4j.AsyncDriver,
        *,
        database: str | None = None,
        max_sessions: int | None = None,
    ) -> None:
        super().__init__(database)
        self._driver = driver
        if max_sessions is None:
            max_sessions = ops.MAX_SESSIONS
        if isinstance(max_sessions, bool) or not isinstance(max_sessions, int) or max_sessions < 1:
            raise ConfigError(f"max_sessions must be a positive integer, not {max_sessions!r}")
        # Backpressure: thousands of coroutines gathered at once wait here, without a deadline,
        # rather than in the driver's pool, whose acquisition timeout (60 s) fails the last.
        self._sessions = asyncio.Semaphore(max_sessions)

    @classmethod
    async def from_uri(
        cls,
        uri: str,
        user: str = "neo4j",
        password: str | None = None,
        database: str | None = None,
        *,
        retry_for: float | None = None,
        **driver_config: Any,
    ) -> AsyncNeo4jStore:
        """Connect to ``uri``, check it answers, own the driver (as :meth:`Neo4jStore.from_uri`,
        ``retry_for`` included)."""
        check_neo4j_uri(uri)
        window = retry_window(retry_for, driver_config)
        shown = redact_uri(uri)
        auth = (user, password) if password is not None else None
        try:
            driver = neo4j.AsyncGraphDatabase.driver(uri, auth=auth, **driver_config)
        except (ValueError, DriverError, ImportError) as e:
            raise ConfigError(f"unusable Neo4j URI {shown!r}: {reason(e)}") from e
        try:
            await driver.verify_connectivity()
        except (DriverError, Neo4jError, OSError, ValueError) as e:
            await driver.close()
            raise ops.connection_error(e, shown, user) from e
        store = cls(driver, database=database, max_sessions=ops.sessions_for(driver_config))
        store._owns_driver = True
        store._retry_for = window
        return store

    @property
    def driver(self) -> neo4j.AsyncDriver:
        return self._driver

    @asynccontextmanager
    async def _open(self, *, read_only: bool = False) -> AsyncIterator[Session]:
        if self._closed:
            raise StoreError("the Neo4j store is closed")
        # One bookmark manager for every session: reads see this store's earlier writes even
        # when a cluster routes them to another member.
        async with (
            self._sessions,
            self._driver.session(
                database=self._database,
                bookmark_manager=self._driver.execute_query_bookmark_manager,
                notifications_min_severity="OFF",
                default_access_mode=neo4j.READ_ACCESS if read_only else neo4j.WRITE_ACCESS,
            ) as session,
        ):
            yield AsyncSession(session, self._retry_for)

    # ---- the contract (AsyncMemoryStore): each method is the one Neo4j operation -------------

    ensure_constraints = ops.ensure_constraints
    dimension = ops.get_dimension
    check_dimension = ops.check_dimension
    embedder_record = embedders.embedder_record
    record_embedder = embedders.record_embedder
    set_embeddings = embedders.set_embeddings
    upsert = ops.upsert
    patch = ops.patch
    update_utility = ops.update_utility
    finish_episode = ops.finish_episode
    mark_used = ops.mark_used
    delete = ops.delete
    get_many = ops.get_many
    edges = ops.edges
    superseded = ops.superseded
    recall = ops.recall_memories
    find_by_hash = ops.find_by_hash
    iter_nodes = ops.iter_nodes
    iter_edges = ops.iter_edges
    namespaces = ops.namespaces
    text_index_problems = fulltext.text_index_problems

    async def recall_text(
        self,
        namespace: str,
        query: str,
        k: int,
        *,
        kinds: Sequence[MemoryKind] | None = None,
        include_obsolete: bool = False,
    ) -> list[TextRecall]:
        """Top-k memories of the namespace by keyword relevance (Lucene's BM25 on the
        ``memory_text`` full-text index), best first; see :mod:`graphmem.stores.neo4j.fulltext`."""
        return await fulltext.recall_text(
            self, namespace, query, k, kinds=kinds, include_obsolete=include_obsolete
        )

    async def recall_text_ids(
        self,
        namespace: str,
        query: str,
        k: int,
        *,
        kinds: Sequence[MemoryKind] | None = None,
        include_obsolete: bool = False,
    ) -> list[tuple[str, float, bool]]:
        """:meth:`recall_text`'s answer without the memories: (memory id, score, whether
        vector recall could return it: not superseded and with an embedding), best first; see
        :func:`graphmem.stores.neo4j.fulltext.recall_text_ids`."""
        return await fulltext.recall_text_ids(
            self, namespace, query, k, kinds=kinds, include_obsolete=include_obsolete
        )

    async def recall_hybrid_ids(
        self,
        namespace: str,
        vector: Sequence[float],
        query: str,
        k: int,
        text_k: int,
        *,
        kinds: Sequence[MemoryKind] | None = None,
        min_sim: float | None = None,
    ) -> tuple[list[Recall], list[tuple[str, float, bool]]]:
        """:meth:`recall_hybrid` with the keyword list as :meth:`recall_text_ids` answers it:
        what hybrid recall (:mod:`graphmem.ops.fusion`) asks."""
        return await fulltext.recall_hybrid_ids(
            self, namespace, vector, query, k, text_k, kinds=kinds, min_sim=min_sim
        )

    async def recall_hybrid(
        self,
        namespace: str,
        vector: Sequence[float],
        query: str,
        k: int,
        text_k: int,
        *,
        kinds: Sequence[MemoryKind] | None = None,
        min_sim: float | None = None,
    ) -> tuple[list[Recall], list[TextRecall]]:
        """:meth:`recall` of k and :meth:`recall_text` of text_k (live memories only) in one
        round trip: hybrid recall's phase A (:mod:`graphmem.ops.fusion`); see
        :func:`graphmem.stores.neo4j.fulltext.recall_hybrid`."""
        return await fulltext.recall_hybrid(
            self, namespace, vector, query, k, text_k, kinds=kinds, min_sim=min_sim
        )

    async def close(self) -> None:
        """Idempotent; closes the driver only if the store owns it."""
        if self._closed:
            return
        self._closed = True
        if self._owns_driver:
            await self._driver.close()


__all__ = ["AsyncNeo4jStore"]
