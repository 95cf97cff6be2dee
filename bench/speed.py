"""Speed and scale: retrieval latency, ingest throughput and memory of graphmem's two stores,
side by side with baselines in the same process, on the same data and the same vectors.

    python -m bench.speed                          # 1k / 10k / 100k; Neo4j too if configured
    python -m bench.speed --sizes 1000,10000 --no-neo4j
    GRAPHMEM_NEO4J_URI=bolt://127.0.0.1:7687 python -m bench.speed --profile
    GRAPHMEM_NEO4J_URI=… python -m bench.speed --scale 1m [--n 50000]   # see bench/speed_scale.py

Systems: numpy brute-force top-k; graphmem's embedded store (phase-A ``recall`` and two-phase
``retrieve``); LangGraph's ``InMemoryStore`` with a vector index; on Neo4j graphmem's store
(recall and two-phase) and neo4j-graphrag's ``VectorRetriever`` over the same vector index.

Data: Procedures with 384-dim unit vectors drawn around N/100 topic centres (a clustered
synthetic corpus, generated before any timing); the stores are grown 1k → 10k → 100k, so each
is filled once and the ingest rate of a step is the rate of adding that step's memories to what
is there. Queries are drawn around the same centres. "Excluded" latency feeds precomputed query
vectors (a lookup embedder for the APIs that take text); "included" latency embeds the query
text with MiniLM first, as a user would (the corpus vectors are synthetic, so those rankings are
meaningless, but the work is the same). Systems compared with each other are timed
round-robin, query by query, so a busy machine's drift hits them alike: numpy with the embedded
store, LangGraph alone, Neo4j with neo4j-graphrag; the groups run one after the other.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import logging
import pstats
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench import common, speed_scale
from bench.common import Case
from bench.speed_report import check_targets, plot, render_markdown
from bench.speed_systems import (
    BATCH,
    Dataset,
    EmbeddedSystem,
    LangGraphSystem,
    Neo4jSystem,
    NumpyBrute,
    Settings,
    System,
    make_dataset,
    procedures,
)

log = logging.getLogger("bench.speed")

# ---- the run --------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> dict[str, Any]:
    sizes = sorted(set(args.sizes))
    settings = Settings(k1=args.k1, k2=args.k2, lam=args.lam, budget_s=args.budget_s)
    result: dict[str, Any] = {
        "machine": common.machine_info(),
        "settings": {
            "sizes": sizes,
            "queries": args.queries,
            "included_queries": args.included_queries,
            "k1": args.k1,
            "k2": args.k2,
            "lam": args.lam,
            "budget_s_per_case": args.budget_s,
            "settle_s": args.settle_s,
            "batch": BATCH,
            "dimension": common.DIM,
        },
        "latency": [],
        "included": [],
        "ingest": [],
        "e2e_ingest": [],
        "blas_threads": [],
        "load_before_timing": [],
        "notes": [],
    }
    started = time.perf_counter()
    neo = None if args.no_neo4j else common.neo4j_settings()
    if neo is None:
        result["notes"].append("Neo4j not benchmarked (GRAPHMEM_NEO4J_URI unset or --no-neo4j).")
    data = make_dataset(sizes[-1], args.queries, args.seed)
    with tempfile.TemporaryDirectory(prefix="graphmem-bench-") as tmp:
        systems: list[System] = [NumpyBrute(), EmbeddedSystem(Path(tmp) / "embedded", data)]
        if not args.no_langgraph:
            systems.append(LangGraphSystem(data))
        if neo is not None:
            neo_system = Neo4jSystem(neo, data)
            systems.append(neo_system)
            if neo_system.foreign_memories:
                result["notes"].append(
                    f"The Neo4j database held {neo_system.foreign_memories} other memories."
                )
        try:
            done = 0
            for n in sizes:
                _grow(systems, data, done, n, result, args)
                _settle(args.settle_s, n, result)
                _latency(systems, data, settings, n, result, args)
                done = n
            if args.blas_sweep:
                _blas_sweep(systems, data, settings, sizes[-1], result, args)
            if args.profile:
                _profile(systems, data, settings, sizes[-1], args)
        finally:
            for system in systems:
                system.close()
        if args.e2e_n:
            _e2e_ingest(data, args, neo, Path(tmp), result)
    gc.unfreeze()
    result["runtime_s"] = round(time.perf_counter() - started, 1)
    result["machine"]["load_avg_at_end"] = [round(x, 2) for x in _loadavg()]
    return result


def _settle(seconds: float, n: int, result: dict[str, Any]) -> None:
    """Let background work from the ingest finish before timing, and keep the GC fair.

    Neo4j merges index segments for a while after a large ingest; and the corpora held in
    Python (LangGraph keeps 384 floats per item in lists) would make every cyclic collection
    walk them, charging a pause to whichever case happens to allocate next. Freezing moves them
    out of the collector's sight; objects made while timing are still collected.
    """
    time.sleep(seconds)
    gc.collect()
    gc.freeze()
    result["load_before_timing"].append({"n": n, "load_avg_1_5_15": list(_loadavg())})


def _loadavg() -> tuple[float, float, float]:
    import os

    return os.getloadavg()


def _grow(
    systems: Sequence[System],
    data: Dataset,
    lo: int,
    hi: int,
    result: dict[str, Any],
    args: argparse.Namespace,
) -> None:
    for system in systems:
        log.info("adding memories %d..%d to %s", lo, hi, system.label)
        with common.PeakRSS() as rss:
            seconds = system.add(data, lo, hi)
        row = {"system": system.label, "n": hi, "added": hi - lo, "peak_rss_mib": rss.peak_mib}
        if system.ingest_label is not None:
            row["seconds"] = round(seconds, 3)
            row["per_s"] = round((hi - lo) / seconds, 1) if seconds > 0 else None
        result["ingest"].append(row)


def _latency(
    systems: Sequence[System],
    data: Dataset,
    settings: Settings,
    n: int,
    result: dict[str, Any],
    args: argparse.Namespace,
) -> None:
    Make = Callable[[Any], list[tuple[str, Callable[[int], object]]]]
    kinds_of_run: tuple[tuple[str, int, Make], ...] = (
        ("latency", args.queries, lambda s: s.cases(data, settings)),
        ("included", args.included_queries, lambda s: s.included(data, settings)),
    )
    for key, count, make in kinds_of_run:
        if count <= 0:
            continue
        # Systems that are compared with each other share a round robin; groups run one after
        # the other, so a Neo4j server's background work or LangGraph's seconds-long scans at
        # 100k never land inside another group's timings.
        groups: dict[str, list[Case]] = {}
        for system in systems:
            groups.setdefault(system.group, []).extend(
                Case(name, fn, max_queries=count, budget_s=settings.budget_s)
                for name, fn in make(system)
            )
        for group, cases in groups.items():
            bar = common.progress_bar(count, f"{key} @ {n:,}: {group}", enabled=not args.quiet)
            with bar, warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)  # neo4j-graphrag's, per call
                common.time_round_robin(cases, count, warmup=args.warmup, progress=bar)
            for case in cases:
                row = {"n": n, "case": case.name, "group": group}
                result[key].append({**row, **common.percentiles(case.samples_ms)})


def _blas_sweep(
    systems: Sequence[System],
    data: Dataset,
    settings: Settings,
    n: int,
    result: dict[str, Any],
    args: argparse.Namespace,
) -> None:
    """Latency with the BLAS as configured vs limited to one thread, in alternating chunks."""
    from threadpoolctl import ThreadpoolController

    controller = ThreadpoolController()
    picked = [s for s in systems if isinstance(s, NumpyBrute | EmbeddedSystem)]
    as_is = [Case(n_, f, args.queries) for s in picked for n_, f in s.cases(data, settings)]
    single = [Case(n_, f, args.queries) for s in picked for n_, f in s.cases(data, settings)]
    chunk = 20
    bar = common.progress_bar(args.queries, f"BLAS threads @ {n:,}", enabled=not args.quiet)
    with bar:
        for start in range(0, args.queries, chunk):
            stop = min(args.queries, start + chunk)
            for group, limit in ((as_is, None), (single, 1)):
                if limit is None:
                    _run_chunk(group, start, stop)
                else:
                    with controller.limit(limits=limit, user_api="blas"):
                        _run_chunk(group, start, stop)
            bar.update(stop - start)
    threads = sorted({str(lib.get("num_threads")) for lib in common.blas_info()})
    for label, group in ((f"as configured ({'/'.join(threads)})", as_is), ("1 thread", single)):
        for case in group:
            result["blas_threads"].append(
                {"n": n, "blas": label, "case": case.name, **common.percentiles(case.samples_ms)}
            )
    if args.included_queries > 0:
        _torch_threads(data, args, result)


def _torch_threads(data: Dataset, args: argparse.Namespace, result: dict[str, Any]) -> None:
    """MiniLM query embedding alone with torch's default threads vs one thread."""
    import torch

    model = common.minilm()
    default = torch.get_num_threads()
    count = args.included_queries
    groups = {default: Case("MiniLM query embedding", lambda i: None, count)}
    groups[1] = Case("MiniLM query embedding", lambda i: None, count)
    try:
        for start in range(0, count, 10):
            for threads, case in groups.items():
                torch.set_num_threads(threads)
                for i in range(start, min(count, start + 10)):
                    t0 = time.perf_counter()
                    model.embed([data.query_texts[i]])
                    case.samples_ms.append((time.perf_counter() - t0) * 1000)
    finally:
        torch.set_num_threads(default)
    for threads, case in groups.items():
        label = f"torch {threads} thread{'s' if threads > 1 else ''}"
        if threads == default:
            label += " (default)"
        result["blas_threads"].append(
            {"n": 0, "blas": label, "case": case.name, **common.percentiles(case.samples_ms)}
        )


