"""Memory-set update (Mem^p strategies, reflection into tips and corrected procedures) and
obsolescence (demotion, supersession), on both stores, offline unless a fake model is given."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel

from graphmem import GraphMemory, HashingEmbedder
from graphmem.config import MemoryConfig, ObsolescenceConfig, UpdateStrategy
from graphmem.errors import InvalidInput, MemoryNotFound
from graphmem.llm import MemoryLLM
from graphmem.models import Edge, EdgeKind, MemoryKind, Procedure, Step, Task, Tip
from graphmem.ops.obsolescence import demote, supersede
from graphmem.ops.prompting import procedure_steps
from graphmem.stores.base import MemoryStore

MUG = "put a clean mug in the fridge"
APPLE = "put a clean apple in the fridge"
LAMP = "light the lamp in the study"


def traj(task: str, actions: list[str], success: bool) -> dict[str, Any]:
    return {
        "task": task,
        "reward": 1.0 if success else 0.0,
        "success": success,
        "steps": [{"action": a, "observation": f"you {a}"} for a in actions],
    }


FAILED_MUG = traj(MUG, ["go to fridge", "open fridge", "put mug in fridge"], False)
GOOD_APPLE = traj(
    APPLE,
    ["take apple", "clean apple in sink", "go to fridge", "open fridge", "put apple in fridge"],
    True,
)
GOOD_MUG = traj(
    MUG, ["take mug", "clean mug in sink", "go to fridge", "open fridge", "put mug in fridge"], True
)
FAILED_LAMP = traj(LAMP, ["go to study", "look", "press lamp"], False)


@pytest.fixture
def mem(store: MemoryStore, embedder: HashingEmbedder) -> GraphMemory:
    return GraphMemory(store, embedder=embedder)


def counts(mem: GraphMemory, namespace: str) -> dict[str, int]:
    return mem.store.counts(namespace)


def edges_of(mem: GraphMemory, namespace: str, kind: EdgeKind) -> list[Edge]:
    return [e for e in mem.store.iter_edges(namespace) if e.kind is kind]


def actions(mem: GraphMemory, namespace: str, procedure_id: str) -> list[str]:
    return [s.action for s in procedure_steps(mem.store, namespace, procedure_id)]


def failed_episode(mem: GraphMemory, namespace: str, query: str, **overrides: Any) -> str:
    """Retrieve for ``query`` in a new episode and finish it with reward 0."""
    retrieval = mem.retrieve(namespace, query, open_episode=True, **overrides)
    assert retrieval.episode_id is not None and retrieval.hits
    mem.finish_episode(namespace, retrieval.episode_id, 0.0)
    return retrieval.episode_id


# ---- strategies ----------------------------------------------------------------------------


def test_vanilla_adds_failed_trajectories(mem: GraphMemory, namespace: str) -> None:
    out = mem.update(namespace, FAILED_MUG, strategy="vanilla")
    assert out.strategy is UpdateStrategy.VANILLA and out.skipped is None
    assert out.built is not None and out.built.procedure.success is False
    assert out.tips == [] and out.adjusted == []
    c = counts(mem, namespace)
    # proceduralized: script + trajectory procedures, one task, three steps, no reflection
    assert (c["Procedure"], c["Task"], c["Step"], c["Tip"]) == (2, 1, 3, 0)


def test_validation_adds_only_successes(mem: GraphMemory, namespace: str) -> None:
    out = mem.update(namespace, FAILED_MUG, strategy=UpdateStrategy.VALIDATION)
    assert out.built is None and out.skipped == "validation stores only successful trajectories"
    assert list(mem.store.iter_nodes(namespace)) == []

    out = mem.update(namespace, GOOD_APPLE, strategy="validation")
    assert out.built is not None and out.built.procedure.success
    assert counts(mem, namespace)["Procedure"] == 2 and counts(mem, namespace)["Tip"] == 0


def test_adjustment_builds_successes_and_reflects_on_failures(
    mem: GraphMemory, namespace: str
) -> None:
    good = mem.update(namespace, GOOD_APPLE, strategy="adjustment")
    assert good.built is not None and good.tips == []
    before = counts(mem, namespace)

    out = mem.update(namespace, FAILED_LAMP, strategy="adjustment")
    assert out.built is None and out.skipped is None
    (tip,) = out.tips
    assert tip.polarity.value == "avoid" and "press lamp" in tip.text
    assert tip.created_by == "fallback" and tip.embedding is not None
    after = counts(mem, namespace)
    # A new Task for the lamp and one Tip ABOUT it; no procedure without a retrieved one.
    assert after["Tip"] == 1 and after["Task"] == before["Task"] + 1
    assert after["Procedure"] == before["Procedure"]
    about = edges_of(mem, namespace, EdgeKind.ABOUT)
    assert [(e.src, e.dst) for e in about] == [(tip.id, out.task.id if out.task else "")]
    assert isinstance(mem.get(namespace, about[0].dst), Task)


def test_adjustment_writes_tip_about_task_and_retrieved_and_a_corrected_procedure(
    mem: GraphMemory, namespace: str
) -> None:
    failing = mem.update(namespace, FAILED_MUG, strategy="vanilla").built
    good = mem.update(namespace, GOOD_MUG, strategy="vanilla").built
    assert failing is not None and good is not None
    episode = failed_episode(mem, namespace, MUG)
    retrieved = {e.dst for e in mem.store.edges(namespace, episode, kinds=[EdgeKind.RETRIEVED])}
    assert retrieved == {failing.procedure.id, good.procedure.id}
    before = counts(mem, namespace)

    out = mem.update(namespace, FAILED_MUG, strategy="adjustment", episode_id=episode)

    # The reflection was grounded in the successful mug procedure (the first divergence).
    assert out.reference_id == good.procedure.id
    (tip,) = out.tips
    assert tip.polarity.value == "prefer" and "take mug" in tip.text
    about = {e.dst for e in mem.store.edges(namespace, tip.id, kinds=[EdgeKind.ABOUT])}
    assert about == {failing.task.id, failing.procedure.id, good.procedure.id}
    # One corrected procedure, a new version of the failing one, with the reference's steps.
    (fix,) = out.adjusted
    assert fix.corrects == failing.procedure.id
    proc = mem.get(namespace, fix.procedure.id)
    assert isinstance(proc, Procedure) and proc.version == failing.procedure.version + 1
    assert proc.source == "adjustment" and proc.key == failing.procedure.key
    assert proc.script and tip.text in proc.script
    assert actions(mem, namespace, proc.id) == [s["action"] for s in GOOD_MUG["steps"]]
    (evolved,) = mem.store.edges(namespace, proc.id, kinds=[EdgeKind.EVOLVED_FROM])
    assert evolved.dst == failing.procedure.id
    assert evolved.props["change"] and evolved.props["at"]
    # The failing procedure is kept, live, with its steps.
    old = mem.get(namespace, failing.procedure.id)
    assert not old.obsolete and actions(mem, namespace, old.id) == FAILED_MUG_ACTIONS
    after = counts(mem, namespace)
    assert after["Tip"] == before["Tip"] + 1 and after["Procedure"] == before["Procedure"] + 1
    assert after["Step"] == before["Step"] + len(GOOD_MUG["steps"])
    assert after["Task"] == before["Task"]  # the mug task existed (vanilla built it)


def test_a_correction_never_takes_another_tasks_steps(mem: GraphMemory, namespace: str) -> None:
    """The only successful reference solved another task (an apple, not a mug): the failing
    mug procedure gets a tip, and a version of it holds none of the apple's steps."""
    failing = mem.update(namespace, FAILED_MUG, strategy="vanilla").built
    good = mem.update(namespace, GOOD_APPLE, strategy="vanilla").built
    assert failing is not None and good is not None
    episode = failed_episode(mem, namespace, MUG)

    out = mem.update(namespace, FAILED_MUG, strategy="adjustment", episode_id=episode)

    assert out.reference_id == good.procedure.id  # the reflection still compares with it
    assert out.tips
    for fix in out.adjusted:
        steps = actions(mem, namespace, fix.procedure.id)
        assert not any("apple" in a for a in steps), steps
        assert set(steps) <= set(FAILED_MUG_ACTIONS)
    if failing.procedure.id in out.not_corrected:
        assert "another task" in out.not_corrected[failing.procedure.id]
    # The apple procedure is not given the mug's steps either.
    versions = mem.store.edges(
        namespace, good.procedure.id, direction="in", kinds=[EdgeKind.EVOLVED_FROM]
    )
    assert versions == []


