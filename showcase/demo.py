"""The showcase: an agent works through a stream of text games with graphmem and gets better.

``./run demo`` (or ``python -m showcase.demo`` from the checkout's root) plays a stream of
TextWorldExpress games twice with the same rule-based agent — once with no memory, once with
graphmem — prints the learning curve of both, writes it as a PNG, and renders the procedural
chain the agent relied on most as an interactive HTML page (plus Mermaid). With
``GRAPHMEM_NEO4J_URI`` set, memories go to Neo4j instead of the embedded store, ready to explore
in Neo4j Browser.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from graphmem.errors import ConfigError, GraphmemError, InvalidNamespace
from graphmem.models import MemoryKind, Procedure, check_namespace
from graphmem.settings import Settings, redact_uri
from showcase.metrics import EpisodeRecord, LearningSummary, blocks, summarise

if TYPE_CHECKING:
    from graphmem.memory import GraphMemory

log = logging.getLogger(__name__)

BROWSER_CHAIN_QUERY = (
    "MATCH (t:Task {namespace: $ns})-[:SOLVED_BY]->(p)-[:FIRST_STEP|NEXT*0..]->(s) "
    "RETURN t, p, s LIMIT 100"
)
"""The demo's closing hint for Neo4j Browser (after ``:param ns => "<namespace>"``)."""

DEMO_NAMESPACE = "demo"
DEMO_GAMES = ("twc", "cookingworld", "coin")
"""The TextWorldExpress games the demo's rule-based explorers are built for."""
MIN_EPISODES = 5
GAME_BUDGETS = {"cookingworld": 40, "twc": 45, "coin": 40}
"""Steps per game when ``--budget`` is not given: ``showcase.textworld_agent.DEFAULT_BUDGET``,
spelled out here so that ``--help`` need not import LangGraph (a test keeps them equal)."""


def parser() -> argparse.ArgumentParser:
    """The demo's command line (``python -m showcase.demo --help``)."""
    from graphmem.commandline import OneLineParser

    demo = OneLineParser(
        prog="python -m showcase.demo",
        description="Watch an agent learn with graphmem (needs Java 17).",
    )
    demo.command = "demo"
    demo.add_argument(
        "--game",
        default="twc",
        choices=DEMO_GAMES,
        help="the game (default twc; in cookingworld the agent without memory already knows "
        "what each cooking verb needs, so memory adds little there)",
    )
    demo.add_argument(
        "--episodes",
        type=_at_least(MIN_EPISODES),
        default=50,
        help=f"games in the stream, at least {MIN_EPISODES} (default 50)",
    )
    demo.add_argument(
        "--budget",
        type=_at_least(1),
        default=None,
        help="steps per game (default: the game's own, "
        + ", ".join(f"{g} {GAME_BUDGETS[g]}" for g in DEMO_GAMES)
        + ")",
    )
    demo.add_argument("--out", default="demo-out", help="where pictures go (default demo-out/)")
    demo.add_argument(
        "--namespace",
        type=_namespace,
        default=DEMO_NAMESPACE,
        help="memory namespace (default demo)",
    )
    demo.add_argument("--keep", action="store_true", help="keep what the namespace already holds")
    return demo


