"""Episodes and credit assignment: RETRIEVED edges, Q ← Q + α(R − Q), finishing once."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

import numpy as np
import pytest

from graphmem import GraphMemory, MemoryConfig
from graphmem.config import RetrievalConfig
from graphmem.errors import InvalidInput, MemoryNotFound, StoreError
from graphmem.models import EdgeKind, Episode, EpisodeStatus, Procedure
from graphmem.ops.episodes import EpisodeFinished, q_history, start_episode
from graphmem.stores.base import MemoryStore
from graphmem.stores.embedded import EmbeddedStore

DIM = 384
QUERY = "the task"


class AxisEmbedder:
    """Every text embeds as the first axis; memories get hand-made vectors."""

    name = "axis"
    dimension = DIM

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        out[:, 0] = 1.0
        return out


def at_sim(s: float, axis: int) -> list[float]:
    v = np.zeros(DIM)
    v[0], v[axis] = s, math.sqrt(1 - s * s)
    return list(v)


def seed_memories(store: MemoryStore, namespace: str, qs: Sequence[float]) -> list[Procedure]:
    """Procedures m0, m1, ... in falling similarity, with the given q values."""
    procs = [
        Procedure(
            namespace=namespace,
            task_text=f"m{i}",
            key=f"m{i}",
            granularity="trajectory",
            embedding=at_sim(0.95 - i / 20, i + 1),
            q=q,
        )
        for i, q in enumerate(qs)
    ]
    store.upsert(procs)
    return procs


def make_memory(store: MemoryStore, **config: object) -> GraphMemory:
    return GraphMemory(store, embedder=AxisEmbedder(), config=MemoryConfig(**config))


def qmap(store: MemoryStore, namespace: str, procs: Sequence[Procedure]) -> dict[str, float]:
    return {m.id: m.q for m in store.get_many(namespace, [p.id for p in procs])}


def test_open_episode_records_exactly_the_hits(namespace: str, store: MemoryStore) -> None:
    seed_memories(store, namespace, [0.5, 0.2, 0.9, 0.5, 0.1, 0.7])
    mem = make_memory(store)
    r = mem.retrieve(namespace, QUERY, k1=5, k2=3, lam=0.5, open_episode=True)
    assert r.episode_id is not None and len(r.hits) == 3

    episode = store.get(namespace, r.episode_id)
    assert isinstance(episode, Episode)
    assert episode.task_text == QUERY and episode.status is EpisodeStatus.OPEN
    assert RetrievalConfig(**json.loads(episode.retrieval_config)) == r.config

    edges = store.edges(namespace, r.episode_id, kinds=[EdgeKind.RETRIEVED], direction="out")
    by_dst = {e.dst: e.props for e in edges}
    assert set(by_dst) == {h.memory.id for h in r.hits}
    for h in r.hits:
        props = by_dst[h.memory.id]
        assert props["rank"] == h.rank
        for name in ("sim", "q", "score"):
            assert props[name] == pytest.approx(getattr(h, name))
    assert store.edges(namespace, r.episode_id, direction="in") == []

    plain = mem.retrieve(namespace, QUERY)
    assert plain.episode_id is None


def test_finish_applies_the_update_to_exactly_the_retrieved(
    namespace: str, store: MemoryStore
) -> None:
    procs = seed_memories(store, namespace, [0.5, 0.2, 0.9, 0.5, 0.1, 0.7])
    mem = make_memory(store, alpha=0.3)
    before = qmap(store, namespace, procs)
    r = mem.retrieve(namespace, QUERY, k1=5, k2=2, lam=0.5, open_episode=True)
    assert r.episode_id is not None
    chosen = {h.memory.id for h in r.hits}

    outcome = mem.finish_episode(namespace, r.episode_id, reward=1.0)

    after = qmap(store, namespace, procs)
    for mid, q in before.items():
        if mid in chosen:
            assert after[mid] == pytest.approx(q + 0.3 * (1.0 - q))
        else:
            assert after[mid] == q
    assert outcome.q == pytest.approx({mid: after[mid] for mid in chosen})
    assert outcome.episode.status is EpisodeStatus.FINISHED
    assert outcome.episode.reward == 1.0 and outcome.episode.success is True
    assert outcome.episode.finished_at is not None
    for m in store.get_many(namespace, [p.id for p in procs]):
        assert (m.uses, m.successes, m.q_updates) == ((1, 1, 1) if m.id in chosen else (0, 0, 0))


def test_alpha_override_and_success_default(namespace: str, store: MemoryStore) -> None:
    (p,) = seed_memories(store, namespace, [0.5])
    mem = make_memory(store, alpha=0.1, success_reward=1.0, failure_reward=-1.0)

    r = mem.retrieve(namespace, QUERY, open_episode=True)
    assert r.episode_id is not None
    out = mem.finish_episode(namespace, r.episode_id, -1.0, alpha=0.5)
    assert out.q[p.id] == pytest.approx(0.5 + 0.5 * (-1.0 - 0.5))
    assert out.episode.success is False

    r = mem.retrieve(namespace, QUERY, open_episode=True)
    assert r.episode_id is not None
    out = mem.finish_episode(namespace, r.episode_id, 0.4, success=True)
    assert out.episode.success is True
    assert store.get(namespace, p.id).successes == 1


def test_finishing_again_replays_the_outcome_and_credits_nothing(
    namespace: str, store: MemoryStore
) -> None:
    procs = seed_memories(store, namespace, [0.5, 0.5])
    mem = make_memory(store)
    r = mem.retrieve(namespace, QUERY, open_episode=True)
    assert r.episode_id is not None
    first = mem.finish_episode(namespace, r.episode_id, 1.0)
    assert not first.replayed and first.q == pytest.approx({p.id: 0.55 for p in procs})
    once = qmap(store, namespace, procs)
    episode = store.get(namespace, r.episode_id)

    again = mem.finish_episode(namespace, r.episode_id, 1.0)  # a retried node, say
    assert again.replayed
    assert again.q == first.q and again.episode == episode
    assert qmap(store, namespace, procs) == once
    assert [m.uses for m in store.get_many(namespace, [p.id for p in procs])] == [1, 1]

    with pytest.raises(EpisodeFinished, match=r"reward 1; a different reward \(0\) is refused"):
        mem.finish_episode(namespace, r.episode_id, 0.0)
    assert qmap(store, namespace, procs) == once
    assert store.get(namespace, r.episode_id) == episode
    with pytest.raises(EpisodeFinished):  # nor can a finished episode record more retrievals
        mem.retrieve(namespace, QUERY, episode_id=r.episode_id)


def test_missing_wrong_kind_and_bad_values_are_refused(namespace: str, store: MemoryStore) -> None:
    procs = seed_memories(store, namespace, [0.5])
    mem = make_memory(store)
    with pytest.raises(MemoryNotFound):
        mem.finish_episode(namespace, "no-such-episode", 1.0)
    with pytest.raises(InvalidInput, match="not an Episode"):
        mem.finish_episode(namespace, procs[0].id, 1.0)
    r = mem.retrieve(namespace, QUERY, open_episode=True)
    assert r.episode_id is not None
    for bad in ({"reward": math.nan}, {"reward": 1.0, "alpha": 0.0}, {"reward": 1.0, "alpha": 2}):
        with pytest.raises(InvalidInput):
            mem.finish_episode(namespace, r.episode_id, **bad)  # type: ignore[arg-type]
    assert store.get(namespace, r.episode_id).status is EpisodeStatus.OPEN
    assert qmap(store, namespace, procs) == {procs[0].id: 0.5}
    with pytest.raises(MemoryNotFound):  # episodes are namespaced like everything else
        mem.finish_episode(f"{namespace}-other", r.episode_id, 1.0)


def test_a_finish_that_fails_midway_changes_nothing_and_the_retry_credits(
    namespace: str, store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    procs = seed_memories(store, namespace, [0.5])
    mem = make_memory(store)
    r = mem.retrieve(namespace, QUERY, open_episode=True)
    assert r.episode_id is not None
    before = store.get(namespace, r.episode_id)

    with monkeypatch.context() as m:
        if isinstance(store, EmbeddedStore):

            def broken(line: bytes) -> None:
                raise StoreError("disk on fire")

            m.setattr(store, "_commit", broken)
        else:  # the last statement of the transaction fails: Neo4j rolls all of it back
            from graphmem.stores.neo4j import cypher

            m.setattr(cypher, "CLOSE_EPISODE", "RETURN 1/0 AS props")
        with pytest.raises(StoreError):
            mem.finish_episode(namespace, r.episode_id, 1.0)
    assert store.get(namespace, r.episode_id) == before
    assert qmap(store, namespace, procs) == {procs[0].id: 0.5}
    out = mem.finish_episode(namespace, r.episode_id, 1.0)  # the retry applies it once
    assert out.q == pytest.approx({procs[0].id: 0.55}) and not out.replayed
    assert store.get(namespace, procs[0].id).uses == 1


def test_a_memory_deleted_after_retrieval_is_simply_not_credited(
    namespace: str, store: MemoryStore
) -> None:
    procs = seed_memories(store, namespace, [0.5, 0.5])
    mem = make_memory(store)
    r = mem.retrieve(namespace, QUERY, open_episode=True)
    assert r.episode_id is not None
    store.delete(namespace, [procs[0].id])
    out = mem.finish_episode(namespace, r.episode_id, 1.0)
    assert out.q == pytest.approx({procs[1].id: 0.55})


def test_started_episode_collects_several_retrievals(namespace: str, store: MemoryStore) -> None:
    procs = seed_memories(store, namespace, [0.5] * 6)
    mem = make_memory(store)
    episode = mem.start_episode(namespace, "a long task")
    a = mem.retrieve(namespace, QUERY, k1=2, k2=2, episode_id=episode.id)
    b = mem.retrieve(namespace, QUERY, k1=6, k2=6, lam=0, episode_id=episode.id)
    assert a.episode_id == b.episode_id == episode.id
    retrieved = {h.memory.id for h in a.hits} | {h.memory.id for h in b.hits}
    assert len(retrieved) == 6

    out = mem.finish_episode(namespace, episode.id, 0.0)
    assert set(out.q) == retrieved  # each memory credited once, however often retrieved
    assert all(q == pytest.approx(0.45) for q in out.q.values())
    assert out.episode.task_text == "a long task"
    assert {p.id for p in procs} == retrieved
    with pytest.raises(MemoryNotFound):
        mem.retrieve(namespace, QUERY, episode_id="nope")
    fresh = start_episode(mem, namespace, "another task")
    assert store.get(namespace, fresh.id).status is EpisodeStatus.OPEN


def test_empty_retrieval_still_opens_an_episode(namespace: str, store: MemoryStore) -> None:
    mem = make_memory(store)
    r = mem.retrieve(namespace, QUERY, open_episode=True)
    assert r.hits == [] and r.episode_id is not None
    out = mem.finish_episode(namespace, r.episode_id, 1.0)
    assert out.updated == [] and out.episode.status is EpisodeStatus.FINISHED


def test_q_history_lists_the_episodes_that_moved_q(namespace: str, store: MemoryStore) -> None:
    (p, other) = seed_memories(store, namespace, [0.5, 0.5])
    mem = make_memory(store, alpha=0.5)
    rewards = [1.0, 0.0, 1.0]
    for reward in rewards:
        r = mem.retrieve(namespace, QUERY, k1=1, k2=1, open_episode=True)
        assert r.episode_id is not None and r.hits[0].memory.id == p.id
        mem.finish_episode(namespace, r.episode_id, reward)
    mem.retrieve(namespace, QUERY, k1=1, k2=1, open_episode=True)  # open: moved nothing yet

    history = q_history(mem, namespace, p.id)
    assert [c.reward for c in history] == rewards
    expected_q = 0.5
    for change, reward in zip(history, rewards, strict=True):
        assert change.q_at_retrieval == pytest.approx(expected_q)
        expected_q += 0.5 * (reward - expected_q)
        assert change.q_after == pytest.approx(expected_q)
        assert change.rank == 0 and change.alpha == 0.5
    assert [c.finished_at for c in history] == sorted(c.finished_at for c in history)
    assert store.get(namespace, p.id).q == pytest.approx(expected_q)
    assert mem.q_history(namespace, other.id) == []
    with pytest.raises(MemoryNotFound):
        q_history(mem, namespace, "missing")
