"""A LangGraph agent that solves a stream of TextWorldExpress games with graphmem memory.

It is the agent flow (:mod:`graphmem.flows.agent`) with text-game parts: the policy node is the
offline rule-based explorer of :mod:`showcase.envs.agents` (or, with ``--llm``, any
OpenAI-compatible chat model: ``GRAPHMEM_LLM_BASE_URL`` / ``GRAPHMEM_LLM_MODEL`` /
``GRAPHMEM_LLM_API_KEY``, see
:mod:`graphmem.settings`), retrieved notes become hints, retrieved procedures are followed
(adapted to the game, :mod:`showcase.envs.procedures`; the reward credits those followed),
and after each game the facts it taught ("roast means cook in oven", "newspaper belongs in side
table") are saved as notes beside the procedure and tip that the update flow writes. Needs
Java 17.

Run it::

    python -m showcase.textworld_agent --game cookingworld --seeds 0-29
    python -m showcase.textworld_agent --game cookingworld --seeds 0-29 --no-memory

Memory goes to the configured store, as in the demo (``./run demo``): Neo4j when
``GRAPHMEM_NEO4J_URI`` is set, else the embedded store in ``GRAPHMEM_STORE``
(./graphmem-data). ``--in-memory`` keeps it in RAM for this run only.

Or from Python (``progress=True`` shows a progress bar; a function is called after each game)::

    from graphmem import GraphMemory, HashingEmbedder
    from graphmem.stores.embedded import EmbeddedStore
    from showcase.textworld_agent import run_stream

    mem = GraphMemory(EmbeddedStore.in_memory(), embedder=HashingEmbedder())
    stream = run_stream(mem, "tw-demo", game="cookingworld", seeds=range(30))
    print(stream.success_rate, stream.successes)
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence, Sized
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from langchain_core.language_models import BaseChatModel

from graphmem.agents import Policy
from graphmem.config import RetrievalConfig, UpdateStrategy
from graphmem.flows.agent import build_agent_graph, default_hints, run_task
from graphmem.flows.state import AgentContext, AgentState, LearnFn
from graphmem.llm import MemoryLLM
from graphmem.memory import GraphMemory
from graphmem.models import Hit, MemoryKind, Namespace, Note, Procedure
from graphmem.ops.build import revise_note
from graphmem.ops.obsolescence import SUBJECT_TAG
from showcase.envs.agents import ChatPolicy as ChatPolicy
from showcase.envs.agents import choose_action as choose_action
from showcase.envs.agents import make_explorer
from showcase.envs.hints import (
    extract_facts,
    fact_subject,
    game_knowledge,
    negation,
    scope_tag,
)
from showcase.envs.textworld import TextWorldEnv

log = logging.getLogger(__name__)

TEXTWORLD_RETRIEVAL = RetrievalConfig(k1=20, k2=8, lam=0.5, kinds=(MemoryKind.NOTE,), hybrid=False)
"""Recall 20 fact notes, keep 8 by (1-λ)·ẑ(sim) + λ·ẑ(Q): games of one kind read alike, so the
utility Q learned from outcomes decides which notes are handed to the explorer. The showcase's
three retrievals recall by vector alone (``hybrid=False``), as they were tuned: keyword scores
differ between Lucene and the embedded index, and with them the demo played on Neo4j learned
other memories than on the embedded store (tests/test_viz_browser.py compares the pictures)."""

PROCEDURE_RETRIEVAL = RetrievalConfig(
    k1=100, k2=60, lam=0.5, kinds=(MemoryKind.PROCEDURE,), hybrid=False
)
"""Procedures the explorer may act on: recall 100, keep the 60 best by two-phase score. The
successful ones among them are followed step by step, best first (the follower adapts up to
three; :mod:`showcase.envs.procedures`); every one offered hands over the steps that
hold in any game (where an item went, what a verb needs), taken where their objects are here.
Games of one kind read alike, so a game needs many procedures to meet its own objects: on 80
twc games of the train fold at budget 30, procedures only solved 12% with k1=50, k2=25 and 19%
with k1=100, k2=60. Only the procedures it takes steps from join the Episode, so Q is learned
per procedure followed."""

DEFAULT_BUDGET = {"cookingworld": 40, "twc": 45, "coin": 40}
RECALL_RETRIEVAL = RetrievalConfig(k1=10, k2=3, lam=0.5, kinds=(MemoryKind.NOTE,), hybrid=False)
"""Questions asked during a game ("where does the gray coat belong?") recall 10 fact notes and
keep the 3 best by two-phase score."""

FACTS_TAG = "textworld-facts"
FACTS_HEADER = "Facts learned in:"
FACTS_ABOUT = "Facts about"


def fact_lines(memory: Any) -> list[str] | None:
    """The facts of a fact note (None for any other memory)."""
    # The header, not the tag, marks a fact note: evolution may give a note new tags.
    if not isinstance(memory, Note):
        return None
    if not memory.content.startswith((FACTS_HEADER, FACTS_ABOUT)):
        return None
    return [line.strip() for line in memory.content.splitlines()[1:] if line.strip()]


# ---- memory ↔ policy -------------------------------------------------------------------------


def textworld_hints(
    memory: GraphMemory, namespace: str, task: str, hits: Sequence[Hit]
) -> list[str]:
    """Hints for the explorer: each fact line of a fact note, tips, and the actions of a
    successful procedure of this very game (another game's moves would mislead the explorer)."""
    hints: list[str] = []
    for hit in hits:
        m = hit.memory
        if (facts := fact_lines(m)) is not None:
            hints.extend(facts)
        elif isinstance(m, Procedure):
            if m.success and m.task_text == task:
                hints.extend(default_hints(memory, namespace, task, [hit]))
        else:
            hints.extend(default_hints(memory, namespace, task, [hit]))
    return list(dict.fromkeys(hints))


def learn_facts(memory: GraphMemory, namespace: str, state: AgentState) -> list[str]:
    """Save the facts a game taught as one note (one fact per line); returns its id."""
    steps = [(s["action"], s["observation"], s["reward"]) for s in state.get("steps", [])]
    facts = extract_facts(steps)
    if not facts:
        return []
    # The task line makes the note similar to the task it helps; the explorer ignores it.
    content = "\n".join([f"{FACTS_HEADER} {state['task']}", *facts])
    note = memory.add_note(namespace, content, tags=[FACTS_TAG, scope_tag(facts)])
    return [note.id]


def learn_facts_by_subject(memory: GraphMemory, namespace: str, state: AgentState) -> list[str]:
    """Save the facts a game taught as one note per subject (an item, a cooking verb).

    Notes about one thing answer the questions an agent asks during a game ("where does the
    gray coat belong?") better than a note of a whole game, whose text is mostly about other
    things. A subject's facts are kept sorted, so a note is a function of its set of facts.
    A subject that already has a note is consolidated: when the game taught something new
    (where a fact contradicts an old one, this game's wins), the note evolves into a new
    version holding the old facts and the new (EVOLVED_FROM the old one, version + 1, the old
    one obsolete; :func:`graphmem.ops.build.revise_note`); the same facts, in whatever order,
    change nothing. Returns the ids of the notes written (new ones and new versions).
    """
    steps = [(s["action"], s["observation"], s["reward"]) for s in state.get("steps", [])]
    source_ref = str(state.get("episode_id") or state.get("seed", "")) or None
    return learn_subject_facts(memory, namespace, extract_facts(steps), source_ref=source_ref)


def learn_subject_facts(
    memory: GraphMemory, namespace: str, facts: Sequence[str], *, source_ref: str | None = None
) -> list[str]:
    """:func:`learn_facts_by_subject` for facts already extracted (``source_ref``: the
    episode or game that taught them, recorded on new versions)."""
    by_subject: dict[str, list[str]] = {}
    for fact in facts:
        by_subject.setdefault(fact_subject(fact) or "this game", []).append(fact)
    ids: list[str] = []
    for subject, taught in by_subject.items():
        header = f"{FACTS_ABOUT} {subject}:"
        older = _subject_notes(memory, namespace, header)
        known = {f for note in older for f in fact_lines(note) or []}
        merged = sorted({*taught, *(f for f in known if negation(f) not in taught)})
        content = "\n".join([header, *merged])
        if not older:
            tags = [FACTS_TAG, scope_tag(merged), SUBJECT_TAG + subject]
            note = memory.add_note(namespace, content, tags=tags)
            if not note.obsolete:  # else the same facts as a note retired earlier
                ids.append(note.id)
            continue
        if len(older) == 1 and set(merged) == known:
            continue  # nothing new: consolidation is order-independent
        added = sorted(set(merged) - known)
        dropped = sorted(known - set(merged))
        change = "; ".join(
            [
                *([f"learned {', '.join(added)}"] if added else []),
                *([f"contradicted {', '.join(dropped)}"] if dropped else []),
                *([f"merged {len(older)} notes"] if len(older) > 1 else []),
            ]
        )
        note = revise_note(
            memory,
            Namespace(namespace),
            [n.id for n in older],
            content,
            change=f"consolidated: {change}",
            tags=[FACTS_TAG, scope_tag(merged), SUBJECT_TAG + subject],
            source="consolidate",
            source_ref=source_ref,
        )
        ids.append(note.id)
    return ids


def _subject_notes(memory: GraphMemory, namespace: str, header: str) -> list[Note]:
    """The live fact notes whose first line is ``header``, newest version first."""
    found = memory.retrieve(namespace, header, k1=10, k2=10, lam=0.0, kinds=(MemoryKind.NOTE,))
    notes = [
        m
        for m in found.memories
        if isinstance(m, Note) and not m.obsolete and m.content.split("\n", 1)[0] == header
    ]
    return sorted(notes, key=lambda n: (-n.version, -n.uses, n.created_at, n.id))


# ---- an LLM policy ---------------------------------------------------------------------------

# ChatPolicy and choose_action live in showcase.envs.agents (re-exported here for callers).


def llm_from_settings() -> MemoryLLM:
    """The :class:`MemoryLLM` the settings name (``GRAPHMEM_LLM_BASE_URL`` etc.)."""
    from graphmem.errors import ConfigError
    from graphmem.settings import Settings

    llm = Settings.from_env().make_llm()
    if llm is None:
        raise ConfigError("set GRAPHMEM_LLM_BASE_URL (and GRAPHMEM_LLM_MODEL) to use --llm")
    return llm


def chat_model_from_settings() -> BaseChatModel:
    """The chat model the settings name (prefer :func:`llm_from_settings`: it counts usage)."""
    return llm_from_settings().chat_model


# ---- the stream ------------------------------------------------------------------------------


@dataclass
class StreamResult:
    """Outcome of a task stream: per-task success and steps, in order."""

    seeds: list[int] = field(default_factory=list)
    successes: list[bool] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)

    @property
    def success_rate(self) -> float:
        return sum(self.successes) / len(self.successes) if self.successes else 0.0


