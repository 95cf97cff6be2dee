"""The async path on Neo4j: AsyncNeo4jStore (neo4j.AsyncDriver) and GraphMemoryStore's async API.

- The async store gives what the blocking store gives for the same calls (same data, same
  Recall sims and superseded flags, same errors); the whole store conformance suite runs on it
  in tests/test_store_conformance.py.
- Many coroutines share one store on one event loop without errors, and tenants stay apart.
- GraphMemoryStore's ``aput`` / ``aget`` / ``asearch`` run on the async driver when the memory
  lives in Neo4j (not in a worker thread), and answer as ``put`` / ``get`` / ``search`` do.

Everything but the first tests needs a Neo4j (GRAPHMEM_NEO4J_URI) and skips fast without.
"""

from __future__ import annotations

import asyncio
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Coroutine,
    Iterator,
    Sequence,
)
from typing import Any, TypeVar

import pytest
from conftest import drop_namespaces
from langgraph.store.base import SearchItem

from graphmem.coroutines import drive, drive_iter
from graphmem.embedding import HashingEmbedder
from graphmem.errors import DimensionMismatch, MemoryNotFound
from graphmem.integrations.langgraph_store import GraphMemoryStore
from graphmem.memory import GraphMemory
from graphmem.models import (
    AnyMemory,
    Edge,
    EdgeKind,
    Episode,
    MemoryKind,
    Note,
    Tip,
    utcnow,
)
from graphmem.ops.retrieve import rank_candidates
from graphmem.stores.base import EpisodeCredit, MemoryStore, Recall
from graphmem.stores.embedded import EmbeddedStore
from graphmem.stores.neo4j import Neo4jStore
from graphmem.stores.neo4j.async_store import AsyncNeo4jStore
from graphmem.testing import angled, chain, vec

T = TypeVar("T")
DIM = 384  # the shared test database's dimension (tests/conftest.py)

# ---- without a server ------------------------------------------------------------------------


def test_drive_finishes_a_coroutine_that_never_suspends() -> None:
    async def twice(x: int) -> int:
        return 2 * x

    async def items() -> AsyncIterator[int]:
        for i in range(3):
            yield await twice(i)

    assert drive(twice(21)) == 42
    assert list(drive_iter(items())) == [0, 2, 4]


def test_drive_refuses_a_coroutine_that_awaits_real_async_work() -> None:
    async def sleeps() -> None:
        await asyncio.sleep(0)  # suspends once, even without a loop

    with pytest.raises(RuntimeError, match="without an event loop"):
        drive(sleeps())


def test_an_embedded_memory_keeps_the_worker_thread_path() -> None:
    lg = GraphMemoryStore(GraphMemory(EmbeddedStore.in_memory(), embedder=HashingEmbedder(32)))

    async def scenario() -> None:
        assert await lg.async_store() is None
        await lg.aput(("u",), "k", {"text": "kept"})
        item = await lg.aget(("u",), "k")
        assert item is not None and item.value == {"text": "kept"}

    asyncio.run(scenario())


def test_open_async_needs_the_credentials_from_uri_knows() -> None:
    store = Neo4jStore(object(), database="neo4j")  # type: ignore[arg-type]
    assert not store.can_open_async
    with pytest.raises(Exception, match="from_uri"):
        store.open_async()


# ---- with a server: fixtures -----------------------------------------------------------------


@pytest.fixture
def sync(neo4j_store: MemoryStore, namespace: str) -> Iterator[Neo4jStore]:
    """The shared blocking store (made by from_uri); this test's namespaces dropped after it."""
    assert isinstance(neo4j_store, Neo4jStore)
    try:
        yield neo4j_store
    finally:
        drop_namespaces(neo4j_store, namespace)


def on_loop(sync: Neo4jStore, body: Callable[[AsyncNeo4jStore], Awaitable[T]]) -> T:
    """``body`` on a fresh event loop with an AsyncNeo4jStore on the same database."""

    async def main() -> T:
        async with sync.open_async() as store:
            return await body(store)

    return asyncio.run(main())


def _note(namespace: str, memory_id: str, weights: Sequence[float], **fields: Any) -> Note:
    return Note(
        id=memory_id,
        namespace=namespace,
        content=f"content of {memory_id}",
        embedding=vec(DIM, *weights),
        **fields,
    )


