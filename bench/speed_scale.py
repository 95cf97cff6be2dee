"""``python -m bench.speed --scale 1m``: a million memories in Neo4j.

Loads N memories (default 1,000,000; ``--n`` for a smaller run) with precomputed vectors into an
empty Neo4j database, spread over 100 namespaces of Zipf-like sizes (the largest tenant holds
about a fifth) and a mix of kinds (40 % Notes, 25 % Procedures, 15 % Tips, 10 % Tasks, all
embedded, and 10 % Steps without embeddings). Vectors are unit rows drawn around N/100 topic
centres, as in ``bench.speed``.

Reports the ingest rate (``--writers`` threads, each upserting batches of 1,000 memories of one
namespace, with the uniqueness constraint but no vector index), the vector index's build time
(``graphmem schema apply`` after the load, until it is online), the store's size on disk (when
``--data-dir`` names the instance directory) and two-phase p50/p95 beside neo4j-graphrag's
VectorRetriever over the same index, timed round-robin, on queries of a large, a middling and a
small namespace.

The database must hold no memories (the vector index is dropped for the load). The memories are
deleted afterwards unless ``--keep``.
"""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import neo4j
import numpy as np

from bench import common
from bench.common import DIM, Case
from bench.speed_systems import BATCH, task_text

log = logging.getLogger("bench.speed")

SCALES = {"1m": 1_000_000, "100k": 100_000, "10k": 10_000}
NAMESPACES = 100
KIND_MIX = (("Note", 0.40), ("Procedure", 0.25), ("Tip", 0.15), ("Task", 0.10), ("Step", 0.10))
QUERIED = (0, 9, 49)
INDEX_WAIT_S = 7200.0  # namespace ranks queried: large, middling, small


def namespace_sizes(n: int, count: int = NAMESPACES) -> list[int]:
    """Zipf-like (exponent 1.1) sizes of ``count`` namespaces summing to n, largest first."""
    weights = np.array([1 / (r + 1) ** 1.1 for r in range(count)])
    sizes = np.floor(weights / weights.sum() * n).astype(int)
    sizes[0] += n - int(sizes.sum())
    return [int(s) for s in sizes]