FAILED_MUG_ACTIONS = [s["action"] for s in FAILED_MUG["steps"]]


def test_no_correction_when_the_retrieved_procedure_was_right(
    mem: GraphMemory, namespace: str
) -> None:
    """The agent repeated a successful procedure and still failed: a tip, no new version."""
    good = mem.update(namespace, GOOD_APPLE, strategy="validation").built
    assert good is not None
    episode = failed_episode(mem, namespace, APPLE)
    failed = {**GOOD_APPLE, "success": False, "reward": 0.0}
    out = mem.update(namespace, failed, strategy="adjustment", episode_id=episode)
    assert len(out.tips) == 1 and out.adjusted == []
    assert counts(mem, namespace)["Procedure"] == 2


def test_identical_failures_share_one_tip(mem: GraphMemory, namespace: str) -> None:
    first = mem.update(namespace, FAILED_LAMP, strategy="adjustment")
    second = mem.update(namespace, FAILED_LAMP, strategy="adjustment")
    assert first.tips[0].id == second.tips[0].id
    assert counts(mem, namespace)["Tip"] == 1 and counts(mem, namespace)["Task"] == 1


def test_failed_episode_leads_to_a_preferred_correction_that_then_supersedes(
    mem: GraphMemory, namespace: str
) -> None:
    failing = mem.update(namespace, FAILED_LAMP, strategy="vanilla").built
    assert failing is not None
    episode = failed_episode(mem, namespace, LAMP, lam=0.5)
    assert mem.get(namespace, failing.procedure.id).q == pytest.approx(0.45)

    out = mem.update(namespace, FAILED_LAMP, strategy="adjustment", episode_id=episode)
    # No successful reference: the failing trajectory cut before its failing step, tip attached.
    (fix,) = out.adjusted
    assert actions(mem, namespace, fix.procedure.id) == ["go to study", "look"]
    assert fix.procedure.success is False and fix.procedure.q == pytest.approx(0.5)

    # Same key, same similarity: two-phase retrieval (λ = 0.5) prefers the correction by Q.
    # (Abstention off: with it on, the retrieval after a credited failure is a probe that hands
    # nothing over while the task's no-memory baseline is learned; tests/test_abstention.py.)
    retrieval = mem.retrieve(
        namespace, LAMP, lam=0.5, k2=1, open_episode=True, abstain=False, kinds=("Procedure",)
    )
    assert [h.memory.id for h in retrieval.hits] == [fix.procedure.id]
    similarity_only = mem.retrieve(
        namespace, LAMP, lam=0.0, k2=2, abstain=False, kinds=("Procedure",)
    )
    assert {h.memory.id for h in similarity_only.hits} == {fix.procedure.id, failing.procedure.id}

    # The correction works: reward it; the successful update makes it SUPERSEDE the original.
    assert retrieval.episode_id is not None
    mem.finish_episode(namespace, retrieval.episode_id, 1.0)
    good_lamp = traj(LAMP, ["go to study", "look", "turn on lamp"], True)
    done = mem.update(namespace, good_lamp, strategy="adjustment", episode_id=retrieval.episode_id)
    assert [(s.new_id, s.old_id) for s in done.superseded] == [
        (fix.procedure.id, failing.procedure.id)
    ]
    old = mem.get(namespace, failing.procedure.id)
    assert old.obsolete and old.obsolete_reason == f"superseded by {fix.procedure.id}"
    assert old.q == pytest.approx(0.45)  # utility untouched by the supersession
    (sup,) = mem.store.edges(namespace, old.id, kinds=[EdgeKind.SUPERSEDES], direction="in")
    assert sup.src == fix.procedure.id
    again = mem.retrieve(namespace, LAMP, lam=0.5, k2=5, abstain=False)
    assert failing.procedure.id not in {h.memory.id for h in again.hits}
    assert actions(mem, namespace, old.id) == [s["action"] for s in FAILED_LAMP["steps"]]


