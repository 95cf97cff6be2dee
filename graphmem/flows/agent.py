"""Agent flow: retrieve → act in an environment → finish the episode → update → evolve.

Why and how, in full: docs/design.md, "Module notes", ``graphmem.flows.agent``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Literal, cast

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime

from graphmem.agents import (
    ProcedurePolicy,
    RecallingPolicy,
    UsingPolicy,
    plans_from_hits,
    task_of,
)
from graphmem.errors import ConfigError, LLMError
from graphmem.flows.evolve import build_evolve_graph
from graphmem.flows.retrieve import build_retrieve_graph
from graphmem.flows.state import (
    AgentContext,
    AgentState,
    HitRecord,
    StepRecord,
    hit_record,
    resolve,
)
from graphmem.flows.update import build_update_graph
from graphmem.memory import GraphMemory
from graphmem.models import Hit, Namespace, Note, Procedure, Tip
from graphmem.ops.build import procedure_chain
from graphmem.ops.episodes import record_retrieval

log = logging.getLogger(__name__)

RECURSION_MARGIN = 20
"""Graph steps of a run besides the policy steps (start, retrieve, begin, finish, ...)."""


def default_hints(memory: GraphMemory, namespace: str, task: str, hits: Sequence[Hit]) -> list[str]:
    """Hints for a policy: successful procedures as ``;``-joined actions, notes, tips."""
    hints: list[str] = []
    for hit in hits:
        m = hit.memory
        if isinstance(m, Procedure) and m.success:
            steps, _ = procedure_chain(memory.store, Namespace(namespace), m.id)
            if steps:
                hints.append("; ".join(s.action for s in steps))
        elif isinstance(m, Note):
            hints.append(m.content)
        elif isinstance(m, Tip):
            hints.append(m.text if m.polarity == "prefer" else f"avoid: {m.text}")
    return hints


def _agent_context(runtime: Runtime[AgentContext]) -> AgentContext:
    ctx = runtime.context
    if not isinstance(ctx, AgentContext) or ctx.env is None or ctx.policy is None:
        raise ConfigError(
            "the agent flow needs context=AgentContext(namespace=..., memory=..., env=..., "
            "policy=...)"
        )
    return ctx


def build_agent_graph(
    memory: GraphMemory | None = None,
) -> StateGraph[AgentState, AgentContext, AgentState, AgentState]:
    """The agent graph, uncompiled; ``memory`` is used when the run context has none."""

    def start(state: AgentState, runtime: Runtime[AgentContext]) -> dict[str, Any]:
        ctx = _agent_context(runtime)
        assert ctx.env is not None
        obs = ctx.env.reset(state["seed"], ctx.fold)
        # The environment says what task its first observation poses (graphmem.agents.TaskEnv).
        task = " ".join(p for p in (ctx.task_prefix, task_of(ctx.env, obs)) if p)
        return {
            "task": task or "text game",
            "query": task or "text game",
            # The Episode records every memory offered; ``used`` is decided at the finish.
            "open_episode": True,
            "sources": {},
            "used": None,
            "episode_id": None,
            "hits": [],
            "prompt": "",
            "observation": obs.text,
            "valid_actions": list(obs.valid_actions),
            "inventory": obs.inventory,
            "steps": [],
            "recalled": [],
            "done": False,
            "success": False,
            "score": 0.0,
            "new_memory_ids": [],
        }

    def after_start(state: AgentState, runtime: Runtime[AgentContext]) -> str:
        return "retrieve" if _agent_context(runtime).use_memory else "begin"

    def begin(state: AgentState, runtime: Runtime[AgentContext]) -> dict[str, Any]:
        ctx = _agent_context(runtime)
        assert ctx.policy is not None
        hints: list[str] = []
        update: dict[str, Any] = {}
        if ctx.use_memory and state.get("hits"):
            mem, namespace, _ = resolve(runtime, memory)
            hits = _hits(mem, namespace, state["hits"])
            hint_fn = ctx.hints or default_hints
            hints = hint_fn(mem, namespace, state["task"], hits)
            if _by_use(ctx):
                sources = {h.memory.id: hint_fn(mem, namespace, state["task"], [h]) for h in hits}
                update["sources"] = sources
        ctx.policy.begin(state["task"], hints=hints, seed=state["seed"])
        plans: list[HitRecord] = []
        if ctx.use_memory and ctx.procedures and isinstance(ctx.policy, ProcedurePolicy):
            mem, namespace, _ = resolve(runtime, memory)
            procs = mem.retrieve(namespace, state["query"], ctx.procedures)
            offered = plans_from_hits(mem, namespace, procs.hits)
            ctx.policy.offer_procedures(offered)
            keep = {p.procedure_id for p in offered}
            kept = procs.model_copy(update={"hits": [h for h in procs.hits if h.memory.id in keep]})
            if kept.hits:  # the plans handed to the policy join the Episode as offered
                episode_id = (
                    state.get("episode_id") or mem.start_episode(namespace, state["task"]).id
                )
                record_retrieval(mem.store, kept, episode_id=episode_id)
                update["episode_id"] = episode_id
            plans = [hit_record(h) for h in kept.hits]
        return {"hints": hints, "plans": plans, **update}

    def recall(state: AgentState, runtime: Runtime[AgentContext]) -> dict[str, Any]:
        """Answer the policy's questions from memory; the hits join the task's Episode."""
        ctx = _agent_context(runtime)
        policy = ctx.policy
        if not (ctx.use_memory and ctx.recall is not None):
            return {}
        if not isinstance(policy, RecallingPolicy):
            return {}
        questions = policy.recall_queries(
            state["observation"], state["valid_actions"], state.get("inventory", "")
        )
        if not questions:
            return {}
        mem, namespace, _ = resolve(runtime, memory)
        episode_id = state.get("episode_id")
        recalled = list(state.get("recalled", []))
        by_use = _by_use(ctx)
        sources = dict(state.get("sources", {}))
        hint_fn = ctx.hints or default_hints
        for question in questions:
            found = mem.retrieve(
                namespace,
                question,
                ctx.recall,
                open_episode=episode_id is None,
                episode_id=episode_id,
            )
            episode_id = episode_id or found.episode_id
            recalled.extend(h.memory.id for h in found.hits)
            policy.add_hints(hint_fn(mem, namespace, question, found.hits))
            if by_use:
                for h in found.hits:
                    if h.memory.id not in sources:
                        sources[h.memory.id] = hint_fn(mem, namespace, question, [h])
        update: dict[str, Any] = {
            "episode_id": episode_id,
            "recalled": list(dict.fromkeys(recalled)),
        }
        if by_use:
            update["sources"] = sources
        return update

    def used_memories(state: AgentState, ctx: AgentContext) -> dict[str, Any]:
        """What the policy used, for the update flow's finish: the memories (offered at the
        start or recalled) whose hints it acted on, or, for a policy that cannot say, all of
        them; and the procedures it followed. ``used`` is None (every memory offered is
        credited) for a policy that reports neither."""
        plans = {h["memory_id"] for h in state.get("plans", [])}
        follows = bool(plans) and isinstance(ctx.policy, ProcedurePolicy)
        if not (ctx.use_memory and (_by_use(ctx) or follows)):
            return {"used": None}
        if isinstance(ctx.policy, UsingPolicy):
            acted = set(ctx.policy.used_hints())
            sources = state.get("sources", {})
            used = [i for i, hints in sources.items() if acted & set(hints)]
        else:
            used = [h["memory_id"] for h in state.get("hits", [])]
            used += state.get("recalled", [])
        followed: list[str] = []
        if follows:
            assert isinstance(ctx.policy, ProcedurePolicy)
            followed = [i for i in ctx.policy.followed_procedures() if i in plans]
        return {"used": list(dict.fromkeys([*used, *followed])), "followed": followed}

    def act(state: AgentState, runtime: Runtime[AgentContext]) -> dict[str, Any]:
        ctx = _agent_context(runtime)
        assert ctx.env is not None and ctx.policy is not None
        update = recall(state, runtime)
        try:
            decision = ctx.policy.act(
                state["observation"], state["valid_actions"], state.get("inventory", "")
            )
        except LLMError as e:
            # A policy whose model failed (after its own retries and fallbacks) ends this game
            # as a failure; the memory built so far and the rest of the stream go on.
            log.warning("seed %s: the policy failed, ending the game: %s", state["seed"], e)
            return {**update, "done": True, "success": False}
        result = ctx.env.step(decision.action)
        ctx.policy.feedback(decision.action, result.observation.text, result.reward)
        obs = result.observation
        step = StepRecord(
            thought=decision.thought,
            action=decision.action,
            observation=obs.text,
            reward=float(result.reward),
        )
        return {
            **update,
            "steps": [*state.get("steps", []), step],
            "observation": obs.text,
            "valid_actions": list(obs.valid_actions),
            "inventory": obs.inventory,
            "done": bool(result.done),
            "success": bool(obs.success),
            "score": float(obs.score),
        }

    def after_act(state: AgentState) -> Literal["act", "finish"]:
        return "finish" if state.get("done") else "act"

    def finish(state: AgentState, runtime: Runtime[AgentContext]) -> dict[str, Any]:
        ctx = _agent_context(runtime)
        cfg = ctx.memory.config if ctx.memory is not None else (memory.config if memory else None)
        success = bool(state.get("success"))
        if cfg is not None:
            reward = cfg.success_reward if success else cfg.failure_reward
        else:
            reward = 1.0 if success else 0.0
        steps = state.get("steps", [])
        trajectory = {
            "task": state["task"],
            "steps": [
                {
                    "thought": s["thought"],
                    "action": s["action"],
                    "observation": s["observation"],
                    "reward": s["reward"],
                }
                for s in steps
            ],
            "reward": reward,
            "success": success,
            "metadata": {"seed": state["seed"], "score": state.get("score", 0.0)},
        }
        log.debug("seed %s: success=%s in %d steps", state["seed"], success, len(steps))
        marks = used_memories(state, ctx)
        if ctx.use_memory and not state.get("episode_id"):
            # Every run with memory is an Episode, even one that was handed nothing: the
            # update flow finishes it with the reward, which then credits no memory.
            mem, namespace, _ = resolve(runtime, memory)
            marks["episode_id"] = mem.start_episode(namespace, state["task"]).id
        return {**marks, "reward": reward, "trajectory": trajectory}

    def after_finish(state: AgentState, runtime: Runtime[AgentContext]) -> str:
        return "update" if _agent_context(runtime).use_memory else END

    def learn(state: AgentState, runtime: Runtime[AgentContext]) -> dict[str, Any]:
        ctx = _agent_context(runtime)
        if ctx.learn is None:
            return {}
        mem, namespace, _ = resolve(runtime, memory)
        extra = ctx.learn(mem, namespace, state)
        ids = list(dict.fromkeys([*state.get("new_memory_ids", []), *extra]))
        return {"new_memory_ids": ids}

    builder = StateGraph(AgentState, context_schema=AgentContext)
    builder.add_node("start", start)
    builder.add_node("retrieve", build_retrieve_graph(memory).compile())
    builder.add_node("begin", begin)
    builder.add_node("act", act)
    builder.add_node("finish", finish)
    builder.add_node("update", build_update_graph(memory).compile())
    builder.add_node("learn", learn)
    builder.add_node("evolve", build_evolve_graph(memory).compile())
    builder.add_edge(START, "start")
    builder.add_conditional_edges("start", after_start, ["retrieve", "begin"])
    builder.add_edge("retrieve", "begin")
    builder.add_edge("begin", "act")
    builder.add_conditional_edges("act", after_act, ["act", "finish"])
    builder.add_conditional_edges("finish", after_finish, ["update", END])
    builder.add_edge("update", "learn")
    builder.add_edge("learn", "evolve")
    builder.add_edge("evolve", END)
    return builder


def _hits(mem: GraphMemory, namespace: str, records: Sequence[HitRecord]) -> list[Hit]:
    """The hits that ``records`` (the state's copies) describe, with their memories read again
    from the store; a memory deleted in the meantime is left out."""
    ids = [r["memory_id"] for r in records]
    found = {m.id: m for m in mem.store.get_many(namespace, ids)}
    return [
        Hit(
            memory=found[r["memory_id"]],
            rank=r["rank"],
            sim=r["sim"],
            q=r["q"],
            z_sim=r["z_sim"],
            z_q=r["z_q"],
            score=r["score"],
        )
        for r in records
        if r["memory_id"] in found
    ]


def _by_use(ctx: AgentContext) -> bool:
    """Whether this run credits memories by use (the policy reports the hints it acted on)."""
    return isinstance(ctx.policy, UsingPolicy)


def run_task(
    graph: CompiledStateGraph[AgentState, AgentContext, AgentState, AgentState],
    seed: int,
    context: AgentContext,
) -> AgentState:
    """Run one task (``seed``) through a compiled agent graph, with a fitting recursion limit."""
    if context.env is None:
        raise ConfigError("run_task needs context.env")
    limit = int(context.env.step_budget) + RECURSION_MARGIN
    return cast(
        AgentState,
        graph.invoke({"seed": seed}, context=context, config={"recursion_limit": limit}),
    )


graph: CompiledStateGraph[AgentState, AgentContext, AgentState, AgentState] = (
    build_agent_graph().compile(name="graphmem-agent").with_config(recursion_limit=10_000)
)
