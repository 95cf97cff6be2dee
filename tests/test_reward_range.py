"""Values that break learning (issue 14): rewards and Q bounded by the reward range, ranking
that never overflows whatever Q is stored, demotion that follows Q0 and the rewards, never
retires the best procedure of a task, and can be undone. Both stores where a store is used."""

from __future__ import annotations

import io
import itertools
import logging
import math
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graphmem import GraphMemory, HashingEmbedder
from graphmem.config import MemoryConfig, ObsolescenceConfig, RetrievalConfig
from graphmem.errors import InvalidInput
from graphmem.integrations.langchain_tools import MemoryToolkit
from graphmem.models import Episode, EpisodeStatus, Note, Procedure
from graphmem.ops.obsolescence import demote, supersede
from graphmem.ops.retrieve import rank_candidates, zscores
from graphmem.stores.base import MemoryStore
from graphmem.stores.embedded import EmbeddedStore

HOSTILE = [1e156, -1e156, 1e300, float("nan"), float("inf"), -float("inf"), 1.5, -1.0001]


def traj(task: str, success: bool, action: str) -> dict[str, Any]:
    return {"task": task, "success": success, "steps": [{"action": action}]}


def export(store: MemoryStore, namespace: str) -> str:
    out = io.StringIO()
    store.export_jsonl(out, namespace)
    return out.getvalue()


@pytest.fixture
def mem(store: MemoryStore, embedder: HashingEmbedder) -> GraphMemory:
    return GraphMemory(store, embedder=embedder)


# ---- rewards and Q stay in the reward range --------------------------------------------------


@pytest.mark.parametrize("reward", HOSTILE)
def test_a_reward_outside_the_range_is_refused_and_changes_nothing(
    mem: GraphMemory, namespace: str, reward: float
) -> None:
    mem.add_note(namespace, "The boiler switch is in the hall cupboard.")
    r = mem.retrieve(namespace, "where is the boiler switch?", kinds=("Note",), open_episode=True)
    assert r.episode_id is not None and r.hits
    before = export(mem.store, namespace)
    with pytest.raises(InvalidInput, match=r"outside the reward range \[-1, 1\]"):
        mem.finish_episode(namespace, r.episode_id, reward)
    assert export(mem.store, namespace) == before
    mem.finish_episode(namespace, r.episode_id, 1.0)  # the episode is still open
    assert mem.get(namespace, r.hits[0].memory.id).q == pytest.approx(0.55)


@pytest.mark.parametrize("reward", [1e308, -1e308, 1.5, -2.0])
def test_build_refuses_a_trajectory_reward_outside_the_range(
    mem: GraphMemory, namespace: str, reward: float
) -> None:
    """Issue 30: build() took reward=1e308 and showed it in the agent's prompt."""
    before = export(mem.store, namespace)
    with pytest.raises(InvalidInput, match=r"outside the reward range \[-1, 1\]"):
        mem.build(namespace, traj("boil water", True, "turn on kettle") | {"reward": reward})
    assert export(mem.store, namespace) == before
    built = mem.build(namespace, traj("boil water", True, "turn on kettle") | {"reward": 1.0})
    assert built.procedure.reward == 1.0


@pytest.mark.parametrize("q", [1e300, -1e300, float("nan"), float("inf"), 1.01, "0.5", True])
def test_add_note_refuses_a_q_outside_the_range(mem: GraphMemory, namespace: str, q: Any) -> None:
    with pytest.raises(InvalidInput, match="q"):
        mem.add_note(namespace, "The gate code is 4711.", q=q)
    assert mem.store.counts(namespace).get("Note", 0) == 0
    assert mem.add_note(namespace, "The gate code is 4711.", q=-0.5).q == -0.5


def test_the_range_is_configurable() -> None:
    unit = MemoryConfig(reward_min=0.0, reward_max=1.0)
    assert unit.check_reward(1.0) == 1.0
    with pytest.raises(InvalidInput, match=r"\[0, 1\]"):
        unit.check_reward(-1.0)


# ---- ranking never overflows -------------------------------------------------------------------


def _note(namespace: str, mem: GraphMemory, text: str, q: float) -> Note:
    note = Note(namespace=namespace, content=text, q=q)
    note.embedding = mem.embed(note.embed_text())
    return note


