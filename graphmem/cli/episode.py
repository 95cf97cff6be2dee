"""``graphmem episode``: what an episode was offered and used, and how each Q moved.

``graphmem episode NAMESPACE EPISODE_ID`` prints one episode's offers in rank order (sim, Q at
retrieval, score), which the agent used, its reward and credit policy, and each credited
memory's Q before → after; without an id, the namespace's most recently finished episode.
"""

from __future__ import annotations

import argparse
import json

from graphmem.cli.args import checked_namespace
from graphmem.models import Edge
from graphmem.ops.explain import EpisodeReport
from graphmem.settings import Settings
from graphmem.stores.base import MemoryStore


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    episode = sub.add_parser(
        "episode", help="what an episode was offered and used, its reward, each Q before → after"
    )
    episode.add_argument("namespace", help="the episode's namespace")
    episode.add_argument(
        "episode_id", nargs="?", help="an Episode id (default: the latest finished one)"
    )
    episode.add_argument("--json", action="store_true", help="print JSON, not text")
    episode.set_defaults(handler=_episode)


def _episode(args: argparse.Namespace) -> int:
    from graphmem.embedding import HashingEmbedder
    from graphmem.memory import GraphMemory
    from graphmem.ops.explain import explain_episode, latest_episode_id

    namespace = checked_namespace(args.namespace, name="NAMESPACE")
    # Only reads: a stand-in embedder spares loading the model (nothing is embedded).
    memory = GraphMemory(Settings.from_env().open_store(create=False), embedder=HashingEmbedder(8))
    with memory:
        episode_id = args.episode_id or latest_episode_id(memory, namespace)
        if episode_id is None:
            if args.json:  # JSON asked, JSON given: no episode is null
                print(json.dumps(None))
                return 0
            print(f"no episodes in namespace {namespace!r}")
            return 0
        report = explain_episode(memory, namespace, episode_id)
        if args.json:
            print(json.dumps(report.model_dump(mode="json"), indent=2))
            return 0
        print(tell_procedures_apart(memory.store, namespace, report).render())
    return 0


def tell_procedures_apart(
    store: MemoryStore, namespace: str, report: EpisodeReport
) -> EpisodeReport:
    """The report with each offered procedure summarised by its steps against the best of
    them (length, the objects only it handles and those it lacks), not by its task text, which
    reads the same for every procedure of one task family ("proceduralized procedure for
    'cookingworld You are hungry!…'" 36 times)."""
    from graphmem.models import Procedure
    from graphmem.viz.compare import best_first, distinctive, procedure_actions

    ids = [o.id for o in report.offered if o.kind == "Procedure"]
    procs = [m for m in store.get_many(namespace, ids) if isinstance(m, Procedure)]
    if len(procs) < 2:
        return report
    cache: dict[str, list[Edge]] = {}

    def edges_of(memory_id: str) -> list[Edge]:
        if memory_id not in cache:
            cache[memory_id] = store.edges(namespace, memory_id, direction="both")
        return cache[memory_id]

    actions = {p.id: procedure_actions(store, p, edges_of) for p in procs}
    best = best_first(procs)[0]
    lines = {}
    for proc in procs:
        steps = actions[proc.id]
        if proc.id == best.id:
            told = "the reference: highest Q now of these (the others are told from it)"
        else:
            told = distinctive(steps, actions[best.id], limit=3)
        kind = "" if proc.granularity.value == "proceduralized" else f" {proc.granularity.value}"
        lines[proc.id] = f"{len(steps)} steps{kind}, v{proc.version}: {told}"
    offered = [
        o.model_copy(update={"summary": lines[o.id]}) if o.id in lines else o
        for o in report.offered
    ]
    return report.model_copy(update={"offered": offered})