def _graph(namespace: str) -> tuple[list[AnyMemory], list[Edge]]:
    """Notes at several angles, one superseded, one obsolete, a procedure chain and a tip."""
    notes: list[AnyMemory] = [
        Note(id=f"n{i}", namespace=namespace, content=f"note {i}", embedding=angled(DIM, i / 10))
        for i in range(12)
    ]
    notes.append(_note(namespace, "old", [1, 0.05], obsolete=True, obsolete_reason="test"))
    steps, chain_edges = chain(namespace, "p", 3, DIM)
    tip = Tip(id="t", namespace=namespace, text="avoid the cellar", embedding=vec(DIM, 0, 1))
    edges = [
        *chain_edges,
        Edge(namespace=namespace, kind=EdgeKind.SUPERSEDES, src="n1", dst="n0"),
        Edge(namespace=namespace, kind=EdgeKind.LINKS_TO, src="n2", dst="n3", props={"r": "x"}),
        Edge(namespace=namespace, kind=EdgeKind.ABOUT, src="t", dst="p"),
    ]
    return [*notes, *steps, tip], edges


async def _collect(items: AsyncIterator[T]) -> list[T]:
    return [item async for item in items]


# ---- the async store gives what the blocking store gives -------------------------------------


@pytest.mark.neo4j
def test_async_reads_equal_sync_reads_of_an_async_write(sync: Neo4jStore, namespace: str) -> None:
    nodes, edges = _graph(namespace)
    query = angled(DIM, 0.33)

    async def body(store: AsyncNeo4jStore) -> dict[str, Any]:
        await store.upsert(nodes, edges)
        return {
            "dimension": await store.dimension(),
            "get_many": await store.get_many(namespace, ["n3", "missing", "p", "n3"]),
            "get": await store.get(namespace, "t"),
            "recall": await store.recall(namespace, query, 5),
            "recall_notes": await store.recall(
                namespace, query, 4, kinds=[MemoryKind.NOTE], include_obsolete=True, min_sim=0.9
            ),
            "superseded": await store.superseded(namespace, ["n0", "n1", "n2"]),
            "edges": await store.edges(namespace, "p", direction="both"),
            "hash": await store.find_by_hash(namespace, MemoryKind.NOTE, "nope"),
            "nodes": await _collect(store.iter_nodes(namespace)),
            "steps": await _collect(store.iter_nodes(namespace, kinds=[MemoryKind.STEP])),
            "all_edges": await _collect(store.iter_edges(namespace)),
            "namespaces": [n for n in await store.namespaces() if n.startswith(namespace)],
        }

    got = on_loop(sync, body)
    want = {
        "dimension": sync.dimension,
        "get_many": sync.get_many(namespace, ["n3", "missing", "p", "n3"]),
        "get": sync.get(namespace, "t"),
        "recall": sync.recall(namespace, query, 5),
        "recall_notes": sync.recall(
            namespace, query, 4, kinds=[MemoryKind.NOTE], include_obsolete=True, min_sim=0.9
        ),
        "superseded": sync.superseded(namespace, ["n0", "n1", "n2"]),
        "edges": sync.edges(namespace, "p", direction="both"),
        "hash": sync.find_by_hash(namespace, MemoryKind.NOTE, "nope"),
        "nodes": list(sync.iter_nodes(namespace)),
        "steps": list(sync.iter_nodes(namespace, kinds=[MemoryKind.STEP])),
        "all_edges": list(sync.iter_edges(namespace)),
        "namespaces": [n for n in sync.namespaces() if n.startswith(namespace)],
    }
    assert got == want
    assert [r.memory.id for r in got["recall"]] == ["n3", "n4", "n2", "n5", "n1"]
    assert {r.memory.id: r.superseded for r in got["recall"]}["n1"] is False
    assert got["superseded"] == {"n0"}
    assert len(got["nodes"]) == len(nodes)


