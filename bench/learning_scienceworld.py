"""ScienceWorld: procedural memory from gold trajectories, replayed and adapted on new variations.

For each task type (``--tasks``; default ``all``: every type whose train gold paths fit the step
budget), the gold trajectories of ``--train`` *train* variations (from position
``--train-start``) are played in the simulator and built into a memory of that task type
(proceduralized; the task description is the key). Then ``--test`` variations of ``--fold``
(test or dev, from position ``--test-start``) are played twice:

- ``none``: the replay-and-adapt agent (:class:`showcase.envs.scienceworld.ReplayAdapter`)
  with no hints, i.e. its exploration only (it focuses on the task's own object and answers
  disambiguation prompts with the option that matches what it meant);
- ``memory``: the same agent handed the procedures graphmem retrieves for the variation's task
  description (two-phase, λ=0.5, k1=5, k2=3; an Episode records them). It replays the nearest
  one, substituting the train variation's objects by the test variation's (from the two task
  descriptions, and objects of the same kind in sight; in a task any thing of a kind will do,
  "find a(n) animal", another of the kind remembered runs focused on, the hints naming focus
  targets as the simulator did), waiting for a life stage not reached yet, skipping steps that
  do not apply, and
  deciding conditional answers ("if conductive, place it in the red box") from what this run
  observes — a measured value against the stated threshold, or the change memory saw before
  each answer — never by copying the remembered answer. After the episode,
  ``finish_episode`` credits what was retrieved (reward = the episode's score, 0..1, negative
  scores as 0) and ``update`` (adjustment) builds the agent's own successful runs into memory
  and reflects on failures (tips).

ScienceWorld is slow (0.1–0.3 s a step with valid actions listed); ``--jobs`` runs task types
in parallel processes. Success is rare for this agent on unseen variations of the harder types;
the partial score (ScienceWorld's 0..100 progress, here 0..1) says how far it got.

Run::

    python -m bench.learning_scienceworld --test 3 --jobs 4
    python -m bench.learning_scienceworld --tasks boil,melt --train 10 --test 5
    python -m bench.learning_scienceworld --fold dev --test-start 5 --test 5
    python -m bench.learning_scienceworld --quick     # a smoke run

``--stream mixed`` plays instead one stream of every task type interleaved, memory holding the
gold runs of all types and the agent's own, at most ``--handover K`` procedures handed over
per episode, beside plain baselines (:mod:`bench.learning_scienceworld_mixed`)::

    python -m bench.learning_scienceworld --stream mixed --handover 5 --heldout
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from bench.common import (
    RESULTS_DIR,
    embedder_label,
    machine_info,
    machine_markdown,
    make_embedder,
    markdown_table,
    matplotlib_figure,
    write_results,
)
from graphmem.config import RetrievalConfig, UpdateStrategy
from graphmem.models import MemoryKind, Namespace, Procedure

log = logging.getLogger(__name__)

DEFAULT_TASKS = (
    "use-thermometer",
    "power-component",
    "find-non-living-thing",
    "find-living-thing",
    "find-plant",
    "chemistry-mix-paint-secondary-color",
)
CONDITIONS = ("none", "memory", "own")
"""none: no memory; memory: gold demonstrations of train variations (imitation), plus the
agent's own successful runs as it goes; own: only the agent's own earlier runs of the task type
(every run kept, vanilla), no demonstration."""
OWN_NAMESPACE = "scienceworld-own"
RETRIEVAL = RetrievalConfig(k1=5, k2=3, lam=0.5, kinds=(MemoryKind.PROCEDURE,))
NAMESPACE = "scienceworld"
GOLD_BUDGET = 500


def memory_hints(mem: Any, hits: Sequence[Any]) -> list[str]:
    """``TASK :: a1; a2`` hints (what ReplayAdapter reads) from successful retrieved procedures."""
    from graphmem.ops.build import procedure_chain
    from showcase.envs.scienceworld import (
        answer_evidence,
        focused_names,
        names_a_kind,
        procedure_hint,
    )

    hints = []
    for hit in hits:
        proc = hit.memory
        if isinstance(proc, Procedure) and proc.success:
            steps, _ = procedure_chain(mem.store, Namespace(NAMESPACE), proc.id)
            if steps:
                pairs = [(s.action, s.observation) for s in steps]
                seen = answer_evidence(proc.task_text, pairs)
                # A task any thing of a kind will do: focus targets as the simulator named them
                # ("dove egg", not "dove"), so the replay can stand in another egg.
                actions = (
                    focused_names(pairs) if names_a_kind(proc.task_text) else [a for a, _ in pairs]
                )
                hints.append(procedure_hint(proc.task_text, actions, seen))
    return hints


def gold_lengths(env: Any, variations: Sequence[int], fold: str) -> list[int]:
    """Length of the simulator's gold path for each variation (nothing is played)."""
    lengths = []
    for v in variations:
        env.reset(v, fold)
        lengths.append(len(env.gold_path()))
    return lengths


