"""Neo4j vector index with and without quantization: recall@k against exact search, latency.

    GRAPHMEM_NEO4J_URI=bolt://127.0.0.1:7687 python -m bench.speed_quant --n 50000

Loads N Procedures (the clustered synthetic corpus of ``bench.speed``) into one namespace of a
Neo4j database that holds no other memories, then for ``vector.quantization.enabled`` false
and true: re-creates graphmem's vector index with that option (in-index filtered on 2026.01+,
as ``graphmem schema apply`` would), times its build, and times phase-A recall and two-phase
retrieval round-robin beside neo4j-graphrag's VectorRetriever; recall@k1 compares the ids
recall returns with exact top-k1 by numpy. The memories are deleted at the end.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from bench import common
from bench.common import DIM, Case
from bench.speed_systems import BATCH, LookupEmbedder, make_dataset, procedures

log = logging.getLogger("bench.speed_quant")

NAMESPACE = "bench-quant"


def _index_query(filtered: bool, quantized: bool) -> str:
    with_clause = "WITH [m.namespace, m.kind, m.obsolete]\n" if filtered else ""
    return (
        ("CYPHER 25\n" if filtered else "")
        + "CREATE VECTOR INDEX memory_embedding IF NOT EXISTS FOR (m:Memory) ON m.embedding\n"
        + with_clause
        + "OPTIONS {indexConfig: {`vector.dimensions`: $dimension, "
        + "`vector.similarity_function`: 'cosine', "
        + f"`vector.quantization.enabled`: {'true' if quantized else 'false'}}}}}"
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    from neo4j_graphrag.retrievers import VectorRetriever

    from graphmem import GraphMemory
    from graphmem.config import RetrievalConfig
    from graphmem.stores.neo4j import Neo4jStore, cypher
    from graphmem.stores.neo4j.recall import supports_search

    settings = common.neo4j_settings()
    if settings is None:
        raise SystemExit("set GRAPHMEM_NEO4J_URI (and _PASSWORD)")
    data = make_dataset(args.n, args.queries, args.seed)
    loader = Neo4jStore.from_uri(
        settings.uri, settings.user, settings.password, database=settings.database
    )
    driver, db = loader.driver, settings.database

    def query(text: str, **params: Any) -> list[dict[str, Any]]:
        records, _, _ = driver.execute_query(text, params, database_=db)
        return [r.data() for r in records]

    loader.setup(DIM)
    if query("MATCH (m:Memory) RETURN count(m) AS n")[0]["n"]:
        raise SystemExit("needs a database without memories (it re-creates the vector index)")
    with driver.session(database=db) as session:
        filtered = session.execute_read(supports_search)
    query(f"DROP INDEX {cypher.VECTOR_INDEX} IF EXISTS")
    t0 = time.perf_counter()
    for lo in range(0, args.n, BATCH):
        loader.upsert(procedures(data, NAMESPACE, lo, min(args.n, lo + BATCH)))
    ingest_s = time.perf_counter() - t0

    truth = [set(np.argsort(-(data.vectors @ q))[: args.k1].tolist()) for q in data.queries]
    result: dict[str, Any] = {
        "machine": common.machine_info(),
        "settings": {
            "n": args.n,
            "queries": args.queries,
            "k1": args.k1,
            "filtered_index": filtered,
            "ingest_s": round(ingest_s, 1),
        },
        "server": query(cypher.SERVER_VERSION),
        "runs": [],
    }
    cfg = RetrievalConfig(k1=args.k1, k2=args.k2, lam=args.lam)
    try:
        for quantized in (False, True):
            query(f"DROP INDEX {cypher.VECTOR_INDEX} IF EXISTS")
            t0 = time.perf_counter()
            query(_index_query(filtered, quantized), dimension=DIM)
            query("CALL db.awaitIndexes(7200)")
            build_s = time.perf_counter() - t0
            time.sleep(args.settle_s)
            store = Neo4jStore.from_uri(
                settings.uri, settings.user, settings.password, database=settings.database
            )
            mem = GraphMemory(store, embedder=LookupEmbedder(data))
            retriever = VectorRetriever(store.driver, cypher.VECTOR_INDEX, neo4j_database=db)
            found: list[set[int]] = [set() for _ in range(args.queries)]

            def recall(i: int, store: Any = store, found: list[set[int]] = found) -> object:
                hits = store.recall(NAMESPACE, data.queries[i].tolist(), args.k1)
                found[i] = {int(h.memory.id[1:]) for h in hits}
                return hits

            cases = [
                Case("graphmem neo4j: recall (phase A)", recall, max_queries=args.queries),
                Case(
                    f"graphmem neo4j: two-phase λ={args.lam}",
                    _two_phase(mem, cfg),
                    max_queries=args.queries,
                ),
                Case(
                    "neo4j-graphrag VectorRetriever",
                    _graphrag(retriever, data.queries, args.k1),
                    max_queries=args.queries,
                ),
            ]
            load = list(os.getloadavg())
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                common.time_round_robin(cases, args.queries, warmup=args.warmup)
            hit = sum(len(f & t) for f, t in zip(found, truth, strict=True))
            run_row: dict[str, Any] = {
                "quantized": quantized,
                "index_build_s": round(build_s, 1),
                "recall_at_k1": round(hit / (args.k1 * args.queries), 4),
                "load_before_timing": load,
                "cases": [{"case": c.name, **common.percentiles(c.samples_ms)} for c in cases],
            }
            result["runs"].append(run_row)
            store.close()
    finally:
        query(f"DROP INDEX {cypher.VECTOR_INDEX} IF EXISTS")
        loader.setup(DIM)  # the index as graphmem's schema has it
        with driver.session(database=db) as session:
            session.run(
                "MATCH (m:Memory {namespace: $ns}) "
                "CALL (m) { DETACH DELETE m } IN TRANSACTIONS OF 10000 ROWS",
                ns=NAMESPACE,
            ).consume()
        loader.close()
    return result


def _two_phase(mem: Any, cfg: Any) -> Callable[[int], object]:
    return lambda i: mem.retrieve(NAMESPACE, f"q:{i}", cfg)


def _graphrag(retriever: Any, queries: np.ndarray, k: int) -> Callable[[int], object]:
    return lambda i: retriever.get_search_results(query_vector=queries[i].tolist(), top_k=k)


def render(result: dict[str, Any]) -> str:
    s = result["settings"]
    kernel = next((r["versions"][0] for r in result["server"] if r["name"] == "Neo4j Kernel"), "?")
    lines = [
        "# Neo4j vector index quantization",
        "",
        common.machine_markdown(result["machine"]),
        f"- Neo4j {kernel}; {s['n']:,} memories in one namespace, "
        f"{'in-index filtered' if s['filtered_index'] else 'plain'} index; k1={s['k1']}; "
        f"{s['queries']} queries; ingest {s['ingest_s']} s",
        "",
        "| quantization | index build s | recall@k1 | case | p50 ms | p95 ms | load (1/5/15) |",
        "|---|---|---|---|---|---|---|",
    ]
    for run_row in result["runs"]:
        load = " / ".join(f"{x:.2f}" for x in run_row["load_before_timing"])
        for c in run_row["cases"]:
            lines.append(
                f"| {'on' if run_row['quantized'] else 'off'} | {run_row['index_build_s']} | "
                f"{run_row['recall_at_k1']} | {c['case']} | {c['p50_ms']:.2f} | "
                f"{c['p95_ms']:.2f} | {load} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.speed_quant", description=__doc__)
    parser.add_argument("--n", type=int, default=50_000, help="memories")
    parser.add_argument("--queries", type=int, default=200, help="timed queries")
    parser.add_argument("--warmup", type=int, default=5, help="untimed queries first")
    parser.add_argument("--k1", type=int, default=5, help="phase-A recall size")
    parser.add_argument("--k2", type=int, default=3, help="two-phase result size")
    parser.add_argument("--lam", type=float, default=0.5, help="λ of the two-phase score")
    parser.add_argument("--settle-s", type=float, default=5.0, help="pause after index build")
    parser.add_argument("--seed", type=int, default=0, help="corpus seed")
    parser.add_argument("--prefix", default="speed_quant", help="result file name")
    parser.add_argument("--out", default=str(common.RESULTS_DIR), help="result folder")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    result = run(args)
    markdown = render(result)
    from pathlib import Path

    files = common.write_results(Path(args.out), args.prefix, result, markdown)
    print(markdown)
    print("wrote " + ", ".join(str(f) for f in files))
    return 0


if __name__ == "__main__":
    sys.exit(main())