ProgressFn = Callable[[int, "int | None", StreamResult], None]
"""``progress(done, total, result)``, called after each game of :func:`run_stream`: games
played, games in the stream (None when ``seeds`` has no length), and the result so far."""


class _Progress:
    """What :func:`run_stream` reports after each game: nothing, a tqdm bar, or a callback."""

    def __init__(self, progress: bool | ProgressFn, seeds: Iterable[int], game: str) -> None:
        self.total = len(seeds) if isinstance(seeds, Sized) else None
        self.callback = progress if callable(progress) else None
        self.bar: Any = None
        if progress is True:
            from tqdm import tqdm

            self.bar = tqdm(total=self.total, desc=game, unit="game")

    def __call__(self, result: StreamResult) -> None:
        if self.callback is not None:
            self.callback(len(result.seeds), self.total, result)
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix_str(f"solved {sum(result.successes)}/{len(result.successes)}")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def run_stream(
    memory: GraphMemory,
    namespace: str,
    *,
    game: str = "cookingworld",
    seeds: Iterable[int] = range(20),
    use_memory: bool = True,
    policy: Policy | None = None,
    step_budget: int | None = None,
    fold: str = "test",
    strategy: UpdateStrategy = UpdateStrategy.ADJUSTMENT,
    retrieval: RetrievalConfig = TEXTWORLD_RETRIEVAL,
    env: TextWorldEnv | None = None,
    recall: RetrievalConfig | None = RECALL_RETRIEVAL,
    learn: LearnFn | None = None,
    progress: bool | ProgressFn = False,
    procedures: RetrievalConfig | None = PROCEDURE_RETRIEVAL,
) -> StreamResult:
    """Play each seed once, in order, learning between games when ``use_memory``.

    Memory is read when a game starts (``retrieval``) and, with ``recall``, whenever the
    explorer meets something it does not know ("where does the gray coat belong?"). The facts
    a game taught are saved by graphmem's distillation (:mod:`graphmem.ops.distill`): a memory
    without a distiller of its own is given the games' fact extractor
    (:func:`showcase.envs.hints.game_knowledge`), one versioned note per subject; ``learn``
    may save more after each game (:func:`learn_facts` keeps one note per game). With
    ``procedures`` the explorer is also handed the successful procedures of similar games
    and follows their steps where they apply (adapted to this game;
    :mod:`showcase.envs.procedures`), and the reward credits the ones it followed; None leaves
    procedures unread. A stream takes minutes: ``progress=True``
    shows a tqdm bar on stderr, and a :data:`ProgressFn` is called after each game.
    ``step_budget`` None is the game's :data:`DEFAULT_BUDGET`; anything below 1 is refused.
    """
    graph = build_agent_graph().compile(name=f"textworld-{game}")
    if memory.distiller is None:
        memory.distiller = game_knowledge
    own_env = env is None
    budget = DEFAULT_BUDGET.get(game, 50) if step_budget is None else step_budget
    env = env or TextWorldEnv(game, step_budget=budget)
    context = AgentContext(
        namespace=namespace,
        memory=memory,
        retrieval=retrieval,
        strategy=strategy,
        env=env,
        policy=policy or make_explorer(game),
        fold=fold,
        use_memory=use_memory,
        hints=textworld_hints,
        learn=learn,
        task_prefix=game,
        recall=recall,
        procedures=procedures,
    )
    result = StreamResult()
    report = _Progress(progress, seeds, game)
    try:
        for seed in seeds:
            out = run_task(graph, seed, context)
            result.seeds.append(seed)
            result.successes.append(bool(out.get("success")))
            result.steps.append(len(out.get("steps", [])))
            log.info("%s seed %d: %s", game, seed, "solved" if out.get("success") else "failed")
            report(result)
    finally:
        report.close()
        if own_env:
            env.close()
    return result