@pytest.mark.neo4j
def test_two_phase_inputs_and_ranking_match_the_sync_path(sync: Neo4jStore, namespace: str) -> None:
    """Recall's pool (sims, q, superseded flags) is the same, so two-phase ranking is too."""
    nodes = [
        _note(namespace, f"m{i}", [1, i / 8], q=q)
        for i, q in enumerate([0.1, 0.9, 0.5, 0.7, 0.2, 0.95, 0.4, 0.6])
    ]
    sync.upsert(nodes, [Edge(namespace=namespace, kind=EdgeKind.SUPERSEDES, src="m1", dst="m0")])
    query = vec(DIM, 1, 0.2)

    async def body(store: AsyncNeo4jStore) -> list[Recall]:
        return await store.recall(namespace, query, 6, kinds=[MemoryKind.NOTE])

    got = on_loop(sync, body)
    want = sync.recall(namespace, query, 6, kinds=[MemoryKind.NOTE])
    assert got == want
    assert [r.superseded for r in got] == [r.superseded for r in want]
    assert any(r.superseded for r in got)

    def ranked(pool: list[Recall]) -> list[tuple[str, float]]:
        live = [(r.memory, r.sim) for r in pool if not r.superseded]
        return [(h.memory.id, h.score) for h in rank_candidates(live, 0.5, 3)]

    assert ranked(got) == ranked(want)


@pytest.mark.neo4j
def test_async_writes_equal_sync_writes(sync: Neo4jStore, namespace: str) -> None:
    """The same calls through each store leave the same graph (two namespaces, compared)."""
    a_ns, s_ns = f"{namespace}-a", f"{namespace}-s"
    episode_at = utcnow()

    def plan(ns: str) -> tuple[list[AnyMemory], list[Edge]]:
        notes: list[AnyMemory] = [_note(ns, f"n{i}", [1, i]) for i in range(4)]
        notes.append(Episode(id="e", namespace=ns, task_text="t", created_at=episode_at))
        edges = [
            Edge(namespace=ns, kind=EdgeKind.RETRIEVED, src="e", dst=f"n{i}", props={"rank": i})
            for i in range(2)
        ]
        return notes, edges

    async def body(store: AsyncNeo4jStore) -> tuple[Any, ...]:
        await store.upsert(*plan(a_ns))
        patched = await store.patch(a_ns, "n2", {"content": "patched"})
        utility = await store.update_utility(a_ns, ["n3"], 1.0, 0.5, success=True)
        credit = await store.finish_episode(
            a_ns, "e", 1.0, 0.1, success=True, finished_at=episode_at
        )
        again = await store.finish_episode(
            a_ns, "e", 1.0, 0.1, success=True, finished_at=episode_at
        )
        deleted = await store.delete(a_ns, ["n0", "nope"])
        return patched, utility, credit, again, deleted

    patched, utility, credit, again, deleted = on_loop(sync, body)
    sync.upsert(*plan(s_ns))
    assert _same(patched, sync.patch(s_ns, "n2", {"content": "patched"}))
    assert _same(utility, sync.update_utility(s_ns, ["n3"], 1.0, 0.5, success=True))
    s_credit = sync.finish_episode(s_ns, "e", 1.0, 0.1, success=True, finished_at=episode_at)
    assert _same(_credit(credit), _credit(s_credit))
    assert again.replayed and again.q_after == credit.q_after
    assert deleted == sync.delete(s_ns, ["n0", "nope"]) == ["n0"]
    assert _same(list(sync.iter_nodes(a_ns)), list(sync.iter_nodes(s_ns)))
    assert _same(list(sync.iter_edges(a_ns)), list(sync.iter_edges(s_ns)))


def _credit(credit: EpisodeCredit) -> tuple[Any, ...]:
    return credit.episode, credit.updated, credit.q_after, credit.replayed


def _same(a: Any, b: Any) -> bool:
    """Equal but for namespace and update times (each side wrote at its own moment)."""

    def strip(x: Any) -> Any:
        if isinstance(x, list | tuple):
            return [strip(i) for i in x]
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items()}
        if hasattr(x, "model_dump"):
            return {
                k: v
                for k, v in x.model_dump().items()
                if k not in ("namespace", "updated_at", "created_at")
            }
        return x

    return bool(strip(a) == strip(b))


