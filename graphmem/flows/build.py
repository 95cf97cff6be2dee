"""Build flow: a trajectory becomes procedural memory (Mem^p ``B(τ, r)``) as a LangGraph graph.

Why and how, in full: docs/design.md, "Module notes", ``graphmem.flows.build``.

>>> from graphmem import GraphMemory, HashingEmbedder
>>> from graphmem.stores.embedded import EmbeddedStore
>>> from graphmem.flows.state import MemoryContext
>>> mem = GraphMemory(EmbeddedStore.in_memory(), embedder=HashingEmbedder())
>>> trajectory = {"task": "boil water", "reward": 1.0, "success": True,
...               "steps": [{"action": "fill kettle"}, {"action": "switch kettle on"}]}
>>> out = graph.invoke({"trajectory": trajectory}, context=MemoryContext("demo", mem))
>>> mem.get("demo", out["new_memory_ids"][0]).kind
'Procedure'
"""

from __future__ import annotations

from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime

from graphmem.flows.state import BuildState, MemoryContext, required, resolve
from graphmem.memory import GraphMemory


def build_build_graph(
    memory: GraphMemory | None = None,
) -> StateGraph[BuildState, MemoryContext, BuildState, BuildState]:
    """The build graph, uncompiled; ``memory`` is used when the run context has none."""

    def build(state: BuildState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
        mem, namespace, _ = resolve(runtime, memory)
        trajectory = required(
            state, "trajectory", "build", '{"trajectory": {"task": ..., "steps": [...]}}'
        )
        result = mem.build(
            namespace,
            trajectory,
            granularity=state.get("granularity"),
            key_mode=state.get("key_mode"),
        )
        new_ids = [] if result.deduplicated else [result.procedure.id]
        return {"task_id": result.task.id, "new_memory_ids": new_ids}

    builder = StateGraph(BuildState, context_schema=MemoryContext)
    builder.add_node("build", build)
    builder.add_edge(START, "build")
    builder.add_edge("build", END)
    return builder


graph: CompiledStateGraph[BuildState, MemoryContext, BuildState, BuildState] = (
    build_build_graph().compile(name="graphmem-build")
)