def _run_chunk(cases: Sequence[Case], start: int, stop: int) -> None:
    for i in range(start, stop):
        for case in cases:
            t0 = time.perf_counter()
            case.fn(i)
            case.samples_ms.append((time.perf_counter() - t0) * 1000)


def _profile(
    systems: Sequence[System],
    data: Dataset,
    settings: Settings,
    n: int,
    args: argparse.Namespace,
) -> None:
    """cProfile of each graphmem two-phase case at the largest N, written next to the results."""
    out: list[str] = []
    for system in systems:
        for name, fn in system.cases(data, settings):
            if "two-phase" not in name:
                continue
            profiler = cProfile.Profile()
            profiler.enable()
            for i in range(min(args.queries, 100)):
                fn(i)
            profiler.disable()
            text = io.StringIO()
            pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(25)
            out.append(f"==== {name} at N={n:,} (100 queries, sorted by own time) ====\n")
            out.append(text.getvalue())
    path = args.out / f"{args.prefix}_profile.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(out), encoding="utf-8")


def _e2e_ingest(
    data: Dataset,
    args: argparse.Namespace,
    neo: common.Neo4jSettings | None,
    tmp: Path,
    result: dict[str, Any],
) -> None:
    """Ingest with MiniLM embedding included: batched, and one ``add_note`` at a time."""
    from graphmem import GraphMemory
    from graphmem.stores.embedded import EmbeddedStore

    model = common.minilm()
    result["e2e_load_at_start"] = [round(x, 2) for x in _loadavg()]
    n = min(args.e2e_n, len(data.texts))
    texts = data.texts[:n]
    notes = texts[: min(n, args.e2e_notes)]

    def record(system: str, how: str, count: int, seconds: float) -> None:
        result["e2e_ingest"].append(
            {
                "system": system,
                "how": how,
                "n": count,
                "seconds": round(seconds, 3),
                "per_s": round(count / seconds, 1),
            }
        )

    t0 = time.perf_counter()
    NumpyBrute().matrix = model.embed(texts)
    record("numpy brute-force top-k", f"MiniLM embed (batch {BATCH}) + array", n, _since(t0))

    if not args.no_langgraph:
        from langgraph.store.base import PutOp
        from langgraph.store.memory import InMemoryStore

        def embed(batch: Sequence[str]) -> list[list[float]]:
            return [[float(x) for x in row] for row in model.embed(list(batch))]

        lg = InMemoryStore(index={"dims": common.DIM, "embed": embed, "fields": ["task"]})
        t0 = time.perf_counter()
        for start in range(0, n, BATCH):
            lg.batch(
                [
                    PutOp(("e2e",), f"m{i}", {"task": texts[i]})
                    for i in range(start, min(n, start + BATCH))
                ]
            )
        record("langgraph InMemoryStore", f"batch put of {BATCH} (MiniLM embed fn)", n, _since(t0))

    holders: list[tuple[str, Any]] = [("graphmem embedded", EmbeddedStore.open(tmp / "e2e"))]
    if neo is not None:
        holders.append(("graphmem neo4j", Neo4jSystem(neo, data)))
    for label, holder in holders:
        neo_system = holder if isinstance(holder, Neo4jSystem) else None
        store = holder.store if neo_system is not None else holder
        namespace = neo_system.namespace if neo_system is not None else "e2e"
        if neo_system is not None:
            neo_system.extra_namespaces.append(namespace + "-notes")
        try:
            mem = GraphMemory(store, embedder=model)
            t0 = time.perf_counter()
            for start in range(0, n, BATCH):
                chunk = texts[start : start + BATCH]
                vectors = mem.embed_many(chunk)
                store.upsert(procedures(data, namespace, start, start + len(chunk), vectors))
            record(label, f"embed_many + upsert (batch {BATCH})", n, _since(t0))
            t0 = time.perf_counter()
            for text in notes:
                mem.add_note(namespace + "-notes", text)
            record(label, "add_note one at a time (offline fields)", len(notes), _since(t0))
        finally:
            holder.close()


