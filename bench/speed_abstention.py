"""What the retrieval-time mechanisms of issue 45 cost a retrieval: two-phase retrieval as
a user gets it (abstention and graph expansion off), with abstention on (opt-in: one more
recall, of the query's task cluster), and with every mechanism on (abstention and graph
expansion of phase A, ``expand='links+tasks'``), at 10k memories, embedded and Neo4j.
Consolidation and retention run when memories are written, not in retrieval: they only change
how many memories there are to search.

    python -m bench.speed_abstention --size 10000 --stores embedded
    GRAPHMEM_NEO4J_URI=bolt://… python -m bench.speed_abstention --stores neo4j

The corpus is ``bench.speed``'s (clustered synthetic vectors, short household tasks): the
memories are procedures, half of them credited three times, each LINKS_TO two others (as
``evolve`` links them); beside them ``--tasks`` Task nodes near the queries carry no-memory
episodes and are SOLVED_BY three procedures each, so the baseline is computed, candidates are
judged and the graph has something to add.
Queries are embedded by lookup (not timed); each query runs through both settings in turn, the
order alternating, after warm-up queries. Timed: ``GraphMemory.retrieve`` end to end (k1 = 20,
k2 = 5), no episode opened.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench import common
from bench.speed_systems import Dataset, LookupEmbedder, make_dataset, procedures

NAMESPACE = "bench-abstention"


def tasks(data: Dataset, namespace: str, count: int, seed: int = 1) -> list[Any]:
    """``count`` Task nodes near the queries, each with a few no-memory episodes."""
    from graphmem.models import Task

    rng = np.random.default_rng(seed)
    rows = rng.choice(len(data.texts), size=min(count, len(data.texts)), replace=False)
    out = []
    for n, row in enumerate(rows):
        # Near the queries, so every query has a cluster and its candidates are judged.
        near = data.queries[n % len(data.queries)]
        vector = near + 0.02 * rng.standard_normal(data.vectors.shape[1])
        vector /= np.linalg.norm(vector)
        episodes = int(rng.integers(1, 6))
        out.append(
            Task(
                namespace=namespace,
                id=f"t{n}",
                text=f"task {n}: {data.texts[row]}",
                key=f"task {n}: {data.texts[row]}",
                embedding=vector.tolist(),
                q=float(rng.uniform(0.3, 0.8)),
                q_updates=episodes,
                uses=episodes,
                successes=int(rng.integers(0, episodes + 1)),
            )
        )
    return out


def load(store: Any, data: Dataset, args: argparse.Namespace) -> float:
    started = time.perf_counter()
    n = len(data.texts)
    for lo in range(0, n, 1000):
        batch = procedures(data, NAMESPACE, lo, min(n, lo + 1000))
        for p in batch[::2]:  # half credited three times
            p.q_updates, p.uses, p.successes = 3, 3, 2
        store.upsert(batch)
    made = tasks(data, NAMESPACE, args.tasks)
    store.upsert(made)
    edges = graph_edges(n, [t.id for t in made])
    for lo in range(0, len(edges), 2000):
        store.upsert(edges=edges[lo : lo + 2000])
    return time.perf_counter() - started


def graph_edges(n: int, task_ids: Sequence[str], seed: int = 2) -> list[Any]:
    """Each procedure LINKS_TO two others; each Task SOLVED_BY three procedures."""
    from graphmem.models import Edge, EdgeKind

    rng = np.random.default_rng(seed)
    edges = []
    for i in range(n):
        for j in {int(x) for x in rng.integers(0, n, size=2)} - {i}:
            edges.append(
                Edge(namespace=NAMESPACE, kind=EdgeKind.LINKS_TO, src=f"m{i}", dst=f"m{j}")
            )
    for t in task_ids:
        for j in {int(x) for x in rng.integers(0, n, size=3)}:
            edges.append(Edge(namespace=NAMESPACE, kind=EdgeKind.SOLVED_BY, src=t, dst=f"m{j}"))
    return edges


def cases(store: Any, data: Dataset) -> tuple[dict[str, Callable[[int], object]], list[int]]:
    from graphmem.config import RetrievalConfig
    from graphmem.memory import GraphMemory
    from graphmem.models import MemoryKind

    mem = GraphMemory(store, embedder=LookupEmbedder(data))
    base = RetrievalConfig(k1=20, k2=5, kinds=(MemoryKind.PROCEDURE,))
    off, on = base.model_copy(update={"abstain": False}), base.model_copy(update={"abstain": True})
    every = on.model_copy(update={"expand": "links+tasks"})
    withheld: list[int] = []

    def with_abstention(i: int) -> object:
        found = mem.retrieve(NAMESPACE, f"q:{i % len(data.queries)}", on)
        withheld.append(len(found.withheld))
        return found

    def without(i: int) -> object:
        return mem.retrieve(NAMESPACE, f"q:{i % len(data.queries)}", off)

    def with_everything(i: int) -> object:
        return mem.retrieve(NAMESPACE, f"q:{i % len(data.queries)}", every)

    return {
        "abstention off (default)": without,
        "abstention on (opt-in)": with_abstention,
        "abstention + graph expansion (every mechanism on)": with_everything,
    }, withheld


def run_store(name: str, data: Dataset, args: argparse.Namespace) -> dict[str, Any]:
    if name == "embedded":
        from graphmem.stores.embedded import EmbeddedStore

        with tempfile.TemporaryDirectory(prefix="graphmem-abstention-") as tmp:
            store = EmbeddedStore.open(Path(tmp) / "store")
            try:
                return measure(store, data, args)
            finally:
                store.close()
    import os

    from graphmem.stores.neo4j import Neo4jStore

    uri = os.environ.get("GRAPHMEM_NEO4J_URI")
    if not uri:
        raise SystemExit("--stores neo4j needs GRAPHMEM_NEO4J_URI")
    neo4j_store = Neo4jStore.from_uri(
        uri,
        user=os.environ.get("GRAPHMEM_NEO4J_USER", "neo4j"),
        password=os.environ.get("GRAPHMEM_NEO4J_PASSWORD") or None,
    )
    try:
        neo4j_store.setup(data.vectors.shape[1])
        ids = [m.id for m in neo4j_store.iter_nodes(NAMESPACE)]
        for lo in range(0, len(ids), 1000):
            neo4j_store.delete(NAMESPACE, ids[lo : lo + 1000])
        return measure(neo4j_store, data, args)
    finally:
        neo4j_store.close()


def measure(store: Any, data: Dataset, args: argparse.Namespace) -> dict[str, Any]:
    load_s = load(store, data, args)
    if hasattr(store, "wait_for_index"):
        store.wait_for_index(600)
    timing, withheld = cases(store, data)
    result = common.time_interleaved(timing, args.queries, args.warmup)
    return {
        "load_s": round(load_s, 1),
        "cases": result,
        "withheld_per_query": round(sum(withheld) / max(1, len(withheld)), 2),
    }


def render(result: dict[str, Any]) -> str:
    lines = [
        "# What abstention and graph expansion cost a retrieval",
        "",
        f"Command: `{result['command']}`",
        "",
        common.machine_markdown(result["machine"]),
        "",
        f"- {result['size']:,} procedures (half credited, each LINKS_TO two others), "
        f"{result['tasks']:,} Task nodes with no-memory episodes, each SOLVED_BY three; "
        f"{result['queries']} queries after {result['warmup']} warm-up, every setting per "
        "query in turn (the order alternating); `GraphMemory.retrieve`, k1 = 20, k2 = 5",
        "",
        "| store | setting | p50 ms | p95 ms | p95 / off | withheld per query |",
        "|---|---|---|---|---|---|",
    ]
    for store, r in result["stores"].items():
        off = r["cases"]["abstention off (default)"]["p95_ms"]
        for name, p in r["cases"].items():
            extra = r["withheld_per_query"] if name.startswith("abstention on") else ""
            lines.append(
                f"| {store} | {name} | {p['p50_ms']:.2f} | {p['p95_ms']:.2f} | "
                f"{p['p95_ms'] / off:.2f}× | {extra} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.speed_abstention")
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--tasks", type=int, default=1_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--stores", default="embedded", help="embedded,neo4j")
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    parser.add_argument("--tag", default="")
    args = parser.parse_args(argv)
    stores = [s for s in args.stores.split(",") if s]
    if unknown := set(stores) - {"embedded", "neo4j"}:
        parser.error(f"unknown store(s): {', '.join(sorted(unknown))}")
    data = make_dataset(args.size, args.queries + args.warmup)
    result: dict[str, Any] = {
        "command": "python -m bench.speed_abstention " + " ".join(argv or sys.argv[1:]),
        "machine": common.machine_info(),
        "size": args.size,
        "tasks": args.tasks,
        "queries": args.queries,
        "warmup": args.warmup,
        "stores": {},
    }
    name = "speed_abstention" + (f"_{args.tag}" if args.tag else "")
    for store in stores:
        result["stores"][store] = run_store(store, data, args)
        common.write_results(args.out, name, result, render(result))  # each store as it ends
    print(render(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
