"""The ``graphmem`` command line.

Each command group lives in the module that owns the work and exposes ``register(subparsers)``;
this file only wires them together, opens the store from the environment, and turns user
mistakes into one clear line (exit 2) instead of a traceback.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence

from graphmem.errors import GraphmemError

Register = Callable[["argparse._SubParsersAction[argparse.ArgumentParser]"], None]


def _command_groups() -> list[Register]:
    from graphmem.cli_neo4j import register as neo4j_commands
    from graphmem.cli_store import register as store_commands
    from graphmem.cli_viz import register as viz_commands
    from graphmem.demo import register as demo_command

    groups: list[Register] = [demo_command, store_commands, neo4j_commands]
    groups.append(viz_commands)
    from graphmem.cli_bench import register as bench_commands

    groups.append(bench_commands)
    return groups


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="graphmem",
        description="Long-term memory for LLM agents that learns which memories help.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log what happens")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for register in _command_groups():
        register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 0
    try:
        result = handler(args)
    except GraphmemError as e:
        print(f"graphmem: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("graphmem: interrupted", file=sys.stderr)
        return 130
    return int(result or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
