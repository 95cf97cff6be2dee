"""Credit by use through the public API, with a policy a user writes (no showcase):
the Episode records every memory offered, the agent says what it used, and only that is
credited. Runs on the embedded store, and on Neo4j when ``GRAPHMEM_NEO4J_URI`` is set."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from graphmem import (
    CreditPolicy,
    EdgeKind,
    Episode,
    GraphMemory,
    HashingEmbedder,
    Hit,
    InvalidInput,
    MemoryConfig,
    MemoryKind,
    Note,
    RetrievalConfig,
)
from graphmem.stores.base import MemoryStore

NOTES = {
    "kettle": "Tea: the kettle sits on the kitchen stove.",
    "leaves": "Tea: the tea leaves are in the blue tin.",
    "cat": "Tea time: the cat sleeps on the sofa.",
}
ALL_NOTES = RetrievalConfig(k1=5, k2=5, lam=0.0, kinds=(MemoryKind.NOTE,), floor=-1.0)


class TeaMaker:
    """A user's own agent: it acts on the memories that mention a thing it needs for tea."""

    needs = ("kettle", "leaves")

    def act(self, hits: Sequence[Hit]) -> list[str]:
        """The ids of the memories it acted on."""
        return [
            h.memory.id
            for h in hits
            if isinstance(h.memory, Note) and any(n in h.memory.content for n in self.needs)
        ]


def _memory(store: MemoryStore, config: MemoryConfig | None = None) -> GraphMemory:
    return GraphMemory(store, embedder=HashingEmbedder(), config=config)


def _seed(mem: GraphMemory, namespace: str) -> dict[str, str]:
    """The three notes; returns name → id."""
    return {name: mem.add_note(namespace, text).id for name, text in NOTES.items()}


def test_a_users_agent_is_credited_for_what_it_used(store: MemoryStore, namespace: str) -> None:
    mem = _memory(store)
    ids = _seed(mem, namespace)
    agent = TeaMaker()
    for game in range(1, 4):
        found = mem.retrieve(namespace, "make a cup of tea", ALL_NOTES, open_episode=True)
        assert {h.memory.id for h in found.hits} == set(ids.values())  # all three offered
        used = agent.act(found.hits)
        assert sorted(used) == sorted([ids["kettle"], ids["leaves"]])
        assert found.episode_id is not None
        outcome = mem.finish_episode(namespace, found.episode_id, 1.0, used=used)
        assert set(outcome.q) == set(used) and not outcome.replayed
        assert outcome.episode.credit is CreditPolicy.USED
        # The Episode still records all it was handed: RETRIEVED for each, used marked.
        edges = store.edges(namespace, found.episode_id, kinds=[EdgeKind.RETRIEVED])
        assert {e.dst: e.props.get("used") is True for e in edges} == {
            ids["kettle"]: True,
            ids["leaves"]: True,
            ids["cat"]: False,
        }
        kettle, cat = mem.get(namespace, ids["kettle"]), mem.get(namespace, ids["cat"])
        assert kettle.uses == game and kettle.q == pytest.approx(1 - 0.5 * 0.9**game)
        assert (cat.uses, cat.q) == (0, 0.5)
    assert len(mem.q_history(namespace, ids["leaves"])) == 3
    assert mem.q_history(namespace, ids["cat"]) == []  # offered three times, never credited


def test_mark_used_during_the_task_with_used_credit_in_the_config(
    store: MemoryStore, namespace: str
) -> None:
    mem = _memory(store, MemoryConfig(credit=CreditPolicy.USED))
    ids = _seed(mem, namespace)
    episode = mem.start_episode(namespace, "make tea")
    first = mem.retrieve(namespace, "where is the kettle?", ALL_NOTES, episode_id=episode.id)
    assert mem.mark_used(namespace, episode.id, [ids["kettle"]]) == [ids["kettle"]]
    mem.retrieve(namespace, "where are the tea leaves?", ALL_NOTES, episode_id=episode.id)
    mem.mark_used(namespace, episode.id, [ids["leaves"]])
    assert len(first.hits) == 3
    outcome = mem.finish_episode(namespace, episode.id, 0.0)  # the config says: credit by use
    assert outcome.q == {ids["kettle"]: pytest.approx(0.45), ids["leaves"]: pytest.approx(0.45)}
    assert mem.get(namespace, ids["cat"]).uses == 0
    again = mem.finish_episode(namespace, episode.id, 0.0, used=[ids["leaves"]])
    assert again.replayed and again.q == outcome.q


def test_the_default_still_credits_everything_offered(store: MemoryStore, namespace: str) -> None:
    mem = _memory(store)
    ids = _seed(mem, namespace)
    found = mem.retrieve(namespace, "make a cup of tea", ALL_NOTES, open_episode=True)
    assert found.episode_id is not None
    outcome = mem.finish_episode(namespace, found.episode_id, 1.0)
    assert set(outcome.q) == set(ids.values())
    episode = mem.get(namespace, found.episode_id)
    assert isinstance(episode, Episode) and episode.credit is CreditPolicy.OFFERED


def test_using_a_memory_not_offered_is_refused_and_changes_nothing(
    store: MemoryStore, namespace: str
) -> None:
    mem = _memory(store)
    ids = _seed(mem, namespace)
    only_kettle = ALL_NOTES.model_copy(update={"k2": 1})
    found = mem.retrieve(namespace, "kettle stove", only_kettle, open_episode=True)
    assert found.episode_id is not None and len(found.hits) == 1
    offered = found.hits[0].memory.id
    stranger = next(i for i in ids.values() if i != offered)
    with pytest.raises(InvalidInput, match="was not offered"):
        mem.finish_episode(namespace, found.episode_id, 1.0, used=[offered, stranger])
    with pytest.raises(InvalidInput, match="was not offered"):
        mem.mark_used(namespace, found.episode_id, [stranger])
    with pytest.raises(InvalidInput, match="credit must be one of"):
        mem.finish_episode(namespace, found.episode_id, 1.0, credit="some")
    episode = mem.get(namespace, found.episode_id)
    assert isinstance(episode, Episode) and episode.reward is None
    assert all(mem.get(namespace, i).uses == 0 for i in ids.values())
    outcome = mem.finish_episode(namespace, found.episode_id, 1.0, used=[offered])
    assert list(outcome.q) == [offered]