@pytest.mark.neo4j
def test_async_errors_are_the_sync_errors(sync: Neo4jStore, namespace: str) -> None:
    sync.upsert([_note(namespace, "n", [1])])

    async def body(store: AsyncNeo4jStore) -> list[type[BaseException]]:
        calls: list[Coroutine[Any, Any, Any]] = [
            store.get(namespace, "missing"),
            store.recall(namespace, [1.0, 0.0], 3),
            store.get_many(namespace, ["bad id!"]),
            store.upsert(
                [_note(namespace, "n2", [1])],
                [Edge(namespace=namespace, kind=EdgeKind.LINKS_TO, src="n2", dst="ghost")],
            ),
            store.check_dimension(DIM + 1),
        ]
        raised = []
        for call in calls:
            try:
                await call
            except Exception as e:
                raised.append(type(e))
        return raised

    assert on_loop(sync, body) == [
        MemoryNotFound,
        DimensionMismatch,
        type(_error(lambda: sync.get_many(namespace, ["bad id!"]))),
        MemoryNotFound,
        DimensionMismatch,
    ]
    assert [m.id for m in sync.iter_nodes(namespace)] == ["n"]  # the failed upsert wrote nothing


def _error(call: Callable[[], object]) -> BaseException:
    try:
        call()
    except Exception as e:
        return e
    raise AssertionError("no error")


# ---- many coroutines, one loop; tenants stay apart -------------------------------------------


@pytest.mark.neo4j
def test_many_coroutines_share_one_async_store(sync: Neo4jStore, namespace: str) -> None:
    tenants = [f"{namespace}-t{i}" for i in range(8)]

    async def tenant(store: AsyncNeo4jStore, ns: str, i: int, copy: int) -> list[str]:
        # Every tenant writes the same ids and nearly the same vectors; the four coroutines of
        # one tenant write the same ten notes at once, and each one a note of its own.
        own = f"x{copy}"
        shared = [_note(ns, f"m{j}", [1, j / 10, i / 100]) for j in range(10)]
        await store.upsert([*shared, _note(ns, own, [0, 1, i / 100])])
        found: list[str] = []
        for j in range(5):
            hits = await store.recall(ns, vec(DIM, 1, j / 10), 3)
            assert all(h.memory.namespace == ns for h in hits)
            found.append(hits[0].memory.id)
        got = await store.get_many(ns, [f"m{j}" for j in range(10)] + [own])
        assert {m.namespace for m in got} == {ns} and len(got) == 11
        assert await store.delete(ns, [own]) == [own]
        return found

    async def body(store: AsyncNeo4jStore) -> list[list[str]]:
        jobs = [tenant(store, ns, i, c) for i, ns in enumerate(tenants) for c in range(4)]
        return await asyncio.gather(*jobs)

    results = on_loop(sync, body)
    assert len(results) == 32
    assert all(found == ["m0", "m1", "m2", "m3", "m4"] for found in results)
    for ns in tenants:
        assert sorted(m.id for m in sync.iter_nodes(ns)) == [f"m{j}" for j in range(10)]
        assert sync.get_many(ns, [f"x{c}" for c in range(4)]) == []


@pytest.mark.neo4j
def test_tenants_never_see_each_other_through_the_async_store(
    sync: Neo4jStore, namespace: str
) -> None:
    a, b = f"{namespace}-a", f"{namespace}-b"
    sync.upsert([_note(b, "secret", [1, 0])])

    async def body(store: AsyncNeo4jStore) -> None:
        await store.upsert([_note(a, "mine", [0, 1])])
        hits = await store.recall(a, vec(DIM, 1, 0), 5)
        assert [h.memory.id for h in hits] == ["mine"]
        assert await store.get_many(a, ["secret"]) == []
        assert await store.delete(a, ["secret"]) == []
        with pytest.raises(MemoryNotFound):
            await store.upsert(
                [], [Edge(namespace=a, kind=EdgeKind.LINKS_TO, src="mine", dst="secret")]
            )
        assert [m.id async for m in store.iter_nodes(a)] == ["mine"]

    on_loop(sync, body)
    assert [m.id for m in sync.iter_nodes(b)] == ["secret"]


