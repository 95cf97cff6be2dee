"""``graphmem episode``: what an episode was offered and used, and how each Q moved.

``graphmem episode NAMESPACE EPISODE_ID`` prints one episode's offers in rank order (sim, Q at
retrieval, score), which the agent used, its reward and credit policy, and each credited
memory's Q before → after; without an id, the namespace's most recently finished episode.
"""

from __future__ import annotations

import argparse
import json

from graphmem.settings import Settings


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

    # Only reads: a stand-in embedder spares loading the model (nothing is embedded).
    memory = GraphMemory(Settings.from_env().open_store(create=False), embedder=HashingEmbedder(8))
    with memory:
        episode_id = args.episode_id or latest_episode_id(memory, args.namespace)
        if episode_id is None:
            print(f"no episodes in namespace {args.namespace!r}")
            return 0
        report = explain_episode(memory, args.namespace, episode_id)
        print(
            json.dumps(report.model_dump(mode="json"), indent=2) if args.json else report.render()
        )
    return 0
