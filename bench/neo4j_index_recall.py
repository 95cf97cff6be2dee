"""How wide a beam Neo4j's vector index needs: recall@k against exact search, and latency.

    GRAPHMEM_NEO4J_URI=… python -m bench.neo4j_index_recall [--widths 5,10,20,50] [--whole-index]

Neo4j's HNSW search is as wide as the number of candidates it is asked for, so a search for
exactly k misses some of the true top k, more of them the larger the index. On a database that
``python -m bench.speed --scale 1m --keep`` filled (100 namespaces of synthetic clustered
vectors), this times ``Neo4jStore.recall`` with the index asked for each width of
``--widths`` (round-robin, query by query) in a large, a middling and a small namespace, and
compares the ids it returns with the exact top k of the namespace's memories (numpy over their
embeddings, read from the database). With ``--whole-index`` it does the same for an unscoped
search of the whole index (graphrag's retriever at its default asks for k): what one tenant
holding every memory would see.

Queries are drawn with ``--query-seed``; the width recall uses (``SEARCH_CANDIDATES_MIN``) was
chosen on seed 101, and the committed table is of seed 202.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench import common

KINDS = ("Note", "Procedure", "Tip", "Task")

WHOLE_INDEX = """
CYPHER 25
MATCH (m:Memory)
  SEARCH m IN (VECTOR INDEX memory_embedding FOR $vector LIMIT $width) SCORE AS score
RETURN elementId(m) AS id ORDER BY score DESC LIMIT $k
"""


def _exact_top(matrix: np.ndarray, ids: Sequence[str], query: np.ndarray, k: int) -> set[str]:
    sims = matrix @ (query / np.linalg.norm(query))
    return {ids[i] for i in np.argsort(-sims, kind="stable")[:k]}


def _read(driver: Any, query: str, **params: Any) -> tuple[list[str], np.ndarray]:
    """Ids and unit float32 embeddings of what ``query`` returns (``id``, ``e``)."""
    ids: list[str] = []
    rows: list[np.ndarray] = []
    with driver.session() as session:
        for record in session.run(query, params):
            ids.append(record["id"])
            rows.append(np.asarray(record["e"], dtype=np.float32))
    if not rows:
        raise SystemExit(
            f"no memories to measure ({params or 'the whole index'}): fill the database first "
            "with `python -m bench.speed --scale 1m --keep`"
        )
    matrix = np.stack(rows)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    return ids, matrix


def _measure(
    searches: dict[int, Callable[[np.ndarray], set[str]]],
    queries: np.ndarray,
    exact: list[set[str]],
    k: int,
) -> list[dict[str, Any]]:
    """Each width's latency and recall@k, its searches timed in turn query by query."""
    times: dict[int, list[float]] = {w: [] for w in searches}
    hits: dict[int, int] = dict.fromkeys(searches, 0)
    for query, truth in zip(queries, exact, strict=True):
        for width, search in searches.items():
            t0 = time.perf_counter()
            found = search(query)
            times[width].append((time.perf_counter() - t0) * 1e3)
            hits[width] += len(found & truth)
    rows = []
    for width in searches:
        samples = sorted(times[width])
        rows.append(
            {
                "width": width,
                "p50_ms": round(statistics.median(samples), 2),
                "p95_ms": round(samples[int(0.95 * (len(samples) - 1))], 2),
                "recall_at_k": round(hits[width] / (k * len(queries)), 3),
            }
        )
    return rows


