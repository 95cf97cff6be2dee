"""The ``graphmem`` command line: :func:`main` wires the command groups of this package's modules
(one module a group: ``store``, ``store_check``, ``neo4j``, ``viz``, ``memory``, ``llm``, ``mcp``,
``bench``; ``demo`` comes from :mod:`graphmem.examples.demo`)."""

from graphmem.cli.main import build_parser, main
from graphmem.commandline import OneLineParser, one_line

__all__ = ["OneLineParser", "build_parser", "main", "one_line"]