def test_retrieval_ranks_whatever_q_a_store_holds(mem: GraphMemory, namespace: str) -> None:
    """Q written past the config (a raw upsert, as an import or a hand edit can) ranks
    without OverflowError, finite in every score part."""
    qs = [1e300, -1e300, 1.7e308, 0.5, 5e-324]
    notes = [_note(namespace, mem, f"The red key {i} opens the shed.", q) for i, q in enumerate(qs)]
    mem.store.upsert(notes)
    assert sorted(m.q for m in mem.store.iter_nodes(namespace)) == sorted(qs)
    for lam in (0.0, 0.5, 1.0):
        r = mem.retrieve(
            namespace, "which key opens the shed?", kinds=("Note",), k1=5, k2=5, lam=lam
        )
        assert len(r.hits) == 5
        for h in r.hits:
            assert all(math.isfinite(v) for v in (h.z_sim, h.z_q, h.score))
        if lam == 1.0:
            assert [h.q for h in r.hits][:2] == [1.7e308, 1e300]
            assert r.hits[-1].q == -1e300


finite_or_not = st.floats(allow_nan=True, allow_infinity=True)


@given(st.lists(finite_or_not, min_size=1, max_size=20))
def test_zscores_never_overflow_nor_give_nan(values: list[float]) -> None:
    z = zscores(values)
    assert len(z) == len(values) and all(math.isfinite(v) for v in z)
    assert all(abs(v) <= math.sqrt(len(values)) + 1e-9 for v in z)
    finite = [(v, zv) for v, zv in zip(values, z, strict=True) if math.isfinite(v)]
    for (a, za), (b, zb) in itertools.pairwise(finite):
        if a < b:
            assert za <= zb + 1e-9  # order kept (ties allowed where scaling merges values)


@given(
    st.lists(
        st.tuples(st.floats(allow_nan=False, allow_infinity=False), st.floats(-1.0, 1.0)),
        min_size=1,
        max_size=12,
    ),
    st.sampled_from([0.0, 0.5, 1.0]),
)
def test_rank_candidates_never_raises(pool: list[tuple[float, float]], lam: float) -> None:
    cands = [
        (Procedure(namespace="p", task_text=f"t{i}", key=f"t{i}", granularity="script", q=q), sim)
        for i, (q, sim) in enumerate(pool)
    ]
    hits = rank_candidates(cands, lam, len(cands))
    assert sorted(h.memory.id for h in hits) == sorted(m.id for m, _ in cands)
    assert all(math.isfinite(h.score) for h in hits)
    # best first, up to the rounding (SCORE_DECIMALS) below which sim breaks the tie
    assert all(a.score >= b.score - 1e-8 for a, b in itertools.pairwise(hits))


# ---- the agent tool ------------------------------------------------------------------------------


@pytest.mark.parametrize("reward", [1e156, float("nan"), 2.0, "1e400", "lots"])
def test_report_outcome_answers_a_hostile_reward_with_a_message(
    mem: GraphMemory, namespace: str, reward: Any
) -> None:
    mem.add_note(namespace, "The spare bulbs are in the garage.")
    kit = MemoryToolkit(mem, namespace)
    search, _, report = kit.tools
    assert "spare bulbs" in search.invoke({"query": "where are the spare bulbs?"})
    episode_id = kit.episode_id
    assert episode_id is not None
    before = export(mem.store, namespace)

    reply = report.invoke({"success": True, "reward": reward})

    assert isinstance(reply, str)
    assert "reward" in reply and ("between -1 and 1" in reply or "Invalid arguments" in reply)
    assert export(mem.store, namespace) == before
    episode = mem.get(namespace, episode_id)
    assert isinstance(episode, Episode) and episode.status is EpisodeStatus.OPEN
    assert report.invoke({"success": True, "reward": 1.0}).startswith(f"Episode {episode_id}")


def test_report_outcome_tells_the_model_the_range() -> None:
    config = MemoryConfig(reward_min=0.0, reward_max=10.0)
    mem = GraphMemory(EmbeddedStore.in_memory(), embedder=HashingEmbedder(), config=config)
    report = MemoryToolkit(mem, "ns").tools[2]
    assert "from 0 to 10" in report.args["reward"]["description"]


# ---- demotion follows Q0 and the rewards -------------------------------------------------------


