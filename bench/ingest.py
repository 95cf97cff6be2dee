"""Batch ingest against one ``add_note`` a turn: notes per second on each store.

    python -m bench.ingest                              # embedded store, MiniLM, 600 turns
    GRAPHMEM_NEO4J_URI=bolt://127.0.0.1:7687 GRAPHMEM_NEO4J_USER=neo4j \\
    GRAPHMEM_NEO4J_PASSWORD=... python -m bench.ingest --stores embedded,neo4j

The turns are a generated conversation's (``bench.conversations``, seed 0), as a user storing
chat history meets them: one note a turn. Each round stores the same ``--turns`` turns into a
fresh namespace twice, once with one ``GraphMemory.add_note`` call a turn and once with
``GraphMemory.add_notes`` in batches of ``--batch``; the two ways alternate round by round (so
load from other work falls on both), and the figure is the ratio of their median rates. The
load average is recorded at start and end. Nothing is downloaded.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from bench import common
from bench.conversations import generate


def turns(n: int) -> list[str]:
    """``n`` distinct turns of generated conversations (seeds 0, 1, ... as needed)."""
    out: dict[str, None] = {}
    seed = 0
    while len(out) < n:
        sessions, _ = generate(seed=seed)
        out.update(
            dict.fromkeys(f"{t['role']}: {t['content']}" for s in sessions for t in s["turns"])
        )
        seed += 1
    return list(out)[:n]


def open_store(name: str, tmp: Path) -> Any:
    if name == "embedded":
        from graphmem.stores.embedded import EmbeddedStore

        return EmbeddedStore.open(tmp / "ingest-store")
    settings = common.neo4j_settings()
    if settings is None:
        raise SystemExit("--stores neo4j needs GRAPHMEM_NEO4J_URI (and user, password)")
    from graphmem.stores.neo4j import Neo4jStore

    store = Neo4jStore.from_uri(
        settings.uri, user=settings.user, password=settings.password, database=settings.database
    )
    store.setup(384)
    return store


def drop(store: Any, namespace: str) -> None:
    ids = [m.id for m in store.iter_nodes(namespace)]
    for start in range(0, len(ids), 1000):
        store.delete(namespace, ids[start : start + 1000])
    store.record_embedder(namespace, None, replace=True)


def run(store_name: str, texts: list[str], batch: int, rounds: int, tmp: Path) -> dict[str, Any]:
    from graphmem import GraphMemory

    store = open_store(store_name, tmp)
    mem = GraphMemory(store, embedder=common.minilm())
    rates: dict[str, list[float]] = {"add_note": [], "add_notes": []}
    try:
        for r in range(rounds):
            for way in ("add_note", "add_notes") if r % 2 == 0 else ("add_notes", "add_note"):
                ns = f"bench-ingest-{os.getpid()}-{r}-{way.replace('_', '-')}"
                start = time.perf_counter()
                if way == "add_note":
                    for text in texts:
                        mem.add_note(ns, text)
                else:
                    for i in range(0, len(texts), batch):
                        mem.add_notes(ns, texts[i : i + batch])
                elapsed = time.perf_counter() - start
                assert sum(1 for _ in store.iter_nodes(ns)) == len(texts)
                rates[way].append(len(texts) / elapsed)
                print(
                    f"{store_name} round {r} {way}: {rates[way][-1]:.0f} notes/s", file=sys.stderr
                )
                drop(store, ns)
    finally:
        store.close()
    one, many = statistics.median(rates["add_note"]), statistics.median(rates["add_notes"])
    return {
        "store": store_name,
        "rates": rates,
        "add_note": one,
        "add_notes": many,
        "ratio": many / one,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stores", default="embedded", help="embedded,neo4j")
    parser.add_argument("--turns", type=int, default=600)
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    parser.add_argument("--name", default="ingest")
    args = parser.parse_args(argv)
    import tempfile

    texts = turns(args.turns)
    load_start = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.stores.split(","):
            rows.append(run(name, texts, args.batch, args.rounds, Path(tmp)))
    load_end = os.getloadavg()
    table = common.markdown_table(
        [
            "store",
            "notes",
            "add_note notes/s (median)",
            f"add_notes ({args.batch} a call) notes/s",
            "ratio",
        ],
        [
            [r["store"], len(texts), r["add_note"], r["add_notes"], f"{r['ratio']:.1f}×"]
            for r in rows
        ],
    )
    md = (
        f"# Batch ingest: add_notes against one add_note a turn\n\n"
        f"Command: `python -m bench.ingest --stores {args.stores} --turns {args.turns} "
        f"--batch {args.batch} --rounds {args.rounds}`; MiniLM; {args.rounds} rounds, the two "
        f"ways alternating; load average {load_start[0]:.1f} at start, "
        f"{load_end[0]:.1f} at end.\n\n"
        f"{table}\n\n{common.machine_markdown(common.machine_info())}\n"
    )
    data = {
        "rows": rows,
        "load": [load_start, load_end],
        "args": vars(args) | {"out": str(args.out)},
    }
    for path in common.write_results(args.out, args.name, data, md):
        print(path, file=sys.stderr)
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