@pytest.mark.neo4j
def test_a_closed_async_store_refuses_work(sync: Neo4jStore, namespace: str) -> None:
    async def body(store: AsyncNeo4jStore) -> None:
        await store.close()
        await store.close()  # idempotent
        with pytest.raises(Exception, match="closed"):
            await store.get_many(namespace, ["x"])

    on_loop(sync, body)


@pytest.mark.neo4j
def test_from_uri_connects_and_reports_a_dead_server() -> None:
    import os

    from graphmem.errors import StoreError

    uri = os.environ["GRAPHMEM_NEO4J_URI"]
    password = os.environ.get("GRAPHMEM_NEO4J_PASSWORD") or None

    async def main() -> None:
        async with await AsyncNeo4jStore.from_uri(uri, "neo4j", password) as store:
            assert await store.dimension() == DIM
        if password is not None:  # a server with auth off takes any password
            with pytest.raises(StoreError, match="rejected the credentials"):
                await AsyncNeo4jStore.from_uri(uri, "neo4j", "wrong-password")
        with pytest.raises(StoreError, match="cannot reach"):
            await AsyncNeo4jStore.from_uri("bolt://127.0.0.1:9", "neo4j", "x")

    asyncio.run(main())


@pytest.mark.neo4j
def test_more_coroutines_than_the_pool_holds_wait_their_turn(namespace: str) -> None:
    """LangGraph's ``large_batches_async`` gathers 6,000 coroutines; on Neo4j the last of them
    waited longer than the pool's acquisition timeout and failed (issue 30). The same here in
    small: a pool of 3 connections, a 0.5 s acquisition timeout and 600 coroutines, which the
    store admits at most 3 at a time (its sessions follow the pool size)."""
    import os

    uri = os.environ["GRAPHMEM_NEO4J_URI"]
    password = os.environ.get("GRAPHMEM_NEO4J_PASSWORD") or None
    notes = [_note(namespace, f"n{i}", [1.0, float(i)]) for i in range(200)]

    async def main() -> list[Any]:
        async with await AsyncNeo4jStore.from_uri(
            uri, "neo4j", password, max_connection_pool_size=3, connection_acquisition_timeout=0.5
        ) as store:
            work: list[Awaitable[Any]] = []
            for note in notes:
                work += [
                    store.upsert([note]),
                    store.get_many(namespace, [note.id]),
                    store.recall(namespace, note.embedding or [], 3),
                ]
            results = list(await asyncio.gather(*work, return_exceptions=True))
            assert len(await store.get_many(namespace, [n.id for n in notes])) == len(notes)
            return results

    results = asyncio.run(main())
    errors = [r for r in results if isinstance(r, BaseException)]
    assert not errors, f"{len(errors)} of {len(results)} failed; first: {errors[0]!r}"


# The conformance suite runs on AsyncNeo4jStore too: tests/test_store_conformance.py, through
# graphmem.testing.LoopBackedStore.


# ---- GraphMemoryStore's async API on Neo4j ---------------------------------------------------


@pytest.fixture
def lg(sync: Neo4jStore, namespace: str) -> GraphMemoryStore:
    mem = GraphMemory(sync, embedder=HashingEmbedder(DIM))
    return GraphMemoryStore(mem, root=f"{namespace}-lg")


