"""Consolidation on both stores: look-alike procedures and notes merge into one version that
pools their uses and Q (nothing lost, nothing deleted, idempotent, safe when two run at once),
and a note contradicting a live note of its subject supersedes it (docs/design.md)."""

from __future__ import annotations

import json
import math
import threading
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel

from graphmem import GraphMemory, HashingEmbedder
from graphmem.config import ConsolidationConfig, MemoryConfig
from graphmem.errors import InvalidInput
from graphmem.llm import MemoryLLM
from graphmem.models import Edge, EdgeKind, MemoryKind, Note, Procedure
from graphmem.ops.consolidation import (
    CONSOLIDATED_INTO,
    contradiction,
    merged_id,
    parse_fact,
    pooled_utility,
    skeleton,
)
from graphmem.stores.base import MemoryStore

SALAD = "make the salad"


def steps(*actions: str) -> list[dict[str, str]]:
    return [{"action": a} for a in actions]


def recipe(fruit: str, tool: str = "knife") -> list[dict[str, str]]:
    return steps(f"take {fruit}", f"slice {fruit} with {tool}", f"put {fruit} in bowl")


def on(**changes: Any) -> MemoryConfig:
    return MemoryConfig(consolidation=ConsolidationConfig(enabled=True, **changes))


def credit(mem: GraphMemory, namespace: str, memory_id: str, reward: float) -> None:
    """One finished episode that was handed ``memory_id`` and got ``reward``."""
    episode = mem.start_episode(namespace, "an episode")
    edge = Edge(
        namespace=namespace,
        kind=EdgeKind.RETRIEVED,
        src=episode.id,
        dst=memory_id,
        props={"rank": 0},
    )
    mem.store.upsert([], [edge])
    mem.finish_episode(namespace, episode.id, reward, success=reward > 0.5)


def live(store: MemoryStore, namespace: str, kind: MemoryKind) -> list[Any]:
    nodes = [m for m in store.iter_nodes(namespace, kinds=[kind]) if not m.obsolete]
    gone = store.superseded(namespace, [m.id for m in nodes])
    return [m for m in nodes if m.id not in gone]


def snapshot(store: MemoryStore, namespace: str) -> dict[str, Any]:
    return {m.id: m for m in store.iter_nodes(namespace)}


# ---- the rules, without a store -------------------------------------------------------------


def test_skeleton_needs_a_consistent_renaming() -> None:
    a = ["take red apple", "slice red apple with knife", "put red apple in bowl"]
    b = ["Take the yellow potato.", "slice yellow potato with a knife", "put yellow potato in bowl"]
    c = ["take red apple", "slice yellow potato with knife", "put red apple in bowl"]
    d = ["take red apple", "slice red apple with knife", "go north"]
    e = ["take red apple", "slice red apple with knife", "go south"]
    assert skeleton(a) == skeleton(b)
    assert skeleton(a) != skeleton(c)  # two objects where a has one: no one-to-one renaming
    assert skeleton(d) != skeleton(e)  # a direction is not an object


def test_parse_fact_and_contradiction_rule() -> None:
    assert parse_fact("The gray coat belongs in the wardrobe.") == (
        "gray coat",
        "belongs in",
        "wardrobe",
        True,
    )
    assert parse_fact("Nice weather today") is None
    wardrobe = Note(namespace="n", content="gray coat belongs in wardrobe")
    tub = Note(namespace="n", content="gray coat belongs in bath tub")
    not_tub = Note(namespace="n", content="gray coat does not belong in bath tub")
    assert contradiction(tub, wardrobe) is not None
    assert contradiction(not_tub, tub) is not None
    assert contradiction(not_tub, wardrobe) is None  # compatible
    other = Note(namespace="n", content="red hat belongs in bath tub")
    assert contradiction(other, wardrobe) is None


