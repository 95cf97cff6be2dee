"""The learning harness every game suite shares: conditions, memories, the game loop, the runs.

A mixed stream (:mod:`bench.learning_mixed` on TextWorldExpress,
:mod:`bench.learning_scienceworld_mixed` on ScienceWorld) plays the same interleaved episodes
under several *conditions*, each with a fresh memory: none (the best agent without memory),
plain (everything handed over), a flat top-K (a vector list, no utility, no graph) and
graphmem's retrieval in its variants. This module holds what those suites do alike, written
once:

- :class:`Condition` and :func:`retrieval_config`: which graphmem retrieval a condition runs
  (``None`` fields keep the library's default), and :func:`graph_memory`, the memory it runs on;
- :class:`ItemList`: the items a ``plain`` (or flat) memory keeps, handed over newest first;
  :class:`GraphmemBase`: graphmem's memory with credit by use and the uses report;
- :func:`interleave`: the stream's order, families interleaved in shuffled rounds;
- :func:`play_game`: one episode of an agent in an environment (act, step, feedback);
- :func:`pick_conditions`, :func:`play_conditions` (one worker process per condition, results
  written as each finishes), :func:`run_in_worker` (quiet logs, seeded ids) and
  :func:`paired_comparisons` (every condition plays the same episodes; exact sign test and
  bootstrap interval from :mod:`bench.paired`).

What stays in each suite is what differs: the agent, what a memory item is (facts, a past game, a
ScienceWorld procedure's hint), the flat baseline's index and the report.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Literal, Protocol, TypeVar

from bench.common import progress_bar
from bench.paired import compare

if TYPE_CHECKING:
    from graphmem.config import RetrievalConfig
    from graphmem.memory import GraphMemory
    from graphmem.models import MemoryKind

CANDIDATES = 4
"""graphmem's phase A recalls ``CANDIDATES × K`` candidates for phase B to keep K of."""

T = TypeVar("T")
R = TypeVar("R")
E = TypeVar("E")


# ---- conditions -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Condition:
    """One way of playing the stream: which memory, and for graphmem which retrieval."""

    name: str
    label: str
    kind: str
    """none, plain, flat, graphmem."""
    lam: float | None = 0.0
    """λ, the weight of utility Q; None: the library's default."""
    graph: bool = True
    q_scale: Literal["pool", "reward"] | None = "pool"
    """None: the library's default."""
    q_prior: Literal["q0", "source", "pool", "source-pool"] | None = None
    """None: graphmem's default (``RetrievalConfig.q_prior``, 'source' since issue 28; 'q0'
    before, in the result files made before that change)."""
    abstain: bool | None = None
    """None: graphmem's default (``RetrievalConfig.abstain``: off; issue 45's held-out run of
    bench/results/learning_mixed_experiences_k5_heldout_abstention.md played it on, as
    ``two-phase``, beside ``two-phase-noabstain``); the similarity baselines set False."""
    abstain_z: float | None = None
    """None: graphmem's default (``RetrievalConfig.abstain_z``, 0); below 0 a memory must be
    surely better than acting alone to be handed over."""
    expand: Literal["off", "tasks", "links", "links+tasks"] | None = None
    """None: graphmem's default (``RetrievalConfig.expand``: off); 'links+tasks' adds the
    graph's neighbours to phase A (issue 45: task clusters and LINKS_TO feeding phase A)."""
    choose_kinds: bool | None = None
    """None: graphmem's default (``RetrievalConfig.choose_kinds``); True: utility chooses the
    kind per task cluster (issue 52); the similarity baselines set False."""
    utility_kinds: tuple[str, ...] | None = None
    """None: graphmem's default (``RetrievalConfig.utility_kinds``)."""
    advantage: bool = False
    """Credit R − b instead of R: b is the family's running success rate in this stream (how
    games of that kind go anyway), so Q measures what a memory adds, not how easy its
    family is."""


