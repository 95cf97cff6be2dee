"""Module paths from before the layered layout, kept importable for one release.

``import graphmem.build`` (or ``from graphmem.envs.agents import …``) still works: it returns
the module from its new home (``graphmem.ops.build``, ``graphmem.examples.envs.agents``), the same
object, with a :class:`DeprecationWarning` naming the new path.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType

MOVED: dict[str, str] = {
    "graphmem.build": "graphmem.ops.build",
    "graphmem.retrieve": "graphmem.ops.retrieve",
    "graphmem.episodes": "graphmem.ops.episodes",
    "graphmem.update": "graphmem.ops.update",
    "graphmem.evolve": "graphmem.ops.evolve",
    "graphmem.history": "graphmem.ops.history",
    "graphmem.obsolescence": "graphmem.ops.obsolescence",
    "graphmem.prompting": "graphmem.ops.prompting",
    "graphmem.schema": "graphmem.stores.neo4j_schema",
    "graphmem.neo4j_server": "graphmem.launcher.server",
    "graphmem.neo4j_jars": "graphmem.launcher.jars",
    "graphmem.langgraph_store": "graphmem.integrations.langgraph_store",
    "graphmem.langgraph_filters": "graphmem.integrations.langgraph_filters",
    "graphmem.tools": "graphmem.integrations.langchain_tools",
    "graphmem.mcp_server": "graphmem.integrations.mcp_server",
    "graphmem.demo": "graphmem.examples.demo",
    "graphmem.metrics": "graphmem.examples.metrics",
    "graphmem.envs": "graphmem.examples.envs",
    "graphmem.cli_bench": "graphmem.cli.bench",
    "graphmem.cli_llm": "graphmem.cli.llm",
    "graphmem.cli_mcp": "graphmem.cli.mcp",
    "graphmem.cli_memory": "graphmem.cli.memory",
    "graphmem.cli_neo4j": "graphmem.cli.neo4j",
    "graphmem.cli_store_check": "graphmem.cli.store_check",
    "graphmem.cli_store": "graphmem.cli.store",
    "graphmem.cli_viz": "graphmem.cli.viz",
}
"""Old dotted path → new one; a moved package's submodules follow it (``graphmem.envs.x``)."""


def new_name(fullname: str) -> str | None:
    """Where the module once called ``fullname`` lives now (None: it did not move)."""
    for old, new in MOVED.items():
        if fullname == old or fullname.startswith(old + "."):
            return new + fullname[len(old) :]
    return None


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers imports of old paths with the module at the new path."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if new_name(fullname) is None:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new = new_name(spec.name)
        assert new is not None
        warnings.warn(
            f"{spec.name} moved to {new}; the old path goes away in the next release",
            DeprecationWarning,
            stacklevel=2,
        )
        return importlib.import_module(new)

    def exec_module(self, module: ModuleType) -> None:
        """The module at the new path is already executed."""


def install() -> None:
    """Put the finder on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _MovedModules) for f in sys.meta_path):
        sys.meta_path.insert(0, _MovedModules())