def test_pooled_q_is_the_update_rule_over_all_the_rewards() -> None:
    cfg = MemoryConfig(alpha=0.2, q0=0.5)

    def after(rewards: list[float]) -> float:
        q = cfg.q0
        for r in rewards:
            q += cfg.alpha * (r - q)
        return q

    def note(rewards: list[float]) -> Note:
        n = len(rewards)
        return Note(namespace="n", content="x", q=after(rewards), q_updates=n, uses=n)

    # Constant rewards: exactly one memory credited with all of them.
    q, n, uses, _ = pooled_utility([note([1.0] * 3), note([1.0] * 2)], cfg)
    assert (n, uses) == (5, 5)
    assert math.isclose(q, after([1.0] * 5), rel_tol=1e-12)
    # A never-credited look-alike adds no evidence.
    assert math.isclose(pooled_utility([note([0.0] * 4), note([])], cfg)[0], after([0.0] * 4))
    # Mixed: Q0 keeps weight (1-α)^N, the rest is the uses-weighted implied mean reward.
    a, b = note([1.0, 0.0, 1.0]), note([0.0])
    mean_a = (a.q - 0.8**3 * 0.5) / (1 - 0.8**3)
    mean_b = (b.q - 0.8 * 0.5) / (1 - 0.8)
    mu = (3 * mean_a + 1 * mean_b) / 4
    assert math.isclose(pooled_utility([a, b], cfg)[0], 0.8**4 * 0.5 + (1 - 0.8**4) * mu)
    assert cfg.reward_min <= pooled_utility([a, b], cfg)[0] <= cfg.reward_max


def test_config_refuses_other_kinds() -> None:
    with pytest.raises(Exception, match="procedures and notes"):
        ConsolidationConfig(kinds=(MemoryKind.TIP,))


# ---- procedures -----------------------------------------------------------------------------


def test_merge_pools_uses_and_q_and_loses_nothing(
    store: MemoryStore, embedder: HashingEmbedder, namespace: str
) -> None:
    mem = GraphMemory(store, embedder=embedder)
    a = mem.build(namespace, {"task": SALAD, "success": True, "steps": recipe("red apple")})
    b = mem.build(namespace, {"task": SALAD, "success": True, "steps": recipe("yellow potato")})
    odd = mem.build(  # same task, another skeleton: stays alone
        namespace, {"task": SALAD, "success": True, "steps": steps("take bowl", "eat bowl", "look")}
    )
    pa, pb = a.procedure.id, b.procedure.id
    for r in (1.0, 0.0, 1.0):
        credit(mem, namespace, pa, r)
    credit(mem, namespace, pb, 1.0)
    before = snapshot(store, namespace)
    edges_before = {e.key for e in store.iter_edges(namespace)}
    history_a = mem.q_history(namespace, pa)
    old_a, old_b = store.get(namespace, pa), store.get(namespace, pb)

    result = mem.consolidate(namespace)

    assert len(result.merges) == 1
    merge = result.merges[0]
    assert sorted(merge.merged_ids) == sorted([pa, pb])
    new = store.get(namespace, merge.new_id)
    assert isinstance(new, Procedure)
    # Nothing deleted: every memory and edge is still there; one version more.
    after = snapshot(store, namespace)
    assert set(before) <= set(after) and set(after) - set(before) == {new.id}
    assert edges_before <= {e.key for e in store.iter_edges(namespace)}
    # Pooled evidence: uses, successes and Q updates add; Q as the update rule gives it.
    assert (new.uses, new.q_updates, new.successes) == (4, 4, 3)
    q, n, uses, successes = pooled_utility([old_a, old_b], mem.config)
    assert math.isclose(new.q, q) and (n, uses, successes) == (4, 4, 3)
    assert new.version == 2 and new.source == "consolidate"
    assert new.embedding is not None
    # Old versions: obsolete with the reason, superseded, their fields and credit kept.
    for old in (old_a, old_b):
        now = store.get(namespace, old.id)
        assert now.obsolete and now.obsolete_reason == f"{CONSOLIDATED_INTO}{new.id}"
        assert (now.q, now.uses, now.q_updates) == (old.q, old.uses, old.q_updates)
    assert store.superseded(namespace, [pa, pb]) == {pa, pb}
    out = {(e.kind, e.dst) for e in store.edges(namespace, new.id)}
    for old_id in (pa, pb):
        assert (EdgeKind.EVOLVED_FROM, old_id) in out and (EdgeKind.SUPERSEDES, old_id) in out
    assert mem.q_history(namespace, pa) == history_a  # RETRIEVED history intact
    assert len(mem.history(namespace, new.id).episodes) == 4
    # The new version holds the steps and hangs off the task; the odd one is untouched.
    rep = store.get(namespace, merge.representative_id)
    from graphmem.ops.build import procedure_chain

    assert [s.action for s in procedure_chain(store, namespace, new.id)[0]] == [
        s.action for s in procedure_chain(store, namespace, rep.id)[0]
    ]
    tasks = store.edges(namespace, new.id, kinds=[EdgeKind.SOLVED_BY], direction="in")
    assert [e.src for e in tasks] == [a.task.id]
    assert not store.get(namespace, odd.procedure.id).obsolete
    # Retrieval sees the merged version, not the old ones.
    hits = mem.retrieve(namespace, SALAD, k1=10, k2=10).hits
    ids = {h.memory.id for h in hits}
    assert new.id in ids or not hits
    assert not ids & {pa, pb}
    # A merged memory cannot be restored into a second live copy.
    with pytest.raises(InvalidInput):
        mem.restore(namespace, pa)