def _since(t0: float) -> float:
    return time.perf_counter() - t0


# ---- command line ---------------------------------------------------------------------------


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(x.replace("_", "").replace("k", "000")) for x in text.split(",") if x]
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"sizes are comma-separated integers: {e}") from e
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError("sizes must be positive")
    return sizes


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--sizes",
        type=_sizes,
        default=[1000, 10_000, 100_000],
        help="store sizes, comma-separated; each grows the stores to that many memories",
    )
    parser.add_argument("--queries", type=int, default=200, help="queries per case and size")
    parser.add_argument(
        "--included-queries", type=int, default=40, help="queries timed with MiniLM embedding"
    )
    parser.add_argument("--warmup", type=int, default=5, help="untimed queries before timing")
    parser.add_argument("--k1", type=int, default=5, help="phase-A recall size (candidates)")
    parser.add_argument("--k2", type=int, default=3, help="memories two-phase retrieval returns")
    parser.add_argument("--lam", type=float, default=0.5, help="λ of the two-phase score")
    parser.add_argument("--budget-s", type=float, default=20.0, help="time cap per case and size")
    parser.add_argument(
        "--settle-s", type=float, default=10.0, help="pause after each ingest step before timing"
    )
    parser.add_argument("--e2e-n", type=int, default=1000, help="memories for MiniLM ingest")
    parser.add_argument("--e2e-notes", type=int, default=200, help="add_note calls timed")
    parser.add_argument("--no-neo4j", action="store_true", help="skip Neo4j even if configured")
    parser.add_argument(
        "--no-langgraph", action="store_true", help="skip LangGraph's InMemoryStore baseline"
    )
    parser.add_argument(
        "--no-blas-sweep",
        dest="blas_sweep",
        action="store_false",
        help="skip timing the embedded store at several BLAS/torch thread counts",
    )
    parser.add_argument("--profile", action="store_true", help="cProfile the two-phase cases")
    parser.add_argument("--no-plots", dest="plots", action="store_false", help="write no PNGs")
    parser.add_argument(
        "--out", type=Path, default=common.RESULTS_DIR, help="folder for the result files"
    )
    parser.add_argument("--prefix", default="speed", help="result file names start with this")
    parser.add_argument("--seed", type=int, default=0, help="seed of the synthetic corpus")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    parser.add_argument(
        "--scale",
        choices=sorted(speed_scale.SCALES),
        help="instead: load this many memories into Neo4j (see bench/speed_scale.py)",
    )
    speed_scale.add_arguments(parser)


def execute(args: argparse.Namespace) -> dict[str, Any]:
    """Run, then write the JSON, Markdown and plots; returns the result."""
    result = run(args)
    result["targets"] = check_targets(result)
    markdown = render_markdown(result)
    files = common.write_results(args.out, f"{args.prefix}_results", result, markdown)
    if args.plots:
        files += plot(result, args.out, args.prefix)
    result["files"] = [str(p) for p in files]
    return result


class _ValueDefaults(argparse.ArgumentDefaultsHelpFormatter):
    """Show ``(default: …)`` for options that take a value, not for on/off flags."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.nargs == 0:
            return action.help
        return super()._get_help_string(action)


def main(argv: Sequence[str] | None = None, *, prog: str = "python -m bench.speed") -> int:
    parser = argparse.ArgumentParser(
        prog=prog,
        # The docstring's first paragraph, whole (its first line alone ends mid-sentence).
        description=" ".join(__doc__.split("\n\n")[0].split()) if __doc__ else None,
        formatter_class=_ValueDefaults,
    )
    add_arguments(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if args.scale:
        speed_scale.execute(args)
        return 0
    result = execute(args)
    print(render_markdown(result))
    print("\nwrote " + ", ".join(result["files"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
