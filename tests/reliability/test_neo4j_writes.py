"""Content writes and utility updates, concurrently; uniqueness before the first write.

- Re-saving a memory (``upsert``: LangGraph ``put``, ``evolve``, ``add_note`` with an existing
  id) while other processes increment its Q loses no increment, on both stores: the content
  write never writes q/q_updates/uses/successes from a value it read earlier.
- Neo4j with no schema applied: processes saving the same ids at once still make one node per
  id, because the store creates the uniqueness constraints before its first write.
- ``graphmem schema apply`` on a graph that already holds duplicates names them and the fix.

The no-schema tests drop the constraints of the *private* server (tests/reliability/conftest.py),
never the shared one's.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from graphmem import cli
from graphmem.config import MemoryConfig
from graphmem.embedding import HashingEmbedder
from graphmem.errors import StoreError
from graphmem.memory import GraphMemory
from graphmem.models import Note
from graphmem.stores.base import MemoryStore
from graphmem.stores.neo4j import cypher

from ._workers import DIM, fork_all, open_store, store_spec
from .conftest import PrivateServer

pytestmark = [pytest.mark.reliability]

INCREMENTERS = 3
INCREMENTS_EACH = 100
"""3 × 100 = 300 acknowledged Q updates of every memory."""
IDS = ("a", "b")
ALPHA, REWARD, Q0 = 0.1, 1.0, 0.5


def expected_q(n: int) -> float:
    """The store's update ``q ← q + α(r − q)`` replayed n times: one reward, so order-free."""
    q = Q0
    for _ in range(n):
        q = q + ALPHA * (REWARD - q)
    return q