def test_consolidating_again_or_twice_at_once_never_double_counts(
    store: MemoryStore, embedder: HashingEmbedder, namespace: str
) -> None:
    mem = GraphMemory(store, embedder=embedder)
    ids = []
    for fruit in ("red apple", "yellow potato", "green pear"):
        built = mem.build(namespace, {"task": SALAD, "success": True, "steps": recipe(fruit)})
        ids.append(built.procedure.id)
        credit(mem, namespace, built.procedure.id, 1.0)

    errors: list[BaseException] = []

    def sweep() -> None:
        try:
            mem.consolidate(namespace)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=sweep) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    again = mem.consolidate(namespace)
    assert again.merges == [] and again.contradictions == []
    procs = live(store, namespace, MemoryKind.PROCEDURE)
    embedded = [p for p in procs if p.embedding is not None]
    assert len(embedded) == 1
    assert embedded[0].id == merged_id(namespace, ids)
    assert embedded[0].uses == 3 and embedded[0].q_updates == 3


def test_build_hook_merges_on_write_only_when_enabled(
    store: MemoryStore, embedder: HashingEmbedder, namespace: str
) -> None:
    off = GraphMemory(store, embedder=embedder)
    a = off.build(namespace, {"task": SALAD, "success": True, "steps": recipe("red apple")})
    b = off.build(namespace, {"task": SALAD, "success": True, "steps": recipe("yellow potato")})
    assert a.consolidated_into is None and b.consolidated_into is None
    mem = GraphMemory(store, embedder=embedder, config=on())
    c = mem.build(namespace, {"task": SALAD, "success": False, "steps": recipe("green pear")})
    assert c.consolidated_into is not None
    new = store.get(namespace, c.consolidated_into)
    assert new.version == 2 and not new.obsolete
    for built in (a, b, c):
        assert store.get(namespace, built.procedure.id).obsolete
    # Exact matching does not merge another recipe, and another task is another cluster.
    exact = GraphMemory(store, embedder=embedder, config=on(step_match="exact"))
    d = exact.build(namespace, {"task": SALAD, "success": True, "steps": recipe("blue plum")})
    assert d.consolidated_into is None
    e = mem.build(
        namespace,
        {"task": "wash the car in the garage", "success": True, "steps": recipe("red apple")},
    )
    assert e.consolidated_into is None


def test_failed_and_correction_procedures(
    store: MemoryStore, embedder: HashingEmbedder, namespace: str
) -> None:
    """The representative is a successful one; update's corrections never merge."""
    mem = GraphMemory(store, embedder=embedder, config=on())
    won = mem.build(namespace, {"task": SALAD, "success": True, "steps": recipe("red apple")})
    lost = mem.build(namespace, {"task": SALAD, "success": False, "steps": recipe("red plum")})
    assert lost.consolidated_into is not None
    new = store.get(namespace, lost.consolidated_into)
    assert isinstance(new, Procedure) and new.success
    assert new.source_ref == won.procedure.id


# ---- notes ----------------------------------------------------------------------------------


def test_notes_of_one_subject_and_content_merge(
    store: MemoryStore, embedder: HashingEmbedder, namespace: str
) -> None:
    mem = GraphMemory(store, embedder=embedder)
    tags = ["subject:gray coat"]
    a = mem.add_note(
        namespace, "gray coat belongs in wardrobe\ngray coat is found in hall", tags=tags
    )
    b = mem.add_note(
        namespace, "Gray coat is found in hall.\nGray coat belongs in wardrobe.", tags=tags
    )
    c = mem.add_note(namespace, "gray coat belongs in wardrobe", tags=tags)  # less content
    store.update_utility(namespace, [a.id], 1.0, 0.1, success=True)
    store.update_utility(namespace, [b.id], 0.0, 0.1, success=False)
    count = len(snapshot(store, namespace))
    result = mem.consolidate(namespace)
    assert [sorted(m.merged_ids) for m in result.merges] == [sorted([a.id, b.id])]
    new = store.get(namespace, result.merges[0].new_id)
    assert new.uses == 2 and new.successes == 1 and not new.obsolete
    assert not store.get(namespace, c.id).obsolete
    assert len(snapshot(store, namespace)) == count + 1


