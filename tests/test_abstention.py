"""Abstention (issue 45, opt-in: ``RetrievalConfig.abstain``): K is a maximum, and a memory
reaches the agent only when its expected reward is not below what its task cluster earns
without memory. Through the public
API, on the embedded store and on Neo4j when ``GRAPHMEM_NEO4J_URI`` is set."""

from __future__ import annotations

import os
from typing import Any

import pytest

from graphmem import (
    GraphMemory,
    HashingEmbedder,
    InvalidInput,
    MemoryConfig,
    MemoryKind,
    RetrievalConfig,
)
from graphmem.models import Task
from graphmem.stores.base import MemoryStore

TASK = "cook a meal in the kitchen: check the cookbook"
PROCS = {
    "good": ["open fridge", "take carrot", "slice carrot", "cook carrot with stove", "eat meal"],
    "bad": ["open fridge", "take apple", "roast apple with oven", "eat meal"],
}
CFG = RetrievalConfig(
    k1=5, k2=5, kinds=(MemoryKind.PROCEDURE,), floor=-1.0, abstain=True, choose_kinds=False
)
"""Per-memory abstention alone: the kind choice (on by default, tests/test_choose_kinds.py)
judges kinds as a whole and is off here."""


def _memory(store: MemoryStore, *, abstain: bool = True) -> GraphMemory:
    """Abstention on in the memory's config (so finishing an episode that credits nothing
    counts towards the baseline), unless ``abstain`` is False (the library default)."""
    config = MemoryConfig(retrieval=CFG.model_copy(update={"abstain": abstain}))
    return GraphMemory(store, embedder=HashingEmbedder(384), config=config)


def _trajectory(steps: list[str], success: bool) -> dict[str, Any]:
    return {
        "task": TASK,
        "steps": [{"action": a, "observation": "ok"} for a in steps],
        "reward": 1.0 if success else 0.0,
        "success": success,
    }


def _build(mem: GraphMemory, namespace: str) -> dict[str, str]:
    """The good and the bad procedure (both from won games, so both start trusted)."""
    ids = {}
    for name, steps in PROCS.items():
        built = mem.build(namespace, _trajectory(steps, True))
        ids[name] = built.procedures[0].id
    return ids


def _play(mem: GraphMemory, namespace: str, memory_id: str, reward: float, times: int) -> None:
    """``times`` episodes that used ``memory_id`` and earned ``reward``."""
    for _ in range(times):
        episode = mem.start_episode(namespace, TASK)
        found = mem.retrieve(namespace, TASK, CFG, episode_id=episode.id, abstain=False)
        assert memory_id in [h.memory.id for h in found.hits]
        mem.finish_episode(namespace, episode.id, reward, used=[memory_id])


def _task(mem: GraphMemory, namespace: str) -> Task:
    tasks = [m for m in mem.store.iter_nodes(namespace, kinds=[MemoryKind.TASK])]
    assert len(tasks) == 1, tasks
    assert isinstance(tasks[0], Task)
    return tasks[0]


def test_nothing_is_withheld_while_nothing_is_known(store: MemoryStore, namespace: str) -> None:
    mem = _memory(store)
    ids = _build(mem, namespace)
    found = mem.retrieve(namespace, TASK, CFG)
    assert sorted(h.memory.id for h in found.hits) == sorted(ids.values())
    assert found.withheld == []
    assert found.baseline_episodes == 0


def test_a_memory_expected_below_the_baseline_is_withheld(
    store: MemoryStore, namespace: str
) -> None:
    mem = _memory(store)
    ids = _build(mem, namespace)
    _play(mem, namespace, ids["good"], 1.0, 4)
    _play(mem, namespace, ids["bad"], 0.0, 4)
    for reward in (1.0, 1.0, 0.0, 1.0):  # the agent alone wins 3 of 4
        mem.report_baseline(namespace, TASK, reward)

    found = mem.retrieve(namespace, TASK, CFG)
    assert found.baseline is not None and found.baseline_episodes == 4
    handed = {h.memory.id: h for h in found.hits}
    held = {h.memory.id: h for h in found.withheld}
    assert ids["good"] in handed and ids["bad"] in held
    assert "below the baseline" in (held[ids["bad"]].withheld or "")
    # Nothing handed over is expected to do worse than acting without memory.
    for hit in found.hits:
        assert hit.expected is not None and hit.expected >= found.baseline
        assert hit.withheld is None
    assert [h.rank for h in found.hits] == list(range(len(found.hits)))
    # Abstention off hands the bad one over, ranked as before.
    plain = mem.retrieve(namespace, TASK, CFG, abstain=False)
    assert ids["bad"] in [h.memory.id for h in plain.hits] and plain.withheld == []


