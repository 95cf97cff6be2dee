"""Build (Mem^p B(τ, r)) and notes (A-MEM): the docs/design.md §1 shapes on every store, offline and
through ChatOpenAI, deduplication, key modes."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from openai_stub import OpenAIStub

from graphmem import GraphMemory, HashingEmbedder, SentenceTransformerEmbedder
from graphmem.config import MemoryConfig
from graphmem.errors import EmptyContent, InvalidInput, InvalidNamespace
from graphmem.keywords import extract_keywords, keyword_key
from graphmem.llm import MemoryLLM, fallbacks
from graphmem.models import (
    EdgeKind,
    Granularity,
    KeyMode,
    MemoryKind,
    Note,
    Procedure,
    Step,
    Task,
    Trajectory,
)
from graphmem.ops.build import BuildResult, procedure_chain, trajectory_hash
from graphmem.stores.base import MemoryStore

TASK = "Put a clean mug in the coffee machine and brew coffee"


def trajectory(
    n: int = 20, task: str = TASK, *, success: bool = True, tag: str = ""
) -> dict[str, Any]:
    """A ``n``-step trajectory; ``tag`` changes every action (a different attempt)."""
    return {
        "task": task,
        "steps": [
            {
                "thought": f"step {i} thinking",
                "action": f"go to cabinet {i}{tag}" if i < n - 1 else f"brew coffee{tag}",
                "observation": f"you see cabinet {i}",
            }
            for i in range(n)
        ],
        "reward": 1.0 if success else 0.0,
        "success": success,
        "metadata": {"episode_id": "ep-42"},
    }


@pytest.fixture
def ns(namespace: str) -> str:
    return namespace  # conftest's fresh namespace (cleaned up on Neo4j)


@pytest.fixture
def mem(store: MemoryStore) -> GraphMemory:
    return GraphMemory(store, embedder=HashingEmbedder(384))


@pytest.fixture
def stub() -> Iterator[OpenAIStub]:
    with OpenAIStub() as server:
        yield server


def stub_llm(stub: OpenAIStub, *, fallback: bool = True) -> MemoryLLM:
    return MemoryLLM.from_openai(
        base_url=stub.base_url,
        model="stub-model",
        api_key="sk-dummy",
        max_retries=0,
        timeout=10,
        fallback=fallback,
    )


def kinds(store: MemoryStore, ns: str) -> Counter[str]:
    return Counter(m.kind for m in store.iter_nodes(ns))


def edge_kinds(store: MemoryStore, ns: str) -> Counter[str]:
    return Counter(e.kind.value for e in store.iter_edges(ns))


def walk(store: MemoryStore, ns: str, procedure_id: str) -> list[Step]:
    """Steps along FIRST_STEP then NEXT, straight from the store's edges."""
    out: list[Step] = []
    edges = store.edges(ns, procedure_id, kinds=[EdgeKind.FIRST_STEP])
    while edges:
        assert len(edges) == 1
        step = store.get(ns, edges[0].dst)
        assert isinstance(step, Step)
        out.append(step)
        edges = store.edges(ns, step.id, kinds=[EdgeKind.NEXT])
    return out


def check_chain(store: MemoryStore, ns: str, owner: Procedure, n: int) -> None:
    chain = walk(store, ns, owner.id)
    assert [s.index for s in chain] == list(range(n))
    assert [s.action for s in chain] == [s["action"] for s in trajectory(n)["steps"]]
    assert all(s.procedure_id == owner.id and s.embedding is None for s in chain)


def check_solved_by(store: MemoryStore, ns: str, result: BuildResult, reward: float) -> None:
    solved = store.edges(ns, result.task.id, kinds=[EdgeKind.SOLVED_BY])
    assert sorted(e.dst for e in solved) == sorted(p.id for p in result.procedures)
    assert all(e.props == {"reward": reward, "success": reward > 0} for e in solved)


# ---- shapes per granularity --------------------------------------------------------------