def run_task(
    task: str, mem: Any, args: argparse.Namespace, progress: Any
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Gold → memory for ``task``, then each condition on its test variations."""
    from showcase.envs.runner import run_episode
    from showcase.envs.scienceworld import ReplayAdapter, ScienceWorldEnv, gold_trajectory

    env = ScienceWorldEnv(task, step_budget=args.budget)
    episodes: list[dict[str, Any]] = []
    try:
        train = env.variations("train")[args.train_start : args.train_start + args.train]
        test = env.variations(args.fold)[args.test_start : args.test_start + args.test]
        env.list_valid_actions = False
        lengths = gold_lengths(env, train, "train")
        env.list_valid_actions = True
        if not train or not test or (args.tasks == "all" and max(lengths) > args.budget):
            # The budget cannot hold what the task takes: not evaluated (said in the results).
            progress.update(len(train) + len(CONDITIONS) * len(test))
            why = (
                f"only {len(env.variations(args.fold))} {args.fold} variations"
                if not test
                else "no train variations"
                if not train
                else f"longest train gold path {max(lengths)}"
            )
            info = {"task": task, "fits": False, "gold_lengths": lengths, "why": why}
            return info, []
        t0 = time.perf_counter()
        gold_ok = 0
        env.step_budget = GOLD_BUDGET  # a gold path is played to its end, whatever --budget
        for v in train:
            traj = gold_trajectory(env, v, "train")
            gold_ok += traj.success
            if traj.steps:
                mem.build(NAMESPACE, traj)
            progress.update(1)
        env.step_budget = args.budget
        gold_seconds = time.perf_counter() - t0
        for cond in args.conditions:
            for v in test:
                hints: list[str] = []
                episode_id = None
                ns = OWN_NAMESPACE if cond == "own" else NAMESPACE
                if cond != "none":
                    desc = env.reset(v, args.fold).task  # the description the agent will see
                    found = mem.retrieve(ns, desc, RETRIEVAL, open_episode=True)
                    episode_id = found.episode_id
                    hints = memory_hints(mem, found.hits)
                result = run_episode(env, ReplayAdapter(), v, hints, fold=args.fold)
                built = False
                if episode_id is not None:
                    mem.finish_episode(
                        ns, episode_id, max(0.0, result.score), success=result.success
                    )
                    update = mem.update(
                        ns,
                        result.trajectory,
                        strategy=UpdateStrategy.VANILLA
                        if cond == "own"
                        else UpdateStrategy.ADJUSTMENT,
                        episode_id=episode_id,
                    )
                    built = update.built is not None and not update.built.deduplicated
                episodes.append(
                    {
                        "task": task,
                        "condition": cond,
                        "variation": v,
                        "success": result.success,
                        "score": result.score,
                        "steps": result.steps,
                        "seconds": result.seconds,
                        "hints": len(hints),
                        "own_run_built": built,
                    }
                )
                progress.update(1)
    finally:
        env.close()
    info = {
        "task": task,
        "fits": True,
        "gold_lengths": lengths,
        "train_variations": train,
        "test_variations": test,
        "gold_successes": gold_ok,
        "gold_seconds": gold_seconds,
    }
    return info, episodes


def summarise_rows(
    episodes: Sequence[dict[str, Any]], tasks: Sequence[str]
) -> list[dict[str, Any]]:
    rows = []
    for task in [*tasks, "all"]:
        for cond in CONDITIONS:
            eps = [e for e in episodes if e["condition"] == cond and task in ("all", e["task"])]
            if not eps:
                continue
            rows.append(
                {
                    "task": task,
                    "condition": cond,
                    "episodes": len(eps),
                    "solved": sum(e["success"] for e in eps),
                    "success": statistics.fmean(float(e["success"]) for e in eps),
                    "mean_score": statistics.fmean(e["score"] for e in eps),
                    "mean_steps": statistics.fmean(e["steps"] for e in eps),
                    "own_runs_built": sum(e["own_run_built"] for e in eps),
                }
            )
    return rows


def plot(path: Path, rows: Sequence[dict[str, Any]], tasks: Sequence[str]) -> Path:
    with matplotlib_figure(path, width=11, height=4) as fig:
        axes = fig.subplots(1, 2)
        labels = [*tasks, "all"]
        xs = range(len(labels))
        conds = [c for c in CONDITIONS if any(r["condition"] == c for r in rows)]
        width = 0.8 / max(1, len(conds))
        for i, cond in enumerate(conds):
            by = {r["task"]: r for r in rows if r["condition"] == cond}
            offs = [x + (i - (len(conds) - 1) / 2) * width for x in xs]
            axes[0].bar(
                offs, [by[t]["mean_score"] if t in by else 0 for t in labels], width, label=cond
            )
            axes[1].bar(
                offs, [by[t]["success"] if t in by else 0 for t in labels], width, label=cond
            )
        for ax, what in zip(axes, ("mean partial score (0..1)", "success rate"), strict=True):
            ax.set_xticks(list(xs))
            ax.set_xticklabels(labels, rotation=20, fontsize=8)
            ax.set_title(what)
            ax.grid(alpha=0.3, axis="y")
        axes[0].legend()
        fig.suptitle("ScienceWorld: replaying procedures from graphmem on test variations")
    return path


class _NoProgress:
    def update(self, n: int = 1) -> None:
        pass


_EMBEDDERS: dict[str, Any] = {}


def task_job(
    task: str, args: argparse.Namespace
) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, int]]:
    """One task type with a memory of its own: (setup info, episodes, memory counts)."""
    from graphmem.memory import GraphMemory
    from graphmem.stores.embedded import EmbeddedStore

    logging.getLogger("py4j").setLevel(logging.CRITICAL)
    logging.getLogger("graphmem").setLevel(logging.ERROR)
    if args.embedder not in _EMBEDDERS:
        _EMBEDDERS[args.embedder] = make_embedder(args.embedder)
    with tempfile.TemporaryDirectory(prefix="graphmem-sw-") as tmp:
        store = EmbeddedStore.in_memory() if args.store == "memory" else EmbeddedStore.open(tmp)
        with GraphMemory(store, embedder=_EMBEDDERS[args.embedder]) as mem:
            info, episodes = run_task(task, mem, args, _NoProgress())
            counts = {k: v for k, v in mem.store.counts(NAMESPACE).items() if k != "edges"}
    return info, episodes, counts


def execute(args: argparse.Namespace, command: str) -> dict[str, Any]:
    from tqdm import tqdm

    from showcase.envs.scienceworld import ScienceWorldEnv

    if getattr(args, "heldout", False):
        from bench.protocol import SCIENCEWORLD_HELDOUT

        args.fold, args.test_start = SCIENCEWORLD_HELDOUT.fold, SCIENCEWORLD_HELDOUT.start
    args.fold = args.fold or "test"
    if args.quick:
        args.tasks, args.train, args.test, args.budget = "use-thermometer", 1, 1, 8
        args.embedder = "hashing"
    if args.tasks == "all":
        with ScienceWorldEnv(DEFAULT_TASKS[0]) as probe:
            tasks = probe.task_names()
    else:
        tasks = [t for t in args.tasks.split(",") if t]
    args.conditions = [c for c in (args.conditions or ",".join(CONDITIONS)).split(",") if c]
    if wrong := [c for c in args.conditions if c not in CONDITIONS]:
        raise SystemExit(f"unknown condition(s) {', '.join(wrong)}; known: {', '.join(CONDITIONS)}")
    machine = machine_info()
    started = time.perf_counter()
    bar = tqdm(total=len(tasks), desc="scienceworld", unit="task", disable=args.no_progress)
    results: dict[str, tuple[dict[str, Any], list[dict[str, Any]], dict[str, int]]] = {}
    if args.jobs > 1:
        spawn = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(args.jobs, mp_context=spawn) as pool:
            futures = {pool.submit(task_job, task, args): task for task in tasks}
            for future in as_completed(futures):
                results[futures[future]] = future.result()
                bar.set_postfix_str(futures[future])
                bar.update(1)
    else:
        for task in tasks:
            bar.set_postfix_str(task)
            results[task] = task_job(task, args)
            bar.update(1)
    bar.close()
    infos = [results[t][0] for t in tasks]
    episodes = [e for t in tasks for e in results[t][1]]
    memories: dict[str, int] = {}
    for t in tasks:
        for kind, n in results[t][2].items():
            memories[kind] = memories.get(kind, 0) + n
    tasks = [i["task"] for i in infos if i["fits"]]
    rows = summarise_rows(episodes, tasks)
    setup = {
        "command": command,
        "machine": machine,
        "tasks": infos,
        "train": args.train,
        "train_start": args.train_start,
        "test": args.test,
        "test_start": args.test_start,
        "fold": args.fold,
        "budget": args.budget,
        "embedder": embedder_label(args.embedder),
        "store": "in memory" if args.store == "memory" else "on disk in a temporary directory",
        "retrieval": RETRIEVAL.model_dump(mode="json"),
        "memories_at_end": memories,
        "seconds": time.perf_counter() - started,
    }
    data = {"setup": setup, "results": rows, "episodes": episodes}
    name = "learning_scienceworld" + ("_heldout" if getattr(args, "heldout", False) else "")
    files = write_results(args.out, name, data, markdown(rows, setup))
    files.append(plot(args.out / f"{name}.png", rows, tasks))
    return {"rows": rows, "files": files, "setup": setup}


def markdown(rows: Sequence[dict[str, Any]], setup: dict[str, Any]) -> str:
    head = ["task", "condition", "solved", "success", "mean score", "mean steps", "own runs built"]
    table = [
        [
            r["task"],
            r["condition"],
            f"{r['solved']}/{r['episodes']}",
            f"{r['success']:.0%}",
            f"{r['mean_score']:.2f}",
            f"{r['mean_steps']:.1f}",
            r["own_runs_built"],
        ]
        for r in rows
    ]
    fit = [i for i in setup["tasks"] if i["fits"]]
    gold = ", ".join(f"{i['task']} {i['gold_successes']}/{len(i['train_variations'])}" for i in fit)
    skipped = ", ".join(
        f"{i['task']} ({i.get('why') or max(i['gold_lengths'], default=0)})"
        for i in setup["tasks"]
        if not i["fits"]
    )
    by = {(r["task"], r["condition"]): r for r in rows}
    worse = [
        f"{t} ({c})"
        for t, c in by
        if c != "none"
        and (t, "none") in by
        and (by[t, c]["solved"], by[t, c]["mean_score"])
        < (by[t, "none"]["solved"], by[t, "none"]["mean_score"])
    ]
    held = ", ".join(f"{v} {k}" for k, v in setup["memories_at_end"].items() if v)
    return "\n".join(
        [
            "# Learning on ScienceWorld: procedures from gold trajectories, replayed and adapted",
            "",
            f"Command: `{setup['command']}`",
            "",
            machine_markdown(setup["machine"]),
            "",
            f"- memory: gold trajectories of train variations {setup['train_start']}.."
            f"{setup['train_start'] + setup['train'] - 1} (by position in the train fold) per "
            "task, one memory per task type "
            f"(gold runs that succeeded: {gold}), proceduralized, key = task description",
            f"- task types evaluated: {len(fit)}, every type whose train gold paths fit the step "
            f"budget and that has the evaluated variations; not evaluated: {skipped or 'none'}",
            f"- evaluation: {setup['fold']} variations {setup['test_start']}.."
            f"{setup['test_start'] + setup['test'] - 1} (by position) per task, step budget "
            f"{setup['budget']}; agent: ReplayAdapter (replays the nearest retrieved procedure "
            "with objects/places substituted, explores otherwise)",
            "- retrieval: two-phase λ=0.5, k1=5, k2=3 over procedures; reward = score (0..1); "
            "update: adjustment (own successful runs built, tips on failures); condition `own`: "
            "no gold, only the agent's own earlier runs of the type (vanilla: every run kept), "
            "so its first variation has nothing to draw on",
            "- `memory` is imitation from demonstrations (gold runs), not learning from the "
            "agent's own experience; `own` is the latter",
            f"- embedder: {setup['embedder']}; store: embedded ({setup['store']}); memory at the "
            f"end: {held}; wall time {setup['seconds']:.0f} s",
            "",
            markdown_table(head, table),
            "",
            "Task types where memory did worse than none (solved, then mean score): "
            + (", ".join(worse) or "none"),
        ]
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tasks",
        default="all",
        help="comma list of task types (run whatever their gold paths' length), or 'all': every "
        "type whose train gold paths fit the budget",
    )
    parser.add_argument("--train", type=int, default=5, help="gold train variations per task")
    parser.add_argument("--train-start", type=int, default=0, help="first train variation (pos)")
    parser.add_argument("--test", type=int, default=5, help="evaluated variations per task")
    parser.add_argument("--test-start", type=int, default=0, help="first evaluated variation")
    parser.add_argument(
        "--stream",
        choices=("types", "mixed"),
        default="types",
        help="types: one memory per task type (default); mixed: every type interleaved in one "
        "stream, one memory, a hand-over budget (bench.learning_scienceworld_mixed)",
    )
    parser.add_argument(
        "--handover",
        type=int,
        default=5,
        help="--stream mixed: procedures handed over per episode (all but plain; default 5)",
    )
    parser.add_argument(
        "--fold",
        choices=("test", "dev"),
        default=None,
        help="evaluated fold (default: test; --stream mixed: the protocol's dev tuning fold)",
    )
    parser.add_argument(
        "--heldout",
        action="store_true",
        help="evaluate the held-out test variations of bench.protocol (reported figures)",
    )
    parser.add_argument("--budget", type=int, default=60, help="steps per episode (60)")
    parser.add_argument(
        "--conditions",
        default=None,
        help=f"comma list of {', '.join(CONDITIONS)} (default: all); --stream mixed: of none, "
        "plain, flat-topk, similarity, two-phase (default: all five)",
    )
    parser.add_argument("--embedder", choices=("minilm", "hashing"), default="minilm")
    parser.add_argument("--store", choices=("disk", "memory"), default="disk")
    parser.add_argument(
        "--jobs", type=int, default=1, help="task types (--stream mixed: conditions) in parallel"
    )
    parser.add_argument("--quick", action="store_true", help="1 task, 1+1 variations, 8 steps")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    parser.add_argument("--tag", default="", help="--stream mixed: suffix of the result files")
    parser.add_argument("--no-progress", action="store_true")


def main(
    argv: Sequence[str] | None = None, prog: str = "python -m bench.learning_scienceworld"
) -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    logging.getLogger("py4j").setLevel(logging.CRITICAL)
    logging.getLogger("graphmem").setLevel(logging.ERROR)
    command = " ".join([prog, *(argv if argv is not None else sys.argv[1:])])
    if args.stream == "mixed":
        from bench import learning_scienceworld_mixed as mixed

        mixed.print_summary(mixed.run(args, command))
        return 0
    out = execute(args, command)
    for r in out["rows"]:
        print(
            f"  {r['task']:<24} {r['condition']:<7} solved {r['solved']}/{r['episodes']}  "
            f"score {r['mean_score']:.2f}  steps {r['mean_steps']:.1f}"
        )
    for path in out["files"]:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
