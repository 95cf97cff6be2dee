"""Update flow: credit the episode (utility), then update the memory set (reflect / build).

State :class:`~graphmem.flows.state.UpdateState`: ``episode_id``, ``reward``, ``success``,
``used`` and ``trajectory`` in; ``q_updates`` (new Q per credited memory), ``new_memory_ids`` and an
``update`` summary out.

- ``utility``: ``finish_episode`` applies ``Q ← Q + α(R − Q)`` to what the episode retrieved,
  or, given ``used`` (ids it was offered), to those only (skipped without an episode or a
  reward; a retried run replays the recorded outcome; another reward for an episode finished
  already fails the run with :class:`~graphmem.errors.EpisodeFinished`, as MCP's
  ``report_outcome`` refuses it, and so does an id the episode was not offered, with
  InvalidInput);
- ``reflect``: ``GraphMemory.update`` with the context's strategy (vanilla / validation /
  adjustment: on failure a Tip and a corrected procedure) — skipped without a trajectory.
"""

from __future__ import annotations

from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime

from graphmem.flows.state import MemoryContext, UpdateState, resolve, summary
from graphmem.memory import GraphMemory
from graphmem.ops.update import UpdateResult


def build_update_graph(
    memory: GraphMemory | None = None,
) -> StateGraph[UpdateState, MemoryContext, UpdateState, UpdateState]:
    """The update graph, uncompiled; ``memory`` is used when the run context has none."""

    def utility(state: UpdateState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
        mem, namespace, _ = resolve(runtime, memory)
        episode_id, reward = state.get("episode_id"), state.get("reward")
        if not episode_id or reward is None:
            return {"q_updates": {}}
        outcome = mem.finish_episode(
            namespace, episode_id, reward, success=state.get("success"), used=state.get("used")
        )
        return {"q_updates": outcome.q}

    def reflect(state: UpdateState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
        mem, namespace, ctx = resolve(runtime, memory)
        trajectory = state.get("trajectory")
        if not trajectory:
            return {"new_memory_ids": [], "update": {}}
        result = mem.update(
            namespace, trajectory, strategy=ctx.strategy, episode_id=state.get("episode_id")
        )
        return {"new_memory_ids": new_ids(result), "update": summary(result)}

    builder = StateGraph(UpdateState, context_schema=MemoryContext)
    builder.add_node("utility", utility)
    builder.add_node("reflect", reflect)
    builder.add_edge(START, "utility")
    builder.add_edge("utility", "reflect")
    builder.add_edge("reflect", END)
    return builder


def new_ids(result: UpdateResult) -> list[str]:
    """The memories an update wrote that evolution should link: the built procedure, the tips,
    the corrected procedures and the notes distilled (new ones and new versions)."""
    ids: list[str] = []
    if result.built is not None and not result.built.deduplicated:
        ids.append(result.built.procedure.id)
    ids.extend(tip.id for tip in result.tips)
    ids.extend(c.procedure.id for c in result.adjusted)
    ids.extend(note.id for note in result.notes)
    return list(dict.fromkeys(ids))


graph: CompiledStateGraph[UpdateState, MemoryContext, UpdateState, UpdateState] = (
    build_update_graph().compile(name="graphmem-update")
)