def test_trajectory_granularity_shape(mem: GraphMemory, ns: str) -> None:
    result = mem.build(ns, trajectory(20), granularity="trajectory")
    store = mem.store
    assert kinds(store, ns) == {"Task": 1, "Procedure": 1, "Step": 20}
    assert edge_kinds(store, ns) == {"SOLVED_BY": 1, "FIRST_STEP": 1, "NEXT": 19}
    (proc,) = result.procedures
    stored = store.get(ns, proc.id)
    assert isinstance(stored, Procedure)
    assert stored.granularity is Granularity.TRAJECTORY and stored.script is None
    assert (stored.n_steps, stored.reward, stored.success) == (20, 1.0, True)
    check_chain(store, ns, proc, 20)
    check_solved_by(store, ns, result, 1.0)
    assert [s.id for s in result.steps] == [s.id for s in walk(store, ns, proc.id)]
    assert len(result.edges) == 21
    assert not result.deduplicated and result.near_duplicates == []


def test_script_granularity_shape(mem: GraphMemory, ns: str) -> None:
    result = mem.build(ns, trajectory(20), granularity=Granularity.SCRIPT)
    store = mem.store
    assert kinds(store, ns) == {"Task": 1, "Procedure": 1, "Step": 20}
    assert edge_kinds(store, ns) == {"SOLVED_BY": 1, "FIRST_STEP": 1, "NEXT": 19}
    proc = store.get(ns, result.procedure.id)
    assert isinstance(proc, Procedure) and proc.granularity is Granularity.SCRIPT
    assert proc.script == fallbacks.script(TASK, Trajectory(**trajectory(20)).steps, True).text()
    assert proc.script.splitlines() == [
        "1. go to cabinet <n> (repeat as needed)",
        "2. brew coffee",
    ]
    check_chain(store, ns, proc, 20)  # the raw steps stay under the script as provenance
    check_solved_by(store, ns, result, 1.0)


def test_proceduralized_shape(mem: GraphMemory, ns: str) -> None:
    result = mem.build(ns, trajectory(20, success=False), granularity="proceduralized")
    store = mem.store
    assert kinds(store, ns) == {"Task": 1, "Procedure": 2, "Step": 20}
    assert edge_kinds(store, ns) == {
        "SOLVED_BY": 2,
        "DISTILLED_FROM": 1,
        "FIRST_STEP": 1,
        "NEXT": 19,
    }
    top, traj = result.procedures
    assert top.granularity is Granularity.PROCEDURALIZED and top.script
    assert "did not complete" in top.script  # failed attempt: the script says so
    assert traj.granularity is Granularity.TRAJECTORY and traj.script is None
    (distilled,) = store.edges(ns, top.id, kinds=[EdgeKind.DISTILLED_FROM])
    assert distilled.dst == traj.id
    assert store.edges(ns, top.id, kinds=[EdgeKind.FIRST_STEP]) == []
    check_chain(store, ns, traj, 20)
    check_solved_by(store, ns, result, 0.0)
    # Only the script procedure is a retrieval unit; its chain is reached via DISTILLED_FROM.
    assert top.embedding is not None and traj.embedding is None
    steps, chain = procedure_chain(store, ns, top.id)
    assert [s.id for s in steps] == [s.id for s in result.steps]
    assert [e.kind for e in chain] == [EdgeKind.FIRST_STEP] + [EdgeKind.NEXT] * 19


def test_default_granularity_and_provenance(store: MemoryStore, ns: str) -> None:
    mem = GraphMemory(store, embedder=HashingEmbedder(384), config=MemoryConfig(q0=0.25))
    result = mem.build(ns, trajectory(5))
    assert result.procedure.granularity is Granularity.PROCEDURALIZED  # MemoryConfig default
    for m in store.iter_nodes(ns):
        assert (m.source, m.source_ref, m.created_by, m.q) == ("build", "ep-42", "fallback", 0.25)
    key_vector = np.asarray(mem.embed(TASK))
    for m in (result.task, result.procedure):
        assert m.embedding is not None
        assert np.allclose(m.embedding, key_vector, atol=1e-6)


def test_source_ref_defaults_to_the_trajectory_hash(mem: GraphMemory, ns: str) -> None:
    raw = trajectory(3)
    raw["metadata"] = {}
    result = mem.build(ns, raw)
    assert result.procedure.source_ref == f"trajectory:{trajectory_hash(Trajectory(**raw))}"


# ---- with a model (ChatOpenAI against the local stub) ------------------------------------