def _at_least(low: int) -> Callable[[str], int]:
    """An argparse type: an integer of at least ``low``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text[:40]!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, got {value}")
        return value

    return parse


def _namespace(text: str) -> str:
    try:
        return check_namespace(text)
    except InvalidNamespace as e:
        raise argparse.ArgumentTypeError(str(e)) from e


def check_demo_args(game: str, episodes: int, budget: int | None, namespace: str) -> None:
    """Refuse a bad argument (or a missing Java) before the demo deletes or writes anything."""
    from showcase.envs.jvm import JavaNotFound, find_java17

    if game not in DEMO_GAMES:
        raise ConfigError(f"unknown demo game {game!r}: use one of {', '.join(DEMO_GAMES)}")
    if isinstance(episodes, bool) or not isinstance(episodes, int) or episodes < MIN_EPISODES:
        raise ConfigError(f"the demo needs at least {MIN_EPISODES} episodes, got {episodes!r}")
    if budget is not None and (
        isinstance(budget, bool) or not isinstance(budget, int) or budget < 1
    ):
        raise ConfigError(f"the step budget must be a positive integer, got {budget!r}")
    check_namespace(namespace)
    try:
        find_java17()
    except JavaNotFound as e:
        raise ConfigError(f"the demo plays text games, which need Java 17: {e}") from e


def _records(successes: list[bool], steps: list[int], seeds: list[int]) -> list[EpisodeRecord]:
    epochs = blocks(len(seeds), max(1, min(6, len(seeds) // 5)))
    return [
        EpisodeRecord(task=str(seed), epoch=e, success=ok, steps=n)
        for seed, e, ok, n in zip(seeds, epochs, successes, steps, strict=True)
    ]


def _bar(rate: float, width: int = 20) -> str:
    filled = round(rate * width)
    return "█" * filled + "·" * (width - filled)


def _print_curve(base: LearningSummary, mem: LearningSummary, per_block: int) -> None:
    print("\n  games      no memory                    with graphmem")
    for i, (a, b) in enumerate(zip(base.success_per_epoch, mem.success_per_epoch, strict=True)):
        lo, hi = i * per_block + 1, (i + 1) * per_block
        print(f"  {lo:>3}-{hi:<4}  {_bar(a)} {a:4.0%}     {_bar(b)} {b:4.0%}")
    print(
        f"\n  overall    solved {base.success_rate:4.0%}, {base.mean_steps:4.1f} steps"
        f"      solved {mem.success_rate:4.0%}, {mem.mean_steps:4.1f} steps"
    )


def rolling_rate(successes: list[bool], window: int) -> list[float]:
    """Success rate over the last ``window`` games at each game (fewer at the start)."""
    out: list[float] = []
    for i in range(len(successes)):
        part = successes[max(0, i + 1 - window) : i + 1]
        out.append(sum(part) / len(part))
    return out


def curve_window(games: int) -> int:
    """Games per rolling mean: about a sixth of the stream, at least 3, at most 50."""
    return max(3, min(50, round(games / 6)))


def _plot(base: list[bool], mem: list[bool], path: Path) -> Path | None:
    """Per-game success as a rolling mean (readable at 5 games or 500), both runs, and the
    cumulative rate with memory; the legend sits below the axes, never over a line."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import PercentFormatter
    except ImportError:
        log.warning("matplotlib is not installed: no plot")
        return None
    n = len(mem)
    window = curve_window(n)
    xs = list(range(1, n + 1))
    marker = "o" if n <= 40 else None
    cumulative = [sum(mem[: i + 1]) / (i + 1) for i in range(n)]
    fig, ax = plt.subplots(figsize=(7.5, 4.6), dpi=110)
    ax.plot(
        xs,
        rolling_rate(base, window),
        color="#868e96",
        lw=2,
        marker=marker,
        ms=3,
        label=f"no memory (last {window} games)",
    )
    ax.plot(
        xs,
        rolling_rate(mem, window),
        color="#d62728",
        lw=2,
        marker=marker,
        ms=3,
        label=f"graphmem (last {window} games)",
    )
    ax.plot(xs, cumulative, ":", color="#d62728", lw=1.5, label="graphmem, all games so far")
    ax.set_xlabel("games played")
    ax.set_ylabel("success rate")
    ax.set_xlim(0.5, n + 0.5)
    ax.set_ylim(-0.03, 1.03)
    ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    ax.set_title(
        f"An agent learning with graphmem: solved {sum(base) / n:.0%} without memory, "
        f"{sum(mem) / n:.0%} with it",
        fontsize=10.5,
    )
    ax.grid(alpha=0.3)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=3, frameon=False, fontsize=8.5)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def _most_useful_procedure(memory: GraphMemory, namespace: str) -> Procedure | None:
    procs = [
        m
        for m in memory.store.iter_nodes(namespace, [MemoryKind.PROCEDURE])
        if isinstance(m, Procedure) and m.success and not m.obsolete
    ]
    if not procs:
        return None
    return max(procs, key=lambda p: (p.uses, p.q, p.created_at))


def _write_chain(memory: GraphMemory, namespace: str, out: Path) -> list[Path]:
    from graphmem.viz import task_subgraph, write

    proc = _most_useful_procedure(memory, namespace)
    if proc is None:
        return []
    sub = task_subgraph(memory.store, namespace, proc.id, siblings=False)
    return [write(sub, out / "chain.html"), write(sub, out / "chain.mmd")]


def _clear(memory: GraphMemory, namespace: str) -> int:
    ids = [m.id for m in memory.store.iter_nodes(namespace)]
    return len(memory.store.delete(namespace, ids)) if ids else 0


def _make_out_dir(out: Path) -> None:
    """The pictures' folder, created before anything else happens; a path that cannot be one
    (a file, no permission) is a one-line error."""
    from graphmem.errors import InvalidInput

    if out.exists() and not out.is_dir():
        raise InvalidInput(f"--out {out} is a file; give a folder for the pictures")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InvalidInput(f"cannot create --out {out}: {e.strerror or e}") from e


