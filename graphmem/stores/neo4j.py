"""The Neo4j store: the memory graph in Neo4j 5.26 (Community is enough).

Every memory is a node labelled ``Memory`` plus its kind, with flat primitive properties (the
model's JSON form: datetimes as ISO strings, lists of strings, the embedding as a float list);
edges are relationships of their kind. All Cypher lives in :mod:`graphmem.stores.cypher`.
Writes are batched with UNWIND inside managed transactions, which the driver retries on
transient errors; ``neo4j://`` routing URIs work unchanged.

The schema (constraints, vector and full-text indexes) is applied explicitly with
:func:`graphmem.stores.neo4j_schema.setup` or ``graphmem schema apply``, never by the constructor.
The one exception: if the uniqueness constraints are missing, the first write that can create a node
creates them (dimension-free and idempotent), since without them concurrent saves of one id
make duplicates; see :meth:`Neo4jStore.ensure_constraints`.

>>> store = Neo4jStore.from_uri("neo4j://127.0.0.1:7687", "neo4j", "secret")  # doctest: +SKIP
>>> store.setup(384)  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import Any, TypeVar, cast

import neo4j
from neo4j.exceptions import AuthError, DriverError, Neo4jError, ServiceUnavailable

from graphmem.errors import (
    ConfigError,
    DimensionMismatch,
    GraphmemError,
    InvalidInput,
    MemoryNotFound,
    StoreError,
)
from graphmem.models import (
    AnyMemory,
    Edge,
    EdgeKind,
    Episode,
    EpisodeStatus,
    MemoryKind,
    check_id,
    check_namespace,
    check_vector,
    memory_from_dict,
    utcnow,
)
from graphmem.stores import cypher
from graphmem.stores import neo4j_recall as recall
from graphmem.stores import neo4j_rows as mapping
from graphmem.stores.base import (
    ABOUT_KINDS,
    OWNED_BY,
    Direction,
    EpisodeCredit,
    MemoryStore,
    Recall,
    check_alpha_reward,
    check_patch,
    closed_episode,
    credited_order,
    replayed_q_after,
    upsert_batch,
)
from graphmem.stores.neo4j_recall import IndexMode
from graphmem.stores.neo4j_uri import check_neo4j_uri, redact_uri

log = logging.getLogger(__name__)

T = TypeVar("T")

PAGE_SIZE = 1000
"""Rows per read transaction when iterating over the whole graph."""


class Neo4jStore(MemoryStore):
    """The memory graph in Neo4j; see the module docstring.

    The driver is injected and stays the caller's (``close`` leaves it open); use
    :meth:`from_uri` to let the store own one.
    """

    def __init__(self, driver: neo4j.Driver, *, database: str | None = None) -> None:
        self._driver = driver
        self._database = database
        self._owns_driver = False
        self._closed = False
        self._dimension: int | None = None
        self._index_ready: IndexMode | None = None
        self._constraints_ok = False

    @classmethod
    def from_uri(
        cls,
        uri: str,
        user: str = "neo4j",
        password: str | None = None,
        database: str | None = None,
        **driver_config: Any,
    ) -> Neo4jStore:
        """Connect to ``uri`` (``bolt://`` or ``neo4j://``), check it answers, own the driver.

        No password means no authentication. Errors say what to change and never show a
        password (credentials in the URI itself are refused, and redacted).
        """
        check_neo4j_uri(uri)
        shown = redact_uri(uri)
        auth = (user, password) if password is not None else None
        try:
            driver = neo4j.GraphDatabase.driver(uri, auth=auth, **driver_config)
        except (ValueError, DriverError, ImportError) as e:
            raise ConfigError(f"unusable Neo4j URI {shown!r}: {_reason(e)}") from e
        try:
            driver.verify_connectivity()
        except AuthError as e:
            driver.close()
            raise StoreError(
                f"Neo4j at {shown} rejected the credentials of user {user!r}: check "
                "GRAPHMEM_NEO4J_USER and GRAPHMEM_NEO4J_PASSWORD"
            ) from e
        except (DriverError, Neo4jError, OSError, ValueError) as e:
            driver.close()
            raise StoreError(
                f"cannot reach Neo4j at {shown}: {_reason(e)}; check the URI and that the "
                "server is running (a local one: `graphmem neo4j start`)"
            ) from e
        store = cls(driver, database=database)
        store._owns_driver = True
        return store

    @property
    def driver(self) -> neo4j.Driver:
        return self._driver

    def setup(self, dimension: int = 384, *, wait: float = 300.0) -> None:
        """Apply the schema (see :func:`graphmem.stores.neo4j_schema.setup`); idempotent."""
        from graphmem.stores.neo4j_schema import setup

        setup(self._driver, dimension, database=self._database, wait=wait)
        self._index_ready = None
        self._constraints_ok = True

    def ensure_constraints(self) -> None:
        """Make sure the uniqueness constraints exist; called before any write that can create
        a node (see :func:`graphmem.stores.neo4j_schema.ensure_constraints`).

        Checked once per store: without the constraints, processes saving the same id at the
        same time create duplicate nodes that no later write can undo.
        """
        if self._constraints_ok:
            return
        from graphmem.stores.neo4j_schema import ensure_constraints

        ensure_constraints(self._driver, database=self._database)
        self._constraints_ok = True

    # ---- plumbing -------------------------------------------------------------------------

    def _session(self) -> neo4j.Session:
        if self._closed:
            raise StoreError("the Neo4j store is closed")
        # One bookmark manager for every session: reads see this store's earlier writes even
        # when a cluster routes them to another member.
        return self._driver.session(
            database=self._database,
            bookmark_manager=self._driver.execute_query_bookmark_manager,
            notifications_min_severity="OFF",
        )

    def _read(self, work: Callable[[neo4j.ManagedTransaction], T], what: str) -> T:
        try:
            with self._session() as session:
                return session.execute_read(work)
        except GraphmemError:
            raise
        except (Neo4jError, DriverError, OSError) as e:
            raise StoreError(f"Neo4j {what} failed: {_reason(e)}") from e

    def _write(self, work: Callable[[neo4j.ManagedTransaction], T], what: str) -> T:
        try:
            with self._session() as session:
                return session.execute_write(work)
        except GraphmemError:
            raise
        except (Neo4jError, DriverError, OSError) as e:
            raise StoreError(f"Neo4j {what} failed: {_reason(e)}") from e

    # ---- schema ---------------------------------------------------------------------------

    @property
    def dimension(self) -> int | None:
        if self._dimension is None:
            self._dimension = self._read(_meta_dimension, "read of the dimension")
        return self._dimension

    def check_dimension(self, dimension: int) -> None:
        if isinstance(dimension, bool) or not isinstance(dimension, int) or dimension < 1:
            raise InvalidInput(f"the dimension must be a positive integer, got {dimension!r}")
        if self.dimension is not None:
            if self._dimension != dimension:
                raise DimensionMismatch(self._dimension or 0, dimension)
            return
        self.ensure_constraints()
        self._dimension = self._write(lambda tx: _fix_dimension(tx, dimension), "dimension write")

    # ---- writes ---------------------------------------------------------------------------

    def upsert(
        self,
        nodes: Sequence[AnyMemory] = (),
        edges: Sequence[Edge] = (),
        *,
        keep_utility: bool = True,
    ) -> None:
        nodes, edges = upsert_batch(nodes, edges)
        if not nodes and not edges:
            return
        dims = mapping.call_dimension(nodes)
        known = self.dimension if dims is not None else None
        if dims is not None and known is not None and dims != known:
            raise DimensionMismatch(known, dims)
        # Only the first vector ever written touches the meta node (no lock on every upsert).
        fix = dims if dims is not None and known is None else None
        by_kind, wanted = mapping.node_rows(nodes, keep_utility=keep_utility)
        edge_rows = mapping.edge_rows(edges)

        def work(tx: neo4j.ManagedTransaction) -> int | None:
            fixed = _fix_dimension(tx, fix) if fix is not None else None
            keys = [{"namespace": m.namespace, "id": m.id} for m in nodes]
            if keys:
                for rec in tx.run(cypher.KINDS_OF, rows=keys):
                    want = wanted.get((rec["namespace"], rec["id"]))
                    if want is not None and want != rec["kind"]:
                        raise InvalidInput(
                            f"memory {rec['id']!r} in namespace {rec['namespace']!r} is a "
                            f"{rec['kind']}, not a {want}"
                        )
            for node_kind, rows in by_kind.items():
                tx.run(cypher.upsert_nodes(node_kind), rows=rows).consume()
            if edge_rows:
                flat = [row for rows in edge_rows.values() for row in rows]
                missing = tx.run(cypher.MISSING_ENDPOINTS, rows=flat).single()
                if missing is not None:
                    raise MemoryNotFound(missing["id"], missing["namespace"])
                for edge_kind, rows in edge_rows.items():
                    tx.run(cypher.upsert_edges(edge_kind), rows=rows).consume()
            return fixed

        if nodes:
            self.ensure_constraints()
        fixed = self._write(work, "upsert")
        if fixed is not None:
            self._dimension = fixed

    def patch(self, namespace: str, memory_id: str, changes: dict[str, Any]) -> AnyMemory:
        check_namespace(namespace)
        check_id(memory_id)
        if not isinstance(changes, dict):
            raise InvalidInput("a patch is a dict of field names to new values")
        check_patch(changes)

        def work(tx: neo4j.ManagedTransaction) -> AnyMemory:
            found = tx.run(cypher.GET_MANY, namespace=namespace, ids=[memory_id]).single()
            if found is None:
                raise MemoryNotFound(memory_id, namespace)
            current = mapping.to_memory(found["props"])
            data = current.model_dump()
            data.update(changes)
            if "updated_at" not in changes:
                data["updated_at"] = utcnow()
            new = memory_from_dict(data)
            dumped = mapping.props(new)
            props = {k: dumped.get(k) for k in [*changes, "updated_at"]}
            record = tx.run(cypher.PATCH, namespace=namespace, id=memory_id, props=props).single()
            assert record is not None
            return mapping.to_memory(record["props"])

        return self._write(work, "patch")

    def update_utility(
        self,
        namespace: str,
        memory_ids: Sequence[str],
        reward: float,
        alpha: float,
        *,
        success: bool | None = None,
    ) -> list[AnyMemory]:
        check_namespace(namespace)
        ids = mapping.check_ids(memory_ids)
        check_alpha_reward(alpha, reward)
        if not ids:
            return []
        unique = sorted(ids)
        inc = 1 if success else 0

        def work(tx: neo4j.ManagedTransaction) -> dict[str, AnyMemory]:
            found = {r["id"] for r in tx.run(cypher.EXISTING_IDS, namespace=namespace, ids=unique)}
            lost = [i for i in ids if i not in found]
            if lost:
                raise MemoryNotFound(lost[0], namespace)
            result = tx.run(
                cypher.UPDATE_UTILITY,
                namespace=namespace,
                ids=unique,
                alpha=float(alpha),
                reward=float(reward),
                success_inc=inc,
                now=utcnow().isoformat(),
            )
            changed = [r["props"] for r in result]
            for row in changed:
                if not math.isfinite(row["q"]):  # raising rolls the whole update back
                    raise InvalidInput(f"the update would make q of {row['id']!r} non-finite")
            return {m.id: m for m in map(mapping.to_memory, changed)}

        updated = self._write(work, "utility update")
        return [updated[i] for i in ids]

    def finish_episode(
        self,
        namespace: str,
        episode_id: str,
        reward: float,
        alpha: float,
        *,
        success: bool,
        finished_at: datetime,
    ) -> EpisodeCredit:
        """One write transaction: lock the episode, then close it and credit its memories.

        The driver may run the transaction function again (a transient error, or a commit
        whose answer was lost); the run that finds the episode finished replays its outcome.
        """
        check_namespace(namespace)
        check_id(episode_id)
        check_alpha_reward(alpha, reward)
        key: dict[str, Any] = {"namespace": namespace, "id": episode_id}

        def work(tx: neo4j.ManagedTransaction) -> EpisodeCredit:
            found = tx.run(cypher.LOCK_EPISODE, **key).single()
            if found is None:
                raise MemoryNotFound(episode_id, namespace)
            episode = mapping.to_memory(found["props"])
            if not isinstance(episode, Episode):
                raise InvalidInput(f"memory {episode_id!r} is a {episode.kind}, not an Episode")
            edges = [
                Edge(namespace=namespace, kind=EdgeKind.RETRIEVED, src=episode_id, **row)
                for row in _retrieved_rows(tx, key)
            ]
            if episode.status is EpisodeStatus.FINISHED:
                return self._replay(tx, namespace, episode, edges, reward)
            ids = credited_order(edges)
            updated: dict[str, AnyMemory] = {}
            if ids:
                result = tx.run(
                    cypher.UPDATE_UTILITY,
                    namespace=namespace,
                    ids=sorted(ids),
                    alpha=float(alpha),
                    reward=float(reward),
                    success_inc=1 if success else 0,
                    now=finished_at.isoformat(),
                )
                for row in result:
                    if not math.isfinite(row["props"]["q"]):  # raising rolls it all back
                        raise InvalidInput(
                            f"the update would make q of {row['props']['id']!r} non-finite"
                        )
                    memory = mapping.to_memory(row["props"])
                    updated[memory.id] = memory
                rows = [{"id": i, "q": updated[i].q} for i in ids]
                tx.run(cypher.ANNOTATE_RETRIEVED, **key, rows=rows, alpha=float(alpha)).consume()
            closed = closed_episode(episode, reward, success, finished_at)
            dumped = mapping.props(closed)
            props = {
                k: dumped[k] for k in ("status", "reward", "success", "finished_at", "updated_at")
            }
            record = tx.run(cypher.CLOSE_EPISODE, **key, props=props).single()
            if record is None:  # cannot happen under the lock; never credit without closing
                raise StoreError(f"episode {episode_id!r} changed while it was being finished")
            return EpisodeCredit(
                episode=cast(Episode, mapping.to_memory(record["props"])),
                updated=[updated[i] for i in ids],
                q_after={i: updated[i].q for i in ids},
            )

        return self._write(work, "episode finish")

    @staticmethod
    def _replay(
        tx: neo4j.ManagedTransaction,
        namespace: str,
        episode: Episode,
        edges: list[Edge],
        reward: float,
    ) -> EpisodeCredit:
        """The recorded outcome of a finished episode, if ``reward`` is the one it got."""
        q_after = replayed_q_after(namespace, episode, edges, reward)
        result = tx.run(cypher.GET_MANY, namespace=namespace, ids=list(q_after))
        by_id = {m.id: m for m in (mapping.to_memory(r["props"]) for r in result)}
        return EpisodeCredit(
            episode=episode,
            updated=[by_id[i] for i in q_after if i in by_id],
            q_after=q_after,
            replayed=True,
        )

    def delete(self, namespace: str, memory_ids: Sequence[str]) -> list[str]:
        check_namespace(namespace)
        ids = mapping.check_ids(memory_ids)
        if not ids:
            return []

        def work(tx: neo4j.ManagedTransaction) -> list[str]:
            found = {r["id"] for r in tx.run(cypher.EXISTING_IDS, namespace=namespace, ids=ids)}
            frontier = [i for i in ids if i in found]
            deleted: list[str] = []
            while frontier:
                candidates = _orphan_candidates(tx, namespace, frontier)
                tx.run(cypher.DETACH_DELETE, namespace=namespace, ids=frontier).consume()
                deleted.extend(frontier)
                frontier = _orphans(tx, namespace, candidates)
            return deleted

        return self._write(work, "delete")

    # ---- reads ----------------------------------------------------------------------------

    def get_many(self, namespace: str, memory_ids: Sequence[str]) -> list[AnyMemory]:
        check_namespace(namespace)
        if isinstance(memory_ids, str):
            raise InvalidInput("get_many takes a sequence of ids, not one string")
        ids = [check_id(i) for i in memory_ids]
        if not ids:
            return []
        unique = list(dict.fromkeys(ids))

        def work(tx: neo4j.ManagedTransaction) -> list[dict[str, Any]]:
            result = tx.run(cypher.GET_MANY, namespace=namespace, ids=unique)
            return [r["props"] for r in result]

        by_id = {m.id: m for m in map(mapping.to_memory, self._read(work, "read"))}
        return [by_id[i] for i in ids if i in by_id]

    def edges(
        self,
        namespace: str,
        memory_id: str,
        *,
        kinds: Sequence[EdgeKind] | None = None,
        direction: Direction = "out",
    ) -> list[Edge]:
        check_namespace(namespace)
        check_id(memory_id)
        if direction not in ("out", "in", "both"):
            raise InvalidInput(f"direction must be 'out', 'in' or 'both', not {direction!r}")
        types = [cypher.rel_type(k) for k in (kinds if kinds is not None else list(EdgeKind))]

        def work(tx: neo4j.ManagedTransaction) -> list[dict[str, Any]]:
            result = tx.run(
                cypher.EDGES_OF, namespace=namespace, id=memory_id, kinds=types, direction=direction
            )
            return [r.data() for r in result]

        found = [mapping.to_edge(namespace, row) for row in self._read(work, "edge read")]
        unique = {e.key: e for e in found}
        return sorted(unique.values(), key=lambda e: (e.created_at, e.kind.value, e.src, e.dst))

    def superseded(self, namespace: str, memory_ids: Sequence[str]) -> set[str]:
        check_namespace(namespace)
        ids = mapping.check_ids(memory_ids)
        if not ids:
            return set()

        def work(tx: neo4j.ManagedTransaction) -> set[str]:
            result = tx.run(cypher.SUPERSEDED, namespace=namespace, ids=ids)
            return {r["id"] for r in result}

        return self._read(work, "superseded lookup")

    def recall(
        self,
        namespace: str,
        vector: Sequence[float],
        k: int,
        *,
        kinds: Sequence[MemoryKind] | None = None,
        include_obsolete: bool = False,
        min_sim: float | None = None,
    ) -> list[Recall]:
        """Top-k memories of the namespace by cosine similarity, best first.

        Through the shared vector index, over-fetching until k survive the namespace filter,
        else by an exact scan of the namespace; see :mod:`graphmem.stores.neo4j_recall`.
        """
        check_namespace(namespace)
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise InvalidInput(f"k must be a non-negative integer, got {k!r}")
        if min_sim is not None and not math.isfinite(min_sim):
            raise InvalidInput(f"min_sim must be a finite number, got {min_sim!r}")
        kind_values = None if kinds is None else [cypher.label(x) for x in kinds]
        dimension = self.dimension
        query = check_vector(vector, dimension)
        if k == 0 or dimension is None or kind_values == []:
            return []
        mode = self._index_mode(dimension)
        params: dict[str, Any] = {
            "namespace": namespace,
            "kinds": kind_values,
            "include_obsolete": include_obsolete,
            "vector": query,
        }

        def work(tx: neo4j.ManagedTransaction) -> list[dict[str, Any]]:
            return recall.candidates(tx, params, k, dimension, mode=mode)

        return recall.rank(self._read(work, "recall"), query, k, min_sim)

    def find_by_hash(self, namespace: str, kind: MemoryKind, content_hash: str) -> AnyMemory | None:
        check_namespace(namespace)
        kind_value = cypher.label(kind)
        if not isinstance(content_hash, str) or not content_hash:
            raise InvalidInput("a content hash must be a non-empty string")

        def work(tx: neo4j.ManagedTransaction) -> dict[str, Any] | None:
            record = tx.run(
                cypher.FIND_BY_HASH, namespace=namespace, hash=content_hash, kind=kind_value
            ).single()
            return None if record is None else dict(record["props"])

        found = self._read(work, "hash lookup")
        return None if found is None else mapping.to_memory(found)

    def iter_nodes(
        self, namespace: str | None = None, kinds: Sequence[MemoryKind] | None = None
    ) -> Iterator[AnyMemory]:
        if namespace is not None:
            check_namespace(namespace)
        kind_values = None if kinds is None else [cypher.label(x) for x in kinds]
        after = ("", "")
        while True:
            params = {
                "namespace": namespace,
                "kinds": kind_values,
                "after_namespace": after[0],
                "after_id": after[1],
                "limit": PAGE_SIZE,
            }

            def work(tx: neo4j.ManagedTransaction, p: dict[str, Any] = params) -> list[Any]:
                return [r["props"] for r in tx.run(cypher.ITER_NODES, p)]

            page = [mapping.to_memory(p) for p in self._read(work, "node scan")]
            yield from page
            if len(page) < PAGE_SIZE:
                return
            after = (page[-1].namespace, page[-1].id)

    def iter_edges(self, namespace: str | None = None) -> Iterator[Edge]:
        if namespace is not None:
            check_namespace(namespace)
        types = [k.value for k in EdgeKind]
        skip = 0
        while True:
            params = {"namespace": namespace, "kinds": types, "skip": skip, "limit": PAGE_SIZE}

            def work(tx: neo4j.ManagedTransaction, p: dict[str, Any] = params) -> list[Any]:
                return [r.data() for r in tx.run(cypher.ITER_EDGES, p)]

            page = self._read(work, "edge scan")
            for row in page:
                yield mapping.to_edge(row["namespace"], row)
            if len(page) < PAGE_SIZE:
                return
            skip += PAGE_SIZE

    def namespaces(self) -> list[str]:
        def work(tx: neo4j.ManagedTransaction) -> list[str]:
            return [r["namespace"] for r in tx.run(cypher.NAMESPACES)]

        return self._read(work, "namespace list")

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._owns_driver:
            self._driver.close()

    # ---- helpers --------------------------------------------------------------------------

    def _index_mode(self, dimension: int) -> IndexMode:
        """How recall uses the vector index: "search" (in-index filtering, Neo4j 2026.01+ with
        the filtered index), "procedure" (index, then filter), or "exact" (no usable index)."""
        if self._index_ready is not None:
            return self._index_ready

        info = self._read(recall.index_state, "index lookup")
        if info is None or info[0] != "ONLINE" or info[1] != dimension:
            log.warning(
                "vector index %r is missing, not online or not %d-dim: recall scans exactly "
                "(run `graphmem schema apply`)",
                cypher.VECTOR_INDEX,
                dimension,
            )
            return "exact"
        mode: IndexMode = "procedure"
        if info[2] and self._read(recall.supports_search, "server version"):
            mode = "search"
        self._index_ready = mode
        return mode


# ---- module helpers ------------------------------------------------------------------------


def _reason(e: BaseException) -> str:
    """One line about a driver error that says what went wrong; never the query parameters,
    and credentials in any URI it quotes are redacted."""
    if isinstance(e, ServiceUnavailable):
        return "the server is unavailable"
    # A server error's ``message`` is the server's text; the driver's own errors only carry a
    # generic GQL status there ("50N42: Unexpected error ..."), their text is str(e).
    message = e.message if isinstance(e, Neo4jError) else None
    text = str(message or e).strip()
    line = redact_uri(text.splitlines()[0])[:300] if text else type(e).__name__
    code = e.code if isinstance(e, Neo4jError) else None
    return f"{line} ({code})" if code else line


def _retrieved_rows(tx: neo4j.ManagedTransaction, key: dict[str, Any]) -> list[dict[str, Any]]:
    """An episode's RETRIEVED edges as Edge fields (dst, props, created_at)."""
    rows = []
    for record in tx.run(cypher.RETRIEVED_BY, **key):
        props = dict(record["props"])
        row: dict[str, Any] = {"dst": record["dst"], "props": props}
        created_at = props.pop("created_at", None)
        if created_at is not None:
            row["created_at"] = created_at
        rows.append(row)
    return rows


def _meta_dimension(tx: neo4j.ManagedTransaction) -> int | None:
    record = tx.run(cypher.META_GET, name=cypher.META_NAME).single()
    return None if record is None or record["dimension"] is None else int(record["dimension"])


def _fix_dimension(tx: neo4j.ManagedTransaction, dimension: int) -> int:
    """Record ``dimension`` if none is; raise DimensionMismatch if another one is."""
    record = tx.run(cypher.META_FIX_DIMENSION, name=cypher.META_NAME, dimension=dimension).single()
    assert record is not None
    stored = int(record["dimension"])
    if stored != dimension:
        raise DimensionMismatch(stored, dimension)
    return stored


def _orphan_candidates(
    tx: neo4j.ManagedTransaction, namespace: str, ids: list[str]
) -> dict[MemoryKind, list[str]]:
    """Owned and ABOUT nodes that may be orphaned once ``ids`` are deleted."""
    out: dict[MemoryKind, list[str]] = {}
    for kind, owners in OWNED_BY.items():
        query = cypher.owned_candidates(kind, tuple(owners))
        out.setdefault(kind, []).extend(
            r["id"] for r in tx.run(query, namespace=namespace, ids=ids)
        )
    for kind in ABOUT_KINDS:
        query = cypher.about_candidates(kind)
        out.setdefault(kind, []).extend(
            r["id"] for r in tx.run(query, namespace=namespace, ids=ids)
        )
    return out


def _orphans(
    tx: neo4j.ManagedTransaction, namespace: str, candidates: dict[MemoryKind, list[str]]
) -> list[str]:
    out: list[str] = []
    for kind, ids in candidates.items():
        ids = list(dict.fromkeys(ids))
        if not ids:
            continue
        queries = []
        if kind in OWNED_BY:
            queries.append(cypher.owned_orphans(kind, tuple(OWNED_BY[kind])))
        if kind in ABOUT_KINDS:
            queries.append(cypher.about_orphans(kind))
        for query in queries:
            out.extend(r["id"] for r in tx.run(query, namespace=namespace, ids=ids))
    return list(dict.fromkeys(out))
