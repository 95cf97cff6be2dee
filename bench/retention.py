"""Retention: a capacity sweep per eviction policy on the mixed TextWorldExpress stream.

Every condition plays the stream of :mod:`bench.learning_mixed` (``--items experiences``: each
game is built into a procedure by ``update``, the next games are handed the K best by graphmem's
default two-phase retrieval, credit goes to the procedures followed). ``keep-all`` is that,
memory unbounded; ``<policy>-c<P>`` caps the namespace at P % of the stream's games
(``RetentionConfig(max_memories=…, policy=…)``, evicted memories archived), enforced by the
library after every write. The question (issue 45, point 3): at C = 10 %, does utility
retention keep within 2 points of keeping everything, and beat recency by 5?

Seeds: the dev fold (``bench.protocol.TUNING``) to choose defaults; ``--heldout`` plays this
module's own held-out range, :data:`HELDOUT`, once.

Run::

    python -m bench.retention --episodes 300 --embedder hashing --jobs 2
    python -m bench.retention --episodes 300 --heldout --jobs 2

Each condition's result is written as it finishes (``retention_<range>[_tag].partial.json``),
so a run cut short keeps what it made.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from bench.common import (
    RESULTS_DIR,
    embedder_label,
    machine_info,
    machine_markdown,
    markdown_table,
    write_results,
)
from bench.learning_mixed import (
    CONDITIONS,
    FAMILIES,
    Condition,
    Game,
    GraphmemExperiences,
    Run,
    mixed_plan,
    summary_row,
)
from bench.paired import compare
from bench.protocol import RETENTION_HELDOUT as HELDOUT
from bench.protocol import TUNING

# Issue 45's figures came from test seeds 60,000 up (bench/results/retention_heldout.md); that
# range is spent (bench.protocol.SPENT), and the next --heldout run draws a fresh one.

POLICIES = ("utility", "recency", "lru", "fifo", "random")
CAPACITIES = (5, 10, 25)
"""Capacities swept, in percent of the stream's games (each game is one procedure)."""

BASE = "two-phase"
"""The condition every arm plays: graphmem's library defaults (two-phase, graph on)."""


def capacity(percent: int, episodes: int) -> int:
    """``percent`` of ``episodes`` memories, at least one.

    >>> capacity(10, 300), capacity(5, 10)
    (30, 1)
    """
    return max(1, round(percent * episodes / 100))


def arm_names(policies: Sequence[str], capacities: Sequence[int]) -> list[str]:
    """``keep-all`` and one arm per (policy, capacity).

    >>> arm_names(["utility"], [10])
    ['keep-all', 'utility-c10']
    """
    return ["keep-all", *[f"{p}-c{c}" for c in capacities for p in policies]]


def parse_arm(name: str) -> tuple[str, int] | None:
    """``(policy, percent)`` of an arm; None for keep-all.

    >>> parse_arm("lru-c25"), parse_arm("keep-all")
    (('lru', 25), None)
    """
    if name == "keep-all":
        return None
    policy, _, pct = name.rpartition("-c")
    if policy not in POLICIES or not pct.isdigit():
        raise ValueError(f"unknown arm {name!r}")
    return policy, int(pct)


class RetainedExperiences(GraphmemExperiences):
    """graphmem procedures as in the stream, with a capacity the library enforces."""

    def __init__(
        self,
        embedder: Any,
        condition: Condition,
        k: int,
        store_dir: Path | None,
        retention: Any,
    ) -> None:
        super().__init__(embedder, condition, k, store_dir)
        # update() (learn_experience) enforces the capacity after every write
        self.mem.config = self.mem.config.model_copy(update={"retention": retention})

    def evictions(self) -> int:
        """Memories retention archived (their reason says so)."""
        from graphmem.ops.retention import is_evicted

        return sum(1 for m in self.mem.store.iter_nodes(self.namespace) if is_evicted(m))

    def size(self) -> int:
        from graphmem.models import Namespace
        from graphmem.ops.retention import live_units

        kinds = self.mem.config.retention.kinds
        return len(live_units(self.mem.store, Namespace(self.namespace), kinds))


