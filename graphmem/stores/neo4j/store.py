"""The Neo4j store: the memory graph in Neo4j 5.26 (Community is enough).

Why and how, in full: docs/design.md, "Module notes", ``graphmem.stores.neo4j``.

>>> store = Neo4jStore.from_uri("neo4j://127.0.0.1:7687", "neo4j", "secret")  # doctest: +SKIP
>>> store.setup(384)  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from graphmem.extras import needs_extra

with needs_extra("neo4j", "the Neo4j store"):
    import neo4j
    from neo4j.exceptions import DriverError, Neo4jError

    from graphmem.coroutines import drive
    from graphmem.errors import ConfigError, StoreError
    from graphmem.stores.faces import BlockingStore, blocking
    from graphmem.stores.neo4j import ops
    from graphmem.stores.neo4j.async_store import AsyncNeo4jStore
    from graphmem.stores.neo4j.recall import IndexMode
    from graphmem.stores.neo4j.tx import (
        Session,
        SyncSession,
        reason,
        retry_window,
    )
    from graphmem.stores.neo4j.uri import check_neo4j_uri, redact_uri

PAGE_SIZE = ops.PAGE_SIZE
"""Rows per read transaction when iterating over the whole graph."""


class Neo4jStore(ops.Neo4jBase, BlockingStore):
    """The memory graph in Neo4j; see the module docstring.

    The driver is injected and stays the caller's (``close`` leaves it open); use
    :meth:`from_uri` to let the store own one.
    """

    parallel_reads = True
    """Reads may run at once from several threads (each opens its own session): hybrid
    recall asks for its vector and keyword candidates together (:mod:`graphmem.ops.fusion`)."""

    def __init__(self, driver: neo4j.Driver, *, database: str | None = None) -> None:
        super().__init__(database)
        self._driver = driver
        self._async_driver: Callable[[], neo4j.AsyncDriver] | None = None
        self._async_sessions: int | None = None  # the pool size from_uri was given

    @classmethod
    def from_uri(
        cls,
        uri: str,
        user: str = "neo4j",
        password: str | None = None,
        database: str | None = None,
        *,
        retry_for: float | None = None,
        **driver_config: Any,
    ) -> Neo4jStore:
        """Connect to ``uri`` (``bolt://`` or ``neo4j://``), check it answers, own the driver.

        No password means no authentication. Errors say what to change and never show a
        password (credentials in the URI itself are refused, and redacted). A transaction
        failing on an error worth retrying (the server restarting, a deadlock) is retried for
        ``retry_for`` seconds: by default the driver's ``max_transaction_retry_time`` if given,
        else a window long enough for an ordinary restart (see :func:`~graphmem.stores.
        neo4j_tx.retry_window`).
        """
        check_neo4j_uri(uri)
        window = retry_window(retry_for, driver_config)
        shown = redact_uri(uri)
        auth = (user, password) if password is not None else None
        try:
            driver = neo4j.GraphDatabase.driver(uri, auth=auth, **driver_config)
        except (ValueError, DriverError, ImportError) as e:
            raise ConfigError(f"unusable Neo4j URI {shown!r}: {reason(e)}") from e
        try:
            driver.verify_connectivity()
        except (DriverError, Neo4jError, OSError, ValueError) as e:
            driver.close()
            raise ops.connection_error(e, shown, user) from e
        store = cls(driver, database=database)
        store._owns_driver = True
        store._retry_for = window
        # A closure, not a stored tuple: the password is kept no more visibly than the driver
        # keeps it.
        store._async_driver = lambda: neo4j.AsyncGraphDatabase.driver(
            uri, auth=auth, **driver_config
        )
        store._async_sessions = ops.sessions_for(driver_config)
        return store

    @property
    def driver(self) -> neo4j.Driver:
        return self._driver

    def setup(self, dimension: int = 384, *, wait: float = 300.0) -> None:
        """Apply the schema (see :func:`graphmem.stores.neo4j.schema.setup`); idempotent."""
        from graphmem.stores.neo4j.schema import setup

        setup(self._driver, dimension, database=self._database, wait=wait)
        self._index_ready = None
        self._constraints_ok = True

    @property
    def can_open_async(self) -> bool:
        """Whether :meth:`open_async` can connect (the store was made by :meth:`from_uri`)."""
        return self._async_driver is not None and not self._closed

    def open_async(self) -> AsyncNeo4jStore:
        """An :class:`~graphmem.stores.neo4j.async_store.AsyncNeo4jStore` on the same server,
        database and credentials, with an ``AsyncDriver`` of its own (it connects on first use).

        The new store owns that driver: close it with ``await store.close()``, on the event loop
        that used it (an async driver's connections belong to one loop). Only a store made by
        :meth:`from_uri` knows its credentials; for an injected driver, build
        ``AsyncNeo4jStore(your_async_driver)`` instead.
        """
        if self._closed:
            raise StoreError("the Neo4j store is closed")
        if self._async_driver is None:
            raise ConfigError(
                "open_async needs a store made by Neo4jStore.from_uri; with an injected driver, "
                "use AsyncNeo4jStore(neo4j.AsyncGraphDatabase.driver(...))"
            )
        store = AsyncNeo4jStore(
            self._async_driver(), database=self._database, max_sessions=self._async_sessions
        )
        store._retry_for = self._retry_for
        store._owns_driver = True
        return store

    # ---- plumbing -------------------------------------------------------------------------

    def _session(self, *, read_only: bool = False) -> neo4j.Session:
        if self._closed:
            raise StoreError("the Neo4j store is closed")
        # One bookmark manager for every session: reads see this store's earlier writes even
        # when a cluster routes them to another member.
        return self._driver.session(
            database=self._database,
            bookmark_manager=self._driver.execute_query_bookmark_manager,
            notifications_min_severity="OFF",
            default_access_mode=neo4j.READ_ACCESS if read_only else neo4j.WRITE_ACCESS,
        )

    @asynccontextmanager
    async def _open(self, *, read_only: bool = False) -> AsyncIterator[Session]:
        # Runs only under drive(): the blocking session never suspends the coroutine.
        with self._session(read_only=read_only) as session:
            yield SyncSession(session, self._retry_for)

    def _index_mode(self, dimension: int) -> IndexMode:
        return drive(ops.index_mode(self, dimension))

    # ---- the contract: every primitive is AsyncNeo4jStore's, run over the blocking driver ----

    async_face = AsyncNeo4jStore
    ensure_constraints = blocking(AsyncNeo4jStore.ensure_constraints)
    recall_hybrid = blocking(AsyncNeo4jStore.recall_hybrid)
    recall_hybrid_ids = blocking(AsyncNeo4jStore.recall_hybrid_ids)
    recall_text_ids = blocking(AsyncNeo4jStore.recall_text_ids)
    text_index_problems = blocking(AsyncNeo4jStore.text_index_problems)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._owns_driver:
            self._driver.close()
