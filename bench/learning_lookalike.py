"""Look-alike memories that mislead: does two-phase retrieval (λ>0) beat similarity-only?

A synthetic task stream where similarity cannot tell good memories from bad ones. There are
``--families`` chores ("descale the kettle", "reset the router", ...). A task is one chore with
random phrasing around it ("could you descale the kettle on floor 7 before noon"), so every task
text is new, and tasks of one chore read alike. Each chore needs its own procedure (a fixed
action sequence). Memory starts with, per chore, procedures built by graphmem from trajectories:

- one *good* procedure (a past success, keyed by one phrasing of the chore);
- ``--bad`` *stale* procedures: recorded as successes, keyed by other phrasings of the same
  chore, but whose steps no longer work (a wrong tool, a step out of order).

Good and stale procedures are equally similar to a new task (their keys differ only in phrasing),
so λ=0 picks a stale one most of the time; only the utility Q learned from outcomes can push the
stale ones down. The agent is handed one procedure (k1=5 recalled, k2=1 kept) and follows it: the
right steps solve the task in a few steps; wrong steps fail, after which it explores with the
rest of its budget (small chance of success). Without memory it explores from the start.

Every episode goes through graphmem: ``retrieve`` (an Episode records the hit) →
``finish_episode`` (Q ← Q + α(R − Q) on the hit) → ``update`` with ``validation`` (a success is
built as a new procedure keyed by its task text; ``--frozen`` skips this, and then demotion
is applied directly to the hits where a condition has it). Demotion of
persistently low-Q memories (graphmem's obsolescence, on by default in MemoryConfig) is switched
off in the main conditions so that the retrieval score alone is compared; the ``+demotion`` rows
switch it on.

Baselines beside graphmem (issue 28's names): ``plain`` hands the agent every procedure, and it
follows the steps most of the chore's procedures give (ties: the newest), as a reader of the
whole list would; ``flat-topk`` is a flat vector list, the procedure with the nearest key by
cosine (K = 1), no Q, no graph. Both keep the same procedures and add each success, as
graphmem's validation update does. Every condition meets the same tasks in the same order (the
step counts that depend on outcomes draw from a stream of their own), so two-phase is compared
with each baseline task by task (sign test, bootstrap interval).

Q0 variants reproduce docs/design.md §6: with rewards {0, 1} and Q0 = 0 a failure teaches nothing
(Q stays 0), so stale look-alikes are never pushed down; Q0 = 0.5 (neutral) or rewards ±1 fix it.

Run::

    python -m bench.learning_lookalike                 # 300 episodes × 3 stream seeds
    python -m bench.learning_lookalike --quick         # a smoke run
"""

from __future__ import annotations

import argparse
import logging
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from bench.common import (
    RESULTS_DIR,
    FlatCosine,
    embedder_label,
    machine_info,
    machine_markdown,
    make_embedder,
    markdown_table,
    write_results,
)
from bench.learning import plot_runs
from bench.paired import compare
from graphmem.config import MemoryConfig, ObsolescenceConfig, RetrievalConfig, UpdateStrategy
from graphmem.models import MemoryKind, Namespace, Trajectory, TrajectoryStep, seeded_ids
from showcase.metrics import EpisodeRecord, summarise

log = logging.getLogger(__name__)

CHORES = (
    ("descale", "kettle", "kitchenette", "descaler"),
    ("reset", "router", "server room", "paperclip"),
    ("water", "ferns", "atrium", "watering can"),
    ("restock", "printer paper", "copy room", "paper ream"),
    ("feed", "office fish", "lobby", "fish flakes"),
    ("empty", "recycling bin", "loading bay", "bin bag"),
    ("charge", "spare laptop", "it desk", "usb-c charger"),
    ("refill", "coffee beans", "pantry", "bean bag"),
    ("clean", "whiteboard", "meeting room", "whiteboard spray"),
    ("replace", "hallway bulb", "hallway", "step ladder"),
    ("sort", "incoming mail", "mail room", "letter opener"),
    ("lock", "bike shed", "car park", "padlock key"),
)
_OPENERS = ("please", "could you", "remember to", "time to", "go and", "", "kindly", "we need to")
_PLACES = ("on floor {n}", "in building {b}", "in the {w} wing", "at site {n}", "")
_CLOSERS = ("before noon", "today", "after the stand-up", "for team {t}", "", "by friday")
_WINGS = ("north", "south", "east", "west")
_TOOLS = tuple(c[3] for c in CHORES)