@pytest.mark.parametrize(
    ("q0", "failure", "expected"),
    [(0.5, 0.0, 0.25), (0.0, -1.0, -0.5), (0.5, -1.0, -0.25), (0.0, 0.0, -0.5), (-1.0, -1.0, -1.0)],
)
def test_the_threshold_follows_q0_and_the_failure_reward(
    q0: float, failure: float, expected: float
) -> None:
    config = MemoryConfig(q0=q0, failure_reward=failure)
    assert ObsolescenceConfig().threshold(config) == pytest.approx(expected)
    assert ObsolescenceConfig(q_below=0.1).threshold(config) == 0.1


def _stream(
    mem: GraphMemory, namespace: str, *, tasks: int = 10, stale: int = 2, episodes: int = 200
) -> tuple[list[str], dict[int, str]]:
    """The issue's scenario in miniature: per task one good procedure and stale look-alikes;
    an episode succeeds when the top hit is the task's good procedure; rewards the config's
    success/failure; update() after each episode demotes."""
    cfg = mem.config
    rng = random.Random(7)
    texts = [f"chore {t}: tidy room number {t} of the house" for t in range(tasks)]
    good: dict[int, str] = {}
    for t, text in enumerate(texts):
        for v in range(stale + 1):
            action = f"good way {t}" if v == 0 else f"stale way {t}.{v}"
            built = mem.build(namespace, traj(text, True, action))
            if v == 0:
                good[t] = built.procedure.id
    retrieval = RetrievalConfig(k1=5, k2=1, lam=0.5)
    for _ in range(episodes):
        t = rng.randrange(tasks)
        r = mem.retrieve(namespace, texts[t], retrieval, open_episode=True)
        assert r.episode_id is not None
        ok = bool(r.hits) and r.hits[0].memory.id == good[t]
        reward = cfg.success_reward if ok else cfg.failure_reward
        mem.finish_episode(namespace, r.episode_id, reward, success=ok)
        trajectory = {"task": texts[t], "success": ok, "steps": [{"action": f"good way {t}"}]}
        mem.update(namespace, trajectory, strategy="validation", episode_id=r.episode_id)
    return texts, good


def _check_stream(mem: GraphMemory, namespace: str) -> None:
    texts, good = _stream(mem, namespace)
    assert all(not mem.get(namespace, g).obsolete for g in good.values())
    for text in texts:
        assert mem.retrieve(namespace, text, k2=1).hits


@pytest.mark.slow
def test_pm1_rewards_with_q0_zero_do_not_demote_good_memories(
    store: MemoryStore, embedder: HashingEmbedder, namespace: str
) -> None:
    """±1 rewards with Q0 = 0 (what the README suggests): 30 memories, 200 episodes. The
    fixed q_below=0.25 lay above Q0 and demoted good procedures; retrieval could go empty."""
    config = MemoryConfig(q0=0.0, failure_reward=-1.0)
    _check_stream(GraphMemory(store, embedder=embedder, config=config), namespace)


@pytest.mark.slow
@pytest.mark.parametrize(("q0", "failure"), [(0.5, -1.0), (0.5, 0.0)])
def test_other_reward_scales_do_not_demote_good_memories(
    embedder: HashingEmbedder, namespace: str, q0: float, failure: float
) -> None:
    """The same stream with ±1 rewards and Q0 = 0.5, and with the default {0, 1} and Q0 = 0.5
    (one store is enough: the store-level behaviour is covered above)."""
    config = MemoryConfig(q0=q0, failure_reward=failure)
    mem = GraphMemory(EmbeddedStore.in_memory(), embedder=embedder, config=config)
    _check_stream(mem, namespace)


# ---- the best procedure of a task stays, with a warning ---------------------------------------


def _used(mem: GraphMemory, namespace: str, ids: list[str], reward: float, times: int) -> None:
    for _ in range(times):
        mem.store.update_utility(namespace, ids, reward, mem.config.alpha)


