"""Does learned utility choose better than similarity? An exact replay over the census table.

:mod:`bench.utility_census` plays every probe game of the mixed stream once with each of its
20 nearest experiences handed over alone. The explorer and the games are deterministic, so
that table holds the real outcome of *every* choice a retrieval policy could make when it hands
over one memory (K = 1). This bench replays retrieval policies over it as an online stream: for
each probe game in stream order the policy ranks the game's candidates with graphmem's own
phase B (:func:`graphmem.ops.retrieve.rank_candidates`, the code ``retrieve`` runs), the top
candidate is "handed over", the table gives the game's outcome, and that memory's Q is
credited with graphmem's rule ``Q ← Q + α(R − Q)``. The outcome of each policy is exactly what
playing the stream with that policy would give, for a fixed library (the census's experiences;
the probes add no memories, so the only thing that learns is Q).

So it answers the question the mixed stream at K = 5 cannot: the explorer there reads the
facts of all five memories it is handed, so the order within the five hardly matters; here one
memory is handed over and the choice is everything.

Policies (``--policies``):

- ``similarity``: λ = 0 (the most similar candidate);
- ``random``: a random candidate (seeded);
- ``two-phase``: λ (``--lam``), Q from Q0 (graphmem's defaults);
- ``two-phase-source``: the same with ``q_prior='source'`` (a procedure's source game, won or
  lost, counts as its first use);
- ``two-phase-source-pool``: ``q_prior='source-pool'``;
- ``source-only``: ``q_prior='source'`` and no credit (nothing learned: only the outcome
  known when the memory was written) — what learning adds is the difference to
  ``two-phase-source``.

Each policy runs over the stream order of the census and over ``--orders`` random orders of the
same probes (paired: every policy sees the same orders). Reported: success in the stream
order with a paired comparison against ``similarity`` (sign test, bootstrap CI), the mean over
all orders and in how many orders each policy beats similarity. ``--report-from N`` adds the
same figures for the probes from index N on only (Q still learns from the earlier ones): probes
a tuning pass never looked at.

Run (after the census; dev table by default, ``--heldout`` for the held-out one)::

    python -m bench.utility_census --library 400 --probes 600 --heldout
    python -m bench.utility_replay --heldout --report-from 200
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import machine_info, machine_markdown, markdown_table, write_results
from bench.paired import compare

RESULTS = Path(__file__).parent / "results"
ALPHA = 0.1
"""graphmem's default learning rate (``GraphMemoryConfig.alpha``)."""
Q0 = 0.5
"""graphmem's default initial Q."""


@dataclass(frozen=True)
class Policy:
    name: str
    label: str
    lam: float = 0.5
    q_prior: str = "q0"
    q_scale: str = "pool"
    """'pool': Q z-scored among the candidates (graphmem's default); 'reward': (Q − Q0) / ½."""
    learn: bool = True
    """Credit the handed-over memory (False: Q stays where its prior puts it)."""
    random: bool = False


def policies(lam: float) -> dict[str, Policy]:
    return {
        p.name: p
        for p in (
            Policy("similarity", "graphmem λ=0: the most similar candidate", lam=0.0),
            Policy("random", "a random candidate", random=True),
            Policy("two-phase", f"graphmem λ={lam}, Q from Q0", lam=lam),
            Policy(
                "two-phase-source",
                f"graphmem λ={lam}, q_prior='source' (source game as first use)",
                lam=lam,
                q_prior="source",
            ),
            Policy(
                "two-phase-source-pool",
                f"graphmem λ={lam}, q_prior='source-pool'",
                lam=lam,
                q_prior="source-pool",
            ),
            Policy(
                "two-phase-reward",
                f"graphmem λ={lam}, Q from Q0 on the reward scale (q_scale='reward')",
                lam=lam,
                q_scale="reward",
            ),
            Policy(
                "two-phase-source-pool-reward",
                f"graphmem λ={lam}, q_prior='source-pool', q_scale='reward'",
                lam=lam,
                q_prior="source-pool",
                q_scale="reward",
            ),
            Policy(
                "source-only",
                f"λ={lam}, q_prior='source', no credit: the source outcome, nothing learned",
                lam=lam,
                q_prior="source",
                learn=False,
            ),
        )
    }


CREDIT_PAIRS = (("two-phase-source", "source-only"), ("two-phase-source-pool", "source-only"))
"""(with credit, without): what learning from rewards adds to the prior alone."""


def _procedures(library: Sequence[dict[str, Any]]) -> list[Any]:
    """One graphmem Procedure per census experience (its source outcome as reward)."""
    from graphmem.models import Granularity, Procedure

    return [
        Procedure(
            id=f"m{i}",
            namespace="replay",
            task_text=f"{e['family']} seed {e['seed']}",
            key=f"{e['family']} seed {e['seed']}",
            granularity=Granularity.TRAJECTORY,
            reward=1.0 if e["success"] else 0.0,
            success=bool(e["success"]),
            q=Q0,
        )
        for i, e in enumerate(library)
    ]