def test_a_contradicting_note_supersedes_the_live_one(
    store: MemoryStore, embedder: HashingEmbedder, namespace: str
) -> None:
    mem = GraphMemory(store, embedder=embedder, config=on())
    tags = ["subject:gray coat"]
    old = mem.add_note(namespace, "gray coat belongs in wardrobe", tags=tags)
    store.update_utility(namespace, [old.id], 1.0, 0.1, success=True)
    compatible = mem.add_note(namespace, "gray coat does not belong in bath tub", tags=tags)
    assert compatible.version == 1
    assert not store.get(namespace, old.id).obsolete
    new = mem.add_note(namespace, "gray coat belongs in bath tub", tags=tags)
    assert new.version == 2
    retired = store.get(namespace, old.id)
    assert retired.obsolete and retired.uses == 1  # kept, with its credit
    # "belongs in bath tub" also contradicts "does not belong in bath tub".
    assert store.get(namespace, compatible.id).obsolete
    assert store.superseded(namespace, [old.id, compatible.id]) == {old.id, compatible.id}
    assert new.uses == 0  # a contradicted claim's credit is not evidence for its contradiction
    out = {(e.kind, e.dst) for e in store.edges(namespace, new.id)}
    assert (EdgeKind.SUPERSEDES, old.id) in out and (EdgeKind.EVOLVED_FROM, old.id) in out
    recalled = mem.retrieve(namespace, "where does the gray coat belong", kinds=("Note",), k1=10)
    assert old.id not in {h.memory.id for h in recalled.hits}
    assert new.id in {h.memory.id for h in recalled.hits}
    # Learning the contradicted fact again does not revive it next to its replacement.
    again = mem.add_note(namespace, "gray coat belongs in wardrobe", tags=tags)
    assert again.id == old.id and again.obsolete


def test_contradiction_off_and_notes_without_subject(
    store: MemoryStore, embedder: HashingEmbedder, namespace: str
) -> None:
    mem = GraphMemory(store, embedder=embedder, config=on(contradictions=False))
    old = mem.add_note(namespace, "red hat belongs in wardrobe")
    mem.add_note(namespace, "red hat belongs in drawer")
    assert not store.get(namespace, old.id).obsolete
    mem2 = GraphMemory(store, embedder=embedder, config=on())
    mem2.add_note(namespace, "red hat belongs in shelf")  # subject from its one fact line
    assert store.get(namespace, old.id).obsolete


def fake_llm(*replies: dict[str, Any]) -> MemoryLLM:
    return MemoryLLM(FakeListChatModel(responses=[json.dumps(r) for r in replies]), name="fake")


def test_llm_judges_what_the_rule_cannot(
    store: MemoryStore, embedder: HashingEmbedder, namespace: str
) -> None:
    tags = ["subject:alice"]
    llm = fake_llm({"contradicts": True, "reason": "Alice moved from Leeds to York."})
    mem = GraphMemory(store, embedder=embedder, llm=llm, config=on(llm_contradiction=True))
    old = mem.add_note(namespace, "Alice has her home in Leeds", tags=tags, context="x")
    # No model asked for the first note (nothing older of its subject).
    new = mem.add_note(namespace, "Alice has her home in York now", tags=tags, context="x")
    assert store.get(namespace, old.id).obsolete
    edge = store.edges(namespace, new.id, kinds=[EdgeKind.SUPERSEDES])[0]
    assert edge.props["reason"] == "Alice moved from Leeds to York."
    # Without the opt-in the rule alone decides: compatible.
    plain = GraphMemory(store, embedder=embedder, llm=llm, config=on())
    third = plain.add_note(namespace, "Alice has her home in Paris", tags=tags, context="x")
    assert not store.get(namespace, new.id).obsolete and not third.obsolete