def retrieval_config(condition: Condition, k: int, kinds: Sequence[MemoryKind]) -> RetrievalConfig:
    """graphmem's retrieval for ``condition`` handing over at most ``k`` memories of ``kinds``:
    phase A recalls ``CANDIDATES × k``; every field the condition leaves None is the library's.

    >>> from graphmem.models import MemoryKind
    >>> c = retrieval_config(Condition("x", "", "graphmem", lam=None, q_scale=None), 5,
    ...                      (MemoryKind.NOTE,))
    >>> (c.k1, c.k2, c.lam == type(c)().lam)
    (20, 5, True)
    """
    from graphmem.config import RetrievalConfig

    chosen = {
        "lam": condition.lam,
        "q_scale": condition.q_scale,
        "q_prior": condition.q_prior,
        "abstain": condition.abstain,
        "expand": condition.expand,
        "abstain_z": condition.abstain_z,
        "choose_kinds": condition.choose_kinds,
        "utility_kinds": condition.utility_kinds,
    }
    overrides: dict[str, Any] = {k: v for k, v in chosen.items() if v is not None}
    return RetrievalConfig(k1=CANDIDATES * k, k2=k, kinds=tuple(kinds), **overrides)


def graph_memory(
    embedder: Any, config: RetrievalConfig, store_dir: Path | None = None
) -> GraphMemory:
    """A fresh graphmem on the embedded store (in memory unless ``store_dir``) whose own config
    carries ``config``, so finishing an episode that credits nothing counts towards
    abstention's baseline when abstention is on."""
    from graphmem.config import MemoryConfig
    from graphmem.memory import GraphMemory
    from graphmem.stores.embedded import EmbeddedStore

    store = EmbeddedStore.open(store_dir) if store_dir else EmbeddedStore.in_memory()
    return GraphMemory(store, embedder=embedder, config=MemoryConfig(retrieval=config))


def pick_conditions(spec: str | None, known: Sequence[str], default: Sequence[str]) -> list[str]:
    """``--conditions``: a comma list of ``known`` names, ``all``, or nothing for ``default``;
    an unknown name is a one-line error.

    >>> pick_conditions("b,a", ("a", "b", "c"), ("a",)), pick_conditions(None, ("a", "b"), ("a",))
    (['b', 'a'], ['a'])
    """
    if not spec:
        names = list(default)
    elif spec == "all":
        names = list(known)
    else:
        names = [n for n in spec.split(",") if n]
    if unknown := [n for n in names if n not in known]:
        raise SystemExit(
            f"unknown condition(s) {', '.join(unknown)} for --stream mixed; "
            f"known: {', '.join(known)}"
        )
    return names


def check_handover(handover: int) -> None:
    if handover < 1:
        raise SystemExit("--handover must be at least 1")


# ---- memories -------------------------------------------------------------------------------


class ItemList(Generic[T]):
    """The items a plain memory keeps: every one so far, handed over all at once."""

    def __init__(self) -> None:
        self.items: list[T] = []

    def add(self, item: T) -> None:
        self.items.append(item)

    def newest_first(self) -> list[T]:
        return self.items[::-1]

    def size(self) -> int:
        return len(self.items)


class GraphmemBase:
    """graphmem as a condition's memory: the retrieval :func:`retrieval_config` makes, on a
    fresh :func:`graph_memory`, credit by use (only the memories the agent used move)."""

    namespace = "mixed"

    def __init__(
        self,
        embedder: Any,
        condition: Condition,
        k: int,
        kinds: Sequence[MemoryKind],
        store_dir: Path | None = None,
    ) -> None:
        self.graph = condition.graph
        self.config = retrieval_config(condition, k, kinds)
        self.mem = graph_memory(embedder, self.config, store_dir)

    def credit(self, episode_id: str, reward: float, success: bool, used: Sequence[str]) -> None:
        """Finish ``episode_id`` with ``reward``, crediting the ``used`` memories only."""
        self.mem.finish_episode(self.namespace, episode_id, reward, success=success, used=used)

    def uses(self) -> list[int]:
        """How often each memory that Q ranks was credited (its ``uses``), for the report."""
        kinds = set(self.config.kinds)
        return [m.uses for m in self.mem.store.iter_nodes(self.namespace) if m.kind in kinds]


# ---- the stream -----------------------------------------------------------------------------