def replay(
    policy: Policy,
    library: Sequence[dict[str, Any]],
    probes: Sequence[dict[str, Any]],
    order: Sequence[int],
    seed: int,
) -> list[float]:
    """Outcomes (1/0) of ``probes`` played in ``order`` under ``policy``, in that order."""
    from graphmem.ops.retrieve import QPrior, rank_candidates

    memories = _procedures(library)
    rng = random.Random(seed)
    prior = (
        None
        if policy.q_prior == "q0"
        else QPrior(Q0, ALPHA, source="source" in policy.q_prior, pool="pool" in policy.q_prior)
    )
    scale = (Q0, 0.5) if policy.q_scale == "reward" else None
    outcomes: list[float] = []
    for p_i in order:
        cands = probes[p_i]["candidates"]
        if policy.random:
            pick = rng.randrange(len(cands))
        else:
            pool = [(memories[c["memory"]], float(c["sim"])) for c in cands]
            top = rank_candidates(pool, policy.lam, 1, q_prior=prior, q_reward_scale=scale)[0]
            pick = next(j for j, (m, _) in enumerate(pool) if m is top.memory)
        reward = 1.0 if cands[pick]["success"] else 0.0
        outcomes.append(reward)
        m = memories[cands[pick]["memory"]]
        if policy.learn:
            m.q = m.q + ALPHA * (reward - m.q)
            m.uses += 1
    return outcomes