def test_the_last_live_procedure_of_a_task_is_kept_with_a_warning(
    mem: GraphMemory, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    task = "water the plants on the balcony"
    only = mem.build(namespace, traj(task, False, "look")).procedure
    _used(mem, namespace, [only.id], 0.0, 8)  # q 0.5 → 0.215, below 0.25 after 8 uses
    with caplog.at_level(logging.WARNING, logger="graphmem.ops.obsolescence"):
        assert demote(mem, namespace, [only.id]) == []
    assert not mem.get(namespace, only.id).obsolete
    assert any("last live procedure" in r.message and only.id in r.message for r in caplog.records)
    assert [h.memory.id for h in mem.retrieve(namespace, task).hits] == [only.id]


def test_of_two_failing_procedures_the_worse_goes_and_the_better_stays(
    mem: GraphMemory, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    task = "feed the cat at noon"
    worse = mem.build(namespace, traj(task, False, "wait")).procedure
    better = mem.build(namespace, traj(task, True, "open tin")).procedure
    _used(mem, namespace, [worse.id, better.id], 0.0, 8)
    _used(mem, namespace, [worse.id], 0.0, 2)
    with caplog.at_level(logging.INFO, logger="graphmem.ops.obsolescence"):
        out = demote(mem, namespace)
    assert [d.memory_id for d in out] == [worse.id]
    assert "after 10 uses" in out[0].reason
    assert any(r.levelno == logging.INFO and worse.id in r.message for r in caplog.records)
    assert any(
        # "best of 2" or, once the worse is gone, "last": the order of the scan decides
        r.levelno == logging.WARNING and "not demoting" in r.message and better.id in r.message
        for r in caplog.records
    )
    assert not mem.get(namespace, better.id).obsolete


def test_update_returns_and_logs_what_it_demoted(
    mem: GraphMemory, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    task = "lock the back door"
    bad = mem.build(namespace, traj(task, False, "push")).procedure
    good = mem.build(namespace, traj(task, True, "turn key")).procedure
    _used(mem, namespace, [bad.id], 0.0, 7)
    _used(mem, namespace, [good.id], 1.0, 3)
    # Both handed over (the kind choice would make this episode a probe that hands none over).
    episode = mem.retrieve(namespace, task, open_episode=True, choose_kinds=False).episode_id
    assert episode is not None
    mem.finish_episode(namespace, episode, 0.0)
    with caplog.at_level(logging.INFO):
        out = mem.update(namespace, traj(task, False, "push"), episode_id=episode)
    assert out.demoted_ids == [bad.id]
    assert any(bad.id in r.message and "demoted" in r.message for r in caplog.records)


# ---- restore -----------------------------------------------------------------------------------


def test_restore_undoes_a_demotion(mem: GraphMemory, namespace: str) -> None:
    note = mem.add_note(namespace, "The recycling goes out on Thursday.")
    _used(mem, namespace, [note.id], 0.0, 8)
    before = mem.get(namespace, note.id)
    assert [d.memory_id for d in demote(mem, namespace)] == [note.id]
    assert mem.retrieve(namespace, "when does recycling go out?", kinds=("Note",)).hits == []

    restored = mem.restore(namespace, note.id)

    assert not restored.obsolete and restored.obsolete_reason is None
    assert (restored.q, restored.uses, restored.version) == (before.q, before.uses, 1)
    hits = mem.retrieve(namespace, "when does recycling go out?", kinds=("Note",)).hits
    assert [h.memory.id for h in hits] == [note.id]
    assert mem.restore(namespace, note.id).obsolete is False  # live: nothing to undo


def test_restore_refuses_a_superseded_memory(mem: GraphMemory, namespace: str) -> None:
    old = mem.add_note(namespace, "The bins are collected on Monday.")
    new = mem.add_note(namespace, "The bins are collected on Tuesday.")
    supersede(mem, namespace, new.id, old.id)
    with pytest.raises(InvalidInput, match="superseded"):
        mem.restore(namespace, old.id)
    assert mem.get(namespace, old.id).obsolete


def test_graphmem_restore_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from graphmem.cli import main

    monkeypatch.setenv("GRAPHMEM_STORE", str(tmp_path / "store"))
    monkeypatch.delenv("GRAPHMEM_NEO4J_URI", raising=False)
    with GraphMemory(EmbeddedStore.open(tmp_path / "store"), embedder=HashingEmbedder()) as mem:
        note = mem.add_note("cli", "The fuse box is behind the coats.")
        _used(mem, "cli", [note.id], 0.0, 8)
        assert [d.memory_id for d in demote(mem, "cli")] == [note.id]

    assert main(["restore", "cli", note.id]) == 0
    assert f"{note.id}: restored (was: low utility" in capsys.readouterr().out
    assert main(["restore", "cli", "nosuchid"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("graphmem: error:")
    with EmbeddedStore.open(tmp_path / "store") as store:
        assert not store.get("cli", note.id).obsolete
