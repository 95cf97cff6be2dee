"""LangGraph flows over graphmem: build, retrieve, update, evolve, and an agent composing them.

Each ``build_*_graph(memory=None)`` returns an uncompiled :class:`~langgraph.graph.StateGraph`
(compile it, or add it to your own graph as a subgraph); each module also has a compiled ``graph``.
Dependencies come from the run context (:class:`~graphmem.flows.state.MemoryContext`), never from
globals. :mod:`graphmem.flows.server` holds the memory graphs ``langgraph.json`` serves over HTTP.
"""

from graphmem.extras import needs_extra

with needs_extra("langgraph", "graphmem.flows"):
    from graphmem.flows.agent import build_agent_graph, run_task
    from graphmem.flows.build import build_build_graph
    from graphmem.flows.evolve import build_evolve_graph
    from graphmem.flows.retrieve import build_retrieve_graph
    from graphmem.flows.state import (
        AgentContext,
        AgentState,
        BuildState,
        EvolveState,
        HitRecord,
        MemoryContext,
        RetrieveState,
        UpdateState,
    )
    from graphmem.flows.update import build_update_graph

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
