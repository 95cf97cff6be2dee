"""Retrieval latency (p50 / p95) of two-phase retrieval at N memories, on either store.

Memories are synthetic procedures with HashingEmbedder vectors computed before timing; query
vectors are precomputed too, so the figures cover retrieval alone (recall, superseded filter,
z-scoring, ranking), not embedding. Phase A alone (``store.recall``) is timed beside it.

    python -m bench.retrieval_latency --n 10000 --store embedded
    GRAPHMEM_NEO4J_URI=bolt://localhost:7687 python -m bench.retrieval_latency --store neo4j
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from graphmem import GraphMemory, HashingEmbedder, Procedure
from graphmem.config import RetrievalConfig
from graphmem.embedding import Matrix
from graphmem.models import MemoryKind
from graphmem.stores.base import MemoryStore

DIM = 384


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


VERBS = _words("heat cool clean slice wash put take open close find move turn fill empty")
OBJECTS = _words(
    "mug apple plate bread cup egg lettuce bowl knife pan kettle book lamp key phone towel "
    "bottle glass fork spoon pot box chair door drawer window sponge soap vase pillow"
)
PLACES = _words(
    "kitchen fridge shelf counter cabinet stove sink table desk drawer sofa bed garage garden "
    "microwave oven dishwasher closet bathroom hall"
)


class PrecomputedEmbedder:
    """Looks up vectors computed before timing, so query embedding is not measured."""

    def __init__(self, table: Mapping[str, Sequence[float]]) -> None:
        self._table = table

    name = "precomputed"
    dimension = DIM

    def embed(self, texts: Sequence[str]) -> Matrix:
        return np.asarray([self._table[t] for t in texts], dtype=np.float32)


def task_text(rng: random.Random) -> str:
    return (
        f"{rng.choice(VERBS)} the {rng.choice(OBJECTS)} and put it in the {rng.choice(PLACES)} "
        f"then {rng.choice(VERBS)} the {rng.choice(OBJECTS)}"
    )


def populate(store: MemoryStore, namespace: str, n: int, seed: int, batch: int = 1000) -> float:
    """Write ``n`` procedures with random q; returns seconds spent writing (not embedding)."""
    rng = random.Random(seed)
    embedder = HashingEmbedder(DIM)
    written = 0.0
    for start in range(0, n, batch):
        texts = [task_text(rng) for _ in range(min(batch, n - start))]
        vectors = embedder.embed(texts)
        procs = [
            Procedure(
                namespace=namespace,
                task_text=t,
                key=t,
                granularity="script",
                script=f"1. {t}",
                embedding=[float(x) for x in v],
                q=rng.random(),
            )
            for t, v in zip(texts, vectors, strict=True)
        ]
        t0 = time.perf_counter()
        store.upsert(procs)
        written += time.perf_counter() - t0
    return written


def percentiles(samples_ms: Sequence[float]) -> dict[str, float]:
    ordered = sorted(samples_ms)

    def pct(p: float) -> float:
        return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]

    return {
        "p50_ms": round(pct(50), 3),
        "p95_ms": round(pct(95), 3),
        "mean_ms": round(statistics.fmean(ordered), 3),
    }


def time_calls(fn: Callable[[str], object], queries: Sequence[str], warmup: int) -> list[float]:
    for q in queries[:warmup]:
        fn(q)
    out = []
    for q in queries:
        t0 = time.perf_counter()
        fn(q)
        out.append((time.perf_counter() - t0) * 1000)
    return out


@contextmanager
def open_store(kind: str, path: str | None) -> Iterator[MemoryStore]:
    if kind == "embedded":
        from graphmem.stores.embedded import EmbeddedStore

        with tempfile.TemporaryDirectory(prefix="graphmem-bench-") as tmp:
            store = EmbeddedStore.open(Path(path) if path else Path(tmp) / "store")
            try:
                yield store
            finally:
                store.close()
        return
    uri = os.environ.get("GRAPHMEM_NEO4J_URI")
    if not uri:
        raise SystemExit("--store neo4j needs GRAPHMEM_NEO4J_URI (and user/password) set")
    from graphmem.stores.neo4j import Neo4jStore

    neo = Neo4jStore.from_uri(
        uri,
        user=os.environ.get("GRAPHMEM_NEO4J_USER", "neo4j"),
        password=os.environ.get("GRAPHMEM_NEO4J_PASSWORD") or None,
        database=os.environ.get("GRAPHMEM_NEO4J_DATABASE") or None,
    )
    try:
        neo.setup(DIM)
        yield neo
    finally:
        neo.close()


def run(args: argparse.Namespace) -> dict[str, object]:
    namespace = f"bench-{uuid.uuid4().hex[:10]}"
    rng = random.Random(args.seed + 1)
    queries = [f"please {task_text(rng)} now" for _ in range(args.queries)]
    table = {
        q: [float(x) for x in v]
        for q, v in zip(queries, HashingEmbedder(DIM).embed(queries), strict=True)
    }
    result: dict[str, object] = {
        "store": args.store,
        "n": args.n,
        "queries": args.queries,
        "k1": args.k1,
        "k2": args.k2,
    }
    with open_store(args.store, args.path) as store:
        try:
            write_s = populate(store, namespace, args.n, args.seed)
            result["ingest_per_s"] = round(args.n / write_s, 1) if write_s > 0 else None
            mem = GraphMemory(store, embedder=PrecomputedEmbedder(table))
            cases: dict[str, Callable[[str], object]] = {
                "phase A only (store.recall)": lambda q: store.recall(
                    namespace,
                    table[q],
                    args.k1,
                    kinds=[MemoryKind.PROCEDURE],
                    min_sim=0.0,
                ),
                "retrieve λ=0 (similarity only)": lambda q: mem.retrieve(
                    namespace, q, RetrievalConfig(k1=args.k1, k2=args.k2, lam=0.0)
                ),
                "retrieve λ=0.5 (MemRL)": lambda q: mem.retrieve(
                    namespace, q, RetrievalConfig(k1=args.k1, k2=args.k2, lam=0.5)
                ),
            }
            timings = {}
            for name, fn in cases.items():
                timings[name] = percentiles(time_calls(fn, queries, args.warmup))
            result["latency"] = timings
        finally:
            if args.store == "neo4j" and not args.keep:
                ids = [m.id for m in store.iter_nodes(namespace)]
                for start in range(0, len(ids), 1000):
                    store.delete(namespace, ids[start : start + 1000])
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--n", type=int, default=10_000, help="memories in the namespace")
    parser.add_argument("--store", choices=["embedded", "neo4j"], default="embedded")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--k1", type=int, default=5)
    parser.add_argument("--k2", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--path", help="embedded store directory (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the Neo4j bench namespace")
    parser.add_argument("--json", action="store_true", help="print JSON only")
    args = parser.parse_args(argv)
    result = run(args)
    if args.json:
        print(json.dumps(result, ensure_ascii=False))
        return 0
    print(
        f"{args.store} store, {args.n} memories, {args.queries} queries, "
        f"k1={args.k1} k2={args.k2} (ingest {result['ingest_per_s']} memories/s)"
    )
    latency = result["latency"]
    assert isinstance(latency, dict)
    print(f"{'':34} {'p50 ms':>8} {'p95 ms':>8} {'mean ms':>8}")
    for name, row in latency.items():
        print(f"{name:34} {row['p50_ms']:8.3f} {row['p95_ms']:8.3f} {row['mean_ms']:8.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
