"""Every Neo4j store operation, written once for both drivers.

Validation, transaction bodies and decoding live here as coroutines over a :class:`Neo4jBase`,
which opens sessions (:mod:`graphmem.stores.neo4j.tx`) and remembers what a store learns once:
the dimension, how recall reaches the vector index, whether the uniqueness constraints exist.
:class:`~graphmem.stores.neo4j.Neo4jStore` runs these coroutines on the blocking driver (they
never suspend there, and :func:`~graphmem.stores.neo4j.tx.drive` finishes them);
:class:`~graphmem.stores.neo4j.async_store.AsyncNeo4jStore` awaits them on the async driver. All
Cypher is in :mod:`graphmem.stores.neo4j.cypher`; the semantics of each operation are those of
:class:`~graphmem.stores.base.MemoryStore`.
"""

from __future__ import annotations

import logging
import math
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from functools import cache, partial
from typing import Any, Final, TypeVar, cast

import neo4j
from neo4j.exceptions import AuthError, DriverError, Neo4jError

from graphmem.errors import (
    DimensionMismatch,
    GraphmemError,
    InvalidInput,
    MemoryNotFound,
    StoreError,
    WriteConflict,
)
from graphmem.models import (
    AnyMemory,
    CreditPolicy,
    Edge,
    EdgeKind,
    Episode,
    EpisodeStatus,
    MemoryKind,
    check_id,
    check_vector,
    memory_from_dict,
    utcnow,
)
from graphmem.stores.base import (
    ABOUT_KINDS,
    CLOSED_FIELDS,
    OWNED_BY,
    Direction,
    EpisodeCredit,
    Recall,
    check_credit,
    check_patch,
    check_prefixes,
    check_used,
    closed_episode,
    credited_ids,
    marked_order,
    plan_marks,
    replayed_q_after,
    upsert_batch,
)
from graphmem.stores.conditional import stale_read
from graphmem.stores.neo4j import cypher, recall
from graphmem.stores.neo4j import rows as mapping
from graphmem.stores.neo4j.recall import IndexMode
from graphmem.stores.neo4j.schema import ensure_constraints_in
from graphmem.stores.neo4j.tx import Session, Tx, Work, reason, single

log = logging.getLogger(__name__)

T = TypeVar("T")

PAGE_SIZE = 1000
"""Rows per read transaction when iterating over the whole graph."""


FAULTY_DRIVERS: Final = frozenset({"5.28.8", "6.4.0", "6.4.1"})
"""Releases of the ``neo4j`` driver under which threads sharing one driver go wrong after a
deadlock retry (the retried write fails with ResultFailedError; a concurrent read waits for
the socket's 120 s timeout). pyproject's ``neo4j`` extra excludes them; see
:func:`faulty_driver`."""


def faulty_driver(version: str = neo4j.__version__) -> bool:
    """Whether ``version`` of the driver is one of :data:`FAULTY_DRIVERS`, logging a warning
    that says what to install instead (once per version, so once per process)."""
    if version not in FAULTY_DRIVERS:
        return False
    _warn_faulty(version)
    return True


@cache
def _warn_faulty(version: str) -> None:
    log.warning(
        "neo4j driver %s stalls concurrent reads after a deadlock retry; install another "
        "release, e.g. pip install 'neo4j>=6.0,<6.4'",
        version,
    )


MAX_SESSIONS = 100
"""How many sessions one async store holds at once by default, the driver's default pool size
(``from_uri`` follows ``max_connection_pool_size``): more coroutines wait their turn in the
store (no deadline) instead of in the pool, whose 60 s acquisition timeout failed the last of
6,000 gathered at once."""


def sessions_for(driver_config: Mapping[str, Any]) -> int:
    """The sessions an async store made with ``driver_config`` holds at once: the pool's size
    when it is a positive number, else :data:`MAX_SESSIONS`."""
    pool = driver_config.get("max_connection_pool_size")
    positive = isinstance(pool, int) and not isinstance(pool, bool) and pool > 0
    return pool if positive else MAX_SESSIONS  # type: ignore[return-value]


