"""The served text-game agent: ``graphmem_agent`` in ``langgraph.json`` (``flows/server.py``).

Over HTTP the run context arrives as JSON, so it names the game and the policy
(:class:`ServedAgentContext`, a :class:`~graphmem.flows.state.ServedContext` with the game's
fields) instead of holding them; each run plays one
task (``seed``) in a fresh TextWorldExpress environment with the agent flow of
:mod:`graphmem.flows.agent`, over the server's memory (:func:`graphmem.flows.server.server_memory`).
"""

from __future__ import annotations

from typing import Any, Literal

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from pydantic import Field

from graphmem.agents import Policy
from graphmem.flows.agent import build_agent_graph, run_task
from graphmem.flows.server import server_memory
from graphmem.flows.state import (
    AgentContext,
    AgentInput,
    AgentOutput,
    AgentState,
    ServedContext,
)
from graphmem.memory import GraphMemory
from graphmem.ops.distill import Distiller
from showcase.envs.agents import make_explorer

TextWorldGame = Literal[
    "twc", "cookingworld", "coin", "mapreader", "arithmetic", "sorting", "simonsays", "peckingorder"
]
"""The TextWorldExpress games a served agent can play
(``showcase.textworld_agent.TWX_GAMES``)."""


class ServedAgentContext(ServedContext):
    """The run context of the agent served over HTTP: names the environment and the policy.

    E.g. ``{"namespace": "agent-1", "env": "textworld", "game": "twc", "policy": "explorer"}``;
    the server builds them for the run and closes the environment after it. ``policy: "llm"``
    uses the chat model of ``GRAPHMEM_LLM_*`` (see :mod:`graphmem.settings`).
    """

    env: Literal["textworld"] = Field(default="textworld", description="The environment.")
    game: TextWorldGame = Field(default="twc", description="The TextWorldExpress game.")
    policy: Literal["explorer", "llm"] = Field(
        default="explorer",
        description="explorer: offline rule-based; llm: the GRAPHMEM_LLM_* chat model.",
    )
    step_budget: int | None = Field(
        default=None, ge=1, le=1000, description="Actions per task; the game's default if unset."
    )
    fold: Literal["train", "dev", "test"] = Field(default="test", description="Game split.")
    use_memory: bool = Field(default=True, description="False: the no-memory baseline.")


_agent_flow = build_agent_graph().compile(name="graphmem-agent-task")


def _policy(served: ServedAgentContext) -> Policy:
    if served.policy == "llm":
        from showcase.textworld_agent import ChatPolicy, llm_from_settings

        # Counted, budgeted calls; a step the model cannot answer goes to the game's explorer.
        return ChatPolicy(llm_from_settings(), fallback=make_explorer(served.game))
    return make_explorer(served.game)


def _play(state: AgentInput, runtime: Runtime[ServedAgentContext]) -> dict[str, Any]:
    """One task (``seed``) in a fresh environment, closed when the task ends."""
    from showcase.envs.hints import game_knowledge
    from showcase.envs.textworld import TextWorldEnv
    from showcase.textworld_agent import (
        DEFAULT_BUDGET,
        RECALL_RETRIEVAL,
        TEXTWORLD_RETRIEVAL,
        textworld_hints,
    )

    served = runtime.context if runtime.context is not None else ServedAgentContext()
    budget = served.step_budget or DEFAULT_BUDGET.get(served.game, 50)
    env = TextWorldEnv(served.game, step_budget=budget)
    try:
        context = AgentContext(
            namespace=served.namespace,
            memory=_distilling(server_memory(), game_knowledge),
            retrieval=served.retrieval or TEXTWORLD_RETRIEVAL,
            strategy=served.strategy,
            env=env,
            policy=_policy(served),
            fold=served.fold,
            use_memory=served.use_memory,
            hints=textworld_hints,
            task_prefix=served.game,
            recall=RECALL_RETRIEVAL,
        )
        return dict(run_task(_agent_flow, state["seed"], context))
    finally:
        env.close()


def _distilling(memory: GraphMemory, distiller: Distiller) -> GraphMemory:
    """``memory`` with ``distiller`` as the one that turns its games into notes, unless it has
    one of its own (the server's memory is shared: set once, kept)."""
    if memory.distiller is None:
        memory.distiller = distiller
    return memory


def _served_agent() -> CompiledStateGraph[AgentState, ServedAgentContext, AgentInput, AgentOutput]:
    builder = StateGraph(
        AgentState,
        context_schema=ServedAgentContext,
        input_schema=AgentInput,
        output_schema=AgentOutput,
    )
    builder.add_node("play", _play)
    builder.add_edge(START, "play")
    builder.add_edge("play", END)
    return builder.compile(name="graphmem-agent")


agent = _served_agent()
