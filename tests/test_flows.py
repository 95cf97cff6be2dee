"""The LangGraph flows end-to-end on both stores, offline: build, retrieve, update, evolve alone
and as subgraphs, the agent flow around a small deterministic game, and langgraph.json."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any, TypedDict

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from trajectories import TEA_TRAJECTORY as TRAJECTORY

from graphmem.agents import Decision, Observation, StepResult
from graphmem.config import DEFAULT_KINDS, RetrievalConfig
from graphmem.embedding import HashingEmbedder
from graphmem.errors import ConfigError, EpisodeFinished, InvalidInput
from graphmem.flows import (
    AgentContext,
    MemoryContext,
    build_agent_graph,
    build_build_graph,
    build_evolve_graph,
    build_retrieve_graph,
    build_update_graph,
    run_task,
)
from graphmem.flows.state import HitRecord, ServedContext
from graphmem.integrations.langchain_tools import MemoryToolkit
from graphmem.memory import GraphMemory
from graphmem.models import EdgeKind, Episode, EpisodeStatus, MemoryKind, Note, Procedure
from graphmem.stores.base import MemoryStore

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def mem(store: MemoryStore, embedder: HashingEmbedder) -> GraphMemory:
    return GraphMemory(store, embedder=embedder)


@pytest.fixture
def ctx(mem: GraphMemory, namespace: str) -> MemoryContext:
    return MemoryContext(namespace=namespace, memory=mem)


# ---- each flow alone ------------------------------------------------------------------------


def test_build_then_retrieve(mem: GraphMemory, ctx: MemoryContext, namespace: str) -> None:
    built = build_build_graph().compile().invoke({"trajectory": TRAJECTORY}, context=ctx)
    (proc_id,) = built["new_memory_ids"]
    assert isinstance(mem.get(namespace, proc_id), Procedure)
    assert built["task_id"]
    again = build_build_graph().compile().invoke({"trajectory": TRAJECTORY}, context=ctx)
    assert again["new_memory_ids"] == []  # the same trajectory is stored once

    out = build_retrieve_graph().compile().invoke({"query": "how to make tea?"}, context=ctx)
    hits: list[HitRecord] = out["hits"]
    assert [h["memory_id"] for h in hits] == [proc_id]
    assert set(hits[0]) >= {"sim", "q", "z_sim", "z_q", "score", "rank"}
    assert "fill kettle" in out["prompt"]
    episode = mem.get(namespace, out["episode_id"])
    assert isinstance(episode, Episode) and episode.status == EpisodeStatus.OPEN

    closed = (
        build_retrieve_graph()
        .compile()
        .invoke({"query": "how to make tea?", "open_episode": False}, context=ctx)
    )
    assert closed["episode_id"] is None and len(closed["hits"]) == 1


def test_a_missing_input_field_is_named(ctx: MemoryContext) -> None:
    with pytest.raises(InvalidInput, match='the retrieve flow needs "query"'):
        build_retrieve_graph().compile().invoke({}, context=ctx)
    with pytest.raises(InvalidInput, match='the build flow needs "trajectory"'):
        build_build_graph().compile().invoke({}, context=ctx)


def test_update_credits_the_episode_and_reflects(
    mem: GraphMemory, ctx: MemoryContext, namespace: str
) -> None:
    build_build_graph().compile().invoke({"trajectory": TRAJECTORY}, context=ctx)
    retrieved = build_retrieve_graph().compile().invoke({"query": "make tea"}, context=ctx)
    proc_id = retrieved["hits"][0]["memory_id"]
    failed = {**TRAJECTORY, "task": "make tea for two", "reward": 0.0, "success": False}
    update = build_update_graph().compile()
    out = update.invoke(
        {
            "episode_id": retrieved["episode_id"],
            "reward": 0.0,
            "success": False,
            "trajectory": failed,
        },
        context=ctx,
    )
    assert out["q_updates"] == {proc_id: pytest.approx(0.45)}  # 0.5 + 0.1·(0 − 0.5)
    assert mem.get(namespace, proc_id).q == pytest.approx(0.45)
    assert out["new_memory_ids"], "adjustment writes memory about the failure"
    for memory_id in out["new_memory_ids"]:
        assert mem.get(namespace, memory_id).kind in ("Note", "Procedure", "Tip")
    assert isinstance(out["update"], dict)
    # The finished episode is not credited twice: the same reward replays, another is refused.
    again = update.invoke({"episode_id": retrieved["episode_id"], "reward": 0.0}, context=ctx)
    assert again["q_updates"] == {proc_id: pytest.approx(0.45)}
    with pytest.raises(EpisodeFinished, match=r"a different reward \(1\) is refused"):
        update.invoke({"episode_id": retrieved["episode_id"], "reward": 1.0}, context=ctx)
    assert mem.get(namespace, proc_id).q == pytest.approx(0.45)


def test_evolve_links_new_memories(mem: GraphMemory, ctx: MemoryContext, namespace: str) -> None:
    first = mem.add_note(namespace, "Green tea is best brewed at 80 degrees.")
    second = mem.add_note(namespace, "Brew green tea at 80 degrees, not boiling.")
    evolve = build_evolve_graph().compile()
    out = evolve.invoke({"new_memory_ids": [second.id, second.id, "gone"]}, context=ctx)
    assert [e["memory_id"] for e in out["evolution"]] == [second.id, "gone"]
    assert [link["dst"] for link in out["evolution"][0]["links"]] == [first.id]
    assert out["evolution"][1]["skipped"] == "the memory is gone"
    links = mem.store.edges(namespace, second.id, kinds=[EdgeKind.LINKS_TO])
    assert [e.dst for e in links] == [first.id]


# ---- injection ------------------------------------------------------------------------------


def test_memory_comes_from_context_or_binding(mem: GraphMemory, namespace: str) -> None:
    mem.add_note(namespace, "The spare key is under the blue pot.")
    notes = RetrievalConfig(kinds=(MemoryKind.NOTE,))
    with pytest.raises(ConfigError, match="MemoryContext"):
        build_retrieve_graph().compile().invoke({"query": "key?"})
    with pytest.raises(ConfigError, match="no GraphMemory"):
        build_retrieve_graph().compile().invoke(
            {"query": "key?"}, context=MemoryContext(namespace=namespace)
        )
    bound = build_retrieve_graph(mem).compile()
    out = bound.invoke(
        {"query": "where is the spare key?"},
        context=MemoryContext(namespace=namespace, retrieval=notes),
    )
    assert len(out["hits"]) == 1
    # A JSON context (as a server sends it) works with a bound memory.
    out = bound.invoke(
        {"query": "spare key", "open_episode": False}, context={"namespace": namespace}
    )
    assert out["episode_id"] is None


def test_flows_as_subgraphs_of_a_user_graph(mem: GraphMemory, ctx: MemoryContext) -> None:
    class Mine(TypedDict, total=False):
        question: str
        query: str
        trajectory: dict[str, Any]
        new_memory_ids: list[str]
        hits: list[HitRecord]
        prompt: str
        episode_id: str | None
        answer: str

    def ask(state: Mine) -> dict[str, Any]:
        return {"query": state["question"], "trajectory": TRAJECTORY}

    def answer(state: Mine) -> dict[str, Any]:
        return {"answer": f"{len(state['hits'])} memories:\n{state['prompt']}"}

    graph = (
        StateGraph(Mine, context_schema=MemoryContext)
        .add_node("ask", ask)
        .add_node("build", build_build_graph().compile())
        .add_node("recall", build_retrieve_graph().compile())
        .add_node("answer", answer)
        .add_edge(START, "ask")
        .add_edge("ask", "build")
        .add_edge("build", "recall")
        .add_edge("recall", "answer")
        .add_edge("answer", END)
        .compile(checkpointer=InMemorySaver())
    )
    out = graph.invoke(
        {"question": "how do I make tea?"}, context=ctx, config={"configurable": {"thread_id": "t"}}
    )
    assert out["answer"].startswith("1 memories") and "boil water" in out["answer"]
    saved = graph.get_state({"configurable": {"thread_id": "t"}}).values
    assert saved["hits"][0]["memory_id"] == out["new_memory_ids"][0]


# ---- the agent flow around a tiny deterministic game ----------------------------------------


class BoxesGame:
    """Five boxes; the key is always in box 3. Open boxes, then take the key."""

    def __init__(self, step_budget: int = 8) -> None:
        self.step_budget = step_budget
        self.opened: set[int] = set()
        self.steps = 0
        self.done = True

    def _obs(self, text: str, *, success: bool = False) -> Observation:
        actions = [f"open box {i}" for i in range(5) if i not in self.opened]
        if 3 in self.opened and not success:
            actions.append("take key")
        return Observation(
            task="Find the key in the hall.",
            text=text,
            valid_actions=tuple(sorted(actions)),
            done=success,
            success=success,
            score=1.0 if success else 0.0,
        )

    def reset(self, seed: int, fold: str = "test") -> Observation:
        self.opened, self.steps, self.done = set(), 0, False
        return self._obs("You are in the hall. There are five boxes.")

    def step(self, action: str) -> StepResult:
        assert not self.done
        self.steps += 1
        success = False
        if action == "take key" and 3 in self.opened:
            success, text = True, "You take the key."
        elif action.startswith("open box "):
            box = int(action.rsplit(" ", 1)[1])
            self.opened.add(box)
            text = "You find a key." if box == 3 else "The box is empty."
        else:
            text = "Nothing happens."
        self.done = success or self.steps >= self.step_budget
        obs = self._obs(text, success=success)
        return StepResult(obs, 1.0 if success else 0.0, self.done, success)

    def gold_path(self) -> list[str]:
        return ["open box 3", "take key"]

    def close(self) -> None:
        pass


class ReplayPolicy:
    """Replays hinted actions that are valid, else takes the first valid action."""

    def begin(self, task: str, hints: Sequence[str] = (), seed: int = 0) -> None:
        self.todo = [a.strip() for h in hints for a in h.split(";") if a.strip()]

    def act(self, observation: str, valid_actions: Sequence[str], inventory: str) -> Decision:
        for action in self.todo:
            if action in valid_actions:
                self.todo.remove(action)
                return Decision(action, "memory says so")
        return Decision(sorted(valid_actions)[0], "try the first thing")

    def feedback(self, action: str, observation: str, reward: float) -> None:
        pass


class ExpertPolicy(ReplayPolicy):
    """Knows where the key is (a strong model whose memory a weaker one reuses, as in Mem^p)."""

    def begin(self, task: str, hints: Sequence[str] = (), seed: int = 0) -> None:
        super().begin(task, ["open box 3; take key"], seed)


def test_agent_flow_learns_across_tasks(mem: GraphMemory, namespace: str) -> None:
    graph = build_agent_graph().compile()
    game = BoxesGame()
    expert = AgentContext(namespace=namespace, memory=mem, env=game, policy=ExpertPolicy())
    first = run_task(graph, 0, expert)
    assert first["success"] and [s["action"] for s in first["steps"]] == ["open box 3", "take key"]
    assert first["hits"] == [] and first["q_updates"] == {}
    (proc_id,) = [i for i in first["new_memory_ids"] if mem.get(namespace, i).kind == "Procedure"]
    # The step that earned reward is distilled into a note beside the procedure (issue 52).
    (note_id,) = [i for i in first["new_memory_ids"] if mem.get(namespace, i).kind == "Note"]
    note = mem.get(namespace, note_id)
    assert isinstance(note, Note) and note.content == "Facts about key:\ntake key: earned reward"
    assert [e["memory_id"] for e in first["evolution"]] == first["new_memory_ids"]

    novice = AgentContext(namespace=namespace, memory=mem, env=game, policy=ReplayPolicy())
    second = run_task(graph, 1, novice)
    # Both kinds in one hand-over: the procedure and what the first task taught.
    assert sorted(h["memory_id"] for h in second["hits"]) == sorted([proc_id, note_id])
    assert "open box 3; take key" in second["hints"]
    assert second["success"] and len(second["steps"]) == 2
    assert second["q_updates"][proc_id] == pytest.approx(0.55)
    episode = mem.get(namespace, second["episode_id"])
    assert isinstance(episode, Episode) and episode.status == EpisodeStatus.FINISHED
    assert episode.reward == 1.0

    alone = AgentContext(
        namespace=namespace, memory=mem, env=game, policy=ReplayPolicy(), use_memory=False
    )
    assert len(run_task(graph, 2, alone)["steps"]) == 6, "without memory the novice explores"


def test_agent_flow_without_memory_learns_nothing(mem: GraphMemory, namespace: str) -> None:
    graph = build_agent_graph().compile()
    context = AgentContext(
        namespace=namespace, memory=mem, env=BoxesGame(), policy=ReplayPolicy(), use_memory=False
    )
    for seed in range(2):
        out = run_task(graph, seed, context)
        assert out["success"] and len(out["steps"]) == 6
    assert list(mem.store.iter_nodes(namespace)) == []


class AskingPolicy(ReplayPolicy):
    """Asks memory where the key is before its first step (a RecallingPolicy)."""

    def begin(self, task: str, hints: Sequence[str] = (), seed: int = 0) -> None:
        super().begin(task, hints, seed)
        self.questions: list[str] = []
        self.answers: list[str] = []

    def recall_queries(
        self, observation: str, valid_actions: Sequence[str], inventory: str
    ) -> list[str]:
        if self.questions:
            return []
        self.questions.append("where is the key? open box 3")
        return list(self.questions)

    def add_hints(self, hints: Sequence[str]) -> None:
        self.answers.extend(hints)
        self.todo.extend(a.strip() for h in hints for a in h.split(";") if a.strip())


def test_agent_flow_answers_questions_during_the_task(mem: GraphMemory, namespace: str) -> None:
    note = mem.add_note(namespace, "open box 3; take key")
    graph = build_agent_graph().compile()
    policy = AskingPolicy()
    only_procedures = RetrievalConfig(kinds=(MemoryKind.PROCEDURE,))
    context = AgentContext(
        namespace=namespace,
        memory=mem,
        env=BoxesGame(),
        policy=policy,
        retrieval=only_procedures,
        recall=RetrievalConfig(k1=5, k2=1, kinds=(MemoryKind.NOTE,)),
    )
    out = run_task(graph, 0, context)
    assert out["hits"] == [], "the first retrieval finds no procedure"
    assert policy.questions == ["where is the key? open box 3"]
    assert policy.answers == ["open box 3; take key"]
    assert out["recalled"] == [note.id]
    assert [s["action"] for s in out["steps"]] == ["open box 3", "take key"]
    retrieved = mem.store.edges(namespace, out["episode_id"], kinds=[EdgeKind.RETRIEVED])
    assert [e.dst for e in retrieved] == [note.id], "what was recalled joins the Episode"
    assert out["q_updates"] == {note.id: pytest.approx(0.55)}

    asker = AskingPolicy()
    no_recall = AgentContext(namespace=namespace, memory=mem, env=BoxesGame(), policy=asker)
    again = run_task(graph, 1, no_recall)
    assert again["recalled"] == [] and asker.answers == [], "no recall config: no questions"


def test_agent_flow_needs_env_and_policy(mem: GraphMemory, namespace: str) -> None:
    graph = build_agent_graph().compile()
    with pytest.raises(ConfigError, match="AgentContext"):
        graph.invoke({"seed": 0}, context=MemoryContext(namespace=namespace, memory=mem))


# ---- the served graphs' context ----------------------------------------------------------------


def test_served_retrieval_looks_through_the_kinds_mcp_searches(mem: GraphMemory) -> None:
    """Unless the context names kinds, a served retrieve looks through procedures, notes and
    tips, as MCP's search_memory does; the rest of the config is the context's or the memory's."""
    assert MemoryToolkit(mem, "any").retrieval.kinds == DEFAULT_KINDS
    assert ServedContext().retrieval_over(mem) == mem.config.retrieval.model_copy(
        update={"kinds": DEFAULT_KINDS}
    )
    limited = ServedContext.model_validate({"retrieval": {"k2": 5}}).retrieval_over(mem)
    assert limited.k2 == 5 and limited.kinds == DEFAULT_KINDS
    notes = ServedContext.model_validate({"retrieval": {"kinds": ["Note"]}})
    assert notes.retrieval_over(mem).kinds == (MemoryKind.NOTE,)
    assert notes.memory_context(mem).retrieval == notes.retrieval_over(mem)


