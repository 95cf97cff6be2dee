"""Conformance tests of ``finish_episode``: one atomic, idempotent credit per episode."""

from __future__ import annotations

import pytest

from graphmem.errors import EpisodeFinished, InvalidInput, MemoryNotFound
from graphmem.models import Edge, EdgeKind, Episode, EpisodeStatus, utcnow
from graphmem.stores.base import MemoryStore
from graphmem.testing.helpers import note, vec


def _episode_with(store: MemoryStore, namespace: str, dim: int, ids: list[str]) -> str:
    """An open episode that RETRIEVED fresh notes ``ids`` (ranks in list order)."""
    episode = Episode(id="ep", namespace=namespace, task_text="water the basil")
    notes = [note(namespace, i, f"note {i}", vec(dim, k + 1)) for k, i in enumerate(ids)]
    edges = [
        Edge(namespace=namespace, kind=EdgeKind.RETRIEVED, src="ep", dst=i, props={"rank": k})
        for k, i in enumerate(ids)
    ]
    store.upsert([episode, *notes], edges)
    return episode.id


class CreditConformance:
    """Mixed into :class:`StoreConformance`; needs its fixtures."""

    def test_finish_closes_the_episode_and_credits_what_it_retrieved(
        self, store: MemoryStore, namespace: str, dim: int
    ) -> None:
        episode_id = _episode_with(store, namespace, dim, ["b", "a"])
        store.upsert([note(namespace, "other", "not retrieved", vec(dim, 5))])
        at = utcnow()
        credit = store.finish_episode(namespace, episode_id, 1.0, 0.1, success=True, finished_at=at)
        assert not credit.replayed
        assert list(credit.q_after) == ["b", "a"]  # rank order
        assert credit.q_after == pytest.approx({"a": 0.55, "b": 0.55}, abs=1e-12)
        assert [m.id for m in credit.updated] == ["b", "a"]
        episode = store.get(namespace, episode_id)
        assert isinstance(episode, Episode)
        assert episode.status is EpisodeStatus.FINISHED and episode.finished_at == at
        assert (episode.reward, episode.success) == (1.0, True)
        a, other = store.get_many(namespace, ["a", "other"])
        assert (a.q_updates, a.uses, a.successes) == (1, 1, 1)
        assert (other.q, other.uses) == (0.5, 0)
        edges = store.edges(namespace, episode_id, kinds=[EdgeKind.RETRIEVED])
        recorded = {e.dst: (e.props["q_after"], e.props["alpha"]) for e in edges}
        assert sorted(recorded) == ["a", "b"]
        for q_after, alpha in recorded.values():
            assert q_after == pytest.approx(0.55, abs=1e-12) and alpha == 0.1

    def test_finishing_again_with_the_same_reward_replays_and_credits_nothing(
        self, store: MemoryStore, namespace: str, dim: int
    ) -> None:
        episode_id = _episode_with(store, namespace, dim, ["a"])
        first = store.finish_episode(
            namespace, episode_id, 0.0, 0.5, success=False, finished_at=utcnow()
        )
        again = store.finish_episode(
            namespace, episode_id, 0.0, 0.5, success=False, finished_at=utcnow()
        )
        assert again.replayed and again.q_after == first.q_after == {"a": 0.25}
        assert again.episode == store.get(namespace, episode_id) == first.episode
        assert store.get(namespace, "a").uses == 1

    def test_finishing_again_with_another_reward_is_refused(
        self, store: MemoryStore, namespace: str, dim: int
    ) -> None:
        episode_id = _episode_with(store, namespace, dim, ["a"])
        store.finish_episode(namespace, episode_id, 1.0, 0.5, success=True, finished_at=utcnow())
        with pytest.raises(EpisodeFinished, match="different reward"):
            store.finish_episode(
                namespace, episode_id, 0.0, 0.5, success=False, finished_at=utcnow()
            )
        a = store.get(namespace, "a")
        assert (a.q, a.uses) == (0.75, 1)

    def test_finish_refuses_unknown_ids_other_kinds_and_bad_values(
        self, store: MemoryStore, namespace: str, dim: int
    ) -> None:
        episode_id = _episode_with(store, namespace, dim, ["a"])
        now = utcnow()
        with pytest.raises(MemoryNotFound):
            store.finish_episode(namespace, "ghost", 1.0, 0.1, success=True, finished_at=now)
        with pytest.raises(InvalidInput, match="not an Episode"):
            store.finish_episode(namespace, "a", 1.0, 0.1, success=True, finished_at=now)
        with pytest.raises(InvalidInput):
            store.finish_episode(namespace, episode_id, 1.0, 0.0, success=True, finished_at=now)
        with pytest.raises(MemoryNotFound):
            store.finish_episode(
                f"{namespace}-x", episode_id, 1.0, 0.1, success=True, finished_at=now
            )
        episode = store.get(namespace, episode_id)
        assert isinstance(episode, Episode) and episode.status is EpisodeStatus.OPEN
        assert store.get(namespace, "a").uses == 0

    def test_an_episode_that_retrieved_nothing_finishes(
        self, store: MemoryStore, namespace: str, dim: int
    ) -> None:
        episode_id = _episode_with(store, namespace, dim, [])
        credit = store.finish_episode(
            namespace, episode_id, 1.0, 0.1, success=True, finished_at=utcnow()
        )
        assert credit.q_after == {} and credit.updated == []
        assert credit.episode.status is EpisodeStatus.FINISHED
