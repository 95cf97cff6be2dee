"""The ``graphmem`` command line: :func:`main` wires the command groups of this package's modules
(one module a group: ``store``, ``store_check``, ``neo4j``, ``viz``, ``memory``, ``llm``, ``mcp``,
``bench``; ``demo`` comes from :mod:`graphmem.examples.demo`)."""

from graphmem.cli.main import OneLineParser, build_parser, main, one_line

__all__ = ["OneLineParser", "build_parser", "main", "one_line"]
