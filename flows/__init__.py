"""LangGraph flows over graphmem: build, retrieve, update, evolve, and an agent composing them.

Each ``build_*_graph(memory=None)`` returns an uncompiled :class:`~langgraph.graph.StateGraph`
(compile it, or add it to your own graph as a subgraph); each module also has a compiled
``graph``. Dependencies come from the run context (:class:`~flows.state.MemoryContext`), never
from globals. :mod:`flows.server` holds the graphs ``langgraph.json`` serves over HTTP.
"""

from flows.agent import build_agent_graph, run_task
from flows.build import build_build_graph
from flows.evolve import build_evolve_graph
from flows.retrieve import build_retrieve_graph
from flows.state import (
    AgentContext,
    AgentState,
    BuildState,
    EvolveState,
    HitRecord,
    MemoryContext,
    RetrieveState,
    UpdateState,
)
from flows.update import build_update_graph

__all__ = [
    "AgentContext",
    "AgentState",
    "BuildState",
    "EvolveState",
    "HitRecord",
    "MemoryContext",
    "RetrieveState",
    "UpdateState",
    "build_agent_graph",
    "build_build_graph",
    "build_evolve_graph",
    "build_retrieve_graph",
    "build_update_graph",
    "run_task",
]
