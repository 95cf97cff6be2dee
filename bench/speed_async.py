"""Async throughput on Neo4j: many concurrent searches on one event loop, by three paths.

    GRAPHMEM_NEO4J_URI=bolt://127.0.0.1:7687 GRAPHMEM_NEO4J_PASSWORD=… python -m bench.speed_async
    … python -m bench.speed_async --n 10000 --queries 240 --concurrency 1,8,32 --rounds 3

Method. One process, one Neo4j server, one data set: ``--n`` LangGraph items (short texts drawn
from a fixed vocabulary, seeded) put through :class:`GraphMemoryStore` into ``--namespaces``
LangGraph namespaces (so recall filters one namespace out of the shared vector index), embedded
with the 384-dim HashingEmbedder (cheap, so the numbers are about the store, not the model).
Then the same query list (texts, and their vectors for store-level recall) runs through:

- **sync, one thread**: ``store.search(...)`` / ``Neo4jStore.recall(...)`` in a plain loop;
- **C threads**: the same sync calls from ``C`` threads sharing the store (the LangGraph store
  has no lock of its own: each call opens its own driver session);
- **to_thread**: ``C`` coroutines on one event loop, each awaiting
  ``asyncio.to_thread(<the sync call>)`` — what ``GraphMemoryStore.abatch`` did before it had an
  async path (the default executor has ``min(32, cores + 4)`` threads);
- **async driver**: ``C`` coroutines on one event loop awaiting ``asearch`` (``abatch`` on
  :class:`~graphmem.stores.neo4j.async_store.AsyncNeo4jStore`) / ``AsyncNeo4jStore.recall``.

Two operations: ``asearch`` (the LangGraph store's query search: embed, recall ``2·limit``
candidates with their superseded flags and Q, two-phase re-rank) and ``recall`` (the store's
phase-A call alone, precomputed vectors). Each of ``--concurrency`` levels is timed for every
path in turn, ``--rounds`` times, round-robin so a busy machine's drift hits the paths alike;
a path's throughput is its queries divided by its wall time, the median over rounds. The first
query's results are checked equal across paths before timing. The data is deleted afterwards.
Writes ``bench/results/speed_async_neo4j-<server version>.md`` (and ``.json``) with the
machine, load average and command line.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import random
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from bench import common

log = logging.getLogger("bench.speed_async")

WORDS = tuple(
    " ".join(
        [
            "tea coffee green black oolong jasmine kettle cup leaf water boil steep brew morning",
            "evening garden rain sun cloud river stone bridge market bread cheese apple pear lemon",
            "honey spoon table window door lamp book page letter story song piano violin drum",
            "train ticket station city village road map north south east west blue red yellow",
            "quiet loud warm cold fresh old",
        ]
    ).split()
)

PATHS = ("sync, one thread", "C threads", "to_thread", "async driver")


def _text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 12)))


def _concurrency(text: str) -> list[int]:
    try:
        levels = [int(x) for x in text.split(",") if x]
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"comma-separated integers: {e}") from e
    if not levels or min(levels) < 1:
        raise argparse.ArgumentTypeError("concurrency levels must be positive")
    return levels


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--n", type=int, default=10_000, help="LangGraph items stored")
    parser.add_argument("--namespaces", type=int, default=20, help="LangGraph namespaces")
    parser.add_argument("--queries", type=int, default=240, help="queries per path and level")
    parser.add_argument(
        "--concurrency",
        type=_concurrency,
        default=[1, 8, 32],
        help="threads or coroutines (C), comma-separated",
    )
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds (median reported)")
    parser.add_argument("--limit", type=int, default=5, help="results per search")
    parser.add_argument("--seed", type=int, default=0, help="seed of texts and queries")
    parser.add_argument("--keep", action="store_true", help="leave the items in the database")
    parser.add_argument(
        "--out", type=Path, default=common.RESULTS_DIR, help="folder for the result files"
    )


# ---- the run --------------------------------------------------------------------------------


def run(args: argparse.Namespace, command: str) -> dict[str, Any]:
    from graphmem.embedding import HashingEmbedder
    from graphmem.integrations.langgraph_store import GraphMemoryStore
    from graphmem.memory import GraphMemory
    from graphmem.models import MemoryKind
    from graphmem.stores.neo4j import Neo4jStore

    settings = common.neo4j_settings()
    if settings is None:
        raise SystemExit("set GRAPHMEM_NEO4J_URI (and _PASSWORD) to the Neo4j to benchmark")
    machine = common.machine_info()
    store = Neo4jStore.from_uri(
        settings.uri, settings.user, settings.password, database=settings.database
    )
    root = f"bench-async-{uuid.uuid4().hex[:8]}"
    try:
        store.setup(common.DIM)
        store.check_dimension(common.DIM)
        embedder = HashingEmbedder(common.DIM)
        lg = GraphMemoryStore(GraphMemory(store, embedder=embedder), root=root)
        rng = random.Random(args.seed)
        users = [("users", f"u{i}") for i in range(args.namespaces)]

        t0 = time.perf_counter()
        from langgraph.store.base import PutOp

        ops = [
            PutOp(users[i % len(users)], f"item{i}", {"text": _text(rng), "i": i})
            for i in range(args.n)
        ]
        for start in range(0, len(ops), 1000):
            lg.batch(ops[start : start + 1000])
        store.driver.execute_query("CALL db.awaitIndexes(600)", database_=settings.database)
        load_s = time.perf_counter() - t0
        log.warning("loaded %d items in %.1f s", args.n, load_s)

        queries = [(users[rng.randrange(len(users))], _text(rng)) for _ in range(args.queries)]
        graph_ns = [lg.graph_namespace(ns) for ns, _ in queries]
        vectors = [embedder.embed([q])[0].tolist() for _, q in queries]
        k = 2 * args.limit  # what a search with this limit recalls (recall_factor 2)
        kinds = [MemoryKind.NOTE]

        def search(i: int) -> object:
            ns, q = queries[i]
            return [(h.key, h.score) for h in lg.search(ns, query=q, limit=args.limit)]

        async def asearch(i: int) -> object:
            ns, q = queries[i]
            return [(h.key, h.score) for h in await lg.asearch(ns, query=q, limit=args.limit)]

        def recall(i: int) -> object:
            return store.recall(graph_ns[i], vectors[i], k, kinds=kinds)

        async def main() -> dict[str, Any]:
            astore = await lg.async_store()
            assert astore is not None

            async def arecall(i: int) -> object:
                return await astore.recall(graph_ns[i], vectors[i], k, kinds=kinds)

            ops_under_test = {"asearch": (search, asearch), "recall": (recall, arecall)}
            for name, (sync_call, async_call) in ops_under_test.items():
                first = [sync_call(0), await asyncio.to_thread(sync_call, 0), await async_call(0)]
                assert first[0] == first[1] == first[2], f"{name}: the paths disagree"
            mode = store._index_mode(common.DIM)
            rows = []
            for name, (sync_call, async_call) in ops_under_test.items():
                for level in args.concurrency:
                    rows.append(await _measure(name, level, sync_call, async_call, args))
            await lg.aclose()
            return {"rows": rows, "recall_mode": mode}

        measured = asyncio.run(main())
        version = _server_version(store)
    finally:
        if not args.keep:
            _drop(store, root)
        store.close()
    return {
        "machine": machine,
        "load_avg_end": [round(x, 2) for x in os.getloadavg()],
        "command": command,
        "neo4j": version,
        "n": args.n,
        "namespaces": args.namespaces,
        "queries": args.queries,
        "rounds": args.rounds,
        "limit": args.limit,
        "load_s": round(load_s, 1),
        **measured,
    }


async def _measure(
    name: str,
    level: int,
    sync_call: Callable[[int], object],
    async_call: Callable[[int], Awaitable[object]],
    args: argparse.Namespace,
) -> dict[str, Any]:
    """Queries per second of each path at one concurrency, median over rounds."""
    n = args.queries
    timings: dict[str, list[float]] = {path: [] for path in PATHS}
    for _ in range(args.rounds):
        t0 = time.perf_counter()
        for i in range(n):
            sync_call(i)
        timings["sync, one thread"].append(time.perf_counter() - t0)
        timings["C threads"].append(await asyncio.to_thread(_threads, level, n, sync_call))
        timings["to_thread"].append(
            await _pool(level, n, lambda i: asyncio.to_thread(sync_call, i))
        )
        timings["async driver"].append(await _pool(level, n, async_call))
    qps = {path: n / statistics.median(spent) for path, spent in timings.items()}
    log.warning(
        "%s C=%d: %s",
        name,
        level,
        ", ".join(f"{path} {rate:.0f} q/s" for path, rate in qps.items()),
    )
    return {"op": name, "concurrency": level, "qps": qps, "seconds": timings}


def _threads(level: int, n: int, call: Callable[[int], object]) -> float:
    """Wall time of ``n`` calls made by ``level`` threads taking the next index in turn."""
    todo = iter(range(n))
    lock = threading.Lock()

    def worker() -> None:
        while True:
            with lock:
                i = next(todo, None)
            if i is None:
                return
            call(i)

    workers = [threading.Thread(target=worker) for _ in range(level)]
    t0 = time.perf_counter()
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    return time.perf_counter() - t0


async def _pool(level: int, n: int, call: Callable[[int], Awaitable[object]]) -> float:
    """Wall time of ``n`` calls made by ``level`` coroutines taking the next index in turn."""
    todo = iter(range(n))

    async def worker() -> None:
        for i in todo:
            await call(i)

    t0 = time.perf_counter()
    await asyncio.gather(*[worker() for _ in range(level)])
    return time.perf_counter() - t0


def _server_version(store: Any) -> str:
    records, _, _ = store.driver.execute_query(
        "CALL dbms.components() YIELD name, versions RETURN versions[0] AS v"
    )
    return str(records[0]["v"])


def _drop(store: Any, root: str) -> None:
    for ns in store.namespaces():
        if ns.startswith(root + "/"):
            ids = [m.id for m in store.iter_nodes(ns)]
            for start in range(0, len(ids), 1000):
                store.delete(ns, ids[start : start + 1000])


# ---- the report -----------------------------------------------------------------------------


def render_markdown(result: dict[str, Any]) -> str:
    rows = []
    for row in result["rows"]:
        qps = row["qps"]
        rows.append(
            [
                row["op"],
                row["concurrency"],
                qps["sync, one thread"],
                qps["C threads"],
                f"{qps['C threads'] / qps['sync, one thread']:.2f}×",
                qps["to_thread"],
                qps["async driver"],
                f"{qps['async driver'] / qps['to_thread']:.2f}×",
                f"{qps['async driver'] / qps['sync, one thread']:.2f}×",
            ]
        )
    table = common.markdown_table(
        [
            "operation",
            "C",
            "sync one thread (q/s)",
            "C threads (q/s)",
            "threads / one thread",
            "to_thread (q/s)",
            "async driver (q/s)",
            "async / to_thread",
            "async / sync",
        ],
        rows,
    )
    end = " / ".join(str(x) for x in result["load_avg_end"])
    return "\n".join(
        [
            "# Async throughput on Neo4j",
            "",
            f"{result['n']:,} LangGraph items in {result['namespaces']} namespaces on Neo4j "
            f"{result['neo4j']} (recall mode: {result['recall_mode']}); {result['queries']} "
            f"queries per path and level, limit {result['limit']}, median of "
            f"{result['rounds']} rounds; HashingEmbedder (384-dim). Method: the module "
            "docstring of `bench/speed_async.py`.",
            "",
            table,
            "",
            f"- command: `{result['command']}`",
            common.machine_markdown(result["machine"]),
            f"- load average at end (1/5/15 min): {end}",
            f"- loading the items took {result['load_s']} s",
        ]
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.speed_async",
        description=" ".join(__doc__.split("\n\n")[0].split()) if __doc__ else None,
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    add_arguments(parser)
    given = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(given)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    result = run(args, " ".join(["python -m bench.speed_async", *given]))
    markdown = render_markdown(result)
    common.write_results(args.out, f"speed_async_neo4j-{result['neo4j']}", result, markdown)
    print(markdown)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
