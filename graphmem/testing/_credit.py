"""Conformance tests of ``finish_episode``: one atomic, idempotent credit per episode."""

from __future__ import annotations

from typing import Any

import pytest

from graphmem.errors import EpisodeFinished, InvalidInput, MemoryNotFound
from graphmem.models import CreditPolicy, Edge, EdgeKind, Episode, EpisodeStatus, utcnow
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


RETRIEVED = EdgeKind.RETRIEVED


def credit_rule(q: float, reward: float, alpha: float) -> float:
    """The credit rule every store writes in its own language: ``Q ← Q + α(R − Q)``."""
    return q + alpha * (reward - q)


CREDIT_RULE_CASES: tuple[tuple[float, float, float], ...] = (
    (0.5, 1.0, 0.1),  # (Q, R, α): a success moves Q a tenth of the way up
    (0.5, 0.0, 0.1),
    (0.5, 0.5, 0.3),  # R = Q: no move
    (0.2, 1.0, 1.0),  # α = 1: Q becomes R
    (-1.0, 1.0, 0.5),
    (0.9, -1.0, 0.25),
    (0.1 + 0.2, 0.7, 0.3),  # floats that do not add up exactly: the same rounding
    (1e-300, 1.0, 1e-300),
    (-7.5, 10.0, 0.999),
)
"""Cases of :func:`credit_rule`: a store's rule must give exactly (to the last bit) its Q."""


class CreditConformance:
    """Mixed into :class:`StoreConformance`; needs its fixtures."""

    @pytest.mark.parametrize(("q", "reward", "alpha"), CREDIT_RULE_CASES)
    def test_the_credit_rule(
        self, store: MemoryStore, namespace: str, dim: int, q: float, reward: float, alpha: float
    ) -> None:
        """One spec, every store: each writes ``Q ← Q + α(R − Q)`` once (the embedded store
        in Python, Neo4j in Cypher); both give :func:`credit_rule`'s Q, bit for bit, on the
        utility update and on an episode's finish alike."""
        a, b = (
            note(namespace, i, "credited", vec(dim, 1)).model_copy(update={"q": q}) for i in "ab"
        )
        episode = Episode(id="ep", namespace=namespace, task_text="water the basil")
        offered = Edge(namespace=namespace, kind=RETRIEVED, src="ep", dst="b", props={"rank": 0})
        store.upsert([a, b, episode], [offered])
        (updated,) = store.update_utility(namespace, ["a"], reward, alpha, success=True)
        assert updated.q == credit_rule(q, reward, alpha)
        assert (updated.q_updates, updated.uses, updated.successes) == (1, 1, 1)
        credit = store.finish_episode(
            namespace, "ep", reward, alpha, success=False, finished_at=utcnow()
        )
        assert credit.q_after == {"b": credit_rule(q, reward, alpha)}
        assert store.get(namespace, "b").q == credit_rule(q, reward, alpha)

    def test_the_credit_rule_never_writes_a_non_finite_q(
        self, store: MemoryStore, namespace: str, dim: int
    ) -> None:
        memory = note(namespace, "a", "credited", vec(dim, 1)).model_copy(update={"q": -1e308})
        store.upsert([memory])
        with pytest.raises(InvalidInput, match="non-finite"):
            store.update_utility(namespace, ["a"], 1e308, 1.0)
        assert (store.get(namespace, "a").q, store.get(namespace, "a").uses) == (-1e308, 0)

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