class Neo4jBase(ABC):
    """What both Neo4j stores share: sessions, error wrapping and what they cache."""

    def __init__(self, database: str | None) -> None:
        faulty_driver()
        self._database = database
        self._retry_for: float | None = None  # None: RETRY_FOR_S; from_uri sets its window
        self._owns_driver = False
        self._closed = False
        self._dimension: int | None = None
        self._index_ready: IndexMode | None = None
        self._constraints_ok = False
        self._search_width: int | None = None
        self._memories_seen: int | None = None  # the database's memories, at the last search

    @property
    def search_width(self) -> int | None:
        """How many candidates recall asks the vector index for on Neo4j 2026.01+ (at least
        k): the HNSW search's beam. Wider finds more of the true top k and costs more time
        (``bench/neo4j_index_recall.py``). None, the default, sizes it by the database: k
        while it holds at most ``SMALL_DATABASE`` memories (every search counts them, at no
        cost), ``SEARCH_CANDIDATES_MIN`` beyond, and before the first count. A number fixes
        it whatever the size: lower trades recall for speed."""
        return self._search_width

    @search_width.setter
    def search_width(self, width: int | None) -> None:
        bad = isinstance(width, bool) or not isinstance(width, int) or width < 1
        if width is not None and bad:
            raise InvalidInput(f"search_width must be a positive integer or None, got {width!r}")
        self._search_width = width

    def search_beam(self, k: int) -> int:
        """The candidates the next in-index recall of k asks for (see :attr:`search_width`)."""
        return recall.search_candidates(k, self._search_width, self._memories_seen)

    @abstractmethod
    def _open(self, *, read_only: bool = False) -> AbstractAsyncContextManager[Session]:
        """A session on the store's database (routed to a reader in a cluster when
        ``read_only``); StoreError once the store is closed."""

    async def _read(self, work: Work[T], what: str) -> T:
        """Run a read-only body in a session routed to readers, each of its statements an
        auto-commit transaction: one round trip per statement, where a managed transaction
        adds a COMMIT round trip (see :meth:`~graphmem.stores.neo4j.tx.Session.read_autocommit`).
        Every read body here is one statement, or statements that each answer on their own
        (recall's exact scan settles what the index did not fill): none needs a snapshot."""
        try:
            async with self._open(read_only=True) as session:
                return await session.read_autocommit(work)
        except GraphmemError:
            raise
        except (Neo4jError, DriverError, OSError) as e:
            raise StoreError(f"Neo4j {what} failed: {reason(e)}") from e

    async def _write(self, work: Work[T], what: str) -> T:
        try:
            async with self._open() as session:
                return await session.write(work)
        except GraphmemError:
            raise
        except (Neo4jError, DriverError, OSError) as e:
            raise StoreError(f"Neo4j {what} failed: {reason(e)}") from e


def connection_error(e: BaseException, shown: str, user: str) -> StoreError:
    """The error ``from_uri`` raises when a new driver cannot verify its connection."""
    code = getattr(e, "code", None) or ""
    if code == "Neo.ClientError.Security.AuthenticationRateLimit":
        # Neo4j locks a user out for a while after repeated wrong passwords (5 by default,
        # dbms.security.auth_lock_time 5 s); retrying at once only extends the lock.
        return StoreError(
            f"Neo4j at {shown} refused user {user!r}: too many wrong passwords, so it locks "
            "the user out for a while; check GRAPHMEM_NEO4J_PASSWORD (and GRAPHMEM_NEO4J_USER), "
            "wait a few seconds and try again"
        )
    if isinstance(e, AuthError):
        return StoreError(
            f"Neo4j at {shown} rejected the credentials of user {user!r}: check "
            "GRAPHMEM_NEO4J_USER and GRAPHMEM_NEO4J_PASSWORD"
        )
    return StoreError(
        f"cannot reach Neo4j at {shown}: {reason(e)}; check the URI and that the server is "
        "running (a local one: `graphmem neo4j start`)"
    )


# ---- schema ----------------------------------------------------------------------------------


