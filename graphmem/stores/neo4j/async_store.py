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
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

from graphmem.extras import needs_extra

with needs_extra("neo4j", "the async Neo4j store"):
    import neo4j
    from neo4j.exceptions import DriverError, Neo4jError

    from graphmem.embedding import EmbedderRecord
    from graphmem.errors import ConfigError, StoreError
    from graphmem.models import AnyMemory, CreditPolicy, Edge, EdgeKind, MemoryKind
    from graphmem.stores.base import Direction, EpisodeCredit, Recall, TextRecall
    from graphmem.stores.neo4j import embedders, fulltext, ops
    from graphmem.stores.neo4j.tx import (
        AsyncSession,
        Session,
        reason,
        retry_window,
    )
    from graphmem.stores.neo4j.uri import check_neo4j_uri, redact_uri


class AsyncNeo4jStore(ops.Neo4jBase):
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

    async def __aenter__(self) -> AsyncNeo4jStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

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

    async def ensure_constraints(self) -> None:
        """Make sure the uniqueness constraints exist (as :meth:`Neo4jStore.ensure_constraints`)."""
        await ops.ensure_constraints(self)

    # ---- schema ---------------------------------------------------------------------------

    async def dimension(self) -> int | None:
        """As :attr:`MemoryStore.dimension`, awaited."""
        return await ops.get_dimension(self)

    async def check_dimension(self, dimension: int) -> None:
        await ops.check_dimension(self, dimension)

    async def embedder_record(self, namespace: str) -> EmbedderRecord | None:
        """As :meth:`MemoryStore.embedder_record`."""
        return await embedders.embedder_record(self, namespace)

    async def record_embedder(
        self, namespace: str, record: EmbedderRecord | None, *, replace: bool = False
    ) -> EmbedderRecord | None:
        """As :meth:`MemoryStore.record_embedder`."""
        return await embedders.record_embedder(self, namespace, record, replace=replace)

    async def set_embeddings(self, namespace: str, vectors: Mapping[str, Sequence[float]]) -> None:
        """As :meth:`MemoryStore.set_embeddings`."""
        await embedders.set_embeddings(self, namespace, vectors)

    # ---- writes ---------------------------------------------------------------------------

    async def upsert(
        self,
        nodes: Sequence[AnyMemory] = (),
        edges: Sequence[Edge] = (),
        *,
        keep_utility: bool = True,
    ) -> None:
        await ops.upsert(self, nodes, edges, keep_utility=keep_utility)

    async def patch(self, namespace: str, memory_id: str, changes: dict[str, Any]) -> AnyMemory:
        return await ops.patch(self, namespace, memory_id, changes)

    async def update_utility(
        self,
        namespace: str,
        memory_ids: Sequence[str],
        reward: float,
        alpha: float,
        *,
        success: bool | None = None,
    ) -> list[AnyMemory]:
        return await ops.update_utility(self, namespace, memory_ids, reward, alpha, success=success)

    async def finish_episode(
        self,
        namespace: str,
        episode_id: str,
        reward: float,
        alpha: float,
        *,
        success: bool,
        finished_at: datetime,
        used: Sequence[str] | None = None,
        credit: CreditPolicy = CreditPolicy.OFFERED,
    ) -> EpisodeCredit:
        return await ops.finish_episode(
            self,
            namespace,
            episode_id,
            reward,
            alpha,
            success=success,
            finished_at=finished_at,
            used=used,
            credit=credit,
        )

    async def mark_used(
        self, namespace: str, episode_id: str, memory_ids: Sequence[str]
    ) -> list[str]:
        return await ops.mark_used(self, namespace, episode_id, memory_ids)

    async def delete(self, namespace: str, memory_ids: Sequence[str]) -> list[str]:
        return await ops.delete(self, namespace, memory_ids)

    # ---- reads ----------------------------------------------------------------------------

    async def get_many(self, namespace: str, memory_ids: Sequence[str]) -> list[AnyMemory]:
        return await ops.get_many(self, namespace, memory_ids)

    async def get(self, namespace: str, memory_id: str) -> AnyMemory:
        """As :meth:`MemoryStore.get`."""
        return await ops.get(self, namespace, memory_id)

    async def edges(
        self,
        namespace: str,
        memory_id: str,
        *,
        kinds: Sequence[EdgeKind] | None = None,
        direction: Direction = "out",
    ) -> list[Edge]:
        return await ops.edges(self, namespace, memory_id, kinds=kinds, direction=direction)

    async def superseded(self, namespace: str, memory_ids: Sequence[str]) -> set[str]:
        return await ops.superseded(self, namespace, memory_ids)

    async def recall(
        self,
        namespace: str,
        vector: Sequence[float],
        k: int,
        *,
        kinds: Sequence[MemoryKind] | None = None,
        include_obsolete: bool = False,
        min_sim: float | None = None,
    ) -> list[Recall]:
        """Top-k memories of the namespace by cosine similarity, best first, each with its
        ``superseded`` flag: the candidate pool of two-phase retrieval
        (:func:`graphmem.ops.retrieve.rank_candidates` ranks it by learned utility)."""
        return await ops.recall_memories(
            self,
            namespace,
            vector,
            k,
            kinds=kinds,
            include_obsolete=include_obsolete,
            min_sim=min_sim,
        )

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

    async def text_index_problems(self) -> list[str]:
        """What is wrong with the full-text index keyword recall uses (empty: nothing)."""
        return await fulltext.text_index_problems(self)

    async def find_by_hash(
        self, namespace: str, kind: MemoryKind, content_hash: str
    ) -> AnyMemory | None:
        return await ops.find_by_hash(self, namespace, kind, content_hash)

    def iter_nodes(
        self, namespace: str | None = None, kinds: Sequence[MemoryKind] | None = None
    ) -> AsyncGenerator[AnyMemory, None]:
        """As :meth:`MemoryStore.iter_nodes`, read a page at a time."""
        return ops.iter_nodes(self, namespace, kinds)

    def iter_edges(self, namespace: str | None = None) -> AsyncGenerator[Edge, None]:
        return ops.iter_edges(self, namespace)

    async def namespaces(self, *prefixes: str) -> list[str]:
        """As :meth:`MemoryStore.namespaces`."""
        return await ops.namespaces(self, prefixes)

    async def close(self) -> None:
        """Idempotent; closes the driver only if the store owns it."""
        if self._closed:
            return
        self._closed = True
        if self._owns_driver:
            await self._driver.close()


__all__ = ["AsyncNeo4jStore"]