def play_arm(
    name: str,
    plan: Sequence[tuple[str, int]],
    fold: str,
    budget: int,
    handover: int,
    embedder_name: str,
    overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One arm in a worker process: the stream played with its capacity; its summary."""
    import bench.learning_mixed as lm
    from bench.common import make_embedder
    from graphmem.config import RetentionConfig
    from graphmem.models import seeded_ids

    logging.getLogger("graphmem").setLevel(logging.ERROR)
    logging.getLogger("py4j").setLevel(logging.CRITICAL)
    arm = parse_arm(name)
    retention = RetentionConfig()
    if arm is not None:
        policy, pct = arm
        retention = RetentionConfig(
            max_memories=capacity(pct, len(plan)), policy=policy, **(overrides or {})
        )
    made: list[RetainedExperiences] = []
    original = lm.make_memory

    def make_memory(condition: Condition, embedder: Any, k: int, *a: Any, **kw: Any) -> Any:
        memory = RetainedExperiences(embedder, condition, k, None, retention)
        made.append(memory)
        return memory

    lm.make_memory = make_memory  # this worker's stream only: the hook play_stream calls
    envs = lm.open_envs(sorted({f for f, _ in plan}), budget)
    started = time.perf_counter()
    try:
        with seeded_ids(0):
            run = lm.play_stream(
                CONDITIONS[BASE],
                plan,
                fold=fold,
                budget=budget,
                handover=handover,
                embedder=make_embedder(embedder_name),
                envs=envs,
                items="experiences",
            )
    finally:
        lm.make_memory = original
        for env in envs.values():
            env.close()
    run.condition = name
    return {
        "name": name,
        "retention": retention.model_dump(mode="json"),
        "evictions": made[0].evictions() if made else 0,
        "seconds": time.perf_counter() - started,
        "run": asdict(run),
    }


def _run_of(record: dict[str, Any]) -> Run:
    raw = dict(record["run"])
    raw["games"] = [Game(**g) for g in raw["games"]]
    return Run(**raw)


def comparisons(runs: dict[str, Run], capacities: Sequence[int]) -> list[dict[str, Any]]:
    """Each capped arm against keep-all, and utility against each other policy at each C;
    over all games and per family."""
    pairs: list[tuple[str, str]] = []
    for c in capacities:
        for p in POLICIES:
            pairs.append((f"{p}-c{c}", "keep-all"))
        for p in POLICIES[1:]:
            pairs.append((f"utility-c{c}", f"{p}-c{c}"))
    out = []
    for a, b in pairs:
        if a not in runs or b not in runs:
            continue
        for scope in ("all", *FAMILIES):
            xs = [float(g.success) for g in runs[a].games if scope in ("all", g.family)]
            ys = [float(g.success) for g in runs[b].games if scope in ("all", g.family)]
            out.append({"a": a, "b": b, "scope": scope, **asdict(compare(xs, ys))})
    return out


def targets(cmp: Sequence[dict[str, Any]]) -> list[list[str]]:
    """Issue 45's retention target at C = 10 %: utility ≥ keep-all − 2 pp, ≥ recency + 5 pp."""
    by = {(c["a"], c["b"], c["scope"]): c for c in cmp}
    rows = []
    wanted: tuple[tuple[str, str, float], ...] = (
        ("keep-all", "≥ −2 pp", -0.02),
        ("recency-c10", "≥ +5 pp", 0.05),
    )
    for b, need, least in wanted:
        c = by.get(("utility-c10", b, "all"))
        if c is None:
            continue
        rows.append(
            [
                f"utility-c10 vs {b}",
                need,
                f"{100 * c['diff']:+.1f} pp",
                f"{c['p_sign']:.3g}",
                "met" if c["diff"] >= least else "missed",
            ]
        )
    return rows


def _pct(x: float) -> str:
    return "–" if x != x else f"{x:.1%}"


def markdown(data: dict[str, Any]) -> str:
    setup, rows, cmp = data["setup"], data["results"], data["comparisons"]
    lines = [
        f"# Retention: capacity sweep on the mixed TextWorldExpress stream "
        f"({'held-out' if setup['heldout'] else 'tuning'} run)",
        "",
        f"Command: `{setup['command']}`",
        "",
        machine_markdown(setup["machine"]),
        "",
        f"- stream: {setup['episodes']} games ({', '.join(FAMILIES)} interleaved, the same "
        f"order for every arm), {setup['fold']} fold, seeds from {setup['seed_start']} per "
        f"family ({setup['protocol']}); budget {setup['budget']} steps; experiences (one "
        "procedure per game, built by `update`)",
        f"- every arm: graphmem `{BASE}` (library defaults), hand-over K = {setup['handover']}, "
        f"embedder {setup['embedder']}; capped arms: `RetentionConfig(max_memories = C % of "
        f"the games, policy=…)`, evicted memories archived, enforced after every write"
        + (f"; overrides {setup['overrides']}" if setup.get("overrides") else ""),
        f"- wall time: {setup['seconds']:.0f} s",
        "",
        "## Success",
        "",
    ]
    head = ["arm", "capacity", "success", *FAMILIES, "live memories at the end", "evictions"]
    table = [
        [
            r["condition"],
            str(r["capacity"]) if r["capacity"] else "∞",
            _pct(r["success"]),
            *[_pct(r["by_family"][f]) for f in FAMILIES],
            str(r["memory_items"]),
            str(r["evictions"]),
        ]
        for r in rows
    ]
    lines.append(markdown_table(head, table))
    if target_rows := targets(cmp):
        lines += ["", "## Target (C = 10 %)", ""]
        lines.append(markdown_table(["comparison", "target", "Δ", "sign test p", ""], target_rows))
    lines += [
        "",
        "## Paired comparisons",
        "",
        "Same games, game by game: difference of success rates, games only the first won / only "
        "the second won, exact two-sided sign test, 95 % bootstrap interval.",
        "",
        markdown_table(
            ["a vs b", "games", "Δ success", "a only / b only", "sign test p", "95 % CI"],
            [
                [
                    f"{c['a']} vs {c['b']}",
                    f"{c['scope']} ({c['n']})",
                    f"{100 * c['diff']:+.1f} pp",
                    f"{c['better']} / {c['worse']}",
                    f"{c['p_sign']:.3g}",
                    f"[{100 * c['ci_low']:+.1f}, {100 * c['ci_high']:+.1f}]",
                ]
                for c in cmp
            ],
        ),
    ]
    return "\n".join(lines) + "\n"


def summarise(
    records: dict[str, dict[str, Any]],
    setup: dict[str, Any],
    names: Sequence[str],
    plan: Sequence[tuple[str, int]] = (),
) -> dict[str, Any]:
    runs = {n: _run_of(records[n]) for n in names if n in records}
    rows = []
    for n in names:
        if n not in runs:
            continue
        row = summary_row(runs[n], FAMILIES, setup["block"])
        arm = parse_arm(n)
        row["capacity"] = capacity(arm[1], setup["episodes"]) if arm else None
        row["evictions"] = records[n]["evictions"]
        rows.append(row)
    return {
        "setup": setup,
        "results": rows,
        "comparisons": comparisons(runs, setup["capacities"]),
        "plan": list(plan),
        "episodes": {n: [asdict(g) for g in r.games] for n, r in runs.items()},
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.retention", description=__doc__)
    parser.add_argument("--episodes", type=int, default=300, help="games in the stream (300)")
    parser.add_argument("--budget", type=int, default=30, help="steps per game (30)")
    parser.add_argument("--handover", type=int, default=5, help="memories handed over (5)")
    parser.add_argument("--embedder", choices=("minilm", "hashing"), default="minilm")
    parser.add_argument("--policies", default=",".join(POLICIES))
    parser.add_argument(
        "--capacities", default=",".join(map(str, CAPACITIES)), help="percent of the games"
    )
    parser.add_argument("--no-keep-all", action="store_true", help="skip the keep-all arm")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="a RetentionConfig field for the capped arms (e.g. grace_episodes=10), repeatable",
    )
    parser.add_argument("--heldout", action="store_true", help=f"seeds {HELDOUT.purpose}")
    parser.add_argument("--jobs", type=int, default=1, help="arms played at once (1)")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    parser.add_argument("--tag", default="")
    args = parser.parse_args(argv)
    policies = [p for p in args.policies.split(",") if p]
    if unknown := [p for p in policies if p not in POLICIES]:
        parser.error(f"unknown policies {unknown}; known: {', '.join(POLICIES)}")
    capacities = [int(c) for c in args.capacities.split(",") if c]
    overrides = {k: json.loads(v) for k, _, v in (s.partition("=") for s in args.set)}
    names = arm_names(policies, capacities)
    if args.no_keep_all:
        names.remove("keep-all")
    seeds = HELDOUT if args.heldout else TUNING
    plan = mixed_plan(args.episodes, start=seeds.start)
    name = f"retention_{'heldout' if args.heldout else seeds.fold}"
    name += f"_{args.tag}" if args.tag else ""
    setup = {
        "command": "python -m bench.retention " + " ".join(sys.argv[1:] if argv is None else argv),
        "machine": machine_info(),
        "heldout": bool(args.heldout),
        "protocol": seeds.purpose,
        "fold": seeds.fold,
        "seed_start": seeds.start,
        "episodes": args.episodes,
        "budget": args.budget,
        "handover": args.handover,
        "embedder": embedder_label(args.embedder),
        "capacities": capacities,
        "overrides": overrides,
        "block": min(100, args.episodes),
        "seconds": 0.0,
    }
    started = time.perf_counter()
    records: dict[str, dict[str, Any]] = {}
    partial = args.out / f"{name}.partial.json"
    args.out.mkdir(parents=True, exist_ok=True)

    def done(record: dict[str, Any]) -> None:
        records[record["name"]] = record
        partial.write_text(json.dumps(records) + "\n", encoding="utf-8")
        setup["seconds"] = time.perf_counter() - started
        data = summarise(records, setup, names, plan)
        write_results(args.out, name, data, markdown(data))
        row = next(r for r in data["results"] if r["condition"] == record["name"])
        print(f"{record['name']}: {row['success']:.1%} ({record['seconds']:.0f} s)", flush=True)

    jobs = max(1, min(args.jobs, len(names)))
    call = (seeds.fold, args.budget, args.handover, args.embedder, overrides)
    if jobs == 1:
        for n in names:
            done(play_arm(n, plan, *call))
    else:
        with ProcessPoolExecutor(jobs, mp_context=get_context("spawn")) as pool:
            futures = [pool.submit(play_arm, n, plan, *call) for n in names]
            for future in as_completed(futures):
                done(future.result())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
