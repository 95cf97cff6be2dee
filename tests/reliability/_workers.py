"""Worker code run in forked child processes by the load and fault tests.

Forking (rather than starting fresh interpreters) keeps start-up to milliseconds on a loaded
2-core machine; each child still opens its own store (own files, locks, driver, sockets) and
ends with ``os._exit`` so it never runs the parent's pytest machinery.
"""

from __future__ import annotations

import json
import os
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from graphmem.config import MemoryConfig
from graphmem.embedding import HashingEmbedder
from graphmem.memory import GraphMemory
from graphmem.stores.base import MemoryStore

DIM = 384
"""The shared test Neo4j database's vector dimension (tests/conftest.py)."""


def backend_of(store: MemoryStore) -> str:
    from graphmem.stores.embedded import EmbeddedStore

    return "embedded" if isinstance(store, EmbeddedStore) else "neo4j"


def fork_all(n: int, work: Callable[[int], None], *, timeout: float = 300.0) -> list[int]:
    """Run ``work(i)`` in ``n`` forked children released together; return their exit codes.

    A child still running after ``timeout`` seconds is killed (exit code -9), so a hung worker
    fails the test instead of hanging the suite.
    """
    go_read, go_write = os.pipe()
    pids = []
    for i in range(n):
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.close(go_write)
                os.read(go_read, 1)  # start together
                work(i)
                code = 0
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(code)
        pids.append(pid)
    os.close(go_read)
    os.write(go_write, b"g" * n)
    os.close(go_write)
    deadline = time.monotonic() + timeout
    codes: dict[int, int] = {}
    while len(codes) < n:
        for pid in pids:
            if pid in codes:
                continue
            done, status = os.waitpid(pid, os.WNOHANG)
            if done == pid:
                codes[pid] = os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            for pid in pids:
                if pid not in codes:
                    os.kill(pid, 9)
                    os.waitpid(pid, 0)
                    codes[pid] = -9
        time.sleep(0.02)
    return [codes[p] for p in pids]


def store_spec(store: MemoryStore) -> dict[str, Any]:
    """How a forked worker opens its own connection to the same store (see :func:`open_store`)."""
    from graphmem.stores.embedded import EmbeddedStore

    if isinstance(store, EmbeddedStore):
        assert store.path is not None
        return {"backend": "embedded", "path": str(store.path)}
    return {
        "backend": "neo4j",
        "uri": os.environ["GRAPHMEM_NEO4J_URI"],
        "user": os.environ.get("GRAPHMEM_NEO4J_USER", "neo4j"),
        "password": os.environ.get("GRAPHMEM_NEO4J_PASSWORD") or None,
        "database": os.environ.get("GRAPHMEM_NEO4J_DATABASE") or None,
    }


def open_store(spec: dict[str, Any]) -> MemoryStore:
    """A fresh store connection from a picklable description (one per process)."""
    if spec["backend"] == "embedded":
        from graphmem.stores.embedded import EmbeddedStore

        return EmbeddedStore.open(spec["path"])
    from graphmem.stores.neo4j import Neo4jStore

    return Neo4jStore.from_uri(
        spec["uri"], spec["user"], spec["password"], database=spec.get("database")
    )


def load_worker(spec: dict[str, Any], worker: int, out: Path) -> None:
    """``ops`` rounds of retrieve(open_episode=True) → finish_episode; results to ``out``.

    Namespace ``j`` always gets reward ``rewards[j]``, so every update of one memory uses the same
    reward and its expected Q is exact whatever order the processes ran in.
    """
    store = open_store(spec)
    mem = GraphMemory(store, embedder=HashingEmbedder(DIM), config=MemoryConfig(alpha=0.1))
    records: list[dict[str, Any]] = []
    errors: list[str] = []
    try:
        for j in range(spec["ops"]):
            which = (worker + j) % len(spec["namespaces"])
            ns, reward = spec["namespaces"][which], spec["rewards"][which]
            query = f"{spec['topics'][which]} question {worker} {j}"
            try:
                t0 = time.perf_counter()
                got = mem.retrieve(
                    ns, query, kinds=("Note",), k1=spec["k1"], k2=spec["k2"], open_episode=True
                )
                t1 = time.perf_counter()
                assert got.episode_id is not None
                outcome = mem.finish_episode(ns, got.episode_id, reward)
                t2 = time.perf_counter()
            except Exception as e:  # counted, never hidden: the test asserts there are none
                errors.append(f"worker {worker} op {j}: {type(e).__name__}: {e}")
                continue
            records.append(
                {
                    "namespace": ns,
                    "episode": got.episode_id,
                    "hits": [h.memory.id for h in got.hits],
                    "credited": sorted(m.id for m in outcome.updated),
                    "retrieve_s": t1 - t0,
                    "finish_s": t2 - t1,
                }
            )
    finally:
        store.close()
        out.write_text(json.dumps({"records": records, "errors": errors}), encoding="utf-8")