def test_model_reflection_gives_the_corrected_steps(store: MemoryStore, namespace: str) -> None:
    reply = {
        "tip": "Find the switch before pressing the lamp.",
        "polarity": "prefer",
        "failed_step": 2,
        "corrected_steps": ["go to study", "find switch", "flip switch"],
    }
    chat = FakeListChatModel(responses=[json.dumps(reply)])
    llm = MemoryLLM(chat, name="fake-model")
    mem = GraphMemory(store, embedder=HashingEmbedder(384), llm=llm)
    plain = GraphMemory(store, embedder=HashingEmbedder(384))
    failing = plain.update(namespace, FAILED_LAMP, strategy="vanilla").built
    assert failing is not None
    episode = failed_episode(plain, namespace, LAMP)

    # The model may correct with a step the attempt never took, about what it saw: the switch.
    seen = copy.deepcopy(FAILED_LAMP)
    seen["steps"][1]["observation"] = "You see a lamp on the desk and a switch by the door."
    out = mem.update(namespace, seen, strategy="adjustment", episode_id=episode)
    assert llm.usage.calls == 2  # the reflection, then the facts the failure taught
    (tip,) = out.tips
    assert tip.text == reply["tip"] and tip.created_by == "fake-model"
    (fix,) = out.adjusted
    assert actions(mem, namespace, fix.procedure.id) == reply["corrected_steps"]
    assert fix.procedure.created_by == "fake-model" and fix.procedure.success
    assert "fake-model" in fix.change