def test_off_by_default_nothing_is_withheld(store: MemoryStore, namespace: str) -> None:
    """With abstention off (the default; the kind choice off too) the bad memory is handed over,
    and finishing an episode that credits nothing writes nothing beyond the credit; reported
    baselines are kept all the same."""
    assert RetrievalConfig().abstain is False and MemoryConfig().retrieval.abstain is False
    mem = _memory(store, abstain=False)
    ids = _build(mem, namespace)
    _play(mem, namespace, ids["bad"], 0.0, 4)
    episode = mem.start_episode(namespace, TASK)
    mem.finish_episode(namespace, episode.id, 1.0)  # credits nothing: no baseline kept
    assert _task(mem, namespace).uses == 0
    for reward in (1.0, 1.0, 0.0, 1.0):
        mem.report_baseline(namespace, TASK, reward)
    found = mem.retrieve(namespace, TASK, mem.config.retrieval)
    assert ids["bad"] in [h.memory.id for h in found.hits]
    assert found.withheld == [] and found.baseline is None
    assert _task(mem, namespace).uses == 4
    assert ids["bad"] in [h.memory.id for h in mem.retrieve(namespace, TASK, CFG).withheld]


def test_a_withheld_memory_is_not_recorded_on_the_episode(
    store: MemoryStore, namespace: str
) -> None:
    mem = _memory(store)
    ids = _build(mem, namespace)
    _play(mem, namespace, ids["bad"], 0.0, 4)
    for _ in range(3):
        mem.report_baseline(namespace, TASK, 1.0)
    found = mem.retrieve(namespace, TASK, CFG, open_episode=True)
    assert ids["bad"] in [h.memory.id for h in found.withheld]
    assert found.episode_id is not None
    report = mem.explain_episode(namespace, found.episode_id)
    assert ids["bad"] not in [o.memory_id for o in report.offered]
    # Credit cannot reach it: the episode was never handed it.
    with pytest.raises(InvalidInput):
        mem.finish_episode(namespace, found.episode_id, 1.0, used=[ids["bad"]])


def test_probe_episodes_teach_the_baseline(store: MemoryStore, namespace: str) -> None:
    mem = _memory(store)
    ids = _build(mem, namespace)
    _play(mem, namespace, ids["good"], 1.0, CFG.probe_after - 1)
    # Too few credited uses to probe, and no no-memory episode to compare with: handed over.
    found = mem.retrieve(namespace, TASK, CFG)
    assert ids["good"] in [h.memory.id for h in found.hits] and found.withheld == []
    _play(mem, namespace, ids["good"], 1.0, 1)  # now memory is being learned here
    probes = CFG.baseline_probes
    for n in range(probes):
        found = mem.retrieve(namespace, TASK, CFG, open_episode=True)
        assert found.hits == [], "a probe hands nothing over"
        assert all((h.withheld or "").startswith("probe") for h in found.withheld)
        assert found.baseline_episodes == n
        assert found.episode_id is not None
        outcome = mem.finish_episode(namespace, found.episode_id, 0.0)
        assert outcome.q_after == {}
    assert _task(mem, namespace).uses == probes
    # The baseline (0.0 without memory, shrunk towards Q0 = 0.5 by one episode's weight) is
    # learned: the good memory is handed over again.
    found = mem.retrieve(namespace, TASK, CFG)
    assert found.baseline_episodes == probes
    assert found.baseline == pytest.approx(0.5 / (probes + 1))
    assert ids["good"] in [h.memory.id for h in found.hits]


def test_one_failure_does_not_hide_a_memory_without_a_baseline(
    store: MemoryStore, namespace: str
) -> None:
    """Retrieve, fail, retrieve: with no episode played without memory there is nothing to
    compare with, so the memory that failed once is still handed over."""
    mem = _memory(store)
    ids = _build(mem, namespace)
    _play(mem, namespace, ids["bad"], 0.0, 1)
    found = mem.retrieve(namespace, TASK, CFG)
    assert ids["bad"] in [h.memory.id for h in found.hits] and found.withheld == []