class Corpus:
    """Deterministic batches of memories: vectors around topic centres, a kind per row."""

    def __init__(self, n: int, seed: int) -> None:
        self.n = n
        self.seed = seed
        rng = np.random.default_rng(seed)
        self.centres = rng.standard_normal((max(8, n // 100), DIM), dtype=np.float32)
        self.sizes = namespace_sizes(n)
        self.run = f"scale{seed}"

    def namespace(self, rank: int) -> str:
        return f"{self.run}-ns{rank:03d}"

    def vectors(self, rng: np.random.Generator, count: int) -> np.ndarray:
        topic = rng.integers(0, len(self.centres), count)
        x = self.centres[topic] + 0.8 * rng.standard_normal((count, DIM), dtype=np.float32)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        return x

    def batches(self) -> Iterator[tuple[int, int, int]]:
        """(namespace rank, first row, row count) of every upsert batch."""
        for rank, size in enumerate(self.sizes):
            for lo in range(0, size, BATCH):
                yield rank, lo, min(BATCH, size - lo)

    def memories(self, rank: int, lo: int, count: int) -> list[Any]:
        import random

        from graphmem.models import Granularity, Note, Procedure, Step, Task, Tip

        rng = np.random.default_rng((self.seed, rank, lo))
        words = random.Random(f"{self.seed}-{rank}-{lo}")
        vecs = self.vectors(rng, count)
        kinds = rng.choice(len(KIND_MIX), size=count, p=[w for _, w in KIND_MIX])
        q = rng.random(count)
        ns = self.namespace(rank)
        out: list[Any] = []
        for j in range(count):
            text = task_text(words)
            common_fields = {"namespace": ns, "id": f"m{lo + j}", "q": float(q[j])}
            emb = vecs[j].tolist()
            kind = KIND_MIX[int(kinds[j])][0]
            if kind == "Note":
                out.append(Note(**common_fields, content=text, embedding=emb))
            elif kind == "Procedure":
                out.append(
                    Procedure(
                        **common_fields,
                        task_text=text,
                        key=text,
                        granularity=Granularity.SCRIPT,
                        script=f"1. {text}",
                        embedding=emb,
                    )
                )
            elif kind == "Tip":
                out.append(Tip(**common_fields, text=text, embedding=emb))
            elif kind == "Task":
                out.append(Task(**common_fields, text=text, key=text, embedding=emb))
            else:
                out.append(Step(**common_fields, procedure_id=f"m{lo}", index=j, action=text))
        return out


def _ingest(store: Any, corpus: Corpus, args: argparse.Namespace, result: dict[str, Any]) -> None:
    """Upsert the corpus with ``args.writers`` threads; the rate and load go into ``result``."""
    n = corpus.n
    done = 0
    lock = threading.Lock()
    started = time.perf_counter()

    def load(batch: tuple[int, int, int]) -> None:
        nonlocal done
        memories = corpus.memories(*batch)
        store.upsert(memories)
        with lock:
            done += len(memories)
            if not args.quiet and done // 50_000 != (done - len(memories)) // 50_000:
                rate = done / (time.perf_counter() - started)
                print(f"  {done:,} memories, {rate:,.0f}/s", flush=True)

    with ThreadPoolExecutor(args.writers) as pool:
        for _ in pool.map(load, corpus.batches()):
            pass
    ingest_s = time.perf_counter() - started
    result["ingest"] = {"memories": n, "seconds": round(ingest_s, 1), "per_s": round(n / ingest_s)}
    result["load_after_ingest"] = list(os.getloadavg())


def run(args: argparse.Namespace) -> dict[str, Any]:
    from graphmem import GraphMemory
    from graphmem.config import RetrievalConfig
    from graphmem.stores.neo4j import Neo4jStore, cypher
    from graphmem.stores.neo4j.recall import ship_args
    from graphmem.stores.neo4j.rows import filter_key

    settings = common.neo4j_settings()
    if settings is None:
        raise SystemExit("--scale needs a Neo4j: set GRAPHMEM_NEO4J_URI (and _PASSWORD)")
    n = args.n if args.n else SCALES[args.scale]
    corpus = Corpus(n, args.seed)
    result: dict[str, Any] = {
        "machine": common.machine_info(),
        "settings": {
            "n": n,
            "namespaces": NAMESPACES,
            "largest_namespace": corpus.sizes[0],
            "kind_mix": dict(KIND_MIX),
            "writers": args.writers,
            "batch": BATCH,
            "queries": args.queries,
            "k1": args.k1,
            "k2": args.k2,
            "lam": args.lam,
        },
        "latency": [],
    }
    store = Neo4jStore.from_uri(
        settings.uri, settings.user, settings.password, database=settings.database
    )
    driver = store.driver
    db = settings.database

    def query(text: str, **params: Any) -> list[dict[str, Any]]:
        records, _, _ = driver.execute_query(text, params, database_=db)
        return [r.data() for r in records]

    store.setup(DIM, wait=INDEX_WAIT_S)
    held = query("MATCH (m:Memory) RETURN count(m) AS n")[0]["n"]
    result["server"] = query(cypher.SERVER_VERSION)
    if args.reuse:
        if held != n:
            raise SystemExit(f"--reuse needs the {n:,} memories of an earlier run, found {held:,}")
        result["ingest"] = None
        result["load_after_ingest"] = None
    elif held:
        raise SystemExit("--scale needs a database without memories (it drops the vector index)")
    else:
        query(f"DROP INDEX {cypher.VECTOR_INDEX} IF EXISTS")
        _ingest(store, corpus, args, result)

    # ---- index build --------------------------------------------------------------------------
    t0 = time.perf_counter()
    store.setup(DIM, wait=INDEX_WAIT_S)
    result["index_build_s"] = None if args.reuse else round(time.perf_counter() - t0, 1)
    if args.data_dir:
        size = subprocess.run(
            ["du", "-sb", str(args.data_dir)], capture_output=True, text=True, check=False
        ).stdout.split()
        result["store_bytes"] = int(size[0]) if size else None

    # ---- latency ------------------------------------------------------------------------------
    from neo4j_graphrag.retrievers import VectorRetriever

    fresh = Neo4jStore.from_uri(
        settings.uri, settings.user, settings.password, database=settings.database
    )
    rng = np.random.default_rng(args.seed + 1)
    queries = corpus.vectors(rng, args.queries)
    probe = corpus.vectors(np.random.default_rng(0), 1)[0]
    namespaces = [corpus.namespace(r) for r in QUERIED if r < NAMESPACES]

    class Lookup:
        name = "precomputed"
        dimension = DIM

        def embed(self, texts: Sequence[str]) -> np.ndarray:
            # A text that is no "q:<row>" key is the store's embedder-identity probe: a fixed
            # vector drawn once, so the record stays the same.
            return np.stack(
                [
                    queries[int(row)] if row.isdigit() else probe
                    for row in (t.partition(":")[2] for t in texts)
                ]
            )

    mem = GraphMemory(fresh, embedder=Lookup())
    cfg = RetrievalConfig(
        k1=args.k1, k2=args.k2, lam=args.lam, kinds=("Note", "Procedure", "Tip", "Task")
    )
    notes = RetrievalConfig(k1=args.k1, k2=args.k2, lam=args.lam, kinds=("Note",))
    retriever = VectorRetriever(fresh.driver, cypher.VECTOR_INDEX, neo4j_database=db)
    # graphrag 1.22 reads an index's filter properties from `vector.filterable_properties` in
    # its options, which 2026.09's SHOW VECTOR INDEXES does not report (they are among its
    # properties), so it would answer a filtered search by an exact scan of every Memory. Told
    # them, it filters inside the index with SEARCH, as graphmem does: its best path.
    retriever._filterable_properties = [cypher.FILTER_KEY]
    # The bare statement is run without the store's session settings, so the server's notice
    # that no SUPERSEDES relationship exists yet would be logged for every query.
    logging.getLogger("neo4j.notifications").setLevel(logging.ERROR)
    # graphmem asks the index for more candidates than k1 in a database of more than
    # SMALL_DATABASE memories (an HNSW search for exactly k misses some of the true top k
    # there), counted by its first search; graphrag is timed at its default beam and at that one.
    fresh.recall(namespaces[0], queries[0].tolist(), args.k1)
    beam = {"candidates": fresh.search_beam(args.k1), **ship_args(args.k1, DIM)}
    ratio = -(-beam["candidates"] // args.k1)

    def graphrag(beam_ratio: int, filters: dict[str, str] | None = None) -> Callable[[int], object]:
        return lambda i: retriever.get_search_results(
            query_vector=queries[i].tolist(),
            top_k=args.k1,
            effective_search_ratio=beam_ratio,
            filters=filters,
        )

    def bare_recall(key: str) -> Callable[[int], object]:
        """graphmem's recall statement alone, on the driver, for the memories under ``key``."""
        return lambda i: driver.execute_query(
            cypher.RECALL_SEARCH,
            {"vector": queries[i].tolist(), "keys": [key], **beam},
            database_=db,
            routing_=neo4j.RoutingControl.READ,
        )

    result["settings"]["beam"] = beam["candidates"]
    result["load_before_timing"] = list(os.getloadavg())
    for ns in namespaces:
        note_key = filter_key(ns, "Note", False)
        cases = [
            Case(
                f"graphmem neo4j: two-phase λ={args.lam} ({ns}, 4 kinds)",
                _two_phase(mem, ns, cfg),
                max_queries=args.queries,
            ),
            Case(
                "neo4j-graphrag VectorRetriever, unfiltered (any namespace), its default beam",
                graphrag(1),  # graphrag's default ratio: a beam of k1
                max_queries=args.queries,
            ),
            Case(
                "neo4j-graphrag VectorRetriever, unfiltered (any namespace), graphmem's beam",
                graphrag(ratio),
                max_queries=args.queries,
            ),
            Case(
                f"graphmem neo4j: two-phase λ={args.lam} ({ns}, Notes)",
                _two_phase(mem, ns, notes),
                max_queries=args.queries,
            ),
            Case(
                "neo4j-graphrag VectorRetriever, filtered to the same Notes, graphmem's beam",
                graphrag(ratio, {cypher.FILTER_KEY: note_key}),
                max_queries=args.queries,
            ),
            Case(
                "graphmem's recall statement alone (same Notes; driver, no store)",
                bare_recall(note_key),
                max_queries=args.queries,
            ),
        ]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            common.time_round_robin(cases, args.queries, warmup=args.warmup)
        ns_size = corpus.sizes[int(ns.rpartition("ns")[2])]
        for case in cases:
            row = {"namespace": ns, "namespace_size": ns_size, "case": case.name}
            result["latency"].append({**row, **common.percentiles(case.samples_ms)})
    result["load_at_end"] = list(os.getloadavg())

    if not args.keep:
        with driver.session(database=db) as session:  # IN TRANSACTIONS needs an implicit one
            for rank in range(NAMESPACES):
                session.run(
                    "MATCH (m:Memory {namespace: $ns}) "
                    "CALL (m) { DETACH DELETE m } IN TRANSACTIONS OF 10000 ROWS",
                    ns=corpus.namespace(rank),
                ).consume()
                # and the embedder each namespace recorded: a run at another size would
                # otherwise meet another corpus's query probe and refuse it
                store.record_embedder(corpus.namespace(rank), None, replace=True)
    fresh.close()
    store.close()
    return result


def _two_phase(mem: Any, namespace: str, cfg: Any) -> Callable[[int], object]:
    return lambda i: mem.retrieve(namespace, f"q:{i}", cfg)


def render(result: dict[str, Any]) -> str:
    s = result["settings"]
    m = result["machine"]
    lines = [
        "# graphmem at scale: Neo4j",
        "",
        f"- {s['n']:,} memories in {s['namespaces']} namespaces "
        f"(largest {s['largest_namespace']:,}), kinds {s['kind_mix']}; "
        f"k1={s['k1']}, k2={s['k2']}, λ={s['lam']}",
        common.machine_markdown(m),
        _ingest_line(result, s["writers"]),
        "- vector index build: "
        + (
            f"{result['index_build_s']} s"
            if result["index_build_s"] is not None
            else "not measured"
        ),
    ]
    if result.get("store_bytes"):
        lines.append(f"- store size on disk: {result['store_bytes'] / 2**30:.2f} GiB")
    lines += [
        f"- load before timing {[round(x, 2) for x in result['load_before_timing']]}, at end "
        f"{[round(x, 2) for x in result['load_at_end']]}",
        "",
        "| case | namespace size | p50 ms | p95 ms | queries |",
        "|---|---|---|---|---|",
    ]
    for row in result["latency"]:
        lines.append(
            f"| {row['case']} | {row['namespace_size']:,} | {row['p50_ms']:.2f} | "
            f"{row['p95_ms']:.2f} | {row['samples']} |"
        )
    lines += ["", *_ratio_lines(result["latency"]), "", CASES_NOTE]
    return "\n".join(lines) + "\n"


CASES_NOTE = (
    "Each namespace's cases were timed round-robin, query by query. graphmem's recall asks the "
    "index for more candidates than k1 (*beam*: an HNSW search for exactly k misses some of the "
    "true top k, `bench.neo4j_index_recall`); graphrag's retriever asks for k1 unless its "
    "`effective_search_ratio` widens the beam, so it is timed both ways. *4 kinds*: two-phase "
    "retrieval of the namespace's live Notes, Procedures, Tips and Tasks, beside graphrag's "
    "retriever asked for the k1 nearest memories of the whole index, any namespace or kind (the "
    "target's baseline: a cheaper question, whose answer a tenant could not use). *Notes*: "
    "two-phase retrieval of the namespace's live Notes, beside graphrag's retriever asked the "
    "same question with the same beam (`filters={filter_key: '<namespace>|Note|live'}`, run as "
    "an in-index filtered `SEARCH`: graphrag 1.22 misses the index's filter property on 2026.09 "
    "and is told it, else it would scan every Memory exactly), and graphmem's recall statement "
    "for it run bare on the driver (the server's share of a recall, with no store code around it)."
)


def _ratio_lines(latency: list[dict[str, Any]]) -> list[str]:
    """p95 ratios per namespace: graphmem to graphrag for the unscoped and the scoped question."""
    out = []
    for ns in dict.fromkeys(row["namespace"] for row in latency):
        rows = [row for row in latency if row["namespace"] == ns]
        if len(rows) < 6:
            continue
        four, default, wide, notes, filtered, bare = (row["p95_ms"] for row in rows[:6])
        out.append(
            f"- {ns} ({rows[0]['namespace_size']:,} memories), p95: 4 kinds / graphrag "
            f"unfiltered **{four / default:.2f}×** (its default beam), {four / wide:.2f}× "
            f"(graphmem's beam); Notes / graphrag filtered alike **{notes / filtered:.2f}×**; "
            f"recall statement alone / graphrag filtered {bare / filtered:.2f}×"
        )
    return out


def _ingest_line(result: dict[str, Any], writers: int) -> str:
    ingest = result["ingest"]
    if ingest is None:
        return "- ingest: not measured (--reuse: the memories of an earlier run)"
    return (
        f"- ingest: {ingest['per_s']:,}/s ({ingest['seconds']} s, {writers} writer threads, "
        f"no vector index); load after {[round(x, 2) for x in result['load_after_ingest']]}"
    )


def execute(args: argparse.Namespace) -> dict[str, Any]:
    result = run(args)
    markdown = render(result)
    files = common.write_results(args.out, f"{args.prefix}_scale_{args.scale}", result, markdown)
    result["files"] = [str(p) for p in files]
    print(markdown)
    print("wrote " + ", ".join(result["files"]))
    return result


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--n", type=int, default=0, help="--scale: memories (0: the scale's)")
    parser.add_argument("--writers", type=int, default=4, help="--scale: ingest threads")
    parser.add_argument("--data-dir", type=Path, help="--scale: Neo4j instance dir, for its size")
    parser.add_argument("--keep", action="store_true", help="--scale: keep the memories")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="--scale: time the memories an earlier run left (no ingest or index figures)",
    )