def test_model_correction_naming_nothing_seen_is_refused(
    store: MemoryStore, namespace: str
) -> None:
    # The same reply for an attempt that never saw a switch: the switch is made up.
    reply = {
        "tip": "Find the switch before pressing the lamp.",
        "polarity": "prefer",
        "failed_step": 2,
        "corrected_steps": ["go to study", "find switch", "flip switch"],
    }
    llm = MemoryLLM(FakeListChatModel(responses=[json.dumps(reply)]), name="fake-model")
    mem = GraphMemory(store, embedder=HashingEmbedder(384), llm=llm)
    out = mem.update(namespace, FAILED_LAMP, strategy="adjustment")
    assert llm.usage.fallbacks == 1 and out.tips[0].created_by == "fallback"


def test_reflection_respects_the_llm_call_budget(store: MemoryStore, namespace: str) -> None:
    chat = FakeListChatModel(responses=["not json"] * 20)
    llm = MemoryLLM(chat, name="bad-model", retries=5)
    mem = GraphMemory(
        store, embedder=HashingEmbedder(384), llm=llm, config=MemoryConfig(max_llm_calls=2)
    )
    out = mem.update(namespace, FAILED_LAMP, strategy="adjustment")
    # Reflection and distillation share the budget: no call is left for the second.
    assert llm.usage.calls == 2 and llm.usage.fallbacks == 2
    assert out.tips[0].created_by == "fallback"


# ---- bad input ----------------------------------------------------------------------------


def test_bad_input_is_refused_and_changes_nothing(mem: GraphMemory, namespace: str) -> None:
    mem.update(namespace, GOOD_APPLE, strategy="vanilla")
    before = counts(mem, namespace)
    with pytest.raises(InvalidInput, match="unknown update strategy"):
        mem.update(namespace, FAILED_MUG, strategy="sometimes")
    with pytest.raises(MemoryNotFound):
        mem.update(namespace, FAILED_MUG, strategy="adjustment", episode_id="no-such-episode")
    task = next(m for m in mem.store.iter_nodes(namespace) if isinstance(m, Task))
    with pytest.raises(InvalidInput, match="not an Episode"):
        mem.update(namespace, FAILED_MUG, strategy="adjustment", episode_id=task.id)
    with pytest.raises(InvalidInput):
        mem.update(namespace, {"task": "", "steps": []}, strategy="vanilla")
    assert counts(mem, namespace) == before


def test_trajectory_without_steps_is_skipped_or_reflected(mem: GraphMemory, namespace: str) -> None:
    empty = {"task": "wake up the cat", "steps": [], "success": False}
    assert mem.update(namespace, empty, strategy="vanilla").skipped
    out = mem.update(namespace, empty, strategy="adjustment")
    assert "took no action" in out.tips[0].text


# ---- obsolescence ---------------------------------------------------------------------------