def task_text(chore: int, rng: random.Random) -> str:
    """One phrasing of chore ``chore``: new words around the same verb and object."""
    verb, obj, _, _ = CHORES[chore]
    place = rng.choice(_PLACES).format(
        n=rng.randint(1, 40), b=rng.choice("ABCDEFGH"), w=rng.choice(_WINGS)
    )
    closer = rng.choice(_CLOSERS).format(t=rng.randint(1, 30))
    return " ".join(p for p in (rng.choice(_OPENERS), verb, "the", obj, place, closer) if p)


def good_steps(chore: int) -> list[str]:
    verb, obj, room, tool = CHORES[chore]
    return [f"go to the {room}", f"take the {tool}", f"{verb} the {obj}", f"check the {obj}"]


def stale_steps(chore: int, variant: int) -> list[str]:
    """Steps that used to work, or nearly: a wrong tool, or the check before the work."""
    verb, obj, room, tool = CHORES[chore]
    other = _TOOLS[(chore + 1 + variant) % len(_TOOLS)]
    if variant % 2 == 0:
        return [f"go to the {room}", f"take the {other}", f"{verb} the {obj}", f"check the {obj}"]
    return [f"go to the {room}", f"check the {obj}", f"take the {tool}", f"ask about the {obj}"]


def trajectory(text: str, actions: Sequence[str], success: bool) -> Trajectory:
    return Trajectory(
        task=text,
        steps=[TrajectoryStep(action=a, observation="done") for a in actions],
        reward=1.0 if success else 0.0,
        success=success,
    )


@dataclass(frozen=True)
class Condition:
    name: str
    label: str
    kind: Literal["graphmem", "none", "flat", "plain"] = "graphmem"
    lam: float = 0.5
    q0: float = 0.5
    failure_reward: float = 0.0
    demotion: bool = False

    @property
    def use_memory(self) -> bool:
        return self.kind != "none"


CONDITIONS: dict[str, Condition] = {
    c.name: c
    for c in (
        Condition("none", "no memory", kind="none"),
        Condition(
            "plain",
            "every procedure handed over; it follows the steps most of the chore's ones give",
            kind="plain",
        ),
        Condition("flat-topk", "a flat vector list, top-1 by cosine (no Q, no graph)", kind="flat"),
        Condition("similarity", "graphmem λ=0 (Q0=0.5)", lam=0.0),
        Condition("two-phase", "graphmem λ=0.5, Q0=0.5, rewards {0,1}"),
        Condition("two-phase-q0", "λ=0.5, Q0=0, rewards {0,1}", q0=0.0),
        Condition("two-phase-q0-pm1", "λ=0.5, Q0=0, rewards ±1", q0=0.0, failure_reward=-1.0),
        Condition("similarity+demotion", "λ=0 with graphmem's demotion", lam=0.0, demotion=True),
        Condition("two-phase+demotion", "λ=0.5, Q0=0.5, with demotion", demotion=True),
    )
}
"""The issue-28 baselines (``plain``, ``flat-topk``) beside graphmem's ``similarity`` and
``two-phase``. Graph features (links, evolution) are not used by this stream: nothing here
calls ``evolve``, and retrieval does not read links."""


@dataclass
class Params:
    episodes: int = 300
    families: int = 12
    bad: int = 3
    budget: int = 20
    explore_success: float = 0.2
    recover_success: float = 0.1
    frozen: bool = False


class FlatProcedures:
    """The baselines' memory: a flat list of (key, steps), no Q, no graph, no episodes."""

    def __init__(self, embedder: Any) -> None:
        self.flat = FlatCosine(embedder)
        self.keys: list[str] = []
        self.steps: list[list[str]] = []

    def add(self, key: str, steps: Sequence[str]) -> None:
        self.flat.add(key)
        self.keys.append(key)
        self.steps.append(list(steps))

    def nearest(self, text: str) -> list[str]:
        """flat-topk with K = 1: the steps of the procedure whose key is nearest by cosine."""
        best = self.flat.top(text, 1)
        return self.steps[best[0]] if best else []

    def most_given(self, verb: str, obj: str) -> list[str]:
        """plain: handed every procedure, the agent reads those whose key names the chore and
        follows the steps most of them give (ties: the newest), as a reader of the whole list
        would. No similarity, no Q."""
        chore = f"{verb} the {obj}"
        counts: dict[tuple[str, ...], tuple[int, int]] = {}
        for i, (key, steps) in enumerate(zip(self.keys, self.steps, strict=True)):
            if chore in key:
                n, _ = counts.get(tuple(steps), (0, 0))
                counts[tuple(steps)] = (n + 1, i)
        if not counts:
            return []
        return list(max(counts.items(), key=lambda item: item[1])[0])


