"""The embedded store's two durabilities side by side: the hand-made journal (files, CRC lines,
fsync per write) and SQLite (WAL, one transaction per write, ``synchronous=FULL``; NORMAL shown
for reference). Same memories, same calls, timed interleaved (the order alternating per call).

    python -m bench.durability --memories 2000 --calls 300

Timed per call: an acknowledged write (one 384-d note), a credit (``update_utility`` of one
memory), a read (``get_many`` of one id: the per-call catch-up with other processes) and a
recall (k = 10, exact scan). Then per store: opening it with every memory in the log (replay),
compacting, opening the compacted store, and its size on disk. Crash, corruption and full-disk
behaviour are tests, not timings: tests/test_embedded_sqlite.py, test_embedded_crash.py,
reliability/test_faults.py run them on both.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from bench import common

NS = "bench"
DIM = 384
STORES = ("journal", "sqlite", "sqlite-normal")


def _note(i: int, rng: np.random.Generator) -> Any:
    from graphmem.models import Note

    vector = rng.standard_normal(DIM).astype(np.float32)
    text = f"memory {i}: " + " ".join(f"w{int(x)}" for x in rng.integers(0, 500, 30))
    return Note(id=f"m{i}", namespace=NS, content=text, embedding=vector.tolist())


def _open(kind: str, path: Path, **kw: Any) -> Any:
    from graphmem.stores.embedded import EmbeddedStore, sqlite_log

    sqlite_log.SYNCHRONOUS = "NORMAL" if kind == "sqlite-normal" else "FULL"
    try:
        durability: Literal["journal", "sqlite"] = "journal" if kind == "journal" else "sqlite"
        return EmbeddedStore.open(path, durability=durability, **kw)
    finally:
        sqlite_log.SYNCHRONOUS = "FULL"


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def run(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    rng = np.random.default_rng(7)
    n = args.memories
    preload = [_note(i, rng) for i in range(n)]
    extra = [_note(n + i, rng) for i in range(args.calls + args.warmup)]
    queries = rng.standard_normal((args.calls + args.warmup, DIM)).astype(np.float32)
    big = 1 << 40  # no compaction while timing: the log holds every write
    stores = {k: _open(k, root / k, compact_bytes=big) for k in STORES}
    load_s = {}
    for kind, store in stores.items():
        t0 = time.perf_counter()
        for lo in range(0, n, 100):
            store.upsert(preload[lo : lo + 100])
        load_s[kind] = time.perf_counter() - t0

    def cases(op: str) -> dict[str, Any]:
        def make(store: Any) -> Any:
            if op == "write":
                return lambda i: store.upsert([extra[i]])
            if op == "credit":
                return lambda i: store.update_utility(NS, [f"m{(i * 7919) % n}"], 1.0, 0.1)
            if op == "read":
                return lambda i: store.get_many(NS, [f"m{(i * 104729) % n}"])
            return lambda i: store.recall(NS, queries[i].tolist(), 10)

        return {kind: make(store) for kind, store in stores.items()}

    timed = {
        op: common.time_interleaved(cases(op), args.calls, args.warmup)
        for op in ("write", "credit", "read", "recall")
    }
    for store in stores.values():
        store.close()
    sizes_log = {k: _size(root / k) for k in STORES}

    def reopen() -> dict[str, float]:
        """Each store opened ``--opens`` times, the order alternating; the best of each."""
        best = dict.fromkeys(STORES, float("inf"))
        for r in range(args.opens):
            for kind in STORES if r % 2 == 0 else STORES[::-1]:
                t0 = time.perf_counter()
                _open(kind, root / kind).close()
                best[kind] = min(best[kind], time.perf_counter() - t0)
        return best

    opens_log = reopen()
    compact_s = {}
    for kind in STORES:
        store = _open(kind, root / kind)
        t0 = time.perf_counter()
        store.compact()
        compact_s[kind] = time.perf_counter() - t0
        store.close()
    opens_snapshot = reopen()
    return {
        "memories": n,
        "calls": args.calls,
        "load_s": load_s,
        "per_call": timed,
        "open_log_s": opens_log,
        "compact_s": compact_s,
        "open_snapshot_s": opens_snapshot,
        "bytes_log": sizes_log,
        "bytes_snapshot": {k: _size(root / k) for k in STORES},
    }


def render(result: dict[str, Any]) -> str:
    r = result["run"]
    base = "journal"
    rows = []
    for op, by in r["per_call"].items():
        rows.append(
            [f"{op} p50 ms", *(by[k]["p50_ms"] for k in STORES), *_ratios(by, "p50_ms", base)]
        )
        rows.append(
            [f"{op} p95 ms", *(by[k]["p95_ms"] for k in STORES), *_ratios(by, "p95_ms", base)]
        )
    for key, label in (
        ("load_s", "bulk load s (batches of 100)"),
        ("open_log_s", "open, all in the log, s"),
        ("compact_s", "compact s"),
        ("open_snapshot_s", "open, compacted, s"),
        ("bytes_log", "bytes on disk, log"),
        ("bytes_snapshot", "bytes on disk, compacted"),
    ):
        by = r[key]
        rows.append([label, *(by[k] for k in STORES), *(by[k] / by[base] for k in STORES[1:])])
    headers = ["", *STORES, *(f"{k} / journal" for k in STORES[1:])]
    return "\n".join(
        [
            f"# Embedded durability: journal vs SQLite ({r['memories']} memories, "
            f"{r['calls']} timed calls each)",
            "",
            common.markdown_table(headers, rows),
            "",
            f"- load average at start {result['load_avg_start']}, at end {result['load_avg_end']}"
            " (a shared machine: compare the ratios, timed interleaved)",
            common.machine_markdown(result["machine"]),
        ]
    )


def _ratios(by: dict[str, Any], key: str, base: str) -> list[float]:
    return [by[k][key] / by[base][key] for k in STORES[1:]]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=2000)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--opens", type=int, default=4, help="opens timed per store (best)")
    parser.add_argument("--dir", type=Path, default=None, help="where the stores go (a disk)")
    parser.add_argument("--out", type=Path, default=common.RESULTS_DIR)
    parser.add_argument("--prefix", default="durability")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="durability-", dir=args.dir))
    try:
        result: dict[str, Any] = {
            "machine": common.machine_info(),
            "load_avg_start": [round(x, 2) for x in os.getloadavg()],
        }
        result["run"] = run(args, root)
        result["load_avg_end"] = [round(x, 2) for x in os.getloadavg()]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    markdown = render(result)
    common.write_results(args.out, args.prefix, result, markdown)
    print(markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