def test_low_q_memories_are_demoted_not_deleted(store: MemoryStore, namespace: str) -> None:
    config = MemoryConfig(obsolescence=ObsolescenceConfig(min_uses=3, q_below=0.4))
    mem = GraphMemory(store, embedder=HashingEmbedder(384), config=config)
    built = mem.update(namespace, FAILED_LAMP, strategy="vanilla").built
    assert built is not None
    proc_id = built.procedure.id
    # Another procedure for the lamp, keyed by keywords (less similar to the query, so never
    # the one retrieved): the failing one is not the task's last, so it can be demoted.
    other = mem.build(namespace, traj(LAMP, ["switch on lamp"], True), key_mode="keywords")
    demoted: list[str] = []
    for _ in range(3):  # q: 0.45, 0.405, 0.3645 — demoted after the third use
        # By vector alone (hybrid recall's keywords rank the keyword-keyed one first).
        episode = failed_episode(mem, namespace, LAMP, k2=1, hybrid=False)
        out = mem.update(namespace, FAILED_LAMP, strategy="validation", episode_id=episode)
        demoted += out.demoted_ids
    assert demoted == [proc_id]

    gone = mem.get(namespace, proc_id)
    assert gone.obsolete and gone.obsolete_reason and "after 3 uses" in gone.obsolete_reason
    assert [h.memory.id for h in mem.retrieve(namespace, LAMP).hits] == [other.procedure.id]
    # Still queryable: the memory, its steps, its history.
    assert actions(mem, namespace, proc_id) == [s["action"] for s in FAILED_LAMP["steps"]]
    hist = mem.history(namespace, proc_id)
    assert len(hist.episodes) == 3 and hist.memory.obsolete
    # An explicit delete removes it and the orphans it leaves (its steps; the trajectory
    # procedure it was distilled from stays until deleted too).
    deleted = set(mem.delete(namespace, [proc_id, built.procedures[1].id]))
    assert {proc_id, built.procedures[1].id} | {s.id for s in built.steps} <= deleted
    left = {m.id for m in store.iter_nodes(namespace) if isinstance(m, Step)}
    assert left == {s.id for s in other.steps}


def test_demote_scans_the_namespace_and_respects_the_thresholds(
    mem: GraphMemory, namespace: str
) -> None:
    low = mem.add_note(namespace, "The study lamp needs a new bulb.")
    young = mem.add_note(namespace, "The kitchen light is broken.")
    high = mem.add_note(namespace, "The hall light works.")
    for _ in range(4):
        mem.store.update_utility(namespace, [low.id, high.id], 0.0, 0.3)
        mem.store.update_utility(namespace, [high.id], 1.0, 0.9)
    mem.store.update_utility(namespace, [young.id], 0.0, 0.9)
    cfg = ObsolescenceConfig(min_uses=4, q_below=0.25)
    out = demote(mem, namespace, config=cfg)
    assert [d.memory_id for d in out] == [low.id]
    assert demote(mem, namespace, config=cfg) == []  # already obsolete: not demoted twice
    assert not mem.get(namespace, young.id).obsolete and not mem.get(namespace, high.id).obsolete


def test_learning_a_demoted_note_again_restores_it_but_not_a_superseded_one(
    mem: GraphMemory, namespace: str
) -> None:
    fact = "The lamp in the study takes an E14 bulb."
    note = mem.add_note(namespace, fact)
    mem.store.patch(namespace, note.id, {"obsolete": True, "obsolete_reason": "low utility"})
    again = mem.add_note(namespace, f"  {fact}  ")  # the same content, learned again
    assert again.id == note.id and not again.obsolete and again.obsolete_reason is None
    hits = mem.retrieve(namespace, "which bulb for the study lamp?", kinds=(MemoryKind.NOTE,))
    assert [h.memory.id for h in hits.hits] == [note.id]

    newer = mem.add_note(namespace, "The study lamp now takes an E27 bulb.")
    supersede(mem, namespace, newer.id, note.id)
    old = mem.add_note(namespace, fact)  # replaced by a newer version: stays retired
    assert old.id == note.id and old.obsolete


def test_supersede_checks_its_input(mem: GraphMemory, namespace: str) -> None:
    note = mem.add_note(namespace, "Bins go out on Tuesday.")
    built = mem.update(namespace, GOOD_APPLE, strategy="vanilla").built
    assert built is not None
    with pytest.raises(InvalidInput, match="itself"):
        supersede(mem, namespace, note.id, note.id)
    with pytest.raises(InvalidInput, match="cannot supersede"):
        supersede(mem, namespace, note.id, built.procedure.id)
    with pytest.raises(MemoryNotFound):
        supersede(mem, namespace, note.id, "missing")
    newer = mem.add_note(namespace, "Bins go out on Wednesday now.")
    out = supersede(mem, namespace, newer.id, note.id)
    assert out.reason == f"superseded by {newer.id}"
    with pytest.raises(InvalidInput, match="obsolete"):
        supersede(mem, namespace, note.id, newer.id)
    hits = mem.retrieve(namespace, "when do the bins go out?", kinds=(MemoryKind.NOTE,)).hits
    assert [h.memory.id for h in hits] == [newer.id]


def test_tip_is_typed(mem: GraphMemory, namespace: str) -> None:
    out = mem.update(namespace, FAILED_LAMP, strategy="adjustment")
    stored = mem.get(namespace, out.tips[0].id)
    assert isinstance(stored, Tip) and stored.task_text == LAMP and stored.source == "reflect"
