"""Targets, Markdown tables and plots of ``bench.speed`` results."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import common

TARGET_EMBEDDED_RATIO = 2.0
TARGET_EMBEDDED_P95_MS_100K = 5.0
TARGET_NEO4J_RATIO = 1.2
TARGET_NEO4J_INGEST = 1000.0


# ---- targets, tables, plots -----------------------------------------------------------------


def _p95(rows: Sequence[dict[str, Any]], n: int, prefix: str) -> float | None:
    for row in rows:
        if row["n"] == n and row["case"].startswith(prefix):
            return float(row["p95_ms"])
    return None


def check_targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue's targets, each with the measured value and whether it was met."""
    lat = result["latency"]
    sizes = result["settings"]["sizes"]
    lam = result["settings"]["lam"]
    out: list[dict[str, Any]] = []
    for n in sizes:
        emb = _p95(lat, n, f"graphmem embedded: two-phase λ={lam}")
        base = _p95(lat, n, "numpy brute-force")
        if emb is not None and base:
            out.append(
                {
                    "target": f"embedded two-phase p95 ≤ {TARGET_EMBEDDED_RATIO}× numpy p95",
                    "n": n,
                    "value": f"{emb:.2f} ms vs {base:.2f} ms = {emb / base:.2f}×",
                    "met": emb <= TARGET_EMBEDDED_RATIO * base,
                }
            )
        if n == 100_000 and emb is not None:
            out.append(
                {
                    "target": f"embedded two-phase p95 ≤ {TARGET_EMBEDDED_P95_MS_100K} ms",
                    "n": n,
                    "value": f"{emb:.2f} ms",
                    "met": emb <= TARGET_EMBEDDED_P95_MS_100K,
                }
            )
        neo = _p95(lat, n, f"graphmem neo4j: two-phase λ={lam}")
        rag = _p95(lat, n, "neo4j-graphrag")
        if neo is not None and rag:
            out.append(
                {
                    "target": f"neo4j two-phase p95 ≤ {TARGET_NEO4J_RATIO}× neo4j-graphrag p95",
                    "n": n,
                    "value": f"{neo:.2f} ms vs {rag:.2f} ms = {neo / rag:.2f}×",
                    "met": neo <= TARGET_NEO4J_RATIO * rag,
                }
            )
    for row in result["ingest"]:
        if row["system"] == "graphmem neo4j" and row.get("per_s"):
            out.append(
                {
                    "target": f"neo4j ingest ≥ {TARGET_NEO4J_INGEST:,.0f} memories/s (precomputed)",
                    "n": row["n"],
                    "value": f"{row['per_s']:,.0f}/s",
                    "met": row["per_s"] >= TARGET_NEO4J_INGEST,
                }
            )
    return out


def _latency_table(rows: Sequence[dict[str, Any]]) -> str:
    return common.markdown_table(
        ["case", "N", "p50 ms", "p95 ms", "mean ms", "queries"],
        [
            [r["case"], f"{r['n']:,}", r["p50_ms"], r["p95_ms"], r["mean_ms"], r["samples"]]
            for r in rows
        ],
    )


def _ingest_row(r: dict[str, Any]) -> list[object]:
    return [r["system"], f"{r['n']:,}", f"{r['added']:,}", r.get("per_s", "–"), r["peak_rss_mib"]]