def test_build_through_chat_openai(stub: OpenAIStub, store: MemoryStore, ns: str) -> None:
    llm = stub_llm(stub)
    mem = GraphMemory(store, embedder=HashingEmbedder(384), llm=llm)
    result = mem.build(ns, trajectory(20), key_mode="keywords")
    # One more call distils the episode's facts into notes (their keywords: offline rules).
    assert stub.ops() == ["extract_keywords", "distill_script", "distill_knowledge"]
    top, traj = result.procedures
    assert top.script is not None and top.script.startswith("1. stub: go to cabinet 0")
    assert result.task.key.startswith("stubkey, ")
    assert result.task.key_mode is KeyMode.KEYWORDS
    assert top.key == traj.key == result.task.key
    # The model wrote the key and the script; the steps are the trajectory's own words.
    by = {m.kind: m.created_by for m in store.iter_nodes(ns)}
    assert by == {
        "Task": "stub-model",
        "Procedure": "stub-model",
        "Step": "fallback",
        "Note": "stub-model",
    }
    assert llm.usage.calls == 3 and llm.usage.failures == 0
    assert result.notes and all(n.content.startswith("Facts about ") for n in result.notes)
    assert kinds(store, ns) == {"Task": 1, "Procedure": 2, "Step": 20, "Note": len(result.notes)}


def test_build_falls_back_when_the_model_keeps_failing(
    stub: OpenAIStub, store: MemoryStore, ns: str
) -> None:
    stub.always("invalid_json", op="distill_script")
    llm = stub_llm(stub)
    mem = GraphMemory(store, embedder=HashingEmbedder(384), llm=llm)
    result = mem.build(ns, trajectory(6), granularity="script")
    steps = Trajectory(**trajectory(6)).steps
    assert result.procedure.script == fallbacks.script(TASK, steps, True).text()
    assert result.procedure.created_by == "fallback"
    assert result.task.created_by == "fallback"  # query key: no model output in it
    assert llm.usage.fallbacks == 1
    assert stub.ops().count("distill_script") == 3  # one try and two retries


def test_llm_calls_per_build_are_capped(stub: OpenAIStub, store: MemoryStore, ns: str) -> None:
    stub.always("wrong_types")
    llm = stub_llm(stub)
    mem = GraphMemory(store, embedder=HashingEmbedder(384), llm=llm, config=MemoryConfig())
    mem.build(ns, trajectory(4), key_mode="keywords")
    assert len(stub.requests) == mem.config.max_llm_calls == 4  # 3 keyword tries + 1 script
    assert llm.usage.fallbacks == 3  # keywords, script, and the notes: no call was left


# ---- deduplication -----------------------------------------------------------------------


@pytest.mark.parametrize("granularity", list(Granularity))
def test_identical_trajectory_is_stored_once(
    mem: GraphMemory, ns: str, granularity: Granularity
) -> None:
    first = mem.build(ns, trajectory(20), granularity=granularity)
    counts, edges = kinds(mem.store, ns), edge_kinds(mem.store, ns)
    # Whitespace and case differences are normalised away; reward is not part of identity.
    again = trajectory(20)
    again["task"] = "  put a CLEAN mug in the coffee   machine and brew coffee "
    again["reward"] = 0.5
    second = mem.build(ns, Trajectory(**again), granularity=granularity)
    assert second.deduplicated and not first.deduplicated
    assert kinds(mem.store, ns) == counts and edge_kinds(mem.store, ns) == edges
    assert [p.id for p in second.procedures] == [p.id for p in first.procedures]
    assert [s.id for s in second.steps] == [s.id for s in first.steps]
    assert second.task.id == first.task.id
    assert {e.key for e in second.edges} == {e.key for e in first.edges}


def test_near_duplicate_is_linked_not_duplicated(mem: GraphMemory, ns: str) -> None:
    first = mem.build(ns, trajectory(8))
    second = mem.build(ns, trajectory(8, tag="b"))  # same task, another way of doing it
    assert not second.deduplicated
    assert second.near_duplicates == [first.procedure.id]
    (link,) = mem.store.edges(ns, second.procedure.id, kinds=[EdgeKind.LINKS_TO])
    assert link.dst == first.procedure.id
    assert link.props["reason"] == "near-duplicate"
    strength = link.props["strength"]
    assert isinstance(strength, float)
    assert mem.config.dedupe_threshold <= strength <= 1.0
    # One Task, now SOLVED_BY both attempts.
    assert second.task.id == first.task.id
    assert kinds(mem.store, ns)["Task"] == 1
    solved = mem.store.edges(ns, first.task.id, kinds=[EdgeKind.SOLVED_BY])
    assert {e.dst for e in solved} >= {first.procedure.id, second.procedure.id}


