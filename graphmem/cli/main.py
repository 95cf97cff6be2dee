"""The ``graphmem`` command line.

Each command group lives in the module that owns the work and exposes ``register(subparsers)``;
this file only wires them together, opens the store from the environment, and turns user
mistakes into one clear line (exit 2) instead of a traceback.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Sequence
from typing import cast

from graphmem.commandline import OneLineParser, one_line
from graphmem.errors import GraphmemError

Register = Callable[["argparse._SubParsersAction[argparse.ArgumentParser]"], None]


def _command_groups() -> list[Register]:
    from graphmem.cli.neo4j import register as neo4j_commands
    from graphmem.cli.store import register as store_commands
    from graphmem.cli.viz import register as viz_commands

    groups: list[Register] = [store_commands, neo4j_commands]
    groups.append(viz_commands)
    from graphmem.cli.store_check import register as store_check_commands

    groups.append(store_check_commands)
    from graphmem.cli.memory import register as memory_commands

    groups.append(memory_commands)
    from graphmem.cli.history import register as history_command

    groups.append(history_command)
    from graphmem.cli.episode import register as episode_command

    groups.append(episode_command)
    from graphmem.cli.llm import register as llm_commands

    groups.append(llm_commands)
    from graphmem.cli.mcp import register as mcp_commands

    groups.append(mcp_commands)
    from graphmem.cli.reembed import register as reembed_command

    groups.append(reembed_command)
    return groups


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="graphmem",
        description="Long-term memory for LLM agents that learns which memories help.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log what happens")
    # Sub-parsers are OneLineParsers too (argparse makes them of the parent's class).
    sub = cast(
        "argparse._SubParsersAction[argparse.ArgumentParser]",
        parser.add_subparsers(dest="command", metavar="COMMAND"),
    )
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
        sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
    except GraphmemError as e:
        print(f"graphmem: error: {one_line(str(e))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("graphmem: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return _closed_pipe()
    return int(result or 0)


def _closed_pipe() -> int:
    """The reader of our output went away (``graphmem export - | head -1``): stop quietly.

    Output still buffered would fail again at exit, so stdout is pointed at /dev/null first.
    Exit status 141 (128 + SIGPIPE) is what a shell reports for a process killed this way.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 141


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
