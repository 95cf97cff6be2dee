"""``graphmem history``: how a memory evolved — its versions, links and episodes.

``graphmem history NAMESPACE MEMORY_ID`` prints one memory's history (any version's id shows
the whole lineage); ``graphmem history NAMESPACE`` lists the namespace's longest version chains
(EVOLVED_FROM) and prints the history of the longest, so a fresh demo (``./run demo``) can be
explored without knowing an id.
"""

from __future__ import annotations

import argparse
import json

from graphmem.cli.args import at_least_one, checked_namespace
from graphmem.settings import Settings

DEFAULT_CHAINS = 5


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    history = sub.add_parser(
        "history", help="versions (EVOLVED_FROM), links and episodes of a memory"
    )
    history.add_argument("namespace", help="the memory's namespace")
    history.add_argument(
        "memory_id", nargs="?", help="a memory id (default: the longest version chain)"
    )
    history.add_argument(
        "--chains",
        type=at_least_one,
        default=DEFAULT_CHAINS,
        help=f"version chains to list without an id (default {DEFAULT_CHAINS})",
    )
    history.add_argument("--json", action="store_true", help="print JSON, not text")
    history.set_defaults(handler=_history)


def _history(args: argparse.Namespace) -> int:
    from graphmem.embedding import HashingEmbedder
    from graphmem.memory import GraphMemory
    from graphmem.ops.history import history, version_chains

    namespace = checked_namespace(args.namespace, name="NAMESPACE")
    # History only reads: a stand-in embedder spares loading the model (nothing is embedded).
    memory = GraphMemory(Settings.from_env().open_store(create=False), embedder=HashingEmbedder(8))
    with memory:
        memory_id = args.memory_id
        chains = []
        if memory_id is None:
            chains = version_chains(memory, namespace, limit=args.chains)
            if not chains:
                if args.json:  # JSON asked, JSON given: the same keys, nothing in them
                    print(json.dumps({"chains": [], "history": None}, indent=2))
                    return 0
                print(f"no version chains (EVOLVED_FROM) in namespace {namespace!r}")
                return 0
            memory_id = chains[0].ids[0]
        found = history(memory, namespace, memory_id)
        if args.json:
            out = {
                "chains": [c.model_dump(mode="json") for c in chains],
                "history": found.model_dump(mode="json", exclude={"memory": {"embedding"}}),
            }
            print(json.dumps(out, indent=2))
            return 0
        if chains:
            print(f"Longest version chains in namespace {namespace!r}:")
            for chain in chains:
                state = " (obsolete)" if chain.obsolete else ""
                print(
                    f"  {chain.length} versions: {chain.kind} {chain.ids[0]} "
                    f"v{chain.version}{state}: {chain.summary}"
                )
            print()
        print(found.render())
        if found.episodes:
            last = found.episodes[-1].episode_id
            print(
                f"\nWhat an episode was offered and used: graphmem episode {namespace} {last}"
                "\n(and on the page: graphmem viz task <id>, section Episodes)"
            )
    return 0