def run(data: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    library, probes = data["library"], data["probes"]
    chosen = [policies(args.lam)[name] for name in args.policies]
    n = len(probes)
    orders = [list(range(n))]
    for s in range(1, args.orders + 1):
        o = list(range(n))
        random.Random(s).shuffle(o)
        orders.append(o)
    # outcome[policy][order index] = outcomes indexed by probe (not by position)
    outcome: dict[str, list[list[float]]] = defaultdict(list)
    for pol in chosen:
        for o_i, o in enumerate(orders):
            played = replay(pol, library, probes, o, seed=o_i)
            by_probe = [0.0] * n
            for pos, p_i in enumerate(o):
                by_probe[p_i] = played[pos]
            outcome[pol.name].append(by_probe)
    none = [1.0 if p["none"] else 0.0 for p in probes]
    oracle = [1.0 if any(c["success"] for c in p["candidates"]) else 0.0 for p in probes]
    return {
        "policies": [vars(p) for p in chosen],
        "outcome": dict(outcome),
        "none": none,
        "oracle": oracle,
        "families": [p["family"] for p in probes],
        "orders": len(orders),
    }


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


def summarise(result: dict[str, Any], start: int) -> dict[str, Any]:
    """Figures over the probes from index ``start`` on (stream order)."""
    fams = result["families"]
    idx = [i for i in range(len(fams)) if i >= start]
    families = sorted(set(fams[i] for i in idx))
    base = result["outcome"].get("similarity")
    rows = []
    for name, runs in result["outcome"].items():
        stream = [runs[0][i] for i in idx]
        means = [_mean([r[i] for i in idx]) for r in runs]
        row: dict[str, Any] = {
            "policy": name,
            "success": _mean(stream),
            "by_family": {f: _mean([runs[0][i] for i in idx if fams[i] == f]) for f in families},
            "mean_over_orders": statistics.fmean(means),
        }
        if base is not None and name != "similarity":
            c = compare(stream, [base[0][i] for i in idx])
            row["vs_similarity"] = vars(c)
            diffs = [m - _mean([b[i] for i in idx]) for m, b in zip(means, base, strict=True)]
            row["orders_better"] = sum(1 for d in diffs if d > 0)
            row["orders_worse"] = sum(1 for d in diffs if d < 0)
            row["mean_diff_over_orders"] = statistics.fmean(diffs)
        row["vs_none"] = vars(compare(stream, [result["none"][i] for i in idx]))
        rows.append(row)
    credit = {}
    for learned, fixed in CREDIT_PAIRS:
        if learned in result["outcome"] and fixed in result["outcome"]:
            a, b = result["outcome"][learned][0], result["outcome"][fixed][0]
            credit[f"{learned} vs {fixed}"] = vars(
                compare([a[i] for i in idx], [b[i] for i in idx])
            )
    return {
        "from": start,
        "credit": credit,
        "n": len(idx),
        "families": families,
        "none": _mean([result["none"][i] for i in idx]),
        "oracle": _mean([result["oracle"][i] for i in idx]),
        "rows": rows,
    }


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _diff(c: dict[str, Any]) -> str:
    return f"{100 * c['diff']:+.1f} pp ({c['p_sign']:.2g})"


def _section(s: dict[str, Any], orders: int, title: str) -> list[str]:
    fams = s["families"]
    rows = []
    for r in s["rows"]:
        v = r.get("vs_similarity")
        rows.append(
            [
                f"`{r['policy']}`",
                _pct(r["success"]),
                *(_pct(r["by_family"][f]) for f in fams),
                _pct(r["mean_over_orders"]),
                "" if v is None else f"{100 * v['diff']:+.1f} pp",
                "" if v is None else f"{v['better']} / {v['worse']}",
                "" if v is None else f"{v['p_sign']:.3g}",
                "" if v is None else f"[{100 * v['ci_low']:+.1f}, {100 * v['ci_high']:+.1f}]",
                "" if v is None else f"{r['orders_better']} / {r['orders_worse']}",
                _diff(r["vs_none"]),
            ]
        )
    credit = [
        f"- {pair}: {100 * c['diff']:+.1f} pp, {c['better']} / {c['worse']} games, "
        f"sign test p = {c['p_sign']:.3g}"
        for pair, c in s["credit"].items()
    ]
    return [
        f"## {title}",
        "",
        f"{s['n']} probe games; without memory {_pct(s['none'])}, best candidate (oracle) "
        f"{_pct(s['oracle'])}.",
        "",
        markdown_table(
            [
                "policy",
                "success (stream order)",
                *fams,
                f"mean over {orders} orders",
                "Δ vs similarity",
                "won only / lost only",
                "sign test p",
                "95 % CI",
                "orders better / worse",
                "Δ vs no memory (p)",
            ],
            rows,
        ),
        "",
        *(
            ["What credit adds to the prior alone (same games, stream order):", "", *credit, ""]
            if credit
            else []
        ),
    ]


def markdown(data: dict[str, Any], command: str) -> str:
    a = data["args"]
    c = data["census"]
    lines = [
        "# Does learned utility choose better than similarity? Replay over the census "
        f"({'held-out' if a['heldout'] else 'tuning'} table)",
        "",
        f"Command: `{command}`",
        "",
        machine_markdown(data["machine"]),
        "",
        f"- table: `{a['table']}` — {c['library']} experiences, {c['probes']} probe games with "
        f"their {c['candidates']} nearest candidates each, {c['fold']} fold, seeds from "
        f"{c['start']} ({c['purpose']})",
        f"- one memory handed over per game (K = 1); graphmem's phase B ranks the candidates; "
        f"the handed-over memory is credited Q ← Q + α(R − Q), α = {ALPHA}, Q0 = {Q0}, "
        f"rewards {{0, 1}}; λ = {a['lam']} for the two-phase policies",
        f"- {data['result']['orders'] - 1} random orders of the probes besides the stream "
        "order; paired comparisons are episode by episode in the stream order (exact sign "
        "test, bootstrap CI), and orders better/worse count the orders in which the policy's "
        "success beat similarity's",
        f"- wall time: {data['seconds']:.0f} s",
        "",
    ]
    orders = data["result"]["orders"]
    lines += _section(data["summary"], orders, "All probes")
    if "summary_from" in data:
        s = data["summary_from"]
        lines += _section(
            s, orders, f"Probes from index {s['from']} on (Q learned from all earlier ones)"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--heldout", action="store_true", help="replay the held-out census")
    parser.add_argument("--table", type=Path, help="census JSON (default: bench/results')")
    parser.add_argument(
        "--policies",
        type=lambda s: [x for x in s.split(",") if x],
        default=list(policies(0.5)),
        help="comma-separated: " + ", ".join(policies(0.5)),
    )
    parser.add_argument("--lam", type=float, default=0.5, help="λ of the two-phase policies")
    parser.add_argument("--orders", type=int, default=20, help="random orders besides the stream")
    parser.add_argument("--report-from", type=int, default=0, help="also report probes from N on")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--tag", default="", help="suffix of the result files")
    args = parser.parse_args(argv)
    unknown = [p for p in args.policies if p not in policies(args.lam)]
    if unknown:
        parser.error(f"unknown policies: {', '.join(unknown)}")
    table = args.table or RESULTS / (
        "utility_census_heldout.json" if args.heldout else "utility_census_dev.json"
    )
    args.table = table
    command = "python -m bench.utility_replay " + " ".join(sys.argv[1:] if argv is None else argv)
    census = json.loads(Path(table).read_text(encoding="utf-8"))
    if census["protocol"]["fold"] != ("test" if args.heldout else "dev"):
        parser.error(f"{table} is a {census['protocol']['fold']}-fold table")
    started = time.perf_counter()
    result = run(census, args)
    data: dict[str, Any] = {
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "census": {
            **census["protocol"],
            "library": len(census["library"]),
            "probes": len(census["probes"]),
            "candidates": min(len(p["candidates"]) for p in census["probes"]),
        },
        "machine": machine_info(),
        "result": result,
        "summary": summarise(result, 0),
    }
    if args.report_from:
        data["summary_from"] = summarise(result, args.report_from)
    data["seconds"] = time.perf_counter() - started
    # Keep the stream-order outcomes per probe; the shuffled orders live in the summaries.
    data["result"] = {
        **{k: v for k, v in result.items() if k != "outcome"},
        "stream_outcome": {name: runs[0] for name, runs in result["outcome"].items()},
    }
    name = f"utility_replay_{'heldout' if args.heldout else 'dev'}{args.tag}"
    out = write_results(args.out, name, data, markdown(data, command))
    print(markdown(data, command))
    print(f"wrote {[str(p) for p in out]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