def run_demo(
    settings: Settings,
    *,
    game: str = "twc",
    episodes: int = 30,
    budget: int | None = None,
    out: Path = Path("demo-out"),
    namespace: str = DEMO_NAMESPACE,
    keep: bool = False,
) -> tuple[LearningSummary, LearningSummary]:
    """Play the stream without and with memory; returns both summaries.

    Every argument is checked (and Java found) before the namespace is cleared.
    """
    check_demo_args(game, episodes, budget, namespace)
    from tqdm import tqdm

    from graphmem.memory import GraphMemory
    from graphmem.stores.embedded import EmbeddedStore
    from showcase.envs.jvm import JavaNotFound
    from showcase.textworld_agent import run_stream

    _make_out_dir(out)
    logging.getLogger("py4j").setLevel(logging.CRITICAL)  # noisy on JVM shutdown
    where = redact_uri(settings.neo4j_uri) if settings.neo4j_uri else str(settings.store_path)
    print(f"graphmem demo: {episodes} {game} games, memory in {settings.backend} ({where})")
    print("loading the embedder ...", flush=True)
    memory = settings.open_memory()
    try:
        if settings.neo4j_uri:
            from graphmem.stores.neo4j import Neo4jStore

            if isinstance(memory.store, Neo4jStore):
                memory.store.setup(memory.embedder.dimension)
        if not keep:
            cleared = _clear(memory, namespace)
            if cleared:
                print(f"cleared {cleared} memories of earlier runs from namespace {namespace!r}")
        seeds = list(range(episodes))
        started = time.monotonic()
        try:
            baseline_memory = GraphMemory(EmbeddedStore.in_memory(), embedder=memory.embedder)
            base = run_stream(
                baseline_memory,
                "baseline",
                game=game,
                seeds=tqdm(seeds, desc="no memory    ", unit="game"),
                use_memory=False,
                step_budget=budget,
            )
            learned = run_stream(
                memory,
                namespace,
                game=game,
                seeds=tqdm(seeds, desc="with graphmem", unit="game"),
                use_memory=True,
                step_budget=budget,
            )
        except JavaNotFound as e:
            raise ConfigError(f"the demo plays text games, which need Java 17: {e}") from e
        elapsed = time.monotonic() - started
        base_summary = summarise(_records(base.successes, base.steps, base.seeds))
        mem_summary = summarise(_records(learned.successes, learned.steps, learned.seeds))
        per_block = -(-episodes // len(base_summary.success_per_epoch))
        _print_curve(base_summary, mem_summary, per_block)
        gain = mem_summary.success_rate - base_summary.success_rate
        print(f"\n  graphmem: {gain:+.0%} success over the same agent without memory")
        counts = memory.store.counts(namespace)
        held = ", ".join(f"{v} {k}" for k, v in counts.items() if v)
        print(f"  memory now holds: {held}  ({elapsed:.0f} s)")
        plot = _plot(base.successes, learned.successes, out / "learning_curve.png")
        written = ([plot] if plot else []) + _write_chain(memory, namespace, out)
        for path in written:
            print(f"  wrote {path}")
        chain = out / "chain.html"
        if settings.neo4j_uri:
            url = browser_url(memory, settings.neo4j_uri)
            where = f"Neo4j Browser at {url}" if url else "Neo4j Browser (its HTTP port is off)"
            # Browser parameters, so the namespace is never pasted into the query text.
            print(f"\n  explore it in {where} with\n    :param ns => {json.dumps(namespace)}")
            print(f"    {BROWSER_CHAIN_QUERY}")
        else:
            shown = f"   |   open {chain} in a browser" if chain in written else ""
            print(f"\n  next: ./run graphmem stats{shown}")
        return base_summary, mem_summary
    finally:
        memory.close()


def browser_url(memory: GraphMemory, uri: str) -> str | None:
    """Neo4j Browser's address for the server ``uri`` points at: that host, and the HTTP port
    the server itself reports (``SHOW SETTINGS``); None when HTTP is off or the server will not
    say (e.g. the user may not read settings)."""
    from urllib.parse import urlsplit

    from neo4j.exceptions import Neo4jError

    from graphmem.stores.neo4j import Neo4jStore, cypher

    if not isinstance(memory.store, Neo4jStore):
        return None
    try:
        records, _, _ = memory.store.driver.execute_query(
            cypher.HTTP_SETTINGS, names=["server.http.enabled", "server.http.listen_address"]
        )
    except Neo4jError as e:
        log.info("cannot read the server's HTTP settings: %s", e)
        return None
    found = {str(r["name"]): str(r["value"]) for r in records}
    if found.get("server.http.enabled", "true").lower() != "true":
        return None
    port = found.get("server.http.listen_address", "").rpartition(":")[2]
    if not port.isdigit():
        return None
    host = urlsplit(uri).hostname or "127.0.0.1"
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{port}/browser/"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the demo; a usage or configuration mistake is one line on stderr and exit 2."""
    from graphmem.commandline import one_line

    args = parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        run_demo(
            Settings.from_env(),
            game=args.game,
            episodes=args.episodes,
            budget=args.budget,
            out=Path(args.out),
            namespace=args.namespace,
            keep=args.keep,
        )
    except GraphmemError as e:
        print(f"demo: error: {one_line(str(e))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("demo: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