async def ensure_constraints(store: Neo4jBase) -> None:
    """Create the uniqueness constraints if they are missing; checked once per store (see
    :func:`graphmem.stores.neo4j.schema.ensure_constraints`)."""
    if store._constraints_ok:
        return
    async with store._open() as session:
        await ensure_constraints_in(session)
    store._constraints_ok = True


async def get_dimension(store: Neo4jBase) -> int | None:
    if store._dimension is None:
        store._dimension = await store._read(_meta_dimension, "read of the dimension")
    return store._dimension


async def check_dimension(store: Neo4jBase, dimension: int) -> None:
    if isinstance(dimension, bool) or not isinstance(dimension, int) or dimension < 1:
        raise InvalidInput(f"the dimension must be a positive integer, got {dimension!r}")
    known = await get_dimension(store)
    if known is not None:
        if known != dimension:
            raise DimensionMismatch(known, dimension)
        return
    await ensure_constraints(store)
    fix = partial(_fix_dimension, dimension=dimension)
    store._dimension = await store._write(fix, "dimension write")


async def index_mode(store: Neo4jBase, dimension: int) -> IndexMode:
    """How recall uses the vector index: "search" (in-index filtering on the filter key, Neo4j
    2026.01+ with the filtered index), "search-fields" (the same on an index that carries the
    three fields instead), "procedure" (index, then filter), or "exact" (no usable index)."""
    if store._index_ready is not None:
        return store._index_ready
    info = await store._read(recall.read_index_state, "index lookup")
    if info is None or info[0] != "ONLINE" or info[1] != dimension:
        log.warning(
            "vector index %r is missing, not online or not %d-dim: recall scans exactly "
            "(run `graphmem schema apply`)",
            cypher.VECTOR_INDEX,
            dimension,
        )
        return "exact"
    mode: IndexMode = "procedure"
    carried = info[2]
    if carried is not None and await store._read(recall.read_supports_search, "server version"):
        mode = "search" if carried == "key" else "search-fields"
    store._index_ready = mode
    return mode


# ---- writes ----------------------------------------------------------------------------------


async def upsert(
    store: Neo4jBase,
    nodes: Sequence[AnyMemory] = (),
    edges: Sequence[Edge] = (),
    *,
    keep_utility: bool = True,
    expect_live: Sequence[AnyMemory] = (),
) -> None:
    nodes, edges = upsert_batch(nodes, edges)
    if not nodes and not edges:
        return
    dims = mapping.call_dimension(nodes)
    known = await get_dimension(store) if dims is not None else None
    if dims is not None and known is not None and dims != known:
        raise DimensionMismatch(known, dims)
    # Only the first vector ever written touches the meta node (no lock on every upsert).
    fix = dims if dims is not None and known is None else None
    by_kind, wanted = mapping.node_rows(nodes, keep_utility=keep_utility)
    edge_rows = mapping.edge_rows(edges)

    async def work(tx: Tx) -> int | None:
        if expect_live:
            await _check_live(tx, expect_live)
        fixed = await _fix_dimension(tx, dimension=fix) if fix is not None else None
        keys = [{"namespace": m.namespace, "id": m.id} for m in nodes]
        if keys:
            for rec in await tx.run(cypher.KINDS_OF, rows=keys):
                want = wanted.get((rec["namespace"], rec["id"]))
                # No kind: deleted while this ran; the MERGE below creates it afresh.
                if want is not None and rec["kind"] is not None and want != rec["kind"]:
                    raise InvalidInput(
                        f"memory {rec['id']!r} in namespace {rec['namespace']!r} is a "
                        f"{rec['kind']}, not a {want}"
                    )
        for node_kind, rows in by_kind.items():
            await tx.run(cypher.upsert_nodes(node_kind), rows=rows)
        if edge_rows:
            flat = [row for rows in edge_rows.values() for row in rows]
            missing = single(await tx.run(cypher.MISSING_ENDPOINTS, rows=flat))
            if missing is not None:
                raise MemoryNotFound(missing["id"], missing["namespace"])
            for edge_kind, rows in edge_rows.items():
                await tx.run(cypher.upsert_edges(edge_kind), rows=rows)
        return fixed

    if nodes:
        await ensure_constraints(store)
    fixed = await store._write(work, "upsert")
    if fixed is not None:
        store._dimension = fixed


