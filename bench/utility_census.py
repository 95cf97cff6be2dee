"""Which memories help? A counterfactual census of the mixed stream's experiences.

Learned utility Q can only beat similarity where some memories *reliably* help more than
others that look as alike to the query. This census measures whether the mixed
TextWorldExpress stream has such memories, without any learning in the way:

1. **Library.** The best explorer without memory plays ``--library`` games of the mixed stream;
   each game is kept as an experience (task + first room as key; steps; outcome), as
   ``bench.learning --stream mixed --items experiences`` keeps them.
2. **Probes.** For each of the next ``--probes`` games, the ``--candidates`` experiences
   nearest its key by cosine (what phase A of retrieval would recall) are each handed to the
   explorer *alone*, and the game is played once per candidate, and once without memory. So
   every (game, memory) pair gets its real outcome: success or failure.

From that table it reports, per family: success without memory; with the most similar
candidate (similarity's choice); with a random candidate; with the best candidate (an
oracle: some candidate wins); and with the candidate whose *leave-one-out utility* is
highest — its mean success over the *other* probe games it was a candidate for, the best any
per-memory Q can know with unlimited, noise-free updates. And it measures how stable a
memory's utility is: split-half reliability of each memory's effect (its outcome minus the
game's mean over candidates) across the games it was a candidate for. If that reliability
is near zero, a memory's utility is not a property of the memory here, and no per-memory Q
can learn it.

Run (the dev fold by default; ``--heldout`` for the reported figures)::

    python -m bench.utility_census --library 400 --probes 200 --heldout
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import machine_info, machine_markdown, markdown_table, progress_bar, write_results
from bench.learning_mixed import FAMILIES, experience_key, mixed_plan, open_envs
from bench.protocol import SeedRange, stream_range

RESULTS = Path(__file__).parent / "results"


@dataclass(frozen=True)
class Experience:
    family: str
    seed: int
    key: str
    steps: tuple[tuple[str, str], ...]
    success: bool


def play(
    env: Any, family: str, seed: int, fold: str, plan: Any | None
) -> tuple[bool, list[tuple[str, str]], str]:
    """One game with at most one experience offered; (success, steps, key)."""
    from showcase.envs.agents import make_explorer

    obs = env.reset(seed, fold=fold)
    key = experience_key(obs.task, obs.text)
    policy: Any = make_explorer(family)
    policy.begin(obs.task, hints=[], seed=seed)
    if plan is not None:
        policy.offer_procedures([plan])
    steps: list[tuple[str, str]] = []
    while True:
        decision = policy.act(obs.text, obs.valid_actions, obs.inventory)
        result = env.step(decision.action)
        policy.feedback(decision.action, result.observation.text, result.reward)
        steps.append((decision.action, result.observation.text))
        obs = result.observation
        if result.done:
            return bool(result.success), steps, key


def census(args: argparse.Namespace, seeds: SeedRange) -> dict[str, Any]:
    from bench.common import make_embedder
    from graphmem.agents import Plan

    embedder = make_embedder(args.embedder)
    plan = mixed_plan(args.library + args.probes, start=seeds.start)
    envs = open_envs(FAMILIES, args.budget)
    library: list[Experience] = []
    bar = progress_bar(args.library + args.probes, "census", enabled=not args.no_progress)
    try:
        for family, seed in plan[: args.library]:
            success, steps, key = play(envs[family], family, seed, seeds.fold, None)
            library.append(Experience(family, seed, key, tuple(steps), success))
            bar.update()
        keys = embedder.embed([e.key for e in library])
        keys = keys / np.linalg.norm(keys, axis=1, keepdims=True)
        probes: list[dict[str, Any]] = []
        for family, seed in plan[args.library :]:
            base, _, key = play(envs[family], family, seed, seeds.fold, None)
            q = embedder.embed([key])[0]
            sims = keys @ (q / np.linalg.norm(q))
            order = [int(i) for i in np.argsort(-sims)[: args.candidates]]
            outcomes = []
            for i in order:
                e = library[i]
                offered = Plan(f"m{i}", e.key, e.steps, success=e.success)
                won, _, _ = play(envs[family], family, seed, seeds.fold, offered)
                outcomes.append({"memory": i, "sim": float(sims[i]), "success": won})
            probes.append({"family": family, "seed": seed, "none": base, "candidates": outcomes})
            bar.update()
    finally:
        bar.close()
        for env in envs.values():
            env.close()
    return {
        "protocol": {"fold": seeds.fold, "start": seeds.start, "purpose": seeds.purpose},
        "library": [{"family": e.family, "seed": e.seed, "success": e.success} for e in library],
        "probes": probes,
    }


# ---- analysis --------------------------------------------------------------------------------


def loo_utility(probes: Sequence[dict[str, Any]]) -> dict[int, list[tuple[int, bool]]]:
    """Each memory's outcomes as (probe index, success) over the probes it was a candidate for."""
    seen: dict[int, list[tuple[int, bool]]] = defaultdict(list)
    for p_i, p in enumerate(probes):
        for c in p["candidates"]:
            seen[c["memory"]].append((p_i, c["success"]))
    return seen