def interleave(
    families: Sequence[str], n: int, *, start: int = 0, order_seed: int
) -> list[tuple[str, int]]:
    """``n`` (family, seed) episodes: families interleaved in rounds of one episode each, the
    order within a round shuffled (seeded by ``order_seed``), each family's seeds running
    upward from ``start``.

    >>> interleave(("a", "b"), 4, order_seed=1)
    [('b', 0), ('a', 0), ('b', 1), ('a', 1)]
    """
    rng = random.Random(order_seed)
    plan: list[tuple[str, int]] = []
    next_seed = dict.fromkeys(families, start)
    while len(plan) < n:
        round_ = list(families)
        rng.shuffle(round_)
        for family in round_[: n - len(plan)]:
            plan.append((family, next_seed[family]))
            next_seed[family] += 1
    return plan


class Agent(Protocol):
    """What :func:`play_game` needs of an agent (every explorer and adapter of ``showcase``)."""

    def act(self, text: str, valid_actions: Any, inventory: Any) -> Any: ...

    def feedback(self, action: str, observation: str, reward: float) -> None: ...


def play_game(
    env: Any, obs: Any, agent: Agent, before_act: Callable[[Any], None] | None = None
) -> Iterator[tuple[Any, Any]]:
    """One episode from ``obs`` (the reset's observation) to its end: ``before_act(obs)`` (the
    agent asks memory), the agent acts, the environment steps, the agent hears back; yields
    each (decision, step result)."""
    while True:
        if before_act is not None:
            before_act(obs)
        decision = agent.act(obs.text, obs.valid_actions, obs.inventory)
        result = env.step(decision.action)
        agent.feedback(decision.action, result.observation.text, result.reward)
        yield decision, result
        obs = result.observation
        if result.done:
            return


def run_in_worker(
    play: Callable[[E], R], open_envs: Callable[[], E], close_envs: Callable[[E], None]
) -> R:
    """Run one condition in a worker process: graphmem's and py4j's logs quiet, the
    environments opened for it and closed after, memory ids seeded (memories with the same
    text tie in similarity and ties go by id, so with random ids two runs could rank them
    apart)."""
    from graphmem.models import seeded_ids

    logging.getLogger("graphmem").setLevel(logging.ERROR)
    logging.getLogger("py4j").setLevel(logging.CRITICAL)
    envs = open_envs()
    try:
        with seeded_ids(0):
            return play(envs)
    finally:
        close_envs(envs)


def play_conditions(
    names: Sequence[str],
    play_one: Callable[..., R],
    play_args: Sequence[Any],
    *,
    jobs: int,
    write: Callable[[dict[str, R]], object],
    progress: bool = True,
) -> dict[str, R]:
    """``play_one(name, *play_args)`` for every condition, ``jobs`` at a time in spawned worker
    processes (each its own JVMs and embedder); ``write(done)`` after each one finishes, so a
    run cut short keeps what it played."""
    runs: dict[str, R] = {}
    bar = progress_bar(len(names), "conditions", enabled=progress)
    try:
        if jobs == 1:
            for name in names:
                runs[name] = play_one(name, *play_args)
                write(runs)
                bar.update(1)
        else:
            with ProcessPoolExecutor(jobs, mp_context=get_context("spawn")) as pool:
                futures = {pool.submit(play_one, name, *play_args): name for name in names}
                for future in as_completed(futures):
                    runs[futures[future]] = future.result()
                    write(runs)
                    bar.update(1)
    finally:
        bar.close()
    return runs


@dataclass
class View(Generic[R]):
    """One way of reading a run for a paired comparison: its label (a scope or a measure) and
    the per-episode outcomes it reads."""

    label: str
    outcomes: Callable[[R], list[float]] = field(repr=False)


def paired_comparisons(
    runs: Mapping[str, R], pairs: Sequence[tuple[str, str]], views: Sequence[View[R]], key: str
) -> list[dict[str, Any]]:
    """Every pair (a, b) both played, compared episode by episode in every view: a row with
    ``a``, ``b``, ``key`` (the view's label) and :func:`bench.paired.compare`'s fields."""
    out = []
    for a, b in pairs:
        if a not in runs or b not in runs:
            continue
        for view in views:
            xs, ys = view.outcomes(runs[a]), view.outcomes(runs[b])
            out.append({"a": a, "b": b, key: view.label, **asdict(compare(xs, ys))})
    return out