def _wait_for(paths: list[Path], seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not all(p.exists() for p in paths):
        assert time.monotonic() < deadline, f"waited {seconds}s for {paths}"
        time.sleep(0.01)


def _increment(spec: dict[str, Any], ns: str, ready: list[Path], done: Path) -> None:
    store = open_store(spec)
    try:
        _wait_for(ready)  # the re-savers are warm: every increment races a re-save
        for _ in range(INCREMENTS_EACH):
            store.update_utility(ns, list(IDS), REWARD, ALPHA, success=True)
            time.sleep(0.003)
    finally:
        store.close()
        done.touch()


def _resave(
    spec: dict[str, Any], ns: str, worker: int, ready: Path, done: list[Path], out: Path
) -> None:
    """Re-save the memories with new content (and a stale q) until the incrementers finish."""
    store = open_store(spec)
    mem = GraphMemory(store, embedder=HashingEmbedder(DIM), config=MemoryConfig(q0=Q0))
    saves = 0
    deadline = time.monotonic() + 60
    try:
        while not all(p.exists() for p in done) and time.monotonic() < deadline:
            for memory_id in IDS:
                content = f"revision {worker}-{saves} of {memory_id}"
                if worker == 0:  # the user-facing path: add_note with an existing id
                    mem.add_note(ns, content, id=memory_id, keywords=["k"], tags=[], context="")
                else:  # a bare upsert carrying q/uses values read long ago
                    data = json.dumps({"n": saves}) if saves % 2 else None
                    store.upsert([Note(id=memory_id, namespace=ns, content=content, data=data)])
            saves += 1
            ready.touch()
    finally:
        store.close()
        out.write_text(str(saves), encoding="utf-8")


@pytest.mark.slow
def test_resaving_while_q_is_incremented_loses_no_update(
    store: MemoryStore, namespace: str, tmp_path: Path
) -> None:
    store.upsert([Note(id=i, namespace=namespace, content=f"first {i}", q=Q0) for i in IDS])
    spec = store_spec(store)
    done = [tmp_path / f"done-{i}" for i in range(INCREMENTERS)]
    ready = [tmp_path / f"ready-{i}" for i in range(2)]
    saves = [tmp_path / f"saves-{i}" for i in range(2)]

    def work(i: int) -> None:
        if i < INCREMENTERS:
            _increment(spec, namespace, ready, done[i])
        else:
            j = i - INCREMENTERS
            _resave(spec, namespace, j, ready[j], done, saves[j])

    codes = fork_all(INCREMENTERS + 2, work, timeout=120)
    assert codes == [0] * (INCREMENTERS + 2), f"worker exit codes {codes}"
    resaves = [int(p.read_text(encoding="utf-8")) for p in saves]
    assert min(resaves) >= 10, f"the re-saves barely overlapped the increments: {resaves}"

    n = INCREMENTERS * INCREMENTS_EACH
    print(f"\n{n} increments raced {resaves} re-saves")
    for memory in store.get_many(namespace, list(IDS)):
        assert isinstance(memory, Note)
        counts = (memory.q_updates, memory.uses, memory.successes)
        assert counts == (n, n, n), f"{memory.id}: {n - memory.q_updates} of {n} updates lost"
        assert memory.q == expected_q(n)
        assert memory.content.startswith("revision "), "the re-saved content was not kept"


def test_a_resave_removes_the_fields_the_new_version_lacks(
    store: MemoryStore, namespace: str
) -> None:
    store.upsert([Note(id="x", namespace=namespace, content="one", data='{"a": 1}', q=Q0)])
    store.update_utility(namespace, ["x"], REWARD, ALPHA)
    store.upsert([Note(id="x", namespace=namespace, content="two", obsolete_reason=None)])
    (got,) = store.get_many(namespace, ["x"])
    assert isinstance(got, Note)
    assert (got.content, got.data) == ("two", None)
    assert (got.q, got.q_updates, got.uses) == (expected_q(1), 1, 1)


# ---- Neo4j without its schema (private server) ---------------------------------------------

WRITERS = 6
SAVED_IDS = [f"id-{i}" for i in range(10)]


def _admin(server: PrivateServer, query: str, **params: Any) -> list[dict[str, Any]]:
    import neo4j

    with neo4j.GraphDatabase.driver(server.uri, auth=("neo4j", server.password)) as driver:
        records, _, _ = driver.execute_query(query, params)
        return [r.data() for r in records]


def _drop_constraints(server: PrivateServer) -> None:
    """Back to a database on which `graphmem schema apply` never ran."""
    for row in _admin(server, "SHOW CONSTRAINTS YIELD name RETURN name"):
        _admin(server, f"DROP CONSTRAINT `{row['name']}` IF EXISTS")


@pytest.fixture
def schemaless(private_neo4j: PrivateServer, namespace: str) -> Iterator[PrivateServer]:
    _drop_constraints(private_neo4j)
    try:
        yield private_neo4j
    finally:
        _admin(private_neo4j, "MATCH (m:Memory {namespace: $ns}) DETACH DELETE m", ns=namespace)


def _private_spec(server: PrivateServer) -> dict[str, Any]:
    return {"backend": "neo4j", "uri": server.uri, "user": "neo4j", "password": server.password}


def _save_all(spec: dict[str, Any], ns: str, worker: int) -> None:
    store = open_store(spec)
    try:
        order = SAVED_IDS[worker % 3 :] + SAVED_IDS[: worker % 3]
        for memory_id in order:  # one call each: many chances to race
            store.upsert([Note(id=memory_id, namespace=ns, content=f"by {worker}")])
    finally:
        store.close()


@pytest.mark.slow
def test_concurrent_saves_without_schema_make_no_duplicate(
    schemaless: PrivateServer, namespace: str
) -> None:
    spec = _private_spec(schemaless)
    codes = fork_all(WRITERS, lambda i: _save_all(spec, namespace, i), timeout=120)
    assert codes == [0] * WRITERS, f"writer exit codes {codes}"
    rows = _admin(
        schemaless,
        "MATCH (m:Memory {namespace: $ns}) RETURN m.id AS id, count(*) AS copies ORDER BY id",
        ns=namespace,
    )
    assert rows == [{"id": i, "copies": 1} for i in SAVED_IDS]
    names = {r["name"] for r in _admin(schemaless, "SHOW CONSTRAINTS YIELD name RETURN name")}
    assert {"memory_namespace_id", "graphmem_meta_name"} <= names


@pytest.mark.slow
def test_schema_apply_names_duplicate_ids_and_the_fix(
    schemaless: PrivateServer,
    namespace: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from graphmem.stores.neo4j import Neo4jStore

    for memory_id, copies in (("dup-1", 3), ("dup-2", 2), ("single", 1)):
        for k in range(copies):
            _admin(
                schemaless,
                "CREATE (m:Memory:Note) SET m = $props",
                props=Note(id=memory_id, namespace=namespace, content=f"copy {k}").model_dump(
                    mode="json", exclude_none=True
                ),
            )
    monkeypatch.setenv("GRAPHMEM_NEO4J_URI", schemaless.uri)
    monkeypatch.setenv("GRAPHMEM_NEO4J_PASSWORD", schemaless.password)
    capsys.readouterr()
    assert cli.main(["schema", "apply", "--dimension", str(DIM)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("graphmem: error:") and len(err.splitlines()) == 1, err
    assert "2 memory id(s) exist more than once" in err
    assert f"'dup-1' in namespace '{namespace}' (3 nodes)" in err and "'dup-2'" in err
    assert "'single'" not in err and cypher.DEDUPE_HINT in err

    store = Neo4jStore.from_uri(schemaless.uri, "neo4j", schemaless.password)
    try:
        with pytest.raises(StoreError, match="'dup-1'"):  # and no write happens meanwhile
            store.upsert([Note(id="dup-1", namespace=namespace, content="another copy")])
        assert len(_admin(schemaless, "MATCH (m:Memory {id: 'dup-1'}) RETURN m")) == 3

        _admin(schemaless, cypher.DEDUPE_HINT)  # the fix the message gives
        _admin(schemaless, "MERGE (:GraphmemMeta {name: 'graphmem'}) CREATE (:GraphmemMeta)")
        _admin(schemaless, "MATCH (g:GraphmemMeta) WHERE g.name IS NULL SET g.name = 'graphmem'")
        with pytest.raises(StoreError, match="GraphmemMeta nodes are named 'graphmem'"):
            store.upsert([Note(id="dup-1", namespace=namespace, content="another copy")])
        _admin(schemaless, cypher.META_DEDUPE_HINT)
        store.upsert([Note(id="dup-1", namespace=namespace, content="after the fix")])
        rows = _admin(
            schemaless,
            "MATCH (m:Memory {namespace: $ns}) RETURN m.id AS id, count(*) AS n ORDER BY id",
            ns=namespace,
        )
        assert rows == [{"id": "dup-1", "n": 1}, {"id": "dup-2", "n": 1}, {"id": "single", "n": 1}]
    finally:
        store.close()
