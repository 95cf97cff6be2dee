"""The ``graphmem`` command line: :func:`main` wires the command groups of this package's modules
(one module a group: ``store``, ``store_check``, ``neo4j``, ``viz``, ``memory``, ``llm``, ``mcp``).

The demo and the benchmarks are not the library's: they live in the checkout
(``python -m showcase.demo``, ``python -m bench.speed``)."""

from graphmem.cli.main import build_parser, main
from graphmem.commandline import OneLineParser, one_line

__all__ = ["OneLineParser", "build_parser", "main", "one_line"]