def test_different_task_is_not_a_near_duplicate(mem: GraphMemory, ns: str) -> None:
    mem.build(ns, trajectory(5))
    other = mem.build(ns, trajectory(5, task="Water the tomato plants in the garden", tag="x"))
    assert other.near_duplicates == []
    assert edge_kinds(mem.store, ns)["LINKS_TO"] == 0
    assert kinds(mem.store, ns)["Task"] == 2


# ---- key modes ---------------------------------------------------------------------------


def test_keyword_key_mode_offline(mem: GraphMemory, ns: str) -> None:
    result = mem.build(ns, trajectory(3), key_mode=KeyMode.KEYWORDS)
    key = keyword_key(extract_keywords(TASK))
    assert key == "coffee, put, clean, mug, machine, brew"
    assert result.task.key == key and result.task.key_mode is KeyMode.KEYWORDS
    assert all(p.key == key for p in result.procedures)
    assert result.procedure.embedding is not None
    assert np.allclose(result.procedure.embedding, mem.embed(key), atol=1e-6)


def test_query_key_mode(mem: GraphMemory, ns: str) -> None:
    result = mem.build(ns, trajectory(3), key_mode="query")
    assert result.task.key == TASK and result.task.key_mode is KeyMode.QUERY


def test_key_modes_make_separate_tasks(mem: GraphMemory, ns: str) -> None:
    a = mem.build(ns, trajectory(3), key_mode="query")
    b = mem.build(ns, trajectory(3, tag="b"), key_mode="keywords")
    assert a.task.id != b.task.id


def test_built_procedure_is_recalled_by_its_key(mem: GraphMemory, ns: str) -> None:
    result = mem.build(ns, trajectory(3))
    mem.build(ns, trajectory(3, task="Water the tomato plants in the garden"))
    hits = mem.store.recall(ns, mem.embed(TASK), 5, kinds=[MemoryKind.PROCEDURE])
    assert hits[0].memory.id == result.procedure.id
    assert len(hits) == 2  # one retrieval unit per build


# ---- invalid input changes nothing -------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"granularity": "paragraph"}, InvalidInput),
        ({"key_mode": "telepathy"}, InvalidInput),
        ({"trajectory": {"task": "t", "steps": []}}, InvalidInput),
        ({"trajectory": {"task": "  ", "steps": [{"action": "a"}]}}, EmptyContent),
        ({"trajectory": {"task": "t", "steps": [{"action": ""}]}}, EmptyContent),
        ({"trajectory": {"task": "t", "steps": [{"act": "a"}]}}, InvalidInput),
        ({"trajectory": "not a trajectory"}, InvalidInput),
        ({"namespace": "bad namespace!"}, InvalidNamespace),
    ],
)
def test_invalid_build_input_is_rejected(
    mem: GraphMemory, ns: str, kwargs: dict[str, Any], error: type[Exception]
) -> None:
    args: dict[str, Any] = {"namespace": ns, "trajectory": trajectory(3), **kwargs}
    with pytest.raises(error):
        mem.build(args.pop("namespace"), args.pop("trajectory"), **args)
    assert list(mem.store.iter_nodes(ns)) == []


# ---- notes -------------------------------------------------------------------------------

NOTE = "The spare key is under the blue flower pot by the back door."


def test_note_offline(mem: GraphMemory, ns: str) -> None:
    note = mem.add_note(ns, NOTE)
    expected = fallbacks.note_fields(NOTE)
    assert (note.keywords, note.tags, note.context, note.category) == (
        expected.keywords,
        expected.tags,
        expected.context,
        expected.category,
    )
    assert (note.source, note.created_by, note.q) == ("note", "fallback", mem.config.q0)
    stored = mem.store.get(ns, note.id)
    assert isinstance(stored, Note) and stored.content == NOTE
    assert stored.embedding is not None
    assert np.allclose(stored.embedding, mem.embed(note.embed_text()), atol=1e-6)
    assert "spare" in note.embed_text() and note.context in note.embed_text()


