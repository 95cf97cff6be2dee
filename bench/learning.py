"""Does memory make the agent better? TextWorldExpress streams with and without graphmem.

One stream is ``--episodes`` test-fold games (seeds 0..N-1) played in order by the same agent,
memory carried from game to game, then a *repeat pass* over seeds 0..R-1 (``--repeat``) so that
forgetting can be measured (a one-pass stream of distinct seeds never repeats a task). Each
condition plays the same stream with a fresh memory:

- ``none``: the agent without memory (the flow's retrieve / update / learn steps are skipped);
- ``sim``: similarity-only retrieval (λ=0), proceduralized procedures, adjustment updates;
- ``two-phase``: two-phase retrieval (λ=0.5), otherwise as ``sim``;
- ``trajectory`` / ``script``: ``two-phase`` with that build granularity (ablation);
- ``vanilla`` / ``validation``: ``two-phase`` with that update strategy (ablation);
- ``notes`` / ``procedures`` / ``both`` (``--memory notes,procedures,both``): where the gain
  comes from. ``notes``: fact notes only (retrieved at the start, recalled in the task);
  ``procedures``: procedures only, no fact notes written or read, every attempt kept as a
  procedure (vanilla update: a failed game still shows where things went); the explorer follows
  the steps of the successful procedures two-phase retrieval finds (adapted to the game,
  :mod:`showcase.envs.procedures`), takes the steps of every one found that hold in
  any game where their objects are here, and only the procedures a step was taken from are
  credited; ``both``: the two (adjustment update, as ``notes``).

The agent is the LangGraph agent flow (:mod:`graphmem.flows.agent`): retrieve (two-phase, an Episode
records what was handed over) → the rule-based explorer of :mod:`showcase.envs.agents`
plays with the hints, asking memory about every item or cooking verb it meets without knowing it
(in-task recall, two-phase with the condition's λ, k1=10, k2=3; the hits join the Episode) →
``finish_episode`` (Q ← Q + α(R − Q)) → ``GraphMemory.update`` with the strategy (procedures
built at the granularity, tips and corrections on failure) → the facts the game taught, one
consolidated note per subject
(:func:`showcase.textworld_agent.learn_facts_by_subject`) → A-MEM evolution. The first
retrieval recalls fact notes and procedures together; a procedure is
replayed only when its task text is the current task's (the game's start), so look-alike
starts of different seeds can mislead it.

With ``--llm`` the policy is the configured OpenAI-compatible chat model
(``GRAPHMEM_LLM_BASE_URL`` / ``GRAPHMEM_LLM_MODEL`` / ``GRAPHMEM_LLM_API_KEY``) and the memory's
LLM steps use it too; calls and tokens are counted (offline they are 0).

``--stream mixed`` plays instead four game families interleaved, graphmem beside plain-memory
baselines under a hand-over budget (:mod:`bench.learning_mixed`); ``--heldout`` runs the
held-out seeds of :mod:`bench.protocol`, the only ones reported.

Run::

    python -m bench.learning --stream mixed --handover 5 --heldout  # reported mixed stream
    python -m bench.learning --game twc --budget 30                # main conditions
    python -m bench.learning --game twc --budget 30 --conditions all
    python -m bench.learning --grid                                # the documented full grid
    python -m bench.learning --quick                               # seconds: a smoke run
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
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
from graphmem.config import MemoryConfig, RetrievalConfig, UpdateStrategy
from graphmem.models import Granularity, Hit, MemoryKind, Procedure, seeded_ids
from showcase.metrics import EpisodeRecord, summarise

log = logging.getLogger(__name__)

BLOCK = 50
"""Episodes per block ("epoch") of the one-pass stream."""

GAMES = ("twc", "cookingworld")
RETRIEVAL_K1 = 50
RETRIEVAL_K2 = 25
"""Recall 50 candidates (fact notes and procedures), keep 25: a fact note holds one game's facts,
so the explorer needs many of them; measured on 150 twc games at budget 30, k2=8 gave 0.19
success and k2=25 gave 0.31."""


@dataclass(frozen=True)
class Condition:
    """One way of running the stream."""

    name: str
    label: str
    use_memory: bool = True
    lam: float = 0.5
    granularity: Granularity = Granularity.PROCEDURALIZED
    strategy: UpdateStrategy = UpdateStrategy.ADJUSTMENT
    notes: bool = True
    """Fact notes: learned after each game, retrieved at the start, recalled in the task."""
    follow: bool = False
    """Procedures handed to the explorer to follow (credited only when followed)."""
    replay: bool = True
    """The first retrieval also recalls procedures, replayed on the very same task only."""


CONDITIONS: dict[str, Condition] = {
    c.name: c
    for c in (
        Condition("none", "no memory", use_memory=False),
        Condition("sim", "λ=0, proceduralized, adjustment", lam=0.0),
        Condition("two-phase", "λ=0.5, proceduralized, adjustment"),
        Condition(
            "trajectory", "λ=0.5, trajectory, adjustment", granularity=Granularity.TRAJECTORY
        ),
        Condition("script", "λ=0.5, script, adjustment", granularity=Granularity.SCRIPT),
        Condition("vanilla", "λ=0.5, proceduralized, vanilla", strategy=UpdateStrategy.VANILLA),
        Condition(
            "validation", "λ=0.5, proceduralized, validation", strategy=UpdateStrategy.VALIDATION
        ),
        Condition("notes", "notes only (fact notes)", replay=False),
        Condition(
            "procedures",
            "procedures only (followed; every attempt kept, vanilla)",
            notes=False,
            follow=True,
            replay=False,
            strategy=UpdateStrategy.VANILLA,
        ),
        Condition("both", "notes + procedures (followed)", follow=True, replay=False),
    )
}
MAIN = ("none", "sim", "two-phase")
ABLATIONS = ("trajectory", "script", "vanilla", "validation")
MEMORY_KINDS = ("notes", "procedures", "both")
"""The memory ablation (``--memory``): each is played beside ``none``."""

GRID: tuple[tuple[str, int, tuple[str, ...]], ...] = (
    ("twc", 30, MAIN + ABLATIONS),
    ("twc", 80, MAIN),
    ("cookingworld", 30, MAIN),
    ("cookingworld", 80, MAIN),
)
"""The full grid (``--grid``): main conditions everywhere, ablations on twc at budget 30."""


# ---- what memory hands the explorer ----------------------------------------------------------

_NUMBERED = re.compile(r"^\s*\d+\.\s*")
_PUT = re.compile(r"^put (.+?) (?:in|on) (.+)$")


def script_actions(script: str) -> list[str]:
    """The instructions of a stored script (``1. take x`` lines), without notes or repeat marks."""
    out: list[str] = []
    for line in script.splitlines():
        if not _NUMBERED.match(line):
            continue
        action = _NUMBERED.sub("", line).replace("(repeat as needed)", "").strip()
        if action:
            out.append(action)
    return out


def final_placements(actions: Sequence[str]) -> list[str]:
    """``X belongs in Y`` for every put a trajectory did not undo (a later ``take X``)."""
    placed: dict[str, str] = {}
    for action in actions:
        if put := _PUT.match(action):
            placed[put.group(1)] = put.group(2)
        elif action.startswith("take ") and action[5:] in placed:
            del placed[action[5:]]
    return [f"{item} belongs in {place}" for item, place in placed.items()]


def procedure_hints(memory: Any, namespace: str, proc: Procedure) -> list[str]:
    """What a procedure tells the explorer, by granularity (Mem^p).

    trajectory: the raw actions, detours included; script: the script's instructions;
    proceduralized (both): the script as the plan, plus the placements the raw trajectory ended
    with (the detail a script abstracts away).
    """
    from graphmem.models import Namespace
    from graphmem.ops.build import procedure_chain

    steps, _ = procedure_chain(memory.store, Namespace(namespace), proc.id)
    raw = [s.action for s in steps if s.action.strip()]
    plan = script_actions(proc.script) if proc.script else []
    if proc.granularity is Granularity.TRAJECTORY or not plan:
        return ["; ".join(raw)] if raw else []
    hints = ["; ".join(plan)]
    if proc.granularity is Granularity.PROCEDURALIZED:
        hints += final_placements(raw)
    return hints


def bench_hints(memory: Any, namespace: str, task: str, hits: Sequence[Hit]) -> list[str]:
    """Hints from retrieved hits: each fact of a fact note; successful procedures of this very
    task text (another start's moves would mislead the explorer). Tips are free text the
    rule-based explorer cannot act on; an LLM policy would read them through the prompt."""
    from showcase.textworld_agent import fact_lines

    hints: list[str] = []
    for hit in hits:
        m = hit.memory
        if (facts := fact_lines(m)) is not None:
            hints.extend(facts)
        elif isinstance(m, Procedure) and m.success and m.task_text == task:
            hints.extend(procedure_hints(memory, namespace, m))
    return list(dict.fromkeys(hints))


# ---- running one stream ---------------------------------------------------------------------


@dataclass
class Episode:
    """One game of the stream as the bench records it."""

    seed: int
    epoch: int
    success: bool
    steps: int
    seconds: float
    llm_calls: int = 0
    llm_tokens: int = 0
    repeat: bool = False
    followed: int = 0
    """Procedures the agent took steps from in this game."""


@dataclass
class StreamRun:
    """A condition's whole stream."""

    condition: str
    episodes: list[Episode] = field(default_factory=list)
    seconds: float = 0.0
    memories: dict[str, int] = field(default_factory=dict)

    def records(self, *, first_pass_only: bool = False) -> list[EpisodeRecord]:
        return [
            EpisodeRecord(
                task=str(e.seed),
                epoch=e.epoch,
                success=e.success,
                steps=e.steps,
                llm_calls=e.llm_calls,
                llm_tokens=e.llm_tokens,
            )
            for e in self.episodes
            if not (first_pass_only and e.repeat)
        ]


class CountingPolicy:
    """Wraps a policy and counts its ``act`` calls (one model call each for an LLM policy)."""

    def __init__(self, inner: Any, *, by_use: bool = True) -> None:
        self.inner = inner
        self.calls = 0
        if by_use and hasattr(inner, "used_hints"):
            # Credit by use (graphmem.flows.agent): only the memories whose hints were acted on.
            self.used_hints = inner.used_hints

    def begin(self, task: str, hints: Sequence[str] = (), seed: int = 0) -> None:
        self.inner.begin(task, hints=hints, seed=seed)

    def act(self, observation: str, valid_actions: Sequence[str], inventory: str) -> Any:
        self.calls += 1
        return self.inner.act(observation, valid_actions, inventory)

    def feedback(self, action: str, observation: str, reward: float) -> None:
        self.inner.feedback(action, observation, reward)

    def recall_queries(
        self, observation: str, valid_actions: Sequence[str], inventory: str
    ) -> list[str]:
        ask = getattr(self.inner, "recall_queries", None)
        return list(ask(observation, valid_actions, inventory)) if ask else []

    def add_hints(self, hints: Sequence[str]) -> None:
        if add := getattr(self.inner, "add_hints", None):
            add(hints)

    def offer_procedures(self, plans: Sequence[Any]) -> None:
        if offer := getattr(self.inner, "offer_procedures", None):
            offer(plans)

    def followed_procedures(self) -> list[str]:
        followed = getattr(self.inner, "followed_procedures", None)
        return list(followed()) if followed else []


@contextmanager
def token_counter(enabled: bool) -> Iterator[Callable[[], int]]:
    """Total tokens of every chat-model call made inside (LangChain usage callback)."""
    if not enabled:
        yield lambda: 0
        return
    from langchain_core.callbacks import get_usage_metadata_callback

    with get_usage_metadata_callback() as cb:
        yield lambda: sum(int(u.get("total_tokens", 0) or 0) for u in cb.usage_metadata.values())


def open_memory(
    store_dir: Path | None, embedder: Any, condition: Condition, llm: Any = None
) -> Any:
    """A fresh GraphMemory on the embedded store (in ``store_dir``, or in memory). Its notes come
    from the condition's own learn hook (``learn_facts_by_subject``), as this bench always
    measured them, so the library's distillation (issue 52) is off here: a procedures-only
    condition keeps no notes, and a notes condition no rule-made ones beside its facts."""
    from graphmem.config import DistillConfig
    from graphmem.memory import GraphMemory
    from graphmem.stores.embedded import EmbeddedStore

    store = EmbeddedStore.open(store_dir) if store_dir else EmbeddedStore.in_memory()
    config = MemoryConfig(granularity=condition.granularity, distill=DistillConfig(enabled=False))
    return GraphMemory(store, embedder=embedder, llm=llm, config=config)


def run_condition(
    condition: Condition,
    *,
    game: str,
    budget: int,
    seeds: Sequence[int],
    repeat: Sequence[int],
    embedder: Any,
    env: Any,
    store_dir: Path | None = None,
    llm_policy: Callable[[], Any] | None = None,
    llm: Any = None,
    block: int = BLOCK,
    progress: Any = None,
    fold: str = "test",
    credit: str = "used",
) -> StreamRun:
    """Play ``seeds`` then ``repeat`` under ``condition`` through the agent flow."""
    from graphmem.flows.agent import build_agent_graph, run_task
    from graphmem.flows.state import AgentContext
    from showcase.envs.agents import make_explorer
    from showcase.textworld_agent import (
        PROCEDURE_RETRIEVAL,
        RECALL_RETRIEVAL,
        learn_facts_by_subject,
    )

    memory = open_memory(store_dir, embedder, condition, llm=llm)
    policy = CountingPolicy(
        llm_policy() if llm_policy else make_explorer(game), by_use=credit == "used"
    )
    retrieval = RetrievalConfig(
        k1=RETRIEVAL_K1,
        k2=RETRIEVAL_K2,
        lam=condition.lam,
        kinds=(MemoryKind.NOTE, MemoryKind.PROCEDURE) if condition.replay else (MemoryKind.NOTE,),
    )
    graph = build_agent_graph().compile(name=f"bench-{game}")
    context = AgentContext(
        namespace=f"bench-{game}-{condition.name}",
        memory=memory,
        retrieval=retrieval,
        strategy=condition.strategy,
        env=env,
        policy=policy,
        use_memory=condition.use_memory,
        fold=fold,
        hints=bench_hints,
        learn=learn_facts_by_subject if condition.notes else None,
        task_prefix=game,
        recall=RECALL_RETRIEVAL.model_copy(update={"lam": condition.lam})
        if condition.notes
        else None,
        procedures=PROCEDURE_RETRIEVAL.model_copy(update={"lam": condition.lam})
        if condition.follow
        else None,
    )
    run = StreamRun(condition.name)
    n_blocks = -(-len(seeds) // block)
    stream = [(s, i // block, False) for i, s in enumerate(seeds)]
    stream += [(s, n_blocks, True) for s in repeat]
    started = time.perf_counter()
    try:
        # Seeded ids (each condition's store is new): memories with the same key tie in
        # similarity, and ties go by id, so with random ids two runs could rank them apart.
        with seeded_ids(0):
            for seed, epoch, again in stream:
                calls_before = policy.calls if llm_policy else 0
                mem_calls = memory.llm.usage.snapshot().calls if memory.llm else 0
                t0 = time.perf_counter()
                with token_counter(llm_policy is not None or llm is not None) as tokens:
                    out = run_task(graph, seed, context)
                    used_tokens = tokens()
                calls = (policy.calls - calls_before) if llm_policy else 0
                if memory.llm:
                    calls += memory.llm.usage.snapshot().calls - mem_calls
                run.episodes.append(
                    Episode(
                        seed=seed,
                        epoch=epoch,
                        success=bool(out.get("success")),
                        steps=len(out.get("steps", [])),
                        seconds=time.perf_counter() - t0,
                        llm_calls=calls,
                        llm_tokens=used_tokens,
                        repeat=again,
                        followed=len(out.get("followed", [])),
                    )
                )
                if progress is not None:
                    progress.update(1)
        run.memories = {
            k: v for k, v in memory.store.counts(context.namespace).items() if k != "edges"
        }
    finally:
        memory.close()
    run.seconds = time.perf_counter() - started
    return run


# ---- summaries, tables, plots ---------------------------------------------------------------


def summary_row(run: StreamRun, baseline: StreamRun | None) -> dict[str, Any]:
    """The numbers a reader compares, for one condition."""
    first = summarise(run.records(first_pass_only=True))
    full = summarise(run.records())
    solved = [e.steps for e in run.episodes if e.success and not e.repeat]
    again = [e for e in run.episodes if e.repeat]
    row: dict[str, Any] = {
        "condition": run.condition,
        "episodes": len(run.episodes),
        "success": first.success_rate,
        "success_per_block": first.success_per_epoch,
        "cumulative_success": first.cumulative_success,
        "steps_per_block": first.steps_per_epoch,
        "mean_steps": first.mean_steps,
        "mean_steps_solved": sum(solved) / len(solved) if solved else float("nan"),
        "repeat_success": sum(e.success for e in again) / len(again) if again else float("nan"),
        "forgetting_rate": full.forgetting_rate,
        "llm_calls": full.llm_calls,
        "llm_tokens": full.llm_tokens,
        "memories": run.memories,
        "followed_share": sum(e.followed > 0 for e in run.episodes if not e.repeat)
        / max(1, sum(not e.repeat for e in run.episodes)),
        "mean_steps_last_100": _last_steps(run, 100),
        "seconds": run.seconds,
        "seconds_per_episode": run.seconds / max(1, len(run.episodes)),
    }
    if baseline is not None:
        base = summarise(baseline.records(first_pass_only=True))
        row["success_gain_pp"] = 100 * (first.success_rate - base.success_rate)
        row["steps_change"] = (
            (first.mean_steps - base.mean_steps) / base.mean_steps if base.mean_steps else 0.0
        )
        base_last = _last_steps(baseline, 100)
        row["steps_change_last_100"] = (
            row["mean_steps_last_100"] / base_last - 1 if base_last else 0.0
        )
    return row


def _last_steps(run: StreamRun, n: int) -> float:
    """Mean steps over the last ``n`` games of the first pass."""
    last = [e.steps for e in run.episodes if not e.repeat][-n:]
    return sum(last) / len(last) if last else float("nan")


def _pct(x: float) -> str:
    return "–" if x != x else f"{x:.0%}"


def run_markdown(
    game: str, budget: int, rows: Sequence[dict[str, Any]], setup: dict[str, Any], block: int
) -> str:
    """The Markdown of one (game, budget) run."""
    labels = {c.name: c.label for c in CONDITIONS.values()}
    head = [
        "condition",
        "success",
        "Δ vs none (pp)",
        "cumulative",
        "mean steps",
        "steps vs none",
        "steps if solved",
        "steps, last 100 (vs none)",
        "games following a procedure",
        "repeat pass",
        "forgetting",
        "LLM calls / tokens",
        "s/episode",
    ]
    table = []
    for r in rows:
        table.append(
            [
                f"`{r['condition']}` {labels.get(r['condition'], '')}",
                _pct(r["success"]),
                f"{r.get('success_gain_pp', 0.0):+.1f}",
                _pct(r["cumulative_success"][-1] if r["cumulative_success"] else float("nan")),
                f"{r['mean_steps']:.1f}",
                f"{r.get('steps_change', 0.0):+.0%}",
                f"{r['mean_steps_solved']:.1f}",
                f"{r.get('mean_steps_last_100', float('nan')):.1f} "
                f"({r.get('steps_change_last_100', 0.0):+.0%})",
                _pct(r.get("followed_share", 0.0)),
                _pct(r["repeat_success"]),
                _pct(r["forgetting_rate"]),
                f"{r['llm_calls']} / {r['llm_tokens']}",
                f"{r['seconds_per_episode']:.2f}",
            ]
        )
    n_blocks = max(len(r["success_per_block"]) for r in rows)
    block_head = ["condition"] + [f"{i * block + 1}–{(i + 1) * block}" for i in range(n_blocks)]
    blocks_rows = [[r["condition"], *[_pct(x) for x in r["success_per_block"]]] for r in rows]
    steps_rows = [[r["condition"], *[f"{x:.1f}" for x in r["steps_per_block"]]] for r in rows]
    mem_rows = [
        [r["condition"], ", ".join(f"{v} {k}" for k, v in r["memories"].items() if v) or "–"]
        for r in rows
    ]
    parts = [
        f"# Learning on TextWorldExpress `{game}`, step budget {budget}",
        "",
        f"Command: `{setup['command']}`",
        "",
        machine_markdown(setup["machine"]),
        "",
        f"- stream: {setup['episodes']} test-fold games (seeds 0–{setup['episodes'] - 1}) in "
        f"blocks of {block}, then a repeat pass over seeds 0–{setup['repeat'] - 1} "
        "(forgetting: solved in the first pass, failed on the repeat)",
        f"- embedder: {setup['embedder']}; store: embedded ({setup['store']}); retrieval: "
        f"k1={RETRIEVAL_K1}, k2={RETRIEVAL_K2} over fact notes and procedures; policy: "
        f"{setup['policy']}",
        f"- wall time: {setup['seconds']:.0f} s",
        "",
        "## Summary (first pass unless said)",
        "",
        markdown_table(head, table),
        "",
        f"## Success per block of {block} (first pass)",
        "",
        markdown_table(block_head, blocks_rows),
        "",
        f"## Mean steps per block of {block}",
        "",
        markdown_table(block_head, steps_rows),
        "",
        "## Memory at the end",
        "",
        markdown_table(["condition", "memories"], mem_rows),
    ]
    return "\n".join(parts)


def plot_runs(path: Path, title: str, rows: Sequence[dict[str, Any]], block: int) -> Path:
    """Success per block, cumulative success and steps per block, one line per condition."""
    with matplotlib_figure(path, width=13, height=4) as fig:
        axes = fig.subplots(1, 3)
        for r in rows:
            xs = [(i + 1) * block for i in range(len(r["success_per_block"]))]
            style = "o--" if r["condition"] == "none" else "o-"
            axes[0].plot(xs, r["success_per_block"], style, label=r["condition"])
            axes[1].plot(xs, r["cumulative_success"], style, label=r["condition"])
            axes[2].plot(xs, r["steps_per_block"], style, label=r["condition"])
        for ax, what in zip(
            axes, ("success rate per block", "cumulative success", "mean steps"), strict=True
        ):
            ax.set_xlabel("games played")
            ax.set_title(what)
            ax.grid(alpha=0.3)
        axes[0].set_ylim(-0.02, 1.02)
        axes[1].set_ylim(-0.02, 1.02)
        axes[0].legend(fontsize=8)
        fig.suptitle(title)
    return path


# ---- the command ----------------------------------------------------------------------------


def parse_params(text: str) -> tuple[bool, dict[str, int]]:
    """``--params``: (start from TextWorldExpress' defaults?, the key=value overrides)."""
    parts = [p.strip() for p in (text or "").split(",") if p.strip()]
    twx = bool(parts) and parts[0] == "twx"
    params: dict[str, int] = {}
    for part in parts[1:] if twx else parts:
        key, eq, value = part.partition("=")
        try:
            params[key.strip()] = int(value)
        except ValueError:
            raise SystemExit(f"--params: {part!r} is not key=integer") from None
        if not eq or not key.strip():
            raise SystemExit(f"--params: {part!r} is not key=integer")
    return twx, params


def run_game(
    game: str,
    budget: int,
    conditions: Sequence[str],
    args: argparse.Namespace,
    embedder: Any,
    command: str,
) -> dict[str, Any]:
    """All ``conditions`` on one (game, budget); writes learning_<game>_b<budget>.{json,md,png}."""
    from tqdm import tqdm

    from showcase.envs.procedures import MAX_PLANS
    from showcase.envs.textworld import TextWorldEnv
    from showcase.textworld_agent import PROCEDURE_RETRIEVAL

    offset = getattr(args, "seed_offset", 0)
    fold = getattr(args, "fold", "test")
    twx_defaults, params = parse_params(getattr(args, "params", ""))
    seeds = list(range(offset, offset + args.episodes))
    repeat = seeds[: min(args.repeat, args.episodes)]
    llm_policy, llm = _llm_parts(args)
    runs: list[StreamRun] = []
    started = time.perf_counter()
    total = len(conditions) * (len(seeds) + len(repeat))
    bar = tqdm(total=total, desc=f"{game} b{budget}", unit="game", disable=args.no_progress)
    env = TextWorldEnv(game, params, step_budget=budget, twx_defaults=twx_defaults)
    try:
        with tempfile.TemporaryDirectory(prefix="graphmem-learning-") as tmp:
            for name in conditions:
                bar.set_postfix_str(name)
                store_dir = None if args.store == "memory" else Path(tmp) / name
                runs.append(
                    run_condition(
                        CONDITIONS[name],
                        game=game,
                        budget=budget,
                        seeds=seeds,
                        repeat=repeat,
                        embedder=embedder,
                        env=env,
                        store_dir=store_dir,
                        llm_policy=llm_policy,
                        llm=llm,
                        block=args.block,
                        progress=bar,
                        fold=fold,
                        credit=getattr(args, "credit", "used"),
                    )
                )
    finally:
        env.close()
        bar.close()
    baseline = next((r for r in runs if r.condition == "none"), None)
    rows = [summary_row(r, baseline) for r in runs]
    setup = {
        "command": command,
        "machine": args.machine,
        "game": game,
        "budget": budget,
        "episodes": len(seeds),
        "repeat": len(repeat),
        "fold": fold,
        "seed_offset": offset,
        "credit": getattr(args, "credit", "used"),
        "params": env.params,
        "params_base": "TextWorldExpress defaults" if twx_defaults else "graphmem defaults",
        "block": args.block,
        "embedder": embedder_label(args.embedder),
        "store": "in memory" if args.store == "memory" else "on disk in a temporary directory",
        "policy": "LLM (GRAPHMEM_LLM_*)" if llm_policy else "rule-based explorer",
        "retrieval": {"k1": RETRIEVAL_K1, "k2": RETRIEVAL_K2, "kinds": ["Note", "Procedure"]},
        "retrieval_notes": "kinds Note only where a condition has replay False",
        "procedures_followed": {
            "k1": PROCEDURE_RETRIEVAL.k1,
            "k2": PROCEDURE_RETRIEVAL.k2,
            "plans": MAX_PLANS,
            "where": "conditions with follow",
        },
        "conditions": {n: asdict(CONDITIONS[n]) for n in conditions},
        "seconds": time.perf_counter() - started,
    }
    setting = (
        ""
        if (fold, offset, params, twx_defaults) == ("test", 0, {}, False)
        else (f"_{fold}{offset}" + ("_twx" if twx_defaults else "") + ("_p" if params else ""))
    )
    name = f"learning_{game}_b{budget}{setting}" + (f"_{args.tag}" if args.tag else "")
    data = {
        "setup": setup,
        "results": rows,
        "episodes": {r.condition: [asdict(e) for e in r.episodes] for r in runs},
    }
    files = write_results(args.out, name, data, run_markdown(game, budget, rows, setup, args.block))
    title = f"graphmem learning: {game}, budget {budget} ({len(seeds)} games)"
    files.append(plot_runs(args.out / f"{name}.png", title, rows, args.block))
    return {"game": game, "budget": budget, "rows": rows, "files": files, "setup": setup}


def _llm_parts(args: argparse.Namespace) -> tuple[Callable[[], Any] | None, Any]:
    if not args.llm:
        return None, None
    from showcase.textworld_agent import ChatPolicy, llm_from_settings

    llm = llm_from_settings()  # one client for the policy and the memory: one usage count
    return (lambda: ChatPolicy(llm)), llm


def targets_markdown(results: Sequence[dict[str, Any]]) -> str:
    """The issue's targets, checked against what was measured."""
    rows = []
    for res in results:
        by = {r["condition"]: r for r in res["rows"]}
        if "none" not in by:
            continue
        for name in ("two-phase", "sim"):
            if name not in by:
                continue
            r = by[name]
            gain, steps = r.get("success_gain_pp", 0.0), r.get("steps_change", 0.0)
            base_last = by["none"]["steps_per_block"][-1]
            last = r["steps_per_block"][-1] / base_last - 1 if base_last else 0.0
            rows.append(
                [
                    f"{res['game']} b{res['budget']}",
                    name,
                    f"{gain:+.1f}",
                    "yes" if gain >= 20 else "no",
                    f"{steps:+.0%}",
                    "yes" if steps <= -0.30 else "no",
                    f"{last:+.0%}",
                ]
            )
    head = [
        "run",
        "condition",
        "Δ success (pp)",
        "≥ +20 pp",
        "Δ mean steps",
        "≤ −30 %",
        "Δ steps, last block",
    ]
    return markdown_table(head, rows)


DESIGN_NOTES = """## How the grid is built

- Each condition plays the same stream with a fresh memory: 300 test-fold games (seeds 0–299)
  in blocks of 50, then a repeat pass over seeds 0–49. A one-pass stream of distinct seeds has
  no repeated task, so forgetting (solved in the first pass, failed on the repeat) is measured on
  those 50; the repeat pass is also where same-task procedures are replayed.
- Agent: the LangGraph agent flow (`graphmem.flows.agent`) with the rule-based explorer; memory goes
  through graphmem for real: two-phase retrieval over fact notes and procedures when a game
  starts (k1=50, k2=25, an Episode per game), in-task recall whenever the explorer meets an
  item or cooking verb it knows nothing about ("where does the gray coat belong?", k1=10,
  k2=3, same λ, hits join the Episode), `finish_episode` (Q updates, α=0.1, rewards {0, 1},
  Q0=0.5), `update` with the condition's strategy (procedures at its granularity,
  tips/corrections on failure), the game's facts as one consolidated note per subject (new
  facts make a new version EVOLVED_FROM the old), A-MEM evolution. Demotion of low-Q memories
  is on (graphmem default).
- Grid: `none` / `sim` (λ=0) / `two-phase` (λ=0.5) at proceduralized + adjustment on both games
  at budgets 30 and 80; the granularity (trajectory, script) and strategy (vanilla, validation)
  ablations on twc at budget 30 only.
- Mean steps count every first-pass game (a failure costs the whole budget); "steps if solved"
  averages the solved ones. In cookingworld the no-memory explorer fails *early* (a wrong
  guess of the device a verb needs ends the game), so memory turns short failures into
  full-length successes and mean steps do not fall; there memory changes whether the game is
  won, not how long the recipe takes. LLM calls/tokens are 0: the policy and all memory
  LLM steps run offline (`--llm` uses GRAPHMEM_LLM_BASE_URL / _MODEL / _API_KEY and counts them)."""


def summary_markdown(results: Sequence[dict[str, Any]], command: str, machine: Any) -> str:
    lines = [
        "# Learning benchmarks: TextWorldExpress summary",
        "",
        f"Command: `{command}`",
        "",
        machine_markdown(machine),
        "",
        DESIGN_NOTES,
        "",
        "## Targets (memory vs no memory, first pass)",
        "",
        targets_markdown(results),
        "",
        "## All runs",
        "",
    ]
    lines += [
        f"- `{res['game']}` budget {res['budget']}: `{res['setup']['command']}` "
        f"({res['setup']['embedder']}, store {res['setup']['store']})"
        for res in results
    ]
    lines.append("")
    head = ["run", "condition", "success", "Δ pp", "mean steps", "repeat", "forgetting", "s/ep"]
    rows = [
        [
            f"{res['game']} b{res['budget']}",
            r["condition"],
            _pct(r["success"]),
            f"{r.get('success_gain_pp', 0.0):+.1f}",
            f"{r['mean_steps']:.1f}",
            _pct(r["repeat_success"]),
            _pct(r["forgetting_rate"]),
            f"{r['seconds_per_episode']:.2f}",
        ]
        for res in results
        for r in res["rows"]
    ]
    lines.append(markdown_table(head, rows))
    lines += ["", "Per-run tables and plots: `learning_<game>_b<budget>.{md,json,png}`."]
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--game", default="twc", help=f"a TextWorldExpress game (explorers: {', '.join(GAMES)})"
    )
    parser.add_argument(
        "--params",
        default="",
        help="game parameters, key=value,... (e.g. numLocations=11,limitInventorySize=1) over "
        "graphmem's defaults; 'twx' (alone or first) starts from TextWorldExpress' own defaults",
    )
    parser.add_argument(
        "--fold", default="test", choices=("train", "dev", "test"), help="game fold (test)"
    )
    parser.add_argument(
        "--credit",
        default="used",
        choices=("used", "retrieved"),
        help="credit the memories whose hints the explorer acted on (used), or every one "
        "retrieved or recalled (retrieved, the old way)",
    )
    parser.add_argument(
        "--seed-offset", type=int, default=0, help="first seed of the stream (0): held-out ranges"
    )
    parser.add_argument("--budget", type=int, default=30, help="steps per game (30)")
    parser.add_argument(
        "--conditions",
        default=None,
        help=f"comma list of {', '.join(CONDITIONS)}, or 'all' (default: {','.join(MAIN)}); "
        "with --stream mixed: none, plain, flat-topk, similarity, two-phase, "
        "similarity-nograph, two-phase-nograph (default: the first five)",
    )
    parser.add_argument(
        "--stream",
        choices=("game", "mixed"),
        default="game",
        help="game: one --game's stream (default); mixed: four game families interleaved, "
        "graphmem beside plain-memory baselines (bench.learning_mixed)",
    )
    parser.add_argument(
        "--handover",
        type=int,
        default=5,
        help="with --stream mixed: memories that reach the agent per decision (5)",
    )
    parser.add_argument(
        "--heldout",
        action="store_true",
        help="the held-out test seeds of bench.protocol (reported figures); the mixed "
        "stream otherwise plays the dev-fold tuning seeds, a game stream --fold/--seed-offset",
    )
    parser.add_argument(
        "--items",
        choices=("experiences", "facts", "both"),
        default="experiences",
        help="with --stream mixed: what memory holds: past games to follow (experiences, "
        "default), the facts they taught (facts), or both kinds in one hand-over (both)",
    )
    parser.add_argument(
        "--jobs", type=int, default=1, help="with --stream mixed: conditions played at once (1)"
    )
    parser.add_argument(
        "--memory",
        default=None,
        help="memory ablation: comma list of notes, procedures, both (each beside none); "
        "replaces --conditions",
    )
    parser.add_argument(
        "--episodes", type=int, default=None, help="first-pass games (300; mixed stream: 400)"
    )
    parser.add_argument("--repeat", type=int, default=50, help="seeds replayed at the end (50)")
    parser.add_argument(
        "--block", type=int, default=None, help="games per block (50; mixed stream: 100)"
    )
    parser.add_argument("--embedder", choices=("minilm", "hashing"), default="minilm")
    parser.add_argument("--store", choices=("disk", "memory"), default="disk")
    parser.add_argument("--grid", action="store_true", help="run the full documented grid")
    parser.add_argument(
        "--runs",
        default=None,
        help="with --grid: only these runs, e.g. twc:30,cookingworld:80 (to split the grid)",
    )
    parser.add_argument(
        "--summarise",
        action="store_true",
        help="only write learning_textworld.{md,json} from the per-run JSON files in --out",
    )
    parser.add_argument(
        "--render",
        type=Path,
        default=None,
        help="with --stream mixed: only write a result's Markdown again from its JSON (today's "
        "tables, intervals and pairs)",
    )
    parser.add_argument("--llm", action="store_true", help="policy: the configured chat model")
    parser.add_argument("--quick", action="store_true", help="6 games, hashing: a smoke run")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    parser.add_argument("--tag", default="", help="suffix for the result files' names")
    parser.add_argument("--no-progress", action="store_true")


def execute(args: argparse.Namespace, command: str) -> dict[str, Any]:
    """Run what ``args`` ask for; returns the results and the files written."""
    if args.stream == "mixed" and args.render is not None:
        from bench.learning_mixed import render

        return {"results": [], "files": render(args.render)}
    if args.stream == "mixed":
        from bench.learning_mixed import run as run_mixed

        return {"results": [], **run_mixed(args, command)}
    if args.heldout:  # the held-out range of bench.protocol, for reported figures
        from bench.protocol import HELDOUT

        args.fold, args.seed_offset = HELDOUT.fold, HELDOUT.start
    if args.episodes is None:
        args.episodes = 300
    if args.block is None:
        args.block = BLOCK
    if args.conditions is None:
        args.conditions = ",".join(MAIN)
    if args.quick:
        args.episodes, args.repeat, args.block, args.embedder = 6, 2, 3, "hashing"
    if args.episodes < 1 or args.repeat < 0 or args.block < 1 or args.budget < 1:
        raise SystemExit("--episodes, --block and --budget must be positive, --repeat >= 0")
    names = list(CONDITIONS) if args.conditions == "all" else args.conditions.split(",")
    if args.memory:
        kinds = [k.strip() for k in args.memory.split(",") if k.strip()]
        if wrong := [k for k in kinds if k not in MEMORY_KINDS]:
            raise SystemExit(f"--memory takes {', '.join(MEMORY_KINDS)}; got {', '.join(wrong)}")
        names = ["none", *dict.fromkeys(kinds)]
    unknown = [n for n in names if n not in CONDITIONS]
    if unknown:
        raise SystemExit(
            f"unknown condition(s) {', '.join(unknown)}; known: {', '.join(CONDITIONS)}"
        )
    from showcase.envs.textworld import EXPLORED_GAMES, TWX_GAMES

    if args.game not in TWX_GAMES:
        raise SystemExit(f"unknown game {args.game!r}; TextWorldExpress has {', '.join(TWX_GAMES)}")
    if args.game not in EXPLORED_GAMES and not args.grid:
        print(
            f"note: {args.game} has no explorer that acts on memory (only "
            f"{', '.join(EXPLORED_GAMES)}): the generic novelty explorer ignores hints, so "
            "memory is inert here",
            file=sys.stderr,
        )
    parse_params(getattr(args, "params", ""))  # a bad --params fails before any game
    args.machine = machine_info()
    if args.summarise:
        results = saved_runs(args.out)
        return {"results": results, "files": write_summary(args.out, results, command, args)}
    embedder = make_embedder(args.embedder)
    plan = [(g, b, c) for g, b, c in GRID] if args.grid else [(args.game, args.budget, names)]
    if args.grid and args.runs:
        wanted = {tuple(r.split(":")) for r in args.runs.split(",")}
        plan = [(g, b, c) for g, b, c in plan if (g, str(b)) in wanted]
    results = [run_game(g, b, c, args, embedder, command) for g, b, c in plan]
    files = [f for r in results for f in r["files"]]
    if args.grid and not args.runs:
        files += write_summary(args.out, results, command, args)
    return {"results": results, "files": files}


def saved_runs(out: Path) -> list[dict[str, Any]]:
    """The per-run results already written in ``out``, in grid order."""
    import json

    results = []
    for game, budget, _ in GRID:
        path = out / f"learning_{game}_b{budget}.json"
        if path.is_file():
            data = json.loads(path.read_text(encoding="utf-8"))
            results.append(
                {"game": game, "budget": budget, "rows": data["results"], "setup": data["setup"]}
            )
    if not results:
        raise SystemExit(f"no learning_<game>_b<budget>.json files in {out}")
    return results


def write_summary(
    out: Path, results: Sequence[dict[str, Any]], command: str, args: argparse.Namespace
) -> list[Path]:
    summary = summary_markdown(results, command, args.machine)
    data = {
        "machine": args.machine,
        "runs": [
            {
                "game": r["game"],
                "budget": r["budget"],
                "command": r["setup"]["command"],
                "embedder": r["setup"]["embedder"],
                "rows": r["rows"],
            }
            for r in results
        ],
    }
    return write_results(out, "learning_textworld", data, summary)


def main(argv: Sequence[str] | None = None, prog: str = "python -m bench.learning") -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    logging.getLogger("py4j").setLevel(logging.CRITICAL)  # noisy on JVM shutdown
    logging.getLogger("graphmem").setLevel(logging.ERROR)  # offline-fallback notices per call
    command = " ".join([prog, *(argv if argv is not None else sys.argv[1:])])
    out = execute(args, command)
    if "data" in out:  # --stream mixed
        for r in out["data"]["results"]:
            print(
                f"  {r['condition']:<19} success {r['success']:.0%}  "
                f"(twc+cookingworld {r['success_reading_memory']:.0%})  "
                f"hand-over max {r['max_handover']}  memory items {r['memory_items']}"
            )
    for res in out["results"]:
        print(f"\n{res['game']} budget {res['budget']}:")
        for r in res["rows"]:
            print(
                f"  {r['condition']:<11} success {r['success']:.0%} "
                f"({r.get('success_gain_pp', 0.0):+.1f} pp)  steps {r['mean_steps']:.1f} "
                f"({r.get('steps_change', 0.0):+.0%})  repeat {_pct(r['repeat_success'])}  "
                f"forgetting {_pct(r['forgetting_rate'])}"
            )
    for path in out["files"]:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
