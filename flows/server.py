"""Graph factories for LangGraph tooling (``langgraph dev`` / LangGraph Server, ``langgraph.json``).

Over HTTP the run context arrives as JSON, so it cannot carry a :class:`GraphMemory`; these
factories bind the memory the environment names (``GRAPHMEM_STORE`` or ``GRAPHMEM_NEO4J_URI``,
``GRAPHMEM_EMBEDDER``, ``GRAPHMEM_LLM_*``: see :mod:`graphmem.settings`) and leave the
namespace to the run context, e.g. ``{"namespace": "agent-1"}``. The memory is opened once per
server process, on the first run, and shared by the factories.
"""

from __future__ import annotations

import threading

from langgraph.graph.state import CompiledStateGraph

from flows.build import build_build_graph
from flows.evolve import build_evolve_graph
from flows.retrieve import build_retrieve_graph
from flows.state import BuildState, EvolveState, MemoryContext, RetrieveState, UpdateState
from flows.update import build_update_graph
from graphmem.memory import GraphMemory

_lock = threading.Lock()
_opened: list[GraphMemory] = []


def server_memory() -> GraphMemory:
    """The memory of this server process, opened from the environment on first use."""
    with _lock:
        if not _opened:
            from graphmem.settings import Settings

            _opened.append(Settings.from_env().open_memory())
        return _opened[0]


def retrieve() -> CompiledStateGraph[RetrieveState, MemoryContext, RetrieveState, RetrieveState]:
    return build_retrieve_graph(server_memory()).compile(name="graphmem-retrieve")


def build() -> CompiledStateGraph[BuildState, MemoryContext, BuildState, BuildState]:
    return build_build_graph(server_memory()).compile(name="graphmem-build")


def update() -> CompiledStateGraph[UpdateState, MemoryContext, UpdateState, UpdateState]:
    return build_update_graph(server_memory()).compile(name="graphmem-update")


def evolve() -> CompiledStateGraph[EvolveState, MemoryContext, EvolveState, EvolveState]:
    return build_evolve_graph(server_memory()).compile(name="graphmem-evolve")
