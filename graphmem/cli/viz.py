"""``graphmem viz``: draw a task's procedural chains, an episode, or a memory's neighbourhood.

    graphmem viz task <id> --out chain.html              # interactive, self-contained page
    graphmem viz task <id> --out chain.png               # format from the suffix...
    graphmem viz episode <id> --out - --format mermaid   # ...or --format; "-" is stdout
    graphmem viz memory <id> --depth 2 --out around.html

The store comes from the environment (``graphmem.settings``). Without ``--namespace`` the id
is looked up in every namespace and must be found in exactly one.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from graphmem.cli.args import checked_namespace
from graphmem.errors import InvalidInput, MemoryNotFound
from graphmem.models import check_id
from graphmem.settings import Settings
from graphmem.stores.base import MemoryStore


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from graphmem.viz import FORMATS
    from graphmem.viz.subgraph import DEFAULT_MAX_NODES

    viz = sub.add_parser(
        "viz",
        help="draw memories as an interactive HTML page, Mermaid, DOT or PNG",
        description="Draw part of the memory graph. The format follows --format, else the "
        "suffix of --out (.html, .mmd/.md, .dot/.gv, .png), else html.",
    )
    views = viz.add_subparsers(dest="view", metavar="VIEW", required=True)
    helps = {
        "task": "a task's procedural chains, tips and evolution (a Task or Procedure id)",
        "episode": "what an episode retrieved, with scores, and how Q moved",
        "memory": "any memory and its neighbours (links, versions, episodes)",
    }
    for view, text in helps.items():
        p = views.add_parser(view, help=text, description=text)
        p.add_argument("id", help="the memory id")
        p.add_argument(
            "--out",
            "-o",
            help="output file, or - for standard output (default: <view>-<id>.<format>)",
        )
        p.add_argument(
            "--format",
            "-f",
            choices=FORMATS,
            help="output format (default: from the suffix of --out, else html)",
        )
        p.add_argument("--namespace", "-n", help="the memory's namespace (default: find it)")
        p.add_argument(
            "--max-nodes",
            type=int,
            default=DEFAULT_MAX_NODES,
            help=f"draw at most this many memories (default {DEFAULT_MAX_NODES})",
        )
        if view == "memory":
            p.add_argument(
                "--depth", type=int, default=1, help="hops from the memory, 0-5 (default 1)"
            )
        p.set_defaults(handler=_viz)


def find_namespace(store: MemoryStore, memory_id: str) -> str:
    """The one namespace holding ``memory_id``; InvalidInput if none or several do."""
    check_id(memory_id)
    found = [ns for ns in store.namespaces() if store.get_many(ns, [memory_id])]
    if not found:
        raise InvalidInput(f"no memory {memory_id!r} in any namespace")
    if len(found) > 1:
        shown = ", ".join(found[:5]) + (", …" if len(found) > 5 else "")
        raise InvalidInput(
            f"memory id {memory_id!r} exists in {len(found)} namespaces ({shown}); "
            "choose one with --namespace"
        )
    return found[0]


def check_out(out: str | None, fmt: str | None) -> None:
    """Refuse an output file whose suffix names no format we write (``x.svg``), or names
    another format than ``--format``: the file would hold something its name denies."""
    from graphmem.viz import SUFFIX_FORMATS

    if not out or out == "-":
        return
    suffix = Path(out).suffix.lower()
    known = ", ".join(sorted(SUFFIX_FORMATS))
    implied = SUFFIX_FORMATS.get(suffix)
    if fmt is None and suffix and implied is None:
        raise InvalidInput(
            f"cannot write {suffix} files ({out!r}): use a suffix among {known}, or name the "
            "format with --format (for SVG: write .dot and run `dot -Tsvg`)"
        )
    if fmt is not None and implied is not None and implied != fmt:
        raise InvalidInput(f"--out {out!r} is a {implied} file name but --format is {fmt}")


def _viz(args: argparse.Namespace) -> int:
    from graphmem import viz

    fmt = viz.format_for(args.out or "", args.format)
    check_out(args.out, args.format)
    if args.out == "-" and fmt == "png":
        raise InvalidInput("PNG cannot go to standard output; give --out FILE.png")
    only = checked_namespace(args.namespace)
    store = Settings.from_env().open_store(create=False)
    try:
        namespace = only or find_namespace(store, args.id)
        if args.view == "task":
            sub = viz.task_subgraph(store, namespace, args.id, max_nodes=args.max_nodes)
        elif args.view == "episode":
            sub = viz.episode_subgraph(store, namespace, args.id, max_nodes=args.max_nodes)
        else:
            sub = viz.memory_subgraph(
                store, namespace, args.id, depth=args.depth, max_nodes=args.max_nodes
            )
    except MemoryNotFound as e:
        raise InvalidInput(str(e)) from e
    finally:
        store.close()
    if args.out == "-":
        text = viz.render(sub, fmt)
        assert isinstance(text, str)  # png was refused above
        sys.stdout.write(text)
        return 0
    suffix = {"html": "html", "mermaid": "mmd", "dot": "dot", "png": "png"}[fmt]
    out = Path(args.out) if args.out else Path(f"{args.view}-{args.id}.{suffix}")
    viz.write(sub, out, fmt)
    note = " (truncated: raise --max-nodes)" if sub.truncated else ""
    print(
        f"wrote {out} ({fmt}: {len(sub.nodes)} memories, {len(sub.edges)} edges){note}",
        file=sys.stderr,
    )
    return 0
