"""``graphmem reembed``: re-embed a namespace's memories with the embedder in use."""

from __future__ import annotations

import argparse
import sys

from graphmem.cli.args import checked_namespace
from graphmem.errors import InvalidInput
from graphmem.settings import Settings

HELP = """\
Re-embed every memory of a namespace with the embedder GRAPHMEM_EMBEDDER names (or --embedder)
and record it as the namespace's embedder. Use it when a store refuses an embedder ("namespace
'x' was embedded with A, not B"): afterwards B reads and writes the namespace, and A is refused.
Each batch is one atomic write; an interrupted run leaves the namespace refusing every
embedder until the same command is run again (it is safe to repeat). Stop other writers first.
The new embedder must have the store's dimension.
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cmd = sub.add_parser(
        "reembed",
        help="re-embed a namespace's memories with another embedder, and record it",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    which = cmd.add_mutually_exclusive_group(required=True)
    which.add_argument("--namespace", "-n", action="append", help="a namespace (repeatable)")
    which.add_argument("--all", action="store_true", help="every namespace of the store")
    cmd.add_argument(
        "--embedder",
        choices=("minilm", "hashing"),
        help="the embedder to re-embed with (default: GRAPHMEM_EMBEDDER, else minilm)",
    )
    cmd.add_argument("--batch-size", type=int, default=256, help="memories per write (256)")
    cmd.add_argument("--quiet", "-q", action="store_true", help="no progress lines")
    cmd.set_defaults(handler=_reembed)


def _reembed(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from graphmem.ops.reembed import reembed

    settings = Settings.from_env()
    if args.embedder:
        settings = replace(settings, embedder=args.embedder)
    if args.batch_size < 1:
        raise InvalidInput(f"--batch-size must be at least 1, got {args.batch_size}")
    asked = [] if args.all else [checked_namespace(ns) for ns in dict.fromkeys(args.namespace)]
    store = settings.open_store(create=False)
    try:
        namespaces = store.namespaces() if args.all else asked
        missing = sorted(set(namespaces) - set(store.namespaces()))
        if missing:
            # Re-embedding records the embedder: a typo would pin it on a namespace that does
            # not exist, refusing the right one later.
            raise InvalidInput(
                f"no namespace {missing[0]!r} in the store; nothing was re-embedded "
                "(`graphmem stats` lists the namespaces)"
            )
        embedder = settings.make_embedder()
        for ns in namespaces:

            def progress(done: int, total: int, ns: str = ns) -> None:
                if not args.quiet:
                    print(f"{ns}: re-embedded {done}/{total}", file=sys.stderr, flush=True)

            result = reembed(store, ns, embedder, batch_size=args.batch_size, progress=progress)
            was = result.before.describe() if result.before else "no record"
            print(
                f"{ns}: {result.reembedded} memories re-embedded with "
                f"{result.after.describe()} (was: {was})"
            )
    finally:
        store.close()
    return 0