def test_an_agent_that_hands_nothing_over_still_learns_the_baseline(
    store: MemoryStore, namespace: str
) -> None:
    mem = _memory(store)
    episode = mem.start_episode(namespace, TASK)
    mem.finish_episode(namespace, episode.id, 1.0)
    again = mem.finish_episode(namespace, episode.id, 1.0)  # a retry is replayed, not counted
    assert again.replayed
    task = _task(mem, namespace)
    assert (task.uses, task.successes, task.q_updates) == (1, 1, 1)
    assert task.q == pytest.approx(0.55)
    # An episode that credited a memory is not a no-memory episode.
    ids = _build(mem, namespace)
    _play(mem, namespace, ids["good"], 1.0, 1)
    assert _task(mem, namespace).uses == 1


def test_report_baseline_refuses_bad_input_and_changes_nothing(
    store: MemoryStore, namespace: str
) -> None:
    mem = _memory(store)
    for args in ((TASK, 2.0), ("", 1.0), ("   ", 0.0), (TASK, float("nan"))):
        with pytest.raises(InvalidInput):
            mem.report_baseline(namespace, *args)
    assert list(mem.store.iter_nodes(namespace)) == []


@pytest.mark.slow
def test_the_mcp_client_sees_what_was_withheld_and_why(store: MemoryStore, namespace: str) -> None:
    """Over the MCP SDK's stdio client: search_memory reports the withheld candidate, its
    expectation and the baseline, and only the trusted memory in its hits."""
    from test_mcp_server import _ok, _with_server

    from graphmem.stores.embedded import EmbeddedStore

    mem = _memory(store)
    ids = _build(mem, namespace)
    _play(mem, namespace, ids["good"], 1.0, 4)
    _play(mem, namespace, ids["bad"], 0.0, 4)
    for reward in (1.0, 1.0, 0.0, 1.0):  # the agent alone wins 3 of 4
        mem.report_baseline(namespace, TASK, reward)

    async def body(client: Any) -> None:
        found = _ok(
            await client.call_tool("search_memory", {"query": TASK, "namespace": namespace})
        )
        assert [h["memory_id"] for h in found["hits"]] == [ids["good"]], found
        assert found["hits"][0]["expected"] >= found["baseline"]
        [held] = found["withheld"]
        assert held["memory_id"] == ids["bad"] and "below the baseline" in held["reason"]
        assert held["expected"] < found["baseline"]

    env = {"GRAPHMEM_EMBEDDER": "hashing", "GRAPHMEM_ABSTAIN": "on"}
    if isinstance(store, EmbeddedStore):
        env["GRAPHMEM_STORE"] = str(store.path)
    else:
        for key in ("URI", "USER", "PASSWORD", "DATABASE"):
            if value := os.environ.get(f"GRAPHMEM_NEO4J_{key}"):
                env[f"GRAPHMEM_NEO4J_{key}"] = value
    _with_server(env, body=body)


def test_the_retrieve_flow_reports_what_was_withheld(store: MemoryStore, namespace: str) -> None:
    from graphmem.flows.retrieve import build_retrieve_graph
    from graphmem.flows.state import MemoryContext

    mem = _memory(store)
    ids = _build(mem, namespace)
    _play(mem, namespace, ids["good"], 1.0, 4)
    _play(mem, namespace, ids["bad"], 0.0, 4)
    for reward in (1.0, 1.0, 0.0, 1.0):
        mem.report_baseline(namespace, TASK, reward)
    ctx = MemoryContext(namespace, mem, retrieval=CFG)
    out = build_retrieve_graph().compile().invoke({"query": TASK}, context=ctx)
    assert [h["memory_id"] for h in out["hits"]] == [ids["good"]]
    assert [w["memory_id"] for w in out["withheld"]] == [ids["bad"]]
    assert out["withheld"][0]["reason"] and out["baseline"] is not None
    assert out["hits"][0]["expected"] is not None
    assert out["hits"][0]["expected"] >= out["baseline"] > out["withheld"][0]["expected"]


def test_graphmem_abstain_switches_it_on_for_the_served_surfaces(tmp_path: Any) -> None:
    from graphmem.errors import ConfigError
    from graphmem.settings import Settings

    env = {"GRAPHMEM_STORE": str(tmp_path / "s"), "GRAPHMEM_EMBEDDER": "hashing"}
    for raw, want in (("", False), ("off", False), ("1", True), ("On", True)):
        settings = Settings.from_env({**env, "GRAPHMEM_ABSTAIN": raw})
        assert settings.abstain is want
        mem = settings.open_memory()
        try:
            assert mem.config.retrieval.abstain is want
        finally:
            mem.store.close()
    with pytest.raises(ConfigError, match="GRAPHMEM_ABSTAIN"):
        Settings.from_env({**env, "GRAPHMEM_ABSTAIN": "maybe"})
