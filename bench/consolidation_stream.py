"""The mixed TextWorldExpress stream with consolidation on and off (issue 45.2).

Plays :mod:`bench.learning_mixed`'s stream (same plan, explorers, credit by use) with a
graphmem condition twice: as the library ships it, and with ``MemoryConfig.consolidation``
enabled (look-alike procedures or notes merged on write, contradicted notes superseded;
:mod:`graphmem.ops.consolidation`). The games are paired, so the comparison is a paired sign
test per family. Tuning range only (:data:`bench.protocol.TUNING`): this decides whether
consolidation is on by default, and a held-out range is played once per such decision.

    python -m bench.consolidation_stream --items experiences --episodes 200 --handover 1
    python -m bench.consolidation_stream --items facts --episodes 200 --handover 5

Each condition's result is written as it finishes (a run cut short keeps what it made):
``bench/results/consolidation_stream_<items>_k<K>.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench import learning_mixed as lm
from bench.common import RESULTS_DIR, machine_info, machine_markdown, markdown_table
from bench.paired import compare
from bench.protocol import TUNING

log = logging.getLogger("bench.consolidation_stream")

VARIANTS: dict[str, dict[str, Any]] = {
    "off": {},
    "on": {"enabled": True},
    "on-exact": {"enabled": True, "step_match": "exact"},
    "on-t80": {"enabled": True, "task_similarity": 0.8},
}
"""Consolidation settings per variant (ConsolidationConfig fields)."""


@contextmanager
def consolidating(settings: dict[str, Any], made: list[Any]) -> Iterator[None]:
    """``learning_mixed.make_memory`` with graphmem memories made under ``settings`` (their
    GraphMemory's config gets that ConsolidationConfig); each memory made is kept in
    ``made`` so its store can be read after the stream."""
    from graphmem.config import ConsolidationConfig

    original = lm.make_memory

    def make(*args: Any, **kwargs: Any) -> Any:
        memory = original(*args, **kwargs)
        if isinstance(memory, lm.GraphmemMemory):
            cfg = memory.mem.config
            memory.mem.config = cfg.model_copy(
                update={"consolidation": ConsolidationConfig(**settings)}
            )
        made.append(memory)
        return memory

    lm.make_memory = make
    try:
        yield
    finally:
        lm.make_memory = original


def store_figures(memory: Any) -> dict[str, int]:
    """What consolidation did to a graphmem memory: versions it wrote, memories merged,
    contradicted notes, and the live retrievable items left."""
    if not isinstance(memory, lm.GraphmemMemory):
        return {}
    from graphmem.models import EdgeKind

    store, ns = memory.mem.store, memory.namespace
    nodes = list(store.iter_nodes(ns, kinds=list(memory.config.kinds)))
    superseded = [
        e for e in store.iter_edges(ns) if e.kind is EdgeKind.SUPERSEDES and "source" in e.props
    ]
    merges = [e for e in superseded if "reason" not in e.props]
    merged = len(merges)
    versions = {e.src for e in merges}
    contradicted = sum(1 for e in superseded if "reason" in e.props)
    live = [m for m in nodes if not m.obsolete and m.embedding is not None]
    return {
        "consolidated_versions": len(versions),
        "merged": merged,
        "contradicted": contradicted,
        "live_items": len(live),
        "max_uses": max((m.uses for m in live), default=0),
    }


def play(
    condition: str,
    variant: str,
    plan: Sequence[tuple[str, int]],
    args: argparse.Namespace,
    envs: dict[str, Any],
    embedder: Any,
) -> dict[str, Any]:
    from graphmem.models import seeded_ids

    made: list[Any] = []
    started = time.perf_counter()
    with consolidating(VARIANTS[variant], made), seeded_ids(0):
        run = lm.play_stream(
            lm.CONDITIONS[condition],
            plan,
            fold=TUNING.fold,
            budget=args.budget,
            handover=args.handover,
            embedder=embedder,
            envs=envs,
            items=args.items,
        )
    row = lm.summary_row(run, lm.FAMILIES, max(1, len(plan)))
    row.update(store_figures(made[0]) if made else {})
    row.update(
        {
            "variant": variant,
            "outcomes": [int(g.success) for g in run.games],
            "families": [g.family for g in run.games],
            "seconds": round(time.perf_counter() - started, 1),
        }
    )
    return row


def paired(rows: dict[str, dict[str, Any]], a: str, b: str) -> list[list[str]]:
    out = []
    fams = rows[a]["families"]
    for scope in ("all", "twc", "cookingworld", "coin", "mapreader"):
        keep = [i for i, f in enumerate(fams) if scope == "all" or f == scope]
        x = [rows[a]["outcomes"][i] for i in keep]
        y = [rows[b]["outcomes"][i] for i in keep]
        c = compare(x, y)
        out.append(
            [
                f"{a} vs {b}",
                scope,
                str(c.n),
                f"{100 * c.diff:+.1f}",
                f"{c.better}/{c.worse}",
                f"{c.p_sign:.3f}",
            ]
        )
    return out


def markdown(data: dict[str, Any]) -> str:
    rows = data["rows"]
    table = [
        [
            key,
            f"{100 * r['success']:.1f}%",
            *(f"{100 * r['by_family'][f]:.0f}%" for f in lm.FAMILIES),
            str(r.get("live_items", "")),
            str(r.get("consolidated_versions", "")),
            str(r.get("merged", "")),
            str(r.get("contradicted", "")),
            f"{r['uses_per_credited']:.2f}",
            str(r.get("max_uses", "")),
            f"{r['seconds_per_episode']:.2f}",
        ]
        for key, r in rows.items()
    ]
    pairs: list[list[str]] = []
    for key in rows:
        cond, _, variant = key.partition(" / ")
        base = f"{cond} / off"
        if variant != "off" and base in rows:
            pairs += paired(rows, key, base)
    s = data["setup"]
    return "\n".join(
        [
            f"# Consolidation on and off: mixed TextWorldExpress stream ({s['items']}, "
            f"K = {s['handover']}, tuning range)",
            "",
            f"Command: `{s['command']}`",
            "",
            machine_markdown(s["machine"]),
            f"- stream: {s['episodes']} games of {', '.join(lm.FAMILIES)} "
            f"({TUNING.fold} fold from seed {TUNING.start}: {TUNING.purpose}); budget "
            f"{s['budget']} steps; embedder {s['embedder']}",
            "- variants: "
            + "; ".join(f"`{k}` {v or 'library default'}" for k, v in VARIANTS.items()),
            "",
            markdown_table(
                [
                    "condition / consolidation",
                    "success",
                    *lm.FAMILIES,
                    "live items",
                    "merged versions",
                    "memories merged",
                    "notes contradicted",
                    "uses per credited",
                    "max uses",
                    "s/episode",
                ],
                table,
            ),
            "",
            "## Paired (same games), consolidation on minus off",
            "",
            markdown_table(["comparison", "games", "n", "Δ pp", "better/worse", "sign p"], pairs)
            if pairs
            else "(no pair finished yet)",
            "",
        ]
    )


def write(data: dict[str, Any], out: Path, name: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(data, indent=1, default=str) + "\n")
    (out / f"{name}.md").write_text(markdown(data))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.consolidation_stream")
    parser.add_argument("--items", choices=lm.ITEMS, default="experiences")
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--handover", type=int, default=1)
    parser.add_argument("--budget", type=int, default=30)
    parser.add_argument("--conditions", default="two-phase")
    parser.add_argument("--variants", default="off,on")
    parser.add_argument("--embedder", choices=["minilm", "hashing"], default="minilm")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    parser.add_argument("--tag", default="")
    args = parser.parse_args(argv)
    from bench.common import embedder_label, make_embedder

    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("graphmem").setLevel(logging.ERROR)
    logging.getLogger("py4j").setLevel(logging.CRITICAL)
    variants = args.variants.split(",")
    if bad := [v for v in variants if v not in VARIANTS]:
        raise SystemExit(f"unknown variant(s) {', '.join(bad)}; known: {', '.join(VARIANTS)}")
    plan = lm.mixed_plan(args.episodes, start=TUNING.start)
    name = f"consolidation_stream_{args.items}_k{args.handover}" + (
        f"_{args.tag}" if args.tag else ""
    )
    data: dict[str, Any] = {
        "setup": {
            "command": "python -m bench.consolidation_stream " + " ".join(sys.argv[1:]),
            "machine": machine_info(),
            "items": args.items,
            "handover": args.handover,
            "episodes": args.episodes,
            "budget": args.budget,
            "embedder": embedder_label(args.embedder),
            "protocol": TUNING.purpose,
        },
        "rows": {},
    }
    embedder = make_embedder(args.embedder)
    envs = lm.open_envs(sorted({f for f, _ in plan}), args.budget)
    try:
        for condition in args.conditions.split(","):
            for variant in variants:
                row = play(condition, variant, plan, args, envs, embedder)
                data["rows"][f"{condition} / {variant}"] = row
                write(data, args.out, name)
                print(f"{condition} / {variant}: {100 * row['success']:.1f}%", flush=True)
    finally:
        for env in envs.values():
            env.close()
    print(markdown(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