def choices(
    probes: Sequence[dict[str, Any]],
    library: Sequence[dict[str, Any]] | None = None,
    seed: int = 0,
) -> dict[str, list[bool]]:
    """Outcome per probe under each way of choosing one candidate (with ``library``, also the
    nearest experience whose own game was won: what is known when a memory is written)."""
    rng = random.Random(seed)
    seen = loo_utility(probes)
    out: dict[str, list[bool]] = defaultdict(list)
    for p_i, p in enumerate(probes):
        cands = p["candidates"]
        out["none"].append(p["none"])
        out["similarity (top-1)"].append(cands[0]["success"])
        out["random candidate"].append(rng.choice(cands)["success"])
        if library is not None:
            won = [c for c in cands if library[c["memory"]]["success"]]
            out["nearest won game"].append((won or cands)[0]["success"])
        out["best candidate (oracle)"].append(any(c["success"] for c in cands))

        def loo(c: dict[str, Any], p_i: int = p_i) -> tuple[float, float]:
            others = [s for j, s in seen[c["memory"]] if j != p_i]
            mean = sum(others) / len(others) if others else -1.0
            return mean, c["sim"]

        out["leave-one-out utility (Q ceiling)"].append(max(cands, key=loo)["success"])
    return out


def reliability(probes: Sequence[dict[str, Any]], min_games: int) -> dict[str, Any]:
    """Split-half reliability of memories' effects (outcome − the game's mean over candidates):
    the correlation, across memories seen in ≥ ``min_games`` probes, between the mean effect
    on the odd and on the even ones of its probes; and the share of outcome variance that is
    memory (main effect) vs the game-by-memory interaction."""
    effects: dict[int, list[float]] = defaultdict(list)
    residual_all: list[float] = []
    for p in probes:
        wins = [float(c["success"]) for c in p["candidates"]]
        mean = sum(wins) / len(wins)
        for c, w in zip(p["candidates"], wins, strict=True):
            effects[c["memory"]].append(w - mean)
            residual_all.append(w - mean)
    kept = {m: e for m, e in effects.items() if len(e) >= min_games}
    odd = [statistics.fmean(e[0::2]) for e in kept.values()]
    even = [statistics.fmean(e[1::2]) for e in kept.values()]
    r = (
        float(np.corrcoef(odd, even)[0, 1])
        if len(kept) >= 3 and np.std(odd) and np.std(even)
        else float("nan")
    )
    total = float(np.var(residual_all)) if residual_all else 0.0
    main = float(np.var([statistics.fmean(e) for e in kept.values()])) if kept else 0.0
    return {
        "memories": len(kept),
        "split_half_r": r,
        "spearman_brown": 2 * r / (1 + r) if r == r and r > -1 else float("nan"),
        "residual_variance": total,
        "memory_effect_variance": main,
    }


def summarise(data: dict[str, Any], min_games: int) -> dict[str, Any]:
    probes = data["probes"]
    by_family: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for p in probes:
        by_family[p["family"]].append(p)
    rows = []
    for name, group in [("all", probes), *sorted(by_family.items())]:
        picked = choices(group, data["library"])
        depth = min(len(p["candidates"]) for p in group)
        by_rank = [
            sum(p["candidates"][i]["success"] for p in group) / len(group) for i in range(depth)
        ]
        rest = [c["success"] for p in group for c in p["candidates"][5:]]
        rows.append(
            {
                "games": name,
                "n": len(group),
                "by_rank": by_rank,
                "by_rank_rest": sum(rest) / len(rest) if rest else float("nan"),
                **{k: sum(v) / len(v) for k, v in picked.items()},
                **reliability(group, min_games),
            }
        )
    return {"rows": rows}


