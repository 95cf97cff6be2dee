"""Retrieve flow: two-phase retrieval as a LangGraph graph (usable alone or as a subgraph).

Why and how, in full: docs/design.md, "Module notes", ``graphmem.flows.retrieve``.

>>> from graphmem import GraphMemory, HashingEmbedder
>>> from graphmem.stores.embedded import EmbeddedStore
>>> from graphmem.config import RetrievalConfig
>>> from graphmem.flows.state import MemoryContext
>>> mem = GraphMemory(EmbeddedStore.in_memory(), embedder=HashingEmbedder())
>>> _ = mem.add_note("demo", "The spare key is under the blue flower pot.")
>>> ctx = MemoryContext("demo", mem, retrieval=RetrievalConfig(kinds=("Note",)))
>>> out = graph.invoke({"query": "where is the spare key?"}, context=ctx)
>>> [h["kind"] for h in out["hits"]], out["episode_id"] is not None
(['Note'], True)
"""

from __future__ import annotations

from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime

from graphmem.flows.state import (
    MemoryContext,
    RetrieveState,
    hit_record,
    required,
    resolve,
    withheld_record,
)
from graphmem.memory import GraphMemory


def build_retrieve_graph(
    memory: GraphMemory | None = None,
) -> StateGraph[RetrieveState, MemoryContext, RetrieveState, RetrieveState]:
    """The retrieve graph, uncompiled; ``memory`` is used when the run context has none."""

    def retrieve(state: RetrieveState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
        mem, namespace, ctx = resolve(runtime, memory)
        episode_id = state.get("episode_id")
        opening = state.get("open_episode", True) and not episode_id
        query = required(state, "query", "retrieve", '{"query": "how do I make tea?"}')
        result = mem.retrieve(
            namespace,
            query,
            ctx.retrieval,
            open_episode=opening,
            episode_id=episode_id or None,
        )
        return {
            "hits": [hit_record(h) for h in result.hits],
            "prompt": result.as_prompt(),
            "episode_id": result.episode_id,
            "withheld": [withheld_record(h) for h in result.withheld],
            "baseline": result.baseline,
        }

    builder = StateGraph(RetrieveState, context_schema=MemoryContext)
    builder.add_node("retrieve", retrieve)
    builder.add_edge(START, "retrieve")
    builder.add_edge("retrieve", END)
    return builder


graph: CompiledStateGraph[RetrieveState, MemoryContext, RetrieveState, RetrieveState] = (
    build_retrieve_graph().compile(name="graphmem-retrieve")
)