def _no_thread_path(lg: GraphMemoryStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``batch`` (what the worker-thread path runs) fail: only the async path may work."""

    def refuse(ops: Any) -> Any:
        raise AssertionError("abatch ran batch in a worker thread")

    monkeypatch.setattr(lg, "batch", refuse)


DOCS = [
    (f"doc{i}", {"text": f"tea number {i} from {['china', 'japan', 'india'][i % 3]}", "i": i})
    for i in range(15)
]


def _untied(found: Sequence[SearchItem]) -> tuple[list[float | None], list[str]]:
    """Scores of a result list, and the keys of the hits scored above its last score: which of
    several memories tied at the cut the vector index hands over differs between namespaces
    (its graph is approximate), so the tied ones at the end are compared by score alone."""
    scores = [r.score for r in found]
    last = scores[-1] if scores else None
    return scores, [r.key for r in found if last is None or r.score != last]


@pytest.mark.neo4j
def test_langgraph_async_api_on_neo4j_answers_as_the_sync_api(
    lg: GraphMemoryStore, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in DOCS:
        lg.put(("sync",), key, value)
    queries = ["tea from japan", "number 7", "india"]
    want = {
        "get": lg.get(("sync",), "doc4"),
        "search": [lg.search(("sync",), query=q, limit=4) for q in queries],
        "filtered": lg.search(("sync",), filter={"i": {"$gte": 12}}),
    }
    _no_thread_path(lg, monkeypatch)

    async def scenario() -> None:
        store = await lg.async_store()
        assert isinstance(store, AsyncNeo4jStore)
        await asyncio.gather(*[lg.aput(("async",), k, v) for k, v in DOCS])
        got_item = await lg.aget(("async",), "doc4")
        assert got_item is not None and want["get"] is not None
        assert (got_item.key, got_item.value) == (want["get"].key, want["get"].value)
        for q, expected in zip(queries, want["search"], strict=True):
            found = await lg.asearch(("async",), query=q, limit=4)
            assert _untied(found) == _untied(expected)
        filtered = await lg.asearch(("async",), filter={"i": {"$gte": 12}})
        assert sorted(r.key for r in filtered) == sorted(r.key for r in want["filtered"])
        assert await lg.alist_namespaces() == [("async",), ("sync",)]
        await lg.adelete(("async",), "doc4")
        assert await lg.aget(("async",), "doc4") is None
        await lg.aclose()

    asyncio.run(scenario())


@pytest.mark.neo4j
def test_langgraph_many_concurrent_asearches_on_one_loop(
    lg: GraphMemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    users = [("users", f"u{i}") for i in range(6)]
    for u, user in enumerate(users):
        for key, value in DOCS[:6]:
            lg.put(user, key, {**value, "user": u})
    _no_thread_path(lg, monkeypatch)

    async def search(u: int, q: int) -> None:
        hits = await lg.asearch(users[u], query=f"tea number {q}", limit=3)
        assert len(hits) == 3 and all(h.value["user"] == u for h in hits)
        assert all(h.namespace == users[u] for h in hits)

    async def scenario() -> None:
        await asyncio.gather(*[search(u, q) for u in range(6) for q in range(20)])

    asyncio.run(scenario())  # the store opened for this loop is closed as the loop ends


@pytest.mark.neo4j
def test_langgraph_uses_an_injected_async_store_and_leaves_it_open(
    sync: Neo4jStore, namespace: str
) -> None:
    mem = GraphMemory(sync, embedder=HashingEmbedder(DIM))

    async def scenario() -> None:
        async with sync.open_async() as mine:
            lg = GraphMemoryStore(mem, root=f"{namespace}-inj", async_store=mine)
            assert await lg.async_store() is mine
            await lg.aput(("x",), "k", {"text": "two-phase please"})
            hits = await lg.asearch(("x",), query="two-phase")
            assert [h.key for h in hits] == ["k"]
            await lg.aclose()
            assert await mine.get_many(f"{namespace}-inj/x", ["nothing"]) == []  # still open

    asyncio.run(scenario())


@pytest.mark.neo4j
def test_langgraph_store_tenants_stay_apart_on_the_async_path(
    sync: Neo4jStore, namespace: str
) -> None:
    mem = GraphMemory(sync, embedder=HashingEmbedder(DIM))
    a = GraphMemoryStore(mem, root=f"{namespace}-ta")
    b = GraphMemoryStore(mem, root=f"{namespace}-tb")

    async def scenario() -> None:
        await asyncio.gather(
            *[a.aput(("docs",), f"k{i}", {"text": f"alpha secret {i}"}) for i in range(5)],
            *[b.aput(("docs",), f"k{i}", {"text": f"beta secret {i}"}) for i in range(5)],
        )
        found_a, found_b = await asyncio.gather(
            a.asearch(("docs",), query="secret", limit=10),
            b.asearch(("docs",), query="secret", limit=10),
        )
        assert {h.value["text"].split()[0] for h in found_a} == {"alpha"}
        assert {h.value["text"].split()[0] for h in found_b} == {"beta"}
        assert await a.alist_namespaces() == [("docs",)]
        await asyncio.gather(a.aclose(), b.aclose())

    asyncio.run(scenario())