def markdown(data: dict[str, Any], command: str) -> str:
    rows = data["summary"]["rows"]
    ways = [
        "none",
        "similarity (top-1)",
        "random candidate",
        "nearest won game",
        "leave-one-out utility (Q ceiling)",
        "best candidate (oracle)",
    ]
    a = args_ = data["args"]
    p = data["protocol"]
    lines = [
        "# Which memories help? Counterfactual census of the mixed stream "
        f"({'held-out run' if a['heldout'] else 'tuning run'})",
        "",
        f"Command: `{command}`",
        "",
        machine_markdown(data["machine"]),
        "",
        f"- library: {a['library']} games of the mixed stream played by the explorer without "
        f"memory, each kept as an experience; probes: the next {a['probes']} games, each played "
        f"once without memory and once with each of its {a['candidates']} nearest experiences "
        f"(cosine of task + first room, {a['embedder']} embedder) handed over alone; budget "
        f"{args_['budget']} steps; {p['fold']} fold, seeds from {p['start']} ({p['purpose']})",
        f"- wall time: {data['seconds']:.0f} s",
        "",
        "## Success by how one candidate is chosen",
        "",
        "The leave-one-out column is the most a per-memory utility could know: each candidate "
        "is scored by its mean success over the *other* probe games it was recalled for. "
        "*Nearest won game*: the most similar experience whose own game was won (what is "
        "known when the memory is written).",
        "",
        markdown_table(
            ["games", "n", *ways],
            [[r["games"], r["n"], *(f"{100 * r[w]:.0f}%" for w in ways)] for r in rows],
        ),
        "",
        "Success with the candidate at each similarity rank (within a family the ranking "
        "says little about which memory helps):",
        "",
        markdown_table(
            ["games", *(f"rank {i + 1}" for i in range(5)), "ranks 6–20"],
            [
                [
                    r["games"],
                    *(f"{100 * x:.0f}%" for x in r["by_rank"][:5]),
                    f"{100 * r['by_rank_rest']:.0f}%",
                ]
                for r in rows
            ],
        ),
        "",
        "## Is a memory's utility a property of the memory?",
        "",
        f"Effect of a memory in a game = its outcome minus the game's mean over its candidates. "
        f"Over memories recalled for at least {data['min_games']} probes: split-half "
        "reliability (correlation of a memory's mean effect on its odd vs even probes; "
        "Spearman–Brown for the full length), and the variance of memories' mean effects beside "
        "all effects' variance (the rest is game × memory interaction and noise).",
        "",
        markdown_table(
            [
                "games",
                "memories",
                "split-half r",
                "Spearman–Brown",
                "memory-effect var",
                "effect var",
            ],
            [
                [
                    r["games"],
                    r["memories"],
                    f"{r['split_half_r']:.2f}",
                    f"{r['spearman_brown']:.2f}",
                    f"{r['memory_effect_variance']:.3f}",
                    f"{r['residual_variance']:.3f}",
                ]
                for r in rows
            ],
        ),
        "",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--library", type=int, default=200)
    parser.add_argument("--probes", type=int, default=120)
    parser.add_argument("--candidates", type=int, default=20)
    parser.add_argument("--budget", type=int, default=30)
    parser.add_argument("--embedder", choices=("minilm", "hashing"), default="minilm")
    parser.add_argument("--min-games", type=int, default=4)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--heldout", action="store_true", help="test fold, held-out seeds")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    command = "python -m bench.utility_census " + " ".join(sys.argv[1:] if argv is None else argv)
    started = time.perf_counter()
    data = census(args, stream_range(heldout=args.heldout))
    data.update(
        args={k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        machine=machine_info(),
        seconds=time.perf_counter() - started,
        min_games=args.min_games,
    )
    data["summary"] = summarise(data, args.min_games)
    name = "utility_census_heldout" if args.heldout else "utility_census_dev"
    out = write_results(args.out, name, data, markdown(data, command))
    print(markdown(data, command))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
