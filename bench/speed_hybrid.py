"""Hybrid recall's cost: phase A by vector alone (today) beside vector + full text fused (RRF),
on the embedded store and on Neo4j, and neo4j-graphrag's HybridRetriever on the same server.

    python -m bench.speed_hybrid --sizes 10000 --stores embedded
    GRAPHMEM_NEO4J_URI=bolt://… python -m bench.speed_hybrid --sizes 10000 --stores neo4j

The corpus is ``bench.speed``'s (clustered synthetic vectors, procedures whose text is a short
household task from a vocabulary of 64 words): every query word is held by 3–100 % of the
memories, a hard case for a keyword index, where real text has rarer words. Each query is
timed through both paths in turn (the order alternating), after warm-up queries; the first
keyword search of the embedded store also builds its in-memory index, timed apart
(``index build``). graphmem's paths are phase A as retrieval runs it
(``ops.retrieve._similar_candidates`` and ``ops.fusion.hybrid_candidates``: candidates with the
superseded check, k1 = 10); on Neo4j both ways of asking the two channels are timed, in one
statement (``Neo4jStore.recall_hybrid``, what hybrid recall does) and in two statements at once
from two sessions. graphrag's HybridRetriever searches both indexes of the whole database (it
has no namespace filter), top_k = 10, given the query vector (no embedding timed). Time a
Neo4j server settled after its load: ``--keep`` and a second run (the first run after a 100k
load measured the server's own background work: vector recall p50 330 ms, then 5 ms).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench import common
from bench.speed_systems import Dataset, make_dataset, procedures

log = logging.getLogger("bench.speed_hybrid")
NAMESPACE = "bench"


def _load(store: Any, data: Dataset, namespace: str, quiet: bool) -> float:
    started = time.perf_counter()
    n = len(data.texts)
    bar = common.progress_bar(n, "upsert", enabled=not quiet)
    with bar:
        for lo in range(0, n, 1000):
            store.upsert(procedures(data, namespace, lo, min(n, lo + 1000)))
            bar.update(min(n, lo + 1000) - lo)
    return time.perf_counter() - started


def graphmem_cases(store: Any, data: Dataset, namespace: str, k1: int) -> dict[str, Any]:
    from graphmem.config import RetrievalConfig
    from graphmem.models import MemoryKind
    from graphmem.ops.fusion import hybrid_candidates
    from graphmem.ops.retrieve import _similar_candidates

    kinds = (MemoryKind.PROCEDURE,)
    vector_cfg = RetrievalConfig(k1=k1, k2=k1, kinds=kinds)
    hybrid_cfg = RetrievalConfig(k1=k1, k2=k1, kinds=kinds, hybrid=True)

    def vector_only(i: int) -> object:
        return _similar_candidates(store, namespace, data.queries[i].tolist(), vector_cfg)

    def hybrid(i: int) -> object:
        return hybrid_candidates(
            store,
            namespace,
            data.query_texts[i],
            data.queries[i].tolist(),
            hybrid_cfg,
            _similar_candidates,
        )

    if not hasattr(store, "recall_hybrid"):
        return {"vector only (today)": vector_only, "hybrid (vector + full text, RRF)": hybrid}

    # Neo4j: both channels in one statement (what hybrid recall does there), and in two
    # statements at once from two sessions (what it did before).
    def way(one: bool) -> Callable[[int], object]:
        def run(i: int) -> object:
            return hybrid_candidates(
                store,
                namespace,
                data.query_texts[i],
                data.queries[i].tolist(),
                hybrid_cfg,
                _similar_candidates,
                one_statement=one,
            )

        return run

    return {
        "vector only (today)": vector_only,
        "hybrid, one statement": way(True),
        "hybrid, two statements at once": way(False),
    }


def run_embedded(data: Dataset, args: argparse.Namespace) -> dict[str, Any]:
    from graphmem.stores.embedded import EmbeddedStore

    with tempfile.TemporaryDirectory(prefix="graphmem-hybrid-") as tmp:
        store = EmbeddedStore.open(Path(tmp) / "store")
        try:
            load_s = _load(store, data, NAMESPACE, args.quiet)
            store.wait_for_index(600)
            t0 = time.perf_counter()
            store.recall_text(NAMESPACE, data.query_texts[0], 1)
            build_s = time.perf_counter() - t0
            cases = graphmem_cases(store, data, NAMESPACE, args.k1)
            timed = common.time_interleaved(cases, args.queries, args.warmup)
        finally:
            store.close()
    return {"load_s": round(load_s, 1), "index_build_s": round(build_s, 3), "cases": timed}


def run_neo4j(data: Dataset, args: argparse.Namespace) -> dict[str, Any]:
    import uuid

    from neo4j_graphrag.retrievers import HybridRetriever

    from graphmem.stores.neo4j import Neo4jStore, cypher

    settings = common.neo4j_settings()
    if settings is None:
        raise SystemExit("set GRAPHMEM_NEO4J_URI (and _USER/_PASSWORD) to time Neo4j")
    store = Neo4jStore.from_uri(
        settings.uri, settings.user, settings.password, database=settings.database
    )
    n = len(data.texts)
    namespace = f"bench-hybrid-{n}" if args.keep else f"bench-{uuid.uuid4().hex[:10]}"
    try:
        store.setup(common.DIM)
        store.check_dimension(common.DIM)
        held = sum(1 for _ in store.iter_nodes(namespace)) if args.keep else 0
        # --keep: a namespace loaded by an earlier run (the same seeded corpus) is timed again.
        load_s = _load(store, data, namespace, args.quiet) if held != n else 0.0
        store.driver.execute_query("CALL db.awaitIndexes(600)", database_=settings.database)
        counted, _, _ = store.driver.execute_query(
            "MATCH (m:Memory) RETURN count(m) AS n", database_=settings.database
        )
        versions, _, _ = store.driver.execute_query(
            "CALL dbms.components() YIELD versions RETURN versions[0] AS v",
            database_=settings.database,
        )
        cases = graphmem_cases(store, data, namespace, args.k1)
        retriever = HybridRetriever(
            store.driver,
            cypher.VECTOR_INDEX,
            cypher.FULLTEXT_INDEX,
            neo4j_database=settings.database,
        )
        cases["neo4j-graphrag HybridRetriever"] = lambda i: retriever.get_search_results(
            query_text=data.query_texts[i], query_vector=data.queries[i].tolist(), top_k=args.k1
        )
        timed = common.time_interleaved(cases, args.queries, args.warmup)
    finally:
        try:
            if not args.keep:
                with store.driver.session(database=settings.database) as session:
                    session.run(
                        "MATCH (m:Memory {namespace: $ns}) "
                        "CALL (m) { DETACH DELETE m } IN TRANSACTIONS OF 5000 ROWS",
                        ns=namespace,
                    ).consume()
        finally:
            store.close()
    return {
        "server": str(versions[0]["v"]),
        "load_s": round(load_s, 1),
        "database_memories": int(counted[0]["n"]),
        "cases": timed,
    }


def render(result: dict[str, Any]) -> str:
    lines = [
        "# Hybrid recall: phase A cost, vector only vs vector + full text",
        "",
        common.machine_markdown(result["machine"]),
        f"- k1 = {result['k1']}, {result['queries']} timed queries after {result['warmup']} "
        "warm-up, interleaved; command: `python -m bench.speed_hybrid "
        + " ".join(result["argv"])
        + "`",
        "",
    ]
    rows = []
    for run in result["runs"]:
        cases = run["cases"]
        base = cases.get("vector only (today)", {}).get("p95_ms")
        for name, stats in cases.items():
            ratio = "" if not base else f"{stats['p95_ms'] / base:.2f}×"
            rows.append(
                [
                    run["store"] + (f" {run['server']}" if run.get("server") else ""),
                    run["n"],
                    name,
                    stats["p50_ms"],
                    stats["p95_ms"],
                    ratio,
                ]
            )
    lines.append(
        common.markdown_table(
            ["store", "memories", "path", "p50 ms", "p95 ms", "p95 / vector only"], rows
        )
    )
    extra = [
        f"- {r['store']} at {r['n']}: load {r['load_s']} s"
        + (" (loaded by an earlier run)" if r["load_s"] == 0 else "")
        + (
            f", {r['database_memories']} memories in the database"
            if "database_memories" in r
            else ""
        )
        + (f", keyword index built in {r['index_build_s']} s" if "index_build_s" in r else "")
        + (
            ", load average at its end " + " / ".join(str(x) for x in r["load_avg_end"])
            if "load_avg_end" in r
            else ""
        )
        for r in result["runs"]
    ]
    return "\n".join([*lines, "", *extra])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.speed_hybrid", description=__doc__)
    parser.add_argument("--sizes", default="10000", help="comma list of corpus sizes")
    parser.add_argument("--stores", default="embedded", help="comma list: embedded, neo4j")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--k1", type=int, default=10)
    parser.add_argument("--out", type=Path, default=common.RESULTS_DIR)
    parser.add_argument("--prefix", default="speed_hybrid")
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument(
        "--keep",
        action="store_true",
        help="Neo4j: load into namespace bench-hybrid-N unless it holds the corpus already, "
        "and leave it there for the next run (a 100k load takes many minutes)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    result: dict[str, Any] = {
        "machine": common.machine_info(),
        "k1": args.k1,
        "queries": args.queries,
        "warmup": args.warmup,
        "argv": list(argv if argv is not None else sys.argv[1:]),
        "runs": [],
    }
    for n in (int(x) for x in args.sizes.split(",")):
        data = make_dataset(n, args.queries + args.warmup)
        for name in args.stores.split(","):
            run = run_embedded(data, args) if name == "embedded" else run_neo4j(data, args)
            load_end = [round(x, 2) for x in os.getloadavg()]
            result["runs"].append({"store": name, "n": n, **run, "load_avg_end": load_end})
            # Written as each condition finishes, so a long run keeps what it measured.
            common.write_results(args.out, f"{args.prefix}_results", result, render(result))
            print(render(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
