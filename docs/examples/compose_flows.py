"""graphmem's retrieve and update flows as nodes of an agent's own StateGraph (docs/flows.md).

Run from a checkout: ``python docs/examples/compose_flows.py`` (needs the langgraph extra).
"""

import tempfile
from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph

from graphmem import EmbeddedStore, GraphMemory, HashingEmbedder
from graphmem.flows import MemoryContext, build_retrieve_graph, build_update_graph
from graphmem.flows.state import HitRecord


class State(TypedDict, total=False):
    query: str  # retrieve reads it
    hits: list[HitRecord]  # retrieve writes them, best first
    episode_id: str | None  # retrieve writes it (the Episode it opened); update reads it
    used: list[str] | None  # update reads it: credit these hits only
    reward: float  # update reads it
    success: bool  # update reads it
    q_updates: dict[str, float]  # update writes it: memory id -> Q after the reward


def act(state: State) -> dict[str, Any]:
    """Your agent: here it follows the best hit and succeeds."""
    return {"used": [h["memory_id"] for h in state["hits"][:1]], "reward": 1.0, "success": True}


builder = StateGraph(State, context_schema=MemoryContext)
builder.add_node("retrieve", build_retrieve_graph().compile())
builder.add_node("act", act)
builder.add_node("update", build_update_graph().compile())
builder.add_edge(START, "retrieve")
builder.add_edge("retrieve", "act")
builder.add_edge("act", "update")
builder.add_edge("update", END)
graph = builder.compile()

memory = GraphMemory(EmbeddedStore.open(tempfile.mkdtemp()), embedder=HashingEmbedder())
steps = ["fill kettle", "boil water", "put tea bag in cup", "pour water"]
memory.build("agent-1", {"task": "Make a cup of tea", "reward": 1.0, "success": True,
                         "steps": [{"action": a} for a in steps]})  # fmt: skip
out = graph.invoke({"query": "how do I make tea?"}, context=MemoryContext("agent-1", memory))
hit = out["hits"][0]
print(f"{hit['kind']} {hit['memory_id']}: sim {hit['sim']:.2f}, score {hit['score']:+.2f}")
print(f"Q after the reward: {out['q_updates']}")
memory.close()
