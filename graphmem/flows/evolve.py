"""Evolve flow: A-MEM evolution of new memories as a LangGraph graph.

State :class:`~graphmem.flows.state.EvolveState`: ``new_memory_ids`` in; ``evolution`` (one
summary per memory: the links made, the neighbours refreshed as new versions, or why it was
skipped) out.
Memories are evolved one after the other, so a later one sees what an earlier one wrote.
"""

from __future__ import annotations

from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime

from graphmem.errors import MemoryNotFound
from graphmem.flows.state import EvolveState, MemoryContext, resolve, summary
from graphmem.memory import GraphMemory


def build_evolve_graph(
    memory: GraphMemory | None = None,
) -> StateGraph[EvolveState, MemoryContext, EvolveState, EvolveState]:
    """The evolve graph, uncompiled; ``memory`` is used when the run context has none."""

    def evolve(state: EvolveState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
        mem, namespace, _ = resolve(runtime, memory)
        out = []
        for memory_id in dict.fromkeys(state.get("new_memory_ids", [])):
            try:
                result = mem.evolve(namespace, memory_id)
            except MemoryNotFound:
                out.append({"memory_id": memory_id, "skipped": "the memory is gone"})
                continue
            out.append({"memory_id": memory_id, **summary(result)})
        return {"evolution": out}

    builder = StateGraph(EvolveState, context_schema=MemoryContext)
    builder.add_node("evolve", evolve)
    builder.add_edge(START, "evolve")
    builder.add_edge("evolve", END)
    return builder


graph: CompiledStateGraph[EvolveState, MemoryContext, EvolveState, EvolveState] = (
    build_evolve_graph().compile(name="graphmem-evolve")
)