def run(args: argparse.Namespace) -> dict[str, Any]:
    from graphmem.stores.neo4j import Neo4jStore
    from graphmem.stores.neo4j import recall as neo4j_recall

    settings = common.neo4j_settings()
    if settings is None:
        raise SystemExit("set GRAPHMEM_NEO4J_URI (and _PASSWORD)")
    store = Neo4jStore.from_uri(
        settings.uri, settings.user, settings.password, database=settings.database
    )
    driver = store.driver
    widths = [int(w) for w in args.widths.split(",")]
    rng = np.random.default_rng(args.query_seed)
    from bench.speed_scale import Corpus
    from graphmem.models import MemoryKind

    kinds = [MemoryKind(k) for k in KINDS]

    corpus = Corpus(args.n, args.seed)
    queries = corpus.vectors(rng, args.queries)
    result: dict[str, Any] = {
        "machine": common.machine_info(),
        "settings": vars(args)
        | {
            "default_width": neo4j_recall.search_candidates(args.k, None, args.n),
            "small_database": neo4j_recall.SMALL_DATABASE,
        },
        "load_before": list(os.getloadavg()),
        "namespaces": [],
    }
    chosen = store.search_width

    def recall_at(width: int) -> Callable[[np.ndarray], set[str]]:
        def search(query: np.ndarray) -> set[str]:
            store.search_width = width
            try:
                hits = store.recall(namespace, query.tolist(), args.k, kinds=kinds)
            finally:
                store.search_width = chosen
            return {h.memory.id for h in hits}

        return search

    for namespace in args.namespaces.split(","):
        ids, matrix = _read(
            driver,
            "MATCH (m:Memory {namespace: $ns}) WHERE m.kind IN $kinds "
            "AND m.embedding IS NOT NULL AND NOT coalesce(m.obsolete, false) "
            "RETURN m.id AS id, m.embedding AS e",
            ns=namespace,
            kinds=list(KINDS),
        )
        exact = [_exact_top(matrix, ids, q, args.k) for q in queries]
        rows = _measure({w: recall_at(w) for w in widths}, queries, exact, args.k)
        result["namespaces"].append({"namespace": namespace, "memories": len(ids), "rows": rows})
        if not args.quiet:
            print(f"  {namespace}: {rows}", flush=True)

    if args.whole_index:
        ids, matrix = _read(
            driver,
            "MATCH (m:Memory) WHERE m.embedding IS NOT NULL RETURN elementId(m) AS id, "
            "m.embedding AS e",
        )
        exact = [_exact_top(matrix, ids, q, args.k) for q in queries]
        del matrix

        def unscoped(width: int) -> Callable[[np.ndarray], set[str]]:
            def search(query: np.ndarray) -> set[str]:
                records, _, _ = driver.execute_query(
                    WHOLE_INDEX, vector=query.tolist(), width=width, k=args.k
                )
                return {r["id"] for r in records}

            return search

        rows = _measure({w: unscoped(w) for w in widths}, queries, exact, args.k)
        result["namespaces"].append(
            {"namespace": "(whole index, unscoped)", "memories": len(ids), "rows": rows}
        )
    result["load_after"] = list(os.getloadavg())
    store.close()
    return result


def render(result: dict[str, Any]) -> str:
    s = result["settings"]
    scale = {1_000_000: "1m", 100_000: "100k", 10_000: "10k"}.get(s["n"], f"1m --n {s['n']}")
    lines = [
        "# Neo4j vector index: beam width, recall and latency",
        "",
        f"Made by `python -m bench.neo4j_index_recall --widths {s['widths']} --query-seed "
        f"{s['query_seed']}{' --whole-index' if s['whole_index'] else ''}"
        f"{'' if s['n'] == 1_000_000 else ' --n ' + str(s['n'])}` on the database "
        f"`python -m bench.speed --scale {scale} --keep` filled ({s['n']:,} memories). "
        f"k = {s['k']}, {s['queries']} queries; recall's default width for a database of "
        f"this size is {s['default_width']} (k up to {s.get('small_database', 0):,} memories).",
        common.machine_markdown(result["machine"]),
        f"- load before {[round(x, 2) for x in result['load_before']]}, after "
        f"{[round(x, 2) for x in result['load_after']]}",
        "",
        "| search | memories searched | width | p50 ms | p95 ms | recall@k |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for ns in result["namespaces"]:
        for row in ns["rows"]:
            lines.append(
                f"| {ns['namespace']} | {ns['memories']:,} | {row['width']} | {row['p50_ms']:.2f} "
                f"| {row['p95_ms']:.2f} | {row['recall_at_k']:.3f} |"
            )
    lines += [
        "",
        "A namespace's row: `Neo4jStore.recall` of its live Notes, Procedures, Tips and Tasks "
        "(filtered inside the index), the index asked for *width* candidates; recall@k is the "
        "share of the exact top k (numpy over the same memories' embeddings) it returned. The "
        "whole index's row: one unscoped `SEARCH` of every memory (any namespace), the server's "
        "top k of *width* candidates, against the exact top k of all of them.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.neo4j_index_recall", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--widths", default="5,10,20,30,50", help="candidates asked, per search")
    parser.add_argument("--namespaces", default="scale0-ns000,scale0-ns009,scale0-ns049")
    parser.add_argument("--whole-index", action="store_true", help="also the unscoped search")
    parser.add_argument("--n", type=int, default=1_000_000, help="memories of the --scale run")
    parser.add_argument("--seed", type=int, default=0, help="the --scale run's corpus seed")
    parser.add_argument("--query-seed", type=int, default=202, help="seed of the queries")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--out", default=str(common.RESULTS_DIR))
    parser.add_argument("--prefix", default="neo4j_index_recall")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    result = run(args)
    markdown = render(result)
    files = common.write_results(Path(args.out), args.prefix, result, markdown)
    print(markdown)
    print("wrote " + ", ".join(str(p) for p in files))


if __name__ == "__main__":
    main()
