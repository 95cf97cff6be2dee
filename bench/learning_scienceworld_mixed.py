"""A mixed ScienceWorld stream where memory must choose: graphmem beside plain memories.

``python -m bench.learning_scienceworld --stream mixed``. The task types (every type whose train
gold paths fit the step budget and that has the evaluated variations) are interleaved into one
stream of (task type, variation) episodes, in rounds of one variation per type shuffled per
round, played in the same order by every condition (paired episodes).

Memory starts with one procedure per gold run of ``--train`` train variations of *each* type
(all types in one memory), and grows with the agent's own successful runs as they come
(graphmem: ``update`` with adjustment, as the per-type bench does; the other conditions keep
the same successful runs). So memory holds hundreds of procedures, look-alikes among them
(the same task type with other objects, substances, colours, animals), far more than the
agent is handed: at most ``--handover K`` procedures reach it per episode in every condition
but ``plain``. A procedure's key is its task description; what is handed over is its
``TASK :: a1; a2; ... [:: EVIDENCE]`` hint, the same text in every condition.

The agent (:class:`showcase.envs.scienceworld.ReplayAdapter`) is the same in every
condition. Its own choice rule: of the procedures it is handed (duplicates of one description
dropped, the first handed kept), it replays the one whose task description is most similar to
its task by token Jaccard (:func:`~showcase.envs.scienceworld.similarity`), the first
handed on a tie; all of them feed its room map, its stand-ins for a missing object, where it
looks first, and the evidence for conditional answers. It never tries a second one: an
episode is one attempt.

Conditions:

- ``none``: the same agent handed nothing (it explores);
- ``plain``: every procedure so far handed over, newest first (no retrieval; the agent's
  Jaccard rule picks);
- ``flat-topk``: a flat numpy cosine top-K over the procedures' keys (no Q, no graph);
- ``similarity``: graphmem, λ = 0 (phase A recalls 4K, phase B keeps K by similarity);
- ``two-phase``: graphmem's default two-phase retrieval (λ = 0.5, ``q_prior`` default), phase
  A 4K candidates, K kept; credit by use: only the procedure replayed is credited
  (``finish_episode(used=[it])``), reward = the episode's score (0..1, a failed task as 0).

ScienceWorld's score is its 0..100 progress divided by 100; a task failed outright scores −1,
counted here as 0 (as the reward is). Variations come from :mod:`bench.protocol`:
``SCIENCEWORLD_TUNING`` (dev fold) for tuning, ``SCIENCEWORLD_HELDOUT`` with ``--heldout``.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.common import (
    FlatCosine,
    embedder_label,
    machine_info,
    machine_markdown,
    make_embedder,
    markdown_table,
    write_results,
)
from bench.learning_harness import (
    CANDIDATES,
    Condition,
    GraphmemBase,
    ItemList,
    View,
    check_handover,
    interleave,
    paired_comparisons,
    pick_conditions,
    play_conditions,
    play_game,
    run_in_worker,
)

__all__ = ["CANDIDATES"]  # the harness's

log = logging.getLogger(__name__)


def _graphmem(name: str, label: str, **retrieval: Any) -> Condition:
    """A graphmem condition: the library's retrieval defaults (λ, q_scale, ...) but for
    ``retrieval``."""
    return Condition(name, label, "graphmem", **{"lam": None, "q_scale": None, **retrieval})


SPECS: dict[str, Condition] = {
    c.name: c
    for c in (
        Condition("none", "no memory (the same agent, exploring)", "none"),
        Condition("plain", "every procedure handed over, agent's Jaccard rule picks", "plain"),
        Condition("flat-topk", "numpy cosine top-K over procedure keys", "flat"),
        # plain cosine ranking: every candidate handed over
        _graphmem("similarity", "graphmem λ=0", lam=0.0, abstain=False),
        _graphmem("two-phase", "graphmem two-phase (library defaults, λ=0.5), credit by use"),
        _graphmem(
            "two-phase-noabstain",
            "graphmem two-phase, its defaults but abstention off",
            abstain=False,
        ),
        _graphmem(
            "two-phase-abstain", "graphmem two-phase, its defaults with abstention on", abstain=True
        ),
        # the procedures of the task cluster and linked ones too
        _graphmem(
            "two-phase-expand",
            "graphmem two-phase, its defaults with graph expansion of phase A",
            expand="links+tasks",
        ),
    )
}
"""The conditions, by name: what each memory is, and for graphmem its retrieval."""
CONDITIONS = tuple(SPECS)
LABELS = {c.name: c.label for c in SPECS.values()}
HANDOVER = 5
ORDER_SEED = 20_261_126
"""Seeds the order in which task types interleave (the same for every condition)."""
NAMESPACE = "scienceworld-mixed"
COMPARISONS = (
    ("two-phase", "flat-topk"),
    ("two-phase", "similarity"),
    ("two-phase", "plain"),
    ("two-phase", "none"),
    ("two-phase", "two-phase-noabstain"),
    ("two-phase-abstain", "two-phase"),
    ("two-phase-expand", "two-phase"),
    ("similarity", "flat-topk"),
    ("plain", "none"),
    ("flat-topk", "none"),
)


def mixed_plan(tasks: Sequence[str], per_task: int) -> list[tuple[str, int]]:
    """(task type, position in the evaluated fold from the start) episodes: rounds of one
    variation per type, the order within a round shuffled (fixed seed).

    >>> mixed_plan(["a", "b", "c"], 2)[:3]
    [('a', 0), ('c', 0), ('b', 0)]
    """
    return interleave(tasks, len(tasks) * per_task, order_seed=ORDER_SEED)


def trajectory_hint(task: str, pairs: Sequence[tuple[str, str]]) -> str:
    """The ReplayAdapter hint of a run, as the per-type bench builds it from a procedure."""
    from showcase.envs.scienceworld import (
        answer_evidence,
        focused_names,
        names_a_kind,
        procedure_hint,
    )

    seen = answer_evidence(task, pairs)
    actions = focused_names(pairs) if names_a_kind(task) else [a for a, _ in pairs]
    return procedure_hint(task, actions, seen)


@dataclass(frozen=True)
class Item:
    """One procedure as handed over: its id, source (gold / own) and hint text."""

    id: str
    source: str
    hint: str

    @property
    def description(self) -> str:
        return self.hint.partition("::")[0].strip()


def _item(item_id: str, source: str, traj: Any) -> Item:
    pairs = [(s.action, s.observation) for s in traj.steps]
    return Item(item_id, source, trajectory_hint(traj.task, pairs))


# ---- memories ---------------------------------------------------------------------------------


class NoMemory:
    def start(self, task: str) -> list[Item]:
        return []

    def learn(self, traj: Any, source: str) -> bool:
        """Keep a successful run (gold or own); whether a new item was made."""
        return False

    def finish(self, used: Sequence[str], score: float, success: bool) -> None:
        pass

    def size(self) -> int:
        return 0


class PlainMemory(ItemList[Item], NoMemory):
    """Every successful run so far, handed over newest first."""

    def start(self, task: str) -> list[Item]:
        return self.newest_first()

    def learn(self, traj: Any, source: str) -> bool:
        if not traj.success or not traj.steps:
            return False
        self.add(_item(str(len(self.items)), source, traj))
        return True


class FlatTopK(PlainMemory):
    """A flat list of (key vector, item): cosine top-K of the task description, numpy only."""

    def __init__(self, embedder: Any, k: int) -> None:
        super().__init__()
        self.flat, self.k = FlatCosine(embedder), k

    def learn(self, traj: Any, source: str) -> bool:
        if not super().learn(traj, source):
            return False
        self.flat.add(traj.task)
        return True

    def start(self, task: str) -> list[Item]:
        return [self.items[i] for i in self.flat.top(task, self.k)]  # ties: the older first


class GraphmemMemory(GraphmemBase, NoMemory):
    """graphmem procedures: gold runs built, own runs by ``update`` (adjustment), two-phase
    retrieval into an Episode, credit by use."""

    namespace = NAMESPACE

    def __init__(self, embedder: Any, condition: Condition, k: int) -> None:
        from graphmem.models import MemoryKind

        super().__init__(embedder, condition, k, (MemoryKind.PROCEDURE,))
        self.items: dict[str, Item] = {}
        self.episode_id: str | None = None
        self.pending: Any = None

    def _keep(self, built: Any, source: str, traj: Any) -> bool:
        if built is None or built.deduplicated or not traj.success:
            return False
        proc = built.procedure  # the retrievable one (a proceduralized build's raw steps
        self.items[proc.id] = _item(proc.id, source, traj)  # hang under it, not embedded)
        return True

    def learn(self, traj: Any, source: str) -> bool:
        from graphmem.config import UpdateStrategy

        if source == "gold":
            if not traj.success or not traj.steps:
                return False
            return self._keep(self.mem.build(NAMESPACE, traj), source, traj)
        out = self.mem.update(
            NAMESPACE, traj, strategy=UpdateStrategy.ADJUSTMENT, episode_id=self.episode_id
        )
        return self._keep(out.built, source, traj)

    def _from_store(self, proc: Any) -> Item | None:
        """A hit built by ``update`` itself (a corrected procedure, written after a failure
        from a reference's steps): its hint read from its step chain, as the per-type bench
        reads every procedure; None when it is no complete solution (a cut prefix)."""
        from graphmem.models import Namespace, Procedure
        from graphmem.ops.build import procedure_chain

        if not isinstance(proc, Procedure) or not proc.success:
            return None
        steps, _ = procedure_chain(self.mem.store, Namespace(NAMESPACE), proc.id)
        if not steps:
            return None
        pairs = [(s.action, s.observation) for s in steps]
        item = Item(proc.id, "correction", trajectory_hint(proc.task_text, pairs))
        self.items[proc.id] = item
        return item

    def start(self, task: str) -> list[Item]:
        found = self.mem.retrieve(NAMESPACE, task, self.config, open_episode=True)
        self.episode_id = found.episode_id
        items = [self.items.get(h.memory.id) or self._from_store(h.memory) for h in found.hits]
        return [it for it in items if it is not None]

    def finish(self, used: Sequence[str], score: float, success: bool) -> None:
        if self.episode_id is not None:
            self.credit(self.episode_id, max(0.0, score), success, list(used))

    def size(self) -> int:
        """Retrievable procedures (a build's raw-steps procedure is not embedded)."""
        from graphmem.models import Procedure

        nodes = self.mem.store.iter_nodes(NAMESPACE)
        return len(
            [m for m in nodes if isinstance(m, Procedure) and m.embedding and not m.obsolete]
        )


def make_memory(name: str, embedder: Any, k: int) -> NoMemory:
    if name not in SPECS:
        raise ValueError(f"unknown condition {name!r}")
    spec = SPECS[name]
    if spec.kind == "none":
        return NoMemory()
    if spec.kind == "plain":
        return PlainMemory()
    if spec.kind == "flat":
        return FlatTopK(embedder, k)
    return GraphmemMemory(embedder, spec, k)


# ---- playing --------------------------------------------------------------------------------


@dataclass
class Run:
    condition: str
    episodes: list[dict[str, Any]] = field(default_factory=list)
    memory_items: int = 0
    memory_nodes: dict[str, int] = field(default_factory=dict)
    uses: list[int] = field(default_factory=list)
    seconds: float = 0.0


def _dedupe(items: Sequence[Item]) -> list[Item]:
    seen: set[str] = set()
    out = []
    for it in items:
        if it.description not in seen:
            seen.add(it.description)
            out.append(it)
    return out


def play_episode(
    env: Any, obs: Any, variation: int, fold: str, items: Sequence[Item]
) -> dict[str, Any]:
    """One episode (``obs``: the reset's observation) of the ReplayAdapter handed ``items``:
    outcome, trajectory, the procedure it replayed."""
    from graphmem.models import Trajectory, TrajectoryStep
    from showcase.envs.scienceworld import ReplayAdapter

    t0 = time.perf_counter()
    agent = ReplayAdapter()
    agent.begin(obs.task, hints=[it.hint for it in items], seed=variation)
    first_line = obs.text.strip().split("\n", 1)[0][:300]
    steps: list[TrajectoryStep] = []
    for decision, result in play_game(env, obs, agent):
        obs = result.observation
        steps.append(
            TrajectoryStep(
                thought=decision.thought, action=decision.action, observation=obs.text[:2000]
            )
        )
    replayed = next((it for it in items if it.description == agent.replayed), None)
    traj = Trajectory(
        task=" ".join(p for p in (obs.task.strip(), first_line) if p),
        steps=steps,
        reward=obs.score,
        success=obs.success,
        metadata={"game": f"scienceworld:{env.task}", "variation": variation, "fold": fold},
    )
    return {
        "success": bool(obs.success),
        "score": max(0.0, obs.score),
        "raw_score": obs.score,
        "steps": len(steps),
        "seconds": time.perf_counter() - t0,
        "replayed": replayed.id if replayed else None,
        "replayed_source": replayed.source if replayed else None,
        "trajectory": traj,
    }


def play_stream(
    name: str,
    plan: Sequence[tuple[str, int, int]],
    gold: Sequence[Any],
    envs: dict[str, Any],
    *,
    fold: str,
    handover: int,
    embedder: Any,
    memory: NoMemory | None = None,
    progress: Callable[[], None] | None = None,
) -> Run:
    """Play ``plan`` ((task, position, variation) in order) with condition ``name``: memory
    seeded with the ``gold`` runs, each own successful run learned after its episode."""
    started = time.perf_counter()
    memory = memory if memory is not None else make_memory(name, embedder, handover)
    if name != "none":
        for traj in gold:
            memory.learn(traj, "gold")
    run = Run(name)
    for task, pos, variation in plan:
        env = envs[task]
        obs = env.reset(variation, fold)
        handed = memory.start(obs.task) if name != "none" else []
        out = play_episode(env, obs, variation, fold, _dedupe(handed))
        used = [out["replayed"]] if out["replayed"] else []
        memory.finish(used, out["score"], out["success"])
        traj = out.pop("trajectory")
        built = memory.learn(traj, "own") if name != "none" else False
        run.episodes.append(
            {
                "task": task,
                "position": pos,
                "variation": variation,
                "handed": len(handed),
                "memory_items": memory.size(),
                "own_run_built": built,
                **out,
            }
        )
        if progress:
            progress()
    run.memory_items = memory.size()
    if isinstance(memory, GraphmemMemory):
        run.uses = memory.uses()
        run.memory_nodes = {
            k: v for k, v in memory.mem.store.counts(NAMESPACE).items() if k != "edges"
        }
    run.seconds = time.perf_counter() - started
    return run


def open_envs(tasks: Sequence[str], budget: int) -> dict[str, Any]:
    """One ScienceWorldEnv per task type, all on one JVM (the simulator loads a task per
    reset); close with :func:`close_envs`."""
    from showcase.envs.scienceworld import ScienceWorldEnv

    envs: dict[str, Any] = {}
    server = None
    for task in tasks:
        env = ScienceWorldEnv(task, step_budget=budget)
        if server is None:
            server = env._server()
        else:
            env._env = server
        envs[task] = env
    return envs


def close_envs(envs: dict[str, Any]) -> None:
    first = next(iter(envs.values()), None)
    for env in envs.values():
        if env is not first:
            env._env = None
    if first is not None:
        first.close()


def _play_one(
    name: str,
    plan: Sequence[tuple[str, int, int]],
    gold: Sequence[Any],
    fold: str,
    budget: int,
    handover: int,
    embedder_name: str,
) -> Run:
    """One condition in a worker process (its own JVM and embedder). Ids are seeded: with
    random ids a condition ranked procedures of one description differently from run to run
    (similarity: 33 then 30 solved)."""

    def play(envs: Any) -> Run:
        return play_stream(
            name,
            plan,
            gold,
            envs,
            fold=fold,
            handover=handover,
            embedder=make_embedder(embedder_name),
        )

    return run_in_worker(
        play, lambda: open_envs(sorted({t for t, _, _ in plan}), budget), close_envs
    )


# ---- setting up: task types, the plan, the gold runs ---------------------------------------


def prepare(args: argparse.Namespace) -> dict[str, Any]:
    """Task types that fit, the stream's plan and the gold trajectories (played once)."""
    from showcase.envs.scienceworld import gold_trajectory

    envs = open_envs(["use-thermometer"], args.budget)
    try:
        names = (
            envs["use-thermometer"].task_names()
            if args.tasks == "all"
            else [t for t in args.tasks.split(",") if t]
        )
    finally:
        close_envs(envs)
    envs = open_envs(names, args.budget)
    infos, tasks, gold = [], [], []
    try:
        for task in names:
            env = envs[task]
            evaluated = env.variations(args.fold)[args.test_start : args.test_start + args.test]
            train = env.variations("train")[args.train_start : args.train_start + args.train]
            info: dict[str, Any] = {"task": task, "fits": False}
            if len(evaluated) < args.test or not train:
                info["why"] = f"{len(env.variations(args.fold))} {args.fold} variations"
                infos.append(info)
                continue
            env.list_valid_actions = False
            lengths = []
            for v in train:
                env.reset(v, "train")
                lengths.append(len(env.gold_path()))
            info["gold_lengths"] = lengths
            if args.tasks == "all" and max(lengths) > args.budget:
                info["why"] = f"longest train gold path {max(lengths)}"
                infos.append(info)
                continue
            env.step_budget = 500  # a gold path is played to its end, whatever --budget
            trajs = [gold_trajectory(env, v, "train") for v in train]
            env.step_budget = args.budget
            gold += trajs
            tasks.append(task)
            info.update(
                fits=True,
                train_variations=train,
                evaluated_variations=evaluated,
                gold_successes=sum(t.success for t in trajs),
            )
            infos.append(info)
        plan = [
            (task, pos, envs[task].variations(args.fold)[args.test_start + pos])
            for task, pos in mixed_plan(tasks, args.test)
        ]
    finally:
        close_envs(envs)
    return {"tasks": tasks, "infos": infos, "plan": plan, "gold": gold}


# ---- summarising ------------------------------------------------------------------------------


def summary_rows(runs: dict[str, Run], tasks: Sequence[str]) -> list[dict[str, Any]]:
    rows = []
    for task in [*tasks, "all"]:
        for name, run in runs.items():
            eps = [e for e in run.episodes if task in ("all", e["task"])]
            if not eps:
                continue
            row = {
                "task": task,
                "condition": name,
                "episodes": len(eps),
                "solved": sum(e["success"] for e in eps),
                "success": statistics.fmean(float(e["success"]) for e in eps),
                "mean_score": statistics.fmean(e["score"] for e in eps),
                "mean_steps": statistics.fmean(e["steps"] for e in eps),
                "max_handed": max(e["handed"] for e in eps),
                "mean_handed": statistics.fmean(e["handed"] for e in eps),
                "replayed_gold": sum(e["replayed_source"] == "gold" for e in eps),
                "replayed_own": sum(e["replayed_source"] == "own" for e in eps),
                "replayed_correction": sum(e["replayed_source"] == "correction" for e in eps),
                "own_runs_built": sum(e["own_run_built"] for e in eps),
            }
            if task == "all":
                row["memory_items"] = run.memory_items
                row["seconds_per_episode"] = run.seconds / len(eps)
                credited = [u for u in run.uses if u]
                row["credited"] = len(credited)
                row["uses_per_credited"] = statistics.fmean(credited) if credited else float("nan")
            rows.append(row)
    return rows


def _measure(measure: str) -> Callable[[Run], list[float]]:
    return lambda run: [float(e[measure]) for e in run.episodes]


def comparisons(runs: dict[str, Run]) -> list[dict[str, Any]]:
    """Every pair of :data:`COMPARISONS` played, on episodes solved and on score."""
    views = [View(m, _measure(m)) for m in ("success", "score")]
    return paired_comparisons(runs, COMPARISONS, views, "measure")


def targets(cmp: Sequence[dict[str, Any]]) -> list[list[str]]:
    """The issue's targets: two-phase ≥ flat-topk + 5 and ≥ similarity + 5 points (score and
    solved) at p < 0.01, and not below plain by more than 5 points."""
    by = {(c["a"], c["b"], c["measure"]): c for c in cmp}
    rows = []
    for b, need in (
        ("flat-topk", "≥ +5 pts, p < 0.01"),
        ("similarity", "≥ +5 pts, p < 0.01"),
        ("plain", "≥ −5 pts"),
    ):
        for measure in ("success", "score"):
            c = by.get(("two-phase", b, measure))
            if c is None:
                continue
            met = c["diff"] >= -0.05 if b == "plain" else c["diff"] >= 0.05 and c["p_sign"] < 0.01
            rows.append(
                [
                    f"two-phase vs {b} ({'solved' if measure == 'success' else 'score'})",
                    need,
                    f"{100 * c['diff']:+.1f}",
                    f"{c['p_sign']:.3g}",
                    "met" if met else "missed",
                ]
            )
    return rows


def markdown(data: dict[str, Any]) -> str:
    setup, rows, cmp = data["setup"], data["results"], data["comparisons"]
    fit = [i for i in setup["tasks"] if i["fits"]]
    skipped = ", ".join(f"{i['task']} ({i['why']})" for i in setup["tasks"] if not i["fits"])
    gold = ", ".join(f"{i['task']} {i['gold_successes']}/{len(i['train_variations'])}" for i in fit)
    lines = [
        f"# Mixed ScienceWorld stream, hand-over K = {setup['handover']} "
        f"({'held-out' if setup['heldout'] else 'tuning'} run)",
        "",
        f"Command: `{setup['command']}`",
        "",
        machine_markdown(setup["machine"]),
        "",
        f"- stream: {setup['episodes']} episodes, {len(fit)} task types interleaved (rounds of "
        f"one variation per type, shuffled per round; the same order for every condition), "
        f"{setup['fold']} variations at positions {setup['test_start']}.."
        f"{setup['test_start'] + setup['test'] - 1} of each type ({setup['protocol']}); step "
        f"budget {setup['budget']}",
        f"- memory at the start: one procedure per successful gold run of train variations "
        f"{setup['train_start']}..{setup['train_start'] + setup['train'] - 1} of every type, all "
        f"types in one memory (gold runs that succeeded: {gold}); then the agent's own "
        "successful runs as they come (graphmem: `update`, adjustment; the others keep the same "
        "successful runs); key = task description",
        f"- task types not in the stream: {skipped or 'none'}",
        f"- hand-over: at most K = {setup['handover']} procedures per episode (one decision, at "
        f"the start) in every condition but `plain`; graphmem phase A recalls k1 = "
        f"{setup['k1']}, phase B keeps K",
        "- agent: ReplayAdapter, the same in every condition. Of the procedures handed over "
        "(one per description, the first handed kept) it replays the one whose task "
        "description is most similar to its own by token Jaccard, the first handed on a tie; "
        "all of them feed its room map, stand-ins, where it looks first and the evidence for "
        "conditional answers. One attempt per episode; it never falls back to a second one",
        "- two-phase: graphmem `RetrievalConfig` defaults (λ = 0.5, q_prior = "
        f"{setup['q_prior']!r}) with k1/k2 above; credit by use: only the replayed procedure "
        "is credited (`finish_episode(used=[it])`), reward = score; similarity: the same, λ = 0",
        "- score: ScienceWorld's 0..100 progress / 100, a task failed outright (−1) counted as 0",
        f"- embedder: {setup['embedder']}; graphmem store: embedded, in memory; wall time "
        f"{setup['seconds']:.0f} s (jobs {setup['jobs']})",
        "",
        "## All task types",
        "",
    ]
    head = [
        "condition",
        "solved",
        "success",
        "mean score",
        "mean steps",
        "max / mean handed",
        "replayed gold / own / correction",
        "memory items (end)",
        "s/episode",
    ]
    lines.append(
        markdown_table(
            head,
            [
                [
                    f"`{r['condition']}` {LABELS[r['condition']]}",
                    f"{r['solved']}/{r['episodes']}",
                    f"{r['success']:.0%}",
                    f"{r['mean_score']:.3f}",
                    f"{r['mean_steps']:.1f}",
                    f"{r['max_handed']} / {r['mean_handed']:.1f}",
                    f"{r['replayed_gold']} / {r['replayed_own']} / {r['replayed_correction']}",
                    str(r["memory_items"]),
                    f"{r['seconds_per_episode']:.1f}",
                ]
                for r in rows
                if r["task"] == "all"
            ],
        )
    )
    credit = [r for r in rows if r["task"] == "all" and r.get("credited")]
    if credit:
        lines += [
            "",
            "graphmem credit: procedures credited at least once (replayed), mean credited uses: "
            + "; ".join(
                f"{r['condition']} {r['credited']} ({r['uses_per_credited']:.1f})" for r in credit
            ),
        ]
    lines += ["", "## Per task type (solved, mean score)", ""]
    conds = [r["condition"] for r in rows if r["task"] == "all"]
    by = {(r["task"], r["condition"]): r for r in rows}
    lines.append(
        markdown_table(
            ["task", *conds],
            [
                [
                    i["task"],
                    *[
                        f"{by[i['task'], c]['solved']}/{by[i['task'], c]['episodes']}, "
                        f"{by[i['task'], c]['mean_score']:.2f}"
                        for c in conds
                    ],
                ]
                for i in fit
            ],
        )
    )
    lines += [
        "",
        "## Paired comparisons",
        "",
        "Same episodes, episode by episode: difference of the means (points = percentage "
        "points of solved, or of score × 100), episodes where the first did better and the "
        "reverse, exact two-sided sign test on those, 95 % bootstrap interval.",
        "",
        markdown_table(
            ["a vs b", "measure", "Δ (points)", "a better / b better", "sign test p", "95 % CI"],
            [
                [
                    f"{c['a']} vs {c['b']}",
                    "solved" if c["measure"] == "success" else "score",
                    f"{100 * c['diff']:+.1f}",
                    f"{c['better']} / {c['worse']}",
                    f"{c['p_sign']:.3g}",
                    f"[{100 * c['ci_low']:+.1f}, {100 * c['ci_high']:+.1f}]",
                ]
                for c in cmp
            ],
        ),
    ]
    if target_rows := targets(cmp):
        lines += ["", "## Targets (issue 28)", ""]
        lines.append(markdown_table(["comparison", "target", "Δ", "p", ""], target_rows))
    if nodes := setup.get("memory_nodes"):
        lines += [
            "",
            "Memory at the end, graphmem nodes by kind: "
            + "; ".join(
                f"{name}: {', '.join(f'{v} {k}' for k, v in n.items() if v)}"
                for name, n in nodes.items()
            ),
        ]
    return "\n".join(lines) + "\n"


# ---- command line ---------------------------------------------------------------------------


def run(args: argparse.Namespace, command: str) -> dict[str, Any]:
    """Play every condition on the mixed stream; write the results."""
    from bench.protocol import SCIENCEWORLD_HELDOUT, SCIENCEWORLD_TUNING
    from graphmem.config import RetrievalConfig

    names = pick_conditions(args.conditions, CONDITIONS, CONDITIONS)
    check_handover(args.handover)
    protocol = SCIENCEWORLD_HELDOUT if args.heldout else SCIENCEWORLD_TUNING
    if args.heldout or args.fold is None:
        args.fold, args.test_start = protocol.fold, protocol.start
    if args.quick:
        args.tasks, args.train, args.test, args.budget = "find-plant,use-thermometer", 2, 1, 8
        args.embedder = "hashing"
    machine = machine_info()
    started = time.perf_counter()
    prep = prepare(args)
    plan, gold = prep["plan"], prep["gold"]
    name = f"learning_scienceworld_mixed_k{args.handover}"
    name += "_heldout" if args.heldout else f"_{args.fold}"
    name += f"_{args.tag}" if args.tag else ""
    files: list[Any] = []

    def write(done: dict[str, Run]) -> dict[str, Any]:
        """The results of the conditions finished so far (a run cut short keeps them)."""
        nonlocal files
        runs = {n: done[n] for n in names if n in done}
        rows = summary_rows(runs, prep["tasks"])
        data = {
            "setup": {
                "command": command,
                "machine": machine,
                "heldout": bool(args.heldout),
                "protocol": protocol.purpose
                if args.fold == protocol.fold and args.test_start == protocol.start
                else f"{args.fold} fold from position {args.test_start} (not the protocol's range)",
                "fold": args.fold,
                "test_start": args.test_start,
                "test": args.test,
                "train": args.train,
                "train_start": args.train_start,
                "budget": args.budget,
                "handover": args.handover,
                "k1": CANDIDATES * args.handover,
                "q_prior": RetrievalConfig().q_prior,
                "episodes": len(plan),
                "gold_procedures": sum(t.success for t in gold),
                "tasks": prep["infos"],
                "embedder": embedder_label(args.embedder),
                "jobs": jobs,
                "memory_nodes": {n: r.memory_nodes for n, r in runs.items() if r.memory_nodes},
                "seconds": time.perf_counter() - started,
            },
            "plan": plan,
            "results": rows,
            "comparisons": comparisons(runs),
            "episodes": {n: r.episodes for n, r in runs.items()},
        }
        files = write_results(args.out, name, data, markdown(data))
        return data

    jobs = max(1, min(args.jobs, len(names)))
    runs = play_conditions(
        names,
        _play_one,
        (plan, gold, args.fold, args.budget, args.handover, args.embedder),
        jobs=jobs,
        write=write,
        progress=not args.no_progress,
    )
    data = write(runs)
    return {"data": data, "files": files, "runs": runs}


def print_summary(out: dict[str, Any]) -> None:
    for r in out["data"]["results"]:
        if r["task"] == "all":
            print(
                f"  {r['condition']:<11} solved {r['solved']}/{r['episodes']}  "
                f"score {r['mean_score']:.3f}  handed ≤ {r['max_handed']}"
            )
    for row in targets(out["data"]["comparisons"]):
        print("  " + " | ".join(row))
    for path in out["files"]:
        print(f"wrote {path}")