def test_note_deduplicated_by_content(mem: GraphMemory, ns: str) -> None:
    first = mem.add_note(ns, NOTE)
    second = mem.add_note(ns, "  the spare key is under the BLUE flower pot by the back door.")
    assert second.id == first.id
    assert kinds(mem.store, ns) == {"Note": 1}


def test_note_fields_given_are_kept(stub: OpenAIStub, store: MemoryStore, ns: str) -> None:
    mem = GraphMemory(store, embedder=HashingEmbedder(384), llm=stub_llm(stub))
    note = mem.add_note(
        ns,
        NOTE,
        keywords=["key"],
        tags=["home"],
        context="Where the key is.",
        category="fact",
        source_ref="chat-7",
    )
    assert stub.requests == []  # nothing left to extract: no model call
    assert (note.keywords, note.tags, note.category, note.source_ref) == (
        ["key"],
        ["home"],
        "fact",
        "chat-7",
    )
    assert note.created_by == "fallback"  # no model output in it


def test_note_through_chat_openai(stub: OpenAIStub, store: MemoryStore, ns: str) -> None:
    mem = GraphMemory(store, embedder=HashingEmbedder(384), llm=stub_llm(stub))
    note = mem.add_note(ns, NOTE, tags=["home"])
    assert note.keywords[0] == "stubkey" and note.category == "stubcat"
    assert note.tags == ["home"]  # given fields win over extracted ones
    assert note.created_by == "stub-model"
    assert stub.ops() == ["extract_note_fields"]


@pytest.mark.parametrize(
    ("content", "fields", "error"),
    [
        ("", {}, EmptyContent),
        ("   ", {}, EmptyContent),
        (42, {}, InvalidInput),
        ("ok", {"embedding": [1.0]}, InvalidInput),
        ("ok", {"content_hash": "abc"}, InvalidInput),
        ("ok", {"kind": "Task"}, InvalidInput),
        ("ok", {"colour": "red"}, InvalidInput),
        ("ok", {"keywords": "not a list"}, InvalidInput),
    ],
)
def test_invalid_note_is_rejected(
    mem: GraphMemory, ns: str, content: Any, fields: dict[str, Any], error: type[Exception]
) -> None:
    with pytest.raises(error):
        mem.add_note(ns, content, **fields)
    assert list(mem.store.iter_nodes(ns)) == []


# ---- the real embedder -------------------------------------------------------------------


@pytest.mark.slow  # loading torch and the model takes seconds to a minute on a busy machine
def test_build_with_minilm_recalls_by_meaning(
    store: MemoryStore, ns: str, minilm: SentenceTransformerEmbedder
) -> None:
    mem = GraphMemory(store, embedder=minilm)
    coffee = mem.build(ns, trajectory(4))
    mem.build(ns, trajectory(4, task="Water the tomato plants in the garden", tag="w"))
    query = mem.embed("make a cup of coffee with the coffee maker")
    hits = store.recall(ns, query, 2, kinds=[MemoryKind.PROCEDURE])
    assert hits[0].memory.id == coffee.procedure.id
    assert hits[0].sim > hits[1].sim
    assert len(coffee.procedure.embedding or []) == 384


def test_task_node_is_a_task(mem: GraphMemory, ns: str) -> None:
    result = mem.build(ns, trajectory(2))
    assert isinstance(mem.store.get(ns, result.task.id), Task)


def test_rebuild_after_the_task_was_deleted_restores_a_task(mem: GraphMemory, ns: str) -> None:
    first = mem.build(ns, trajectory(3))
    mem.delete(ns, [first.task.id])
    again = mem.build(ns, trajectory(3))
    assert again.deduplicated and again.procedure.id == first.procedure.id
    assert again.task.id != first.task.id and again.task.text == TASK
    solved = mem.store.edges(ns, again.task.id, kinds=[EdgeKind.SOLVED_BY])
    assert {e.dst for e in solved} == {p.id for p in first.procedures}