TWX_GAMES = (
    *("twc", "cookingworld", "coin"),
    *("mapreader", "arithmetic", "sorting", "simonsays", "peckingorder"),
)
"""Games TextWorldExpress generates (the first three have their own explorers)."""


def _seed_range(text: str) -> range:
    """``--seeds``: one seed (``7``) or an inclusive range (``0-19``) of non-negative seeds."""
    lo, sep, hi = text.strip().partition("-")
    try:
        seeds = range(int(lo), int(hi if sep else lo) + 1)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a seed or a range like 0-19, got {text[:40]!r}"
        ) from None
    if not seeds:
        raise argparse.ArgumentTypeError(f"the range {text[:40]!r} holds no seed")
    return seeds


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text[:40]!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _namespace(text: str) -> str:
    from graphmem.errors import InvalidNamespace
    from graphmem.models import check_namespace

    try:
        return check_namespace(text)
    except InvalidNamespace as e:
        raise argparse.ArgumentTypeError(str(e)) from e


def _parser() -> argparse.ArgumentParser:
    from graphmem.commandline import OneLineParser

    parser = OneLineParser(
        prog="python -m showcase.textworld_agent",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,  # keep the docstring's layout
    )
    parser.command = "textworld_agent"
    parser.add_argument(
        "--game", default="cookingworld", choices=TWX_GAMES, help="the game (default cookingworld)"
    )
    parser.add_argument(
        "--seeds", type=_seed_range, default="0-19", help="7 or a range (default 0-19)"
    )
    budgets = ", ".join(f"{g} {n}" for g, n in DEFAULT_BUDGET.items())
    parser.add_argument(
        "--budget",
        type=_positive,
        default=None,
        help=f"steps per game, at least 1 (default: the game's own: {budgets}; others 50)",
    )
    parser.add_argument(
        "--namespace",
        type=_namespace,
        default="textworld-agent",
        help="memory namespace (default textworld-agent)",
    )
    parser.add_argument("--no-memory", action="store_true", help="the same agent, no memory")
    parser.add_argument("--llm", action="store_true", help="policy: the configured chat model")
    parser.add_argument(
        "--in-memory",
        action="store_true",
        help="keep memory in RAM for this run only (default: the configured store, "
        "GRAPHMEM_NEO4J_URI or GRAPHMEM_STORE)",
    )
    # The configured store is the default now; --persist stays accepted for old scripts.
    parser.add_argument("--persist", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Play the stream; a usage or configuration mistake is one line on stderr and exit 2.

    Everything is checked (arguments, settings, the chat model for ``--llm``) before a store is
    opened or Java started.
    """
    from graphmem.commandline import one_line
    from graphmem.errors import GraphmemError

    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    log.setLevel(logging.INFO)
    logging.getLogger("py4j").setLevel(logging.CRITICAL)  # noisy tracebacks on JVM shutdown
    try:
        result = _play(args)
    except GraphmemError as e:
        print(f"textworld_agent: error: {one_line(str(e))}", file=sys.stderr)
        return 2
    solved = sum(result.successes)
    print(f"{args.game}: solved {solved}/{len(result.successes)} ({result.success_rate:.0%})")
    return 0


@contextmanager
def _report_usage(llm: MemoryLLM | None, policy: ChatPolicy | None = None) -> Iterator[None]:
    """Log what the model cost when the run ends, however it ends, and who chose the steps."""
    try:
        yield
    finally:
        if llm is not None:
            acted = f"; {policy.summary()}" if policy is not None else ""
            log.info("LLM usage (%s): %s%s", llm.name, llm.usage.snapshot().summary(), acted)


def _play(args: argparse.Namespace) -> StreamResult:
    from graphmem.settings import Settings

    settings = Settings.from_env()
    # One client for the policy and the memory steps: one usage count, one endpoint check.
    llm = settings.make_llm()
    policy: ChatPolicy | None = None
    if args.llm:
        llm = llm_from_settings()
        policy = ChatPolicy(llm, fallback=make_explorer(args.game))
    if args.in_memory:
        from graphmem.stores.embedded import EmbeddedStore

        memory = GraphMemory(EmbeddedStore.in_memory(), embedder=settings.make_embedder(), llm=llm)
    else:
        memory = GraphMemory(settings.open_store(), embedder=settings.make_embedder(), llm=llm)
        _setup_neo4j(memory)
        log.info("memory in %s (%s)", settings.backend, _where(settings))
    with memory, _report_usage(llm, policy):
        return run_stream(
            memory,
            args.namespace,
            game=args.game,
            seeds=args.seeds,
            use_memory=not args.no_memory,
            policy=policy,
            step_budget=args.budget,
            progress=not args.no_progress,
        )


def _setup_neo4j(memory: GraphMemory) -> None:
    """Apply the schema on Neo4j (idempotent), as the demo does."""
    from graphmem.stores.neo4j import Neo4jStore

    if isinstance(memory.store, Neo4jStore):
        memory.store.setup(memory.embedder.dimension)


def _where(settings: Any) -> str:
    from graphmem.settings import redact_uri

    return redact_uri(settings.neo4j_uri) if settings.neo4j_uri else str(settings.store_path)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
