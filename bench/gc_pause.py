"""``python -m bench.gc_pause``: what one full garbage collection costs with N memories held.

CPython's full collection visits every object its collector tracks and stops every thread while
it does. This holds N procedures (``bench.speed``'s corpus, precomputed vectors) three ways in
turn, in one process, and times ``gc.collect()`` in thread CPU time (the median of five):

- nothing held (the imported modules alone);
- the embedded store with its defaults (memories and edges packed: ``stores/embedded/packed.py``);
- the same memories as pydantic models in a networkx ``MultiDiGraph``, one node attribute dict
  each: how the embedded store held them before it packed them (networkx must be installed).

It also records, in thread CPU time, every full collection that ran while each case was being
built, in batches of 1,000: what a full collection costs while memories are being added, when
the newest ones are still tracked (their own objects and, unless the store keeps them apart,
every container that holds them).
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.speed_systems import make_dataset, procedures

RESULTS = Path(__file__).parent / "results"


def full_collection_ms(repeat: int = 5) -> float:
    """The median thread CPU time of a full collection, ms."""
    gc.collect()
    times = []
    for _ in range(repeat):
        t0 = time.thread_time()
        gc.collect()
        times.append((time.thread_time() - t0) * 1000)
    return statistics.median(times)


class FullCollections:
    """The thread CPU time and the wall time (ms) of each full collection that runs inside the
    ``with`` block."""

    def __init__(self) -> None:
        self.cpu_ms: list[float] = []
        self.wall_ms: list[float] = []
        self._started = (0.0, 0.0)

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._started = (time.thread_time(), time.perf_counter())
        else:
            self.cpu_ms.append((time.thread_time() - self._started[0]) * 1000)
            self.wall_ms.append((time.perf_counter() - self._started[1]) * 1000)

    def __enter__(self) -> FullCollections:
        gc.callbacks.append(self._on_gc)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._on_gc)


def measure(label: str, hold: Callable[[], Any]) -> dict[str, Any]:
    with FullCollections() as during:
        held = hold()
    gc.collect()
    gc.collect()  # a second pass untracks what the first left one level deep
    row = {
        "case": label,
        "tracked": len(gc.get_objects()),
        "gc_ms": full_collection_ms(),
        "during_ms": during.cpu_ms,
    }
    del held
    gc.collect()
    return row


def run(n: int, batch: int = 1000) -> list[dict[str, Any]]:
    from graphmem.stores.embedded import EmbeddedStore

    data = make_dataset(n, 1, seed=n)

    def store() -> Any:
        s = EmbeddedStore(None, ann_threshold=None)
        for lo in range(0, n, batch):
            s.upsert(procedures(data, "bench", lo, min(n, lo + batch)))
        return s

    def models_in_networkx() -> Any:
        import networkx as nx

        graph = nx.MultiDiGraph()
        for lo in range(0, n, batch):
            for memory in procedures(data, "bench", lo, min(n, lo + batch)):
                graph.add_node(memory.id, m=memory.model_copy(update={"embedding": None}))
        return graph

    rows = [measure("nothing held (imported modules)", lambda: None)]
    rows.append(measure("embedded store (packed)", store))
    if importlib.util.find_spec("networkx") is not None:
        rows.append(measure("pydantic models in networkx (before)", models_in_networkx))
    return rows


def report(n: int, rows: list[dict[str, Any]], load: tuple[float, float]) -> str:
    lines = [
        "# One full garbage collection with memories held",
        "",
        f"Made by `python -m bench.gc_pause --n {n}`. {n:,} procedures (`bench.speed`'s corpus); "
        "thread CPU time of `gc.collect()`, median of five, each case built, measured and "
        f"dropped in turn in one process. Machine: {platform.machine()}, {os.cpu_count()} CPUs, "
        f"load average {load[0]:.1f} at the start and {load[1]:.1f} at the end.",
        "",
        "| held | objects the collector tracks | full collection, CPU ms "
        "| full collections while it was built: count, longest / p90 CPU ms |",
        "|---|---:|---:|---:|",
    ]
    for r in rows:
        during = sorted(r["during_ms"])
        p90 = during[int(0.9 * (len(during) - 1))] if during else 0.0
        longest = during[-1] if during else 0.0
        lines.append(
            f"| {r['case']} | {r['tracked']:,} | {r['gc_ms']:.1f} "
            f"| {len(during)}, {longest:.1f} / {p90:.1f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="memories held")
    parser.add_argument("--out", type=Path, default=RESULTS / "gc_pause.md")
    args = parser.parse_args(argv)
    start = os.getloadavg()[0]
    rows = run(args.n)
    text = report(args.n, rows, (start, os.getloadavg()[0]))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