async def _check_live(tx: Tx, expected: Sequence[AnyMemory]) -> None:
    """upsert's compare-and-set: write-lock what the caller read (sorted, so concurrent calls
    lock in one order), read it again, and raise WriteConflict if any of it moved."""
    keys = sorted({(m.namespace, m.id) for m in expected})
    rows = [{"namespace": ns, "id": i} for ns, i in keys]
    now = {}
    for rec in await tx.run(cypher.LOCK_READ, rows=rows):
        memory = mapping.to_memory(rec["props"])
        now[(memory.namespace, memory.id)] = (memory, bool(rec["superseded"]))
    for read in expected:
        found, superseded = now.get((read.namespace, read.id), (None, False))
        problem = stale_read(read, found, superseded)
        if problem is not None:
            raise WriteConflict(problem)


async def patch(
    store: Neo4jBase, namespace: str, memory_id: str, changes: dict[str, Any]
) -> AnyMemory:
    check_id(memory_id)
    if not isinstance(changes, dict):
        raise InvalidInput("a patch is a dict of field names to new values")
    check_patch(changes)

    async def work(tx: Tx) -> AnyMemory:
        found = single(await tx.run(cypher.GET_MANY, namespace=namespace, ids=[memory_id]))
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
        record = single(await tx.run(cypher.PATCH, namespace=namespace, id=memory_id, props=props))
        assert record is not None
        return mapping.to_memory(record["props"])

    return await store._write(work, "patch")