def render_markdown(result: dict[str, Any]) -> str:
    s = result["settings"]
    machine = result["machine"]
    lines = [
        "# graphmem speed and scale",
        "",
        common.machine_markdown(result["machine"]),
        f"- load average at end: {' / '.join(map(str, machine.get('load_avg_at_end', [])))}"
        f"; whole run {result.get('runtime_s')} s",
        f"- sizes {', '.join(f'{n:,}' for n in s['sizes'])} memories, {s['dimension']}-dim; "
        f"k1={s['k1']}, k2={s['k2']}, λ={s['lam']}; {s['queries']} queries "
        f"({s['included_queries']} with embedding), at most {s['budget_s_per_case']} s per case",
        "",
        "- load average before each timing phase: "
        + "; ".join(
            f"{r['n']:,}: {' / '.join(f'{x:.2f}' for x in r['load_avg_1_5_15'])}"
            for r in result["load_before_timing"]
        ),
        "",
        "Command: `python -m bench.speed` (see the module docstring for the method).",
        "",
        "## Targets",
        "",
        common.markdown_table(
            ["target", "N", "measured", "met"],
            [
                [t["target"], f"{t['n']:,}", t["value"], "yes" if t["met"] else "**no**"]
                for t in result.get("targets", [])
            ],
        ),
        "",
        "## Retrieval latency, query embedding excluded",
        "",
        _latency_table(result["latency"]),
    ]
    if result["included"]:
        lines += [
            "",
            "## Retrieval latency, MiniLM query embedding included",
            "",
            _latency_table(result["included"]),
        ]
    lines += [
        "",
        "## Ingest, precomputed vectors (batches of 1,000; the store grows step by step)",
        "",
        common.markdown_table(
            ["system", "N after", "added", "memories/s", "peak RSS Δ MiB"],
            [_ingest_row(r) for r in result["ingest"]],
        ),
    ]
    if result["e2e_ingest"]:
        lines += [
            "",
            "## Ingest end to end, MiniLM embedding included",
            "",
            f"Load average when this phase started: {result.get('e2e_load_at_start')}; the "
            "systems ran one after the other, so a change of load shows up between them.",
            "",
            common.markdown_table(
                ["system", "how", "N", "memories/s"],
                [[r["system"], r["how"], r["n"], r["per_s"]] for r in result["e2e_ingest"]],
            ),
        ]
    if result["blas_threads"]:
        lines += [
            "",
            "## BLAS and torch threads (alternating chunks of queries)",
            "",
            common.markdown_table(
                ["case", "threads", "N", "p50 ms", "p95 ms"],
                [
                    [
                        r["case"],
                        r["blas"],
                        f"{r['n']:,}" if r["n"] else "–",
                        r["p50_ms"],
                        r["p95_ms"],
                    ]
                    for r in result["blas_threads"]
                ],
            ),
        ]
    if result["notes"]:
        lines += ["", "## Notes", "", *[f"- {note}" for note in result["notes"]]]
    return "\n".join(lines)


def plot(result: dict[str, Any], out: Path, prefix: str) -> list[Path]:
    paths = [out / f"{prefix}_latency.png", out / f"{prefix}_ingest.png"]
    with common.matplotlib_figure(paths[0], width=12, height=4.8) as fig:
        for pos, key, title in (
            (1, "latency", "p95 retrieval latency, query embedding excluded"),
            (2, "included", "p95 latency with MiniLM query embedding"),
        ):
            ax = fig.add_subplot(1, 2, pos)
            by_case: dict[str, list[tuple[int, float]]] = {}
            for row in result[key]:
                by_case.setdefault(row["case"], []).append((row["n"], row["p95_ms"]))
            for case, points in by_case.items():
                xs, ys = zip(*sorted(points), strict=True)
                ax.plot(xs, ys, marker="o", label=case)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("memories (N)")
            ax.set_ylabel("p95 ms")
            ax.set_title(title, fontsize=10)
            ax.grid(True, which="both", alpha=0.3)
            if by_case:
                ax.legend(fontsize=7)
    with common.matplotlib_figure(paths[1], width=10, height=4.5) as fig:
        ax = fig.add_subplot(1, 1, 1)
        rows = [r for r in result["ingest"] if r.get("per_s")]
        systems = list(dict.fromkeys(r["system"] for r in rows))
        sizes = list(dict.fromkeys(r["n"] for r in rows))
        width = 0.8 / max(1, len(sizes))
        for j, n in enumerate(sizes):
            values = [
                next((r["per_s"] for r in rows if r["system"] == s and r["n"] == n), 0)
                for s in systems
            ]
            ax.bar([i + j * width for i in range(len(systems))], values, width, label=f"→ {n:,}")
        ax.axhline(TARGET_NEO4J_INGEST, color="red", linestyle="--", linewidth=1)
        ax.set_xticks([i + width * (len(sizes) - 1) / 2 for i in range(len(systems))])
        ax.set_xticklabels(systems)
        ax.set_yscale("log")
        ax.set_ylabel("memories/s (precomputed vectors)")
        ax.set_title("ingest throughput; red: Neo4j target", fontsize=10)
        ax.legend(fontsize=8)
    return paths