def test_served_retrieves_on_one_thread_open_their_own_episodes(
    mem: GraphMemory, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a thread a served graph's state outlives the run; the next run still starts from its
    own input, so it opens a new episode unless the input names one."""
    from graphmem.flows import server

    monkeypatch.setattr(server, "_opened", [mem])
    mem.build(namespace, TRAJECTORY)
    retrieve = server.retrieve.copy(update={"checkpointer": InMemorySaver()})
    thread: Any = {"configurable": {"thread_id": "one-conversation"}}
    context = ServedContext(namespace=namespace)
    first = retrieve.invoke({"query": "make tea"}, thread, context=context)
    second = retrieve.invoke({"query": "make tea"}, thread, context=context)
    assert first["episode_id"] and second["episode_id"] not in (None, first["episode_id"])
    named = {"query": "boil water", "episode_id": first["episode_id"]}
    assert retrieve.invoke(named, thread, context=context)["episode_id"] == first["episode_id"]


# ---- langgraph.json ----------------------------------------------------------------------------


NO_RUN = SimpleNamespace(execution_runtime=None)


def _a_run(context: object) -> SimpleNamespace:
    """What LangGraph Server hands a graph factory for a run: the context as the client sent it."""
    return SimpleNamespace(execution_runtime=SimpleNamespace(context=context))


def test_served_graph_factories_refuse_unknown_context_keys() -> None:
    from graphmem.flows.server import refusing_unknown_context, retrieve
    from showcase.served_agent import agent

    factory = refusing_unknown_context(retrieve)
    assert factory(NO_RUN) is retrieve and factory(_a_run(None)) is retrieve
    assert factory(_a_run({"namespace": "a", "retrieval": {"kinds": ["Note"]}})) is retrieve
    known = r"\(known: namespace, retrieval, strategy\)"
    with pytest.raises(ConfigError, match=rf"unknown context key 'namspace' {known}"):
        factory(_a_run({"namspace": "agent-1"}))
    with pytest.raises(ConfigError, match=r"'retrieval.kind' \(known: k1, k2, lam"):
        factory(_a_run({"namespace": "a", "retrieval": {"kind": ["Note"]}}))
    agent_factory = refusing_unknown_context(agent)
    assert agent_factory(_a_run({"namespace": "a", "game": "coin"})) is agent
    with pytest.raises(ConfigError, match="'gmae'"):
        agent_factory(_a_run({"gmae": "coin"}))
    with pytest.raises(TypeError, match="ServedContext"):
        refusing_unknown_context(build_retrieve_graph().compile())


def test_langgraph_json_graphs_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every graph langgraph.json names resolves as LangGraph tooling loads it (file:attr)."""
    monkeypatch.setenv("GRAPHMEM_STORE", str(tmp_path / "store"))
    monkeypatch.setenv("GRAPHMEM_EMBEDDER", "hashing")
    monkeypatch.delenv("GRAPHMEM_NEO4J_URI", raising=False)
    config = json.loads((ROOT / "langgraph.json").read_text())
    assert config["dependencies"] == ["."]
    modules: list[Any] = []
    try:
        for name, spec in config["graphs"].items():
            path, _, attr = spec.partition(":")
            module_spec = importlib.util.spec_from_file_location(f"lg_{name}", ROOT / path)
            assert module_spec is not None and module_spec.loader is not None
            module = importlib.util.module_from_spec(module_spec)
            module_spec.loader.exec_module(module)
            modules.append(module)
            target = getattr(module, attr)
            # A graph factory (flows/server.py's are), called as the server calls it to read
            # a graph's schemas: a runtime with no run in it.
            graph = target if isinstance(target, CompiledStateGraph) else target(NO_RUN)
            assert isinstance(graph, CompiledStateGraph), name
            assert graph.get_graph().nodes, name
    finally:
        for module in modules:
            for opened in getattr(module, "_opened", []):
                opened.close()