class UsedCreditConformance:
    """Offered vs used: marks on RETRIEVED edges and the ``used`` credit policy."""

    def test_finish_with_used_marks_them_and_credits_only_them(
        self, store: MemoryStore, namespace: str, dim: int
    ) -> None:
        episode_id = _episode_with(store, namespace, dim, ["a", "b", "c"])
        credit = store.finish_episode(
            namespace,
            episode_id,
            1.0,
            0.1,
            success=True,
            finished_at=utcnow(),
            used=["b"],
            credit=CreditPolicy.USED,
        )
        assert credit.q_after == pytest.approx({"b": 0.55}, abs=1e-12)
        assert [m.id for m in credit.updated] == ["b"]
        a, b, c = store.get_many(namespace, ["a", "b", "c"])
        assert (a.q, a.uses, b.uses, c.q, c.uses) == (0.5, 0, 1, 0.5, 0)
        episode = store.get(namespace, episode_id)
        assert isinstance(episode, Episode) and episode.credit is CreditPolicy.USED
        props = {e.dst: e.props for e in store.edges(namespace, episode_id, kinds=[RETRIEVED])}
        assert sorted(props) == ["a", "b", "c"]  # what it was offered stays recorded
        assert props["b"]["used"] is True and props["b"]["q_after"] == pytest.approx(0.55)
        for unused in ("a", "c"):
            assert "used" not in props[unused] and "q_after" not in props[unused]
            assert props[unused]["rank"] == {"a": 0, "c": 2}[unused]

    def test_mark_used_then_finish_by_use_credits_the_marked(
        self, store: MemoryStore, namespace: str, dim: int
    ) -> None:
        episode_id = _episode_with(store, namespace, dim, ["a", "b", "c"])
        assert store.mark_used(namespace, episode_id, ["c", "a"]) == ["a", "c"]  # rank order
        assert store.mark_used(namespace, episode_id, ["a"]) == ["a", "c"]  # again: no-op
        episode = store.get(namespace, episode_id)
        assert isinstance(episode, Episode) and episode.status is EpisodeStatus.OPEN
        credit = store.finish_episode(
            namespace,
            episode_id,
            0.0,
            0.5,
            success=False,
            finished_at=utcnow(),
            credit=CreditPolicy.USED,
        )
        assert credit.q_after == {"a": 0.25, "c": 0.25}
        assert store.get(namespace, "b").uses == 0

    def test_offered_credit_credits_everything_and_keeps_the_marks(
        self, store: MemoryStore, namespace: str, dim: int
    ) -> None:
        episode_id = _episode_with(store, namespace, dim, ["a", "b"])
        credit = store.finish_episode(
            namespace, episode_id, 1.0, 0.5, success=True, finished_at=utcnow(), used=["a"]
        )
        assert credit.q_after == {"a": 0.75, "b": 0.75}
        edges = store.edges(namespace, episode_id, kinds=[RETRIEVED])
        assert {e.dst: e.props.get("used") for e in edges} == {"a": True, "b": None}
        episode = store.get(namespace, episode_id)
        assert isinstance(episode, Episode) and episode.credit is CreditPolicy.OFFERED

    def test_used_credit_with_nothing_marked_credits_nothing(
        self, store: MemoryStore, namespace: str, dim: int
    ) -> None:
        episode_id = _episode_with(store, namespace, dim, ["a"])
        credit = store.finish_episode(
            namespace,
            episode_id,
            1.0,
            0.1,
            success=True,
            finished_at=utcnow(),
            credit=CreditPolicy.USED,
        )
        assert credit.q_after == {} and credit.episode.status is EpisodeStatus.FINISHED
        assert store.get(namespace, "a").uses == 0

    def test_marking_a_memory_not_offered_is_refused_and_changes_nothing(
        self, store: MemoryStore, namespace: str, dim: int
    ) -> None:
        episode_id = _episode_with(store, namespace, dim, ["a"])
        store.upsert([note(namespace, "other", "not offered", vec(dim, 5))])
        with pytest.raises(InvalidInput, match="not offered 'other'"):
            store.mark_used(namespace, episode_id, ["a", "other"])
        with pytest.raises(InvalidInput, match="not offered 'ghost'"):
            store.finish_episode(
                namespace,
                episode_id,
                1.0,
                0.1,
                success=True,
                finished_at=utcnow(),
                used=["a", "ghost"],
                credit=CreditPolicy.USED,
            )
        with pytest.raises(InvalidInput, match="not one string"):
            store.mark_used(namespace, episode_id, "a")
        with pytest.raises(MemoryNotFound):
            store.mark_used(namespace, "ghost", ["a"])
        with pytest.raises(InvalidInput, match="not an Episode"):
            store.mark_used(namespace, "a", ["a"])
        episode = store.get(namespace, episode_id)
        assert isinstance(episode, Episode) and episode.status is EpisodeStatus.OPEN
        edges = store.edges(namespace, episode_id, kinds=[RETRIEVED])
        assert [e.props.get("used") for e in edges] == [None]
        assert (store.get(namespace, "a").uses, store.get(namespace, "other").uses) == (0, 0)

    def test_a_finish_by_use_is_credited_once(
        self, store: MemoryStore, namespace: str, dim: int
    ) -> None:
        episode_id = _episode_with(store, namespace, dim, ["a", "b", "c"])
        store.mark_used(namespace, episode_id, ["c"])

        def finish(used: list[str] | None, credit: CreditPolicy, reward: float = 1.0) -> Any:
            return store.finish_episode(
                namespace,
                episode_id,
                reward,
                0.5,
                success=True,
                finished_at=utcnow(),
                used=used,
                credit=credit,
            )

        first = finish(["a"], CreditPolicy.USED)
        assert not first.replayed and first.q_after == {"a": 0.75, "c": 0.75}
        for used in (["a"], ["c", "a"], None, []):  # the same finish again, or a subset of it
            again = finish(used, CreditPolicy.USED)
            assert again.replayed and again.q_after == first.q_after
        with pytest.raises(EpisodeFinished, match="marking 'b' used now is refused"):
            finish(["a", "b"], CreditPolicy.USED)
        with pytest.raises(EpisodeFinished, match="crediting the offered ones is refused"):
            finish(["a"], CreditPolicy.OFFERED)
        with pytest.raises(EpisodeFinished, match="different reward"):
            finish(["a"], CreditPolicy.USED, reward=0.0)
        assert store.mark_used(namespace, episode_id, ["a"]) == ["a", "c"]  # marked: no-op
        with pytest.raises(EpisodeFinished, match="marking 'b' used now is refused"):
            store.mark_used(namespace, episode_id, ["b"])
        a, b, c = store.get_many(namespace, ["a", "b", "c"])
        assert (a.uses, b.uses, c.uses) == (1, 0, 1) and (a.q, b.q) == (0.75, 0.5)
        edges = store.edges(namespace, episode_id, kinds=[RETRIEVED])
        assert {e.dst: e.props.get("used") for e in edges} == {"a": True, "b": None, "c": True}