def run_stream(
    cond: Condition,
    params: Params,
    stream_seed: int,
    embedder: Any,
    store_dir: Path | None,
) -> list[EpisodeRecord]:
    """One stream under ``cond``; returns per-episode records (task = the chore)."""
    from graphmem.memory import GraphMemory
    from graphmem.ops.build import procedure_chain
    from graphmem.ops.obsolescence import demote
    from graphmem.stores.embedded import EmbeddedStore

    rng = random.Random(stream_seed)
    world = random.Random(stream_seed + 10_000)  # memory contents: the same for every condition
    steps_rng = random.Random(stream_seed + 20_000)  # step counts only: the tasks stay paired
    config = MemoryConfig(
        q0=cond.q0,
        failure_reward=cond.failure_reward,
        obsolescence=ObsolescenceConfig(enabled=cond.demotion),
    )
    store = EmbeddedStore.open(store_dir) if store_dir else EmbeddedStore.in_memory()
    mem = GraphMemory(store, embedder=embedder, config=config)
    ns = "lookalike"
    retrieval = RetrievalConfig(k1=5, k2=1, lam=cond.lam, kinds=(MemoryKind.PROCEDURE,))
    records: list[EpisodeRecord] = []
    flat = FlatProcedures(embedder)  # plain / flat-topk: the same procedures, no graphmem
    try:
        if cond.use_memory:
            for chore in range(params.families):
                seeded = [good_steps(chore)] + [stale_steps(chore, v) for v in range(params.bad)]
                world.shuffle(seeded)
                for seq in seeded:
                    key = task_text(chore, world)
                    if cond.kind == "graphmem":
                        mem.build(ns, trajectory(key, seq, True))
                    else:
                        flat.add(key, seq)
        blocks = max(1, params.episodes // 50)
        size = -(-params.episodes // blocks)
        for i in range(params.episodes):
            chore = rng.randrange(params.families)
            text = task_text(chore, rng)
            luck = rng.random()
            followed: list[str] = []
            hit_ids: list[str] = []
            episode_id = None
            if cond.kind == "flat":
                followed = flat.nearest(text)
            elif cond.kind == "plain":
                followed = flat.most_given(CHORES[chore][0], CHORES[chore][1])
            elif cond.kind == "graphmem":
                found = mem.retrieve(ns, text, retrieval, open_episode=True)
                episode_id = found.episode_id
                hit_ids = [h.memory.id for h in found.hits]
                if found.hits:
                    chain, _ = procedure_chain(mem.store, Namespace(ns), found.hits[0].memory.id)
                    followed = [s.action for s in chain]
            if followed == good_steps(chore):
                success, steps = True, len(followed)
            elif followed:
                success = luck < params.recover_success
                steps = len(followed) + (steps_rng.randint(5, 12) if success else params.budget)
                steps = min(steps, params.budget)
            else:
                success = luck < params.explore_success
                steps = steps_rng.randint(10, params.budget) if success else params.budget
            records.append(
                EpisodeRecord(task=str(chore), epoch=i // size, success=success, steps=steps)
            )
            if cond.kind in ("flat", "plain") and success and not params.frozen:
                flat.add(text, good_steps(chore))  # as graphmem's validation builds successes
            if episode_id is not None:
                reward = config.success_reward if success else config.failure_reward
                mem.finish_episode(ns, episode_id, reward, success=success)
                if not params.frozen:
                    actions = good_steps(chore) if success else followed
                    mem.update(
                        ns,
                        trajectory(text, actions or ["explore"], success),
                        strategy=UpdateStrategy.VALIDATION,
                        episode_id=episode_id,
                    )
                elif cond.demotion and hit_ids:
                    # Without update() nothing demotes; do what update() would do on its hits.
                    demote(mem, Namespace(ns), hit_ids)
    finally:
        mem.close()
    return records


def _mean_sd(values: Sequence[float]) -> tuple[float, float]:
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def execute(args: argparse.Namespace, command: str) -> dict[str, Any]:
    from tqdm import tqdm

    if args.quick:
        args.episodes, args.seeds, args.embedder = 12, 1, "hashing"
    names = list(CONDITIONS) if args.conditions == "all" else args.conditions.split(",")
    unknown = [n for n in names if n not in CONDITIONS]
    if unknown:
        raise SystemExit(
            f"unknown condition(s) {', '.join(unknown)}; known: {', '.join(CONDITIONS)}"
        )
    params = Params(
        episodes=args.episodes, families=args.families, bad=args.bad, frozen=args.frozen
    )
    machine = machine_info()
    embedder = make_embedder(args.embedder)
    started = time.perf_counter()
    per_cond: dict[str, list[list[EpisodeRecord]]] = {n: [] for n in names}
    bar = tqdm(
        total=len(names) * args.seeds,
        desc="look-alike streams",
        unit="stream",
        disable=args.no_progress,
    )
    with tempfile.TemporaryDirectory(prefix="graphmem-lookalike-") as tmp:
        for seed in range(args.seeds):
            for name in names:
                bar.set_postfix_str(name)
                store_dir = None if args.store == "memory" else Path(tmp) / f"{name}-{seed}"
                # Seeded ids: tied look-alikes rank by id, so random ids made runs differ.
                with seeded_ids(seed):
                    per_cond[name].append(
                        run_stream(CONDITIONS[name], params, seed, embedder, store_dir)
                    )
                bar.update(1)
    bar.close()
    rows: list[dict[str, Any]] = []
    for name in names:
        sums = [summarise(recs) for recs in per_cond[name]]
        success, success_sd = _mean_sd([s.success_rate for s in sums])
        last, last_sd = _mean_sd([s.success_per_epoch[-1] for s in sums])
        steps, _ = _mean_sd([s.mean_steps for s in sums])
        n_blocks = len(sums[0].success_per_epoch)
        rows.append(
            {
                "condition": name,
                "label": CONDITIONS[name].label,
                "success": success,
                "success_sd": success_sd,
                "last_block": last,
                "last_block_sd": last_sd,
                "mean_steps": steps,
                "forgetting_rate": statistics.fmean(s.forgetting_rate for s in sums),
                "success_per_block": [
                    statistics.fmean(s.success_per_epoch[b] for s in sums) for b in range(n_blocks)
                ],
                "cumulative_success": [
                    statistics.fmean(s.cumulative_success[b] for s in sums) for b in range(n_blocks)
                ],
                "steps_per_block": [
                    statistics.fmean(s.steps_per_epoch[b] for s in sums) for b in range(n_blocks)
                ],
                "per_seed_success": [s.success_rate for s in sums],
            }
        )
    seconds = time.perf_counter() - started
    setup = {
        "command": command,
        "machine": machine,
        "params": asdict(params),
        "stream_seeds": args.seeds,
        "embedder": embedder_label(args.embedder),
        "store": "in memory" if args.store == "memory" else "on disk in a temporary directory",
        "retrieval": {"k1": 5, "k2": 1, "kinds": ["Procedure"]},
        "conditions": {n: asdict(CONDITIONS[n]) for n in names},
        "seconds": seconds,
    }
    block = -(-params.episodes // max(1, params.episodes // 50))
    name = "learning_lookalike" + ("_frozen" if args.frozen else "")
    paired = comparisons(per_cond)
    data = {"setup": setup, "results": rows, "comparisons": paired}
    files = write_results(args.out, name, data, markdown(rows, setup, block, paired))
    title = f"look-alike stream ({params.episodes} tasks, mean of {args.seeds} streams)"
    files.append(plot_runs(args.out / f"{name}.png", title, rows, block))
    return {"rows": rows, "files": files, "setup": setup}


COMPARED = ("similarity", "flat-topk", "plain", "none")


def comparisons(per_cond: dict[str, list[list[EpisodeRecord]]]) -> list[dict[str, Any]]:
    """two-phase against each baseline, task by task over all streams (the conditions see the
    same tasks in the same order: only step counts draw from another stream)."""
    if "two-phase" not in per_cond:
        return []
    mine = [float(r.success) for recs in per_cond["two-phase"] for r in recs]
    out = []
    for other in COMPARED:
        if other in per_cond:
            theirs = [float(r.success) for recs in per_cond[other] for r in recs]
            out.append({"a": "two-phase", "b": other, **asdict(compare(mine, theirs))})
    return out


def markdown(
    rows: Sequence[dict[str, Any]],
    setup: dict[str, Any],
    block: int,
    paired: Sequence[dict[str, Any]] = (),
) -> str:
    p = setup["params"]
    head = ["condition", "success (mean ± sd)", "last block", "mean steps", "per stream"]
    table = [
        [
            f"`{r['condition']}` {r['label']}",
            f"{r['success']:.2f} ± {r['success_sd']:.2f}",
            f"{r['last_block']:.2f} ± {r['last_block_sd']:.2f}",
            f"{r['mean_steps']:.1f}",
            " / ".join(f"{x:.2f}" for x in r["per_seed_success"]),
        ]
        for r in rows
    ]
    n_blocks = max(len(r["success_per_block"]) for r in rows)
    bhead = ["condition"] + [f"{i * block + 1}–{(i + 1) * block}" for i in range(n_blocks)]
    brows = [[r["condition"], *[f"{x:.2f}" for x in r["success_per_block"]]] for r in rows]
    by = {r["condition"]: r for r in rows}
    margin = ""
    margins = [
        f"{other} {by['two-phase']['success'] - by[other]['success']:+.2f}"
        for other in ("similarity", "flat-topk", "plain", "none")
        if "two-phase" in by and other in by
    ]
    if margins:
        margin = "Two-phase (λ=0.5, Q0=0.5) minus: **" + "**, **".join(margins) + "** success."
    return "\n".join(
        [
            "# Learning with look-alike memories (synthetic stream)",
            "",
            f"Command: `{setup['command']}`",
            "",
            machine_markdown(setup["machine"]),
            "",
            f"- {p['episodes']} tasks per stream, {setup['stream_seeds']} streams (seeds "
            f"0–{setup['stream_seeds'] - 1}); {p['families']} chores, each with 1 good and "
            f"{p['bad']} stale look-alike procedures in memory at the start",
            f"- agent: follows the one procedure handed over (k1=5, k2=1); right steps solve the "
            f"task, wrong steps fail it unless exploring after them succeeds "
            f"(p={p['recover_success']}); no memory: explores (p={p['explore_success']}); "
            f"budget {p['budget']} steps",
            "- memory-set update: "
            + ("none (frozen memory)" if p["frozen"] else "validation (successes are built)")
            + f"; embedder: {setup['embedder']}; store: embedded ({setup['store']}); "
            f"wall time {setup['seconds']:.0f} s",
            "",
            margin,
            "",
            *(
                [
                    "Paired, task by task over all streams (exact sign test on the tasks where "
                    "the two differ; 95 % bootstrap interval):",
                    "",
                    markdown_table(
                        [
                            "a vs b",
                            "tasks",
                            "Δ success",
                            "a only / b only",
                            "sign test p",
                            "95 % CI",
                        ],
                        [
                            [
                                f"{c['a']} vs {c['b']}",
                                str(c["n"]),
                                f"{100 * c['diff']:+.1f} pp",
                                f"{c['better']} / {c['worse']}",
                                f"{c['p_sign']:.3g}",
                                f"[{100 * c['ci_low']:+.1f}, {100 * c['ci_high']:+.1f}]",
                            ]
                            for c in paired
                        ],
                    ),
                    "",
                ]
                if paired
                else []
            ),
            markdown_table(head, table),
            "",
            "Q0=0 with rewards ±1 is Q0=0.5 with rewards {0, 1} doubled and shifted: the z-scores "
            "over a pool are the same, so those two rows should agree (up to float ties).",
            "",
            f"## Success per block of {block} (mean over streams)",
            "",
            markdown_table(bhead, brows),
        ]
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--episodes", type=int, default=300)
    parser.add_argument("--seeds", type=int, default=3, help="independent streams (3)")
    parser.add_argument("--families", type=int, default=12, help="chores (12)")
    parser.add_argument("--bad", type=int, default=3, help="stale look-alikes per chore (3)")
    parser.add_argument("--frozen", action="store_true", help="no memory-set update")
    parser.add_argument("--conditions", default="all")
    parser.add_argument("--embedder", choices=("minilm", "hashing"), default="hashing")
    parser.add_argument("--store", choices=("disk", "memory"), default="disk")
    parser.add_argument("--quick", action="store_true", help="12 tasks, 1 stream: a smoke run")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    parser.add_argument("--no-progress", action="store_true")


def main(
    argv: Sequence[str] | None = None, prog: str = "python -m bench.learning_lookalike"
) -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    logging.getLogger("graphmem").setLevel(logging.ERROR)
    command = " ".join([prog, *(argv if argv is not None else sys.argv[1:])])
    out = execute(args, command)
    for r in out["rows"]:
        print(
            f"  {r['condition']:<20} success {r['success']:.2f} ± {r['success_sd']:.2f}  "
            f"last block {r['last_block']:.2f}  steps {r['mean_steps']:.1f}"
        )
    for path in out["files"]:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