async def update_utility(
    store: Neo4jBase,
    namespace: str,
    memory_ids: Sequence[str],
    reward: float,
    alpha: float,
    *,
    success: bool | None = None,
) -> list[AnyMemory]:
    ids = mapping.check_ids(memory_ids)
    if not ids:
        return []
    unique = sorted(ids)
    inc = 1 if success else 0

    async def work(tx: Tx) -> dict[str, AnyMemory]:
        existing = await tx.run(cypher.EXISTING_IDS, namespace=namespace, ids=unique)
        found = {r["id"] for r in existing}
        lost = [i for i in ids if i not in found]
        if lost:
            raise MemoryNotFound(lost[0], namespace)
        result = await tx.run(
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

    updated = await store._write(work, "utility update")
    return [updated[i] for i in ids]


async def finish_episode(
    store: Neo4jBase,
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
    """One write transaction: lock the episode, then mark, close it and credit its memories.

    The driver may run the transaction function again (a transient error, or a commit
    whose answer was lost); the run that finds the episode finished replays its outcome.
    """
    check_id(episode_id)
    marks = check_used(used)
    policy = check_credit(credit)
    key: dict[str, Any] = {"namespace": namespace, "id": episode_id}

    async def work(tx: Tx) -> EpisodeCredit:
        episode, edges = await _locked_episode(tx, namespace, episode_id)
        if episode.status is EpisodeStatus.FINISHED:
            return await _replay(tx, namespace, episode, edges, reward, marks, policy)
        fresh = [e.dst for e in plan_marks(namespace, episode, edges, marks)]
        if fresh:
            await tx.run(cypher.MARK_USED, **key, ids=fresh)
        ids = credited_ids(edges, marks, policy)
        updated: dict[str, AnyMemory] = {}
        if ids:
            result = await tx.run(
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
            await tx.run(cypher.ANNOTATE_RETRIEVED, **key, rows=rows, alpha=float(alpha))
        closed = closed_episode(episode, reward, success, finished_at, policy)
        dumped = mapping.props(closed)
        props = {k: dumped[k] for k in CLOSED_FIELDS}
        record = single(await tx.run(cypher.CLOSE_EPISODE, **key, props=props))
        if record is None:  # cannot happen under the lock; never credit without closing
            raise StoreError(f"episode {episode_id!r} changed while it was being finished")
        return EpisodeCredit(
            episode=cast(Episode, mapping.to_memory(record["props"])),
            updated=[updated[i] for i in ids],
            q_after={i: updated[i].q for i in ids},
        )

    return await store._write(work, "episode finish")


async def mark_used(
    store: Neo4jBase, namespace: str, episode_id: str, memory_ids: Sequence[str]
) -> list[str]:
    """One write transaction: lock the episode, check the ids, mark them used."""
    check_id(episode_id)
    ids = check_used(memory_ids)

    async def work(tx: Tx) -> list[str]:
        episode, edges = await _locked_episode(tx, namespace, episode_id)
        fresh = [e.dst for e in plan_marks(namespace, episode, edges, ids)]
        if fresh:
            await tx.run(cypher.MARK_USED, namespace=namespace, id=episode_id, ids=fresh)
        return marked_order(edges, ids)

    return await store._write(work, "used mark")


async def _locked_episode(tx: Tx, namespace: str, episode_id: str) -> tuple[Episode, list[Edge]]:
    """The episode, write-locked to the end of the transaction, and its RETRIEVED edges."""
    key: dict[str, Any] = {"namespace": namespace, "id": episode_id}
    found = single(await tx.run(cypher.LOCK_EPISODE, **key))
    if found is None:
        raise MemoryNotFound(episode_id, namespace)
    episode = mapping.to_memory(found["props"])
    if not isinstance(episode, Episode):
        raise InvalidInput(f"memory {episode_id!r} is a {episode.kind}, not an Episode")
    edges = [
        Edge(namespace=namespace, kind=EdgeKind.RETRIEVED, src=episode_id, **row)
        for row in await _retrieved_rows(tx, key)
    ]
    return episode, edges


async def _replay(
    tx: Tx,
    namespace: str,
    episode: Episode,
    edges: list[Edge],
    reward: float,
    used: Sequence[str],
    credit: CreditPolicy,
) -> EpisodeCredit:
    """The recorded outcome of a finished episode, if this finish asks for the same."""
    q_after = replayed_q_after(namespace, episode, edges, reward, used, credit)
    result = await tx.run(cypher.GET_MANY, namespace=namespace, ids=list(q_after))
    by_id = {m.id: m for m in (mapping.to_memory(r["props"]) for r in result)}
    return EpisodeCredit(
        episode=episode,
        updated=[by_id[i] for i in q_after if i in by_id],
        q_after=q_after,
        replayed=True,
    )


async def delete(store: Neo4jBase, namespace: str, memory_ids: Sequence[str]) -> list[str]:
    ids = mapping.check_ids(memory_ids)
    if not ids:
        return []

    async def work(tx: Tx) -> list[str]:
        existing = await tx.run(cypher.EXISTING_IDS, namespace=namespace, ids=ids)
        found = {r["id"] for r in existing}
        frontier = [i for i in ids if i in found]
        deleted: list[str] = []
        while frontier:
            candidates = await _orphan_candidates(tx, namespace, frontier)
            await tx.run(cypher.DETACH_DELETE, namespace=namespace, ids=frontier)
            deleted.extend(frontier)
            frontier = await _orphans(tx, namespace, candidates)
        return deleted

    return await store._write(work, "delete")


# ---- reads -----------------------------------------------------------------------------------


async def get_many(store: Neo4jBase, namespace: str, memory_ids: Sequence[str]) -> list[AnyMemory]:
    if isinstance(memory_ids, str):
        raise InvalidInput("get_many takes a sequence of ids, not one string")
    ids = [check_id(i) for i in memory_ids]
    if not ids:
        return []
    unique = list(dict.fromkeys(ids))

    async def work(tx: Tx) -> list[AnyMemory | None]:
        records = await tx.run(cypher.GET_MANY, namespace=namespace, ids=unique)
        return [mapping.read_memory(r["props"]) for r in records]

    by_id = {m.id: m for m in await store._read(work, "read") if m is not None}
    return [by_id[i] for i in ids if i in by_id]


async def edges(
    store: Neo4jBase,
    namespace: str,
    memory_id: str,
    *,
    kinds: Sequence[EdgeKind] | None = None,
    direction: Direction = "out",
) -> list[Edge]:
    check_id(memory_id)
    if direction not in ("out", "in", "both"):
        raise InvalidInput(f"direction must be 'out', 'in' or 'both', not {direction!r}")
    types = [cypher.rel_type(k) for k in (kinds if kinds is not None else list(EdgeKind))]

    async def work(tx: Tx) -> list[dict[str, Any]]:
        result = await tx.run(
            cypher.EDGES_OF, namespace=namespace, id=memory_id, kinds=types, direction=direction
        )
        return [r.data() for r in result]

    found = [mapping.to_edge(namespace, row) for row in await store._read(work, "edge read")]
    unique = {e.key: e for e in found}
    return sorted(unique.values(), key=lambda e: (e.created_at, e.kind.value, e.src, e.dst))


async def superseded(store: Neo4jBase, namespace: str, memory_ids: Sequence[str]) -> set[str]:
    ids = mapping.check_ids(memory_ids)
    if not ids:
        return set()

    async def work(tx: Tx) -> set[str]:
        return {r["id"] for r in await tx.run(cypher.SUPERSEDED, namespace=namespace, ids=ids)}

    return await store._read(work, "superseded lookup")


async def recall_memories(
    store: Neo4jBase,
    namespace: str,
    vector: Sequence[float],
    k: int,
    *,
    kinds: Sequence[MemoryKind] | None = None,
    include_obsolete: bool = False,
    min_sim: float | None = None,
) -> list[Recall]:
    """Top-k memories of the namespace by cosine similarity, best first, each saying whether
    it is superseded: the inputs of two-phase retrieval, in one round trip.

    Through the shared vector index, over-fetching until k survive the namespace filter,
    else by an exact scan of the namespace; see :mod:`graphmem.stores.neo4j.recall`.
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise InvalidInput(f"k must be a non-negative integer, got {k!r}")
    if min_sim is not None and not math.isfinite(min_sim):
        raise InvalidInput(f"min_sim must be a finite number, got {min_sim!r}")
    kind_values = None if kinds is None else [cypher.label(x) for x in kinds]
    dimension = await get_dimension(store)
    query = check_vector(vector, dimension)
    if k == 0 or dimension is None or kind_values == []:
        return []
    mode = await index_mode(store, dimension)
    params: dict[str, Any] = {
        "namespace": namespace,
        "kinds": kind_values,
        "include_obsolete": include_obsolete,
        "vector": mapping.FloatList(query),
        "search_width": store.search_width,
        "memories": store._memories_seen,
    }

    async def work(tx: Tx, mode: IndexMode = mode) -> list[Recall]:
        rows = await recall.candidates(tx, params, k, dimension, mode=mode)
        store._memories_seen = recall.memories_counted(rows, store._memories_seen)
        return recall.rank(rows, query, k, min_sim)  # in the body: a torn row reads again

    try:
        return await store._read(work, "recall")
    except StoreError:
        if mode not in ("search", "search-fields"):
            raise
        # `graphmem schema apply` may have replaced the index this store searched: look again,
        # and run once more if recall should now reach it another way.
        store._index_ready = None
        again = await index_mode(store, dimension)
        if again == mode:
            raise
        return await store._read(partial(work, mode=again), "recall")


async def find_by_hash(
    store: Neo4jBase, namespace: str, kind: MemoryKind, content_hash: str
) -> AnyMemory | None:
    kind_value = cypher.label(kind)
    if not isinstance(content_hash, str) or not content_hash:
        raise InvalidInput("a content hash must be a non-empty string")

    async def work(tx: Tx) -> AnyMemory | None:
        record = single(
            await tx.run(
                cypher.FIND_BY_HASH, namespace=namespace, hash=content_hash, kind=kind_value
            )
        )
        return None if record is None else mapping.read_memory(record["props"])

    return await store._read(work, "hash lookup")


async def iter_nodes(
    store: Neo4jBase, namespace: str | None = None, kinds: Sequence[MemoryKind] | None = None
) -> AsyncGenerator[AnyMemory, None]:
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

        async def work(tx: Tx, p: dict[str, Any] = params) -> list[AnyMemory | None]:
            return [mapping.read_memory(r["props"]) for r in await tx.run(cypher.ITER_NODES, **p)]

        rows = await store._read(work, "node scan")
        # A row deleted while the page was read is None: skip it, but page on by the rows the
        # server sent (a short page is the last one). A full page of deleted rows is read
        # again from the same key: they are gone by now.
        page = [m for m in rows if m is not None]
        for memory in page:
            yield memory
        if len(rows) < PAGE_SIZE:
            return
        if page:
            after = (page[-1].namespace, page[-1].id)


async def iter_edges(store: Neo4jBase, namespace: str | None = None) -> AsyncGenerator[Edge, None]:
    types = [k.value for k in EdgeKind]
    skip = 0
    while True:
        params = {"namespace": namespace, "kinds": types, "skip": skip, "limit": PAGE_SIZE}

        async def work(tx: Tx, p: dict[str, Any] = params) -> list[Any]:
            return [r.data() for r in await tx.run(cypher.ITER_EDGES, **p)]

        page = await store._read(work, "edge scan")
        for row in page:
            yield mapping.to_edge(row["namespace"], row)
        if len(page) < PAGE_SIZE:
            return
        skip += PAGE_SIZE


async def namespaces(store: Neo4jBase, *prefixes: str) -> list[str]:
    heads = list(check_prefixes(prefixes))
    every = not heads or "" in heads

    async def work(tx: Tx) -> list[str]:
        if every:
            records = await tx.run(cypher.NAMESPACES)
        else:
            records = await tx.run(cypher.NAMESPACES_UNDER, prefixes=heads)
        return [r["namespace"] for r in records]

    return await store._read(work, "namespace list")


# ---- transaction helpers -------------------------------------------------------------------


async def _retrieved_rows(tx: Tx, key: dict[str, Any]) -> list[dict[str, Any]]:
    """An episode's RETRIEVED edges as Edge fields (dst, props, created_at)."""
    rows = []
    for record in await tx.run(cypher.RETRIEVED_BY, **key):
        props = dict(record["props"])
        row: dict[str, Any] = {"dst": record["dst"], "props": props}
        created_at = props.pop("created_at", None)
        if created_at is not None:
            row["created_at"] = created_at
        rows.append(row)
    return rows


async def _meta_dimension(tx: Tx) -> int | None:
    record = single(await tx.run(cypher.META_GET, name=cypher.META_NAME))
    return None if record is None or record["dimension"] is None else int(record["dimension"])


async def _fix_dimension(tx: Tx, *, dimension: int) -> int:
    """Record ``dimension`` if none is; raise DimensionMismatch if another one is."""
    record = single(
        await tx.run(cypher.META_FIX_DIMENSION, name=cypher.META_NAME, dimension=dimension)
    )
    assert record is not None
    stored = int(record["dimension"])
    if stored != dimension:
        raise DimensionMismatch(stored, dimension)
    return stored


async def _orphan_candidates(tx: Tx, namespace: str, ids: list[str]) -> dict[MemoryKind, list[str]]:
    """Owned and ABOUT nodes that may be orphaned once ``ids`` are deleted."""
    out: dict[MemoryKind, list[str]] = {}
    for kind, owners in OWNED_BY.items():
        query = cypher.owned_candidates(kind, tuple(owners))
        out.setdefault(kind, []).extend(
            r["id"] for r in await tx.run(query, namespace=namespace, ids=ids)
        )
    for kind in ABOUT_KINDS:
        query = cypher.about_candidates(kind)
        out.setdefault(kind, []).extend(
            r["id"] for r in await tx.run(query, namespace=namespace, ids=ids)
        )
    return out


async def _orphans(tx: Tx, namespace: str, candidates: dict[MemoryKind, list[str]]) -> list[str]:
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
            out.extend(r["id"] for r in await tx.run(query, namespace=namespace, ids=ids))
    return list(dict.fromkeys(out))
