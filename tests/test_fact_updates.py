"""Fact updates (graphmem.ops.fact_updates) on both stores: a newer note about the same thing
ranks above the older one, which is kept, linked (UPDATES), marked (``updated_by``) and shown
by history and the pictures; notes about other things are left alone.

The hashing embedder makes similarity a matter of shared words, so the notes below are written
to be alike where they should be (two versions of a fact) and the subjects decide the rest.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from graphmem import GraphMemory
from graphmem.config import FactUpdatesConfig, MemoryConfig
from graphmem.embedding import HashingEmbedder
from graphmem.errors import GraphmemError
from graphmem.models import EdgeKind, Note
from graphmem.ops.fact_updates import SPEAKER, says_change, subjects
from graphmem.stores.base import MemoryStore

MARCH = datetime(2024, 3, 1, tzinfo=UTC)
JUNE = datetime(2024, 6, 1, tzinfo=UTC)
AUGUST = datetime(2024, 8, 1, tzinfo=UTC)


def _mem(store: MemoryStore, embedder: HashingEmbedder, *, on: bool = True) -> GraphMemory:
    config = MemoryConfig(fact_updates=FactUpdatesConfig(enabled=on))
    return GraphMemory(store, embedder=embedder, config=config)


def _ranked(mem: GraphMemory, namespace: str, query: str, **over: object) -> list[str]:
    hits = mem.retrieve(namespace, query, kinds=("Note",), lam=0.0, **over).hits
    return [h.memory.id for h in hits]


def test_subjects_are_names_and_the_speaker() -> None:
    assert subjects("Ana moved to Lisbon last month.") == {"ana"}  # Lisbon is the value
    assert subjects("You can reach Ana at 555-0101. Bruno's car is red.") == {"ana", "bruno"}
    assert subjects("Yesterday I sold my car.") == {SPEAKER}
    assert subjects("ana's number is 555-0101") == set()  # nothing capitalised, no "I"
    assert subjects("The weather was lovely.") == set()
    assert says_change("I moved to Lisbon.") and says_change("Ana is no longer a nurse.")
    assert says_change("My new car is red.") and not says_change("A new recipe yesterday.")
    assert not says_change("I watched a documentary about glaciers.")


def test_newer_note_ranks_above_the_older_one_it_updates(
    store: MemoryStore, embedder: HashingEmbedder, namespace: str
) -> None:
    mem = _mem(store, embedder)
    old = mem.add_note(namespace, "Ana lives in Porto with her two cats.", valid_at=MARCH)
    other = mem.add_note(namespace, "Bruno plays chess every Sunday evening.", valid_at=JUNE)
    new = mem.add_note(namespace, "Ana lives in Lisbon with her two cats now.", valid_at=JUNE)
    # The older note is kept, live, and marked; an UPDATES edge links the two.
    kept = store.get(namespace, old.id)
    assert isinstance(kept, Note) and not kept.obsolete and kept.updated_by == new.id
    edges = store.edges(namespace, new.id, kinds=[EdgeKind.UPDATES], direction="out")
    assert [e.dst for e in edges] == [old.id]
    assert edges[0].props["subject"] == "ana" and edges[0].props["source"] == "rules"
    unrelated = store.get(namespace, other.id)
    assert isinstance(unrelated, Note) and unrelated.updated_by is None
    # Retrieval: the newer above the older, both still there, the reason on the hit.
    query = "Where does Ana live with her two cats?"
    for over in ({}, {"hybrid": False}):
        hits = mem.retrieve(namespace, query, lam=0.0, kinds=("Note",), **over).hits
        ids = [h.memory.id for h in hits]
        assert ids[:2] == [new.id, old.id], over
        assert hits[0].newer_than == old.id and hits[1].newer_than is None
    prompt = mem.retrieve(namespace, query, lam=0.0, kinds=("Note",)).as_prompt()
    assert "Note (a newer note updates this one): Ana lives in Porto" in prompt
    # Without fact updates the older note's wording is nearer the question.
    off = _mem(store, embedder, on=False)
    assert _ranked(off, namespace, query)[:2] == [old.id, new.id]
    # A question that names the old value is about the older note: the newer one, much less
    # similar to it, is not moved above it (rank_margin).
    named = "Where does Ana live with her cats in Porto?"
    assert _ranked(mem, namespace, named)[0] == old.id
    always = GraphMemory(
        store,
        embedder=embedder,
        config=MemoryConfig(fact_updates=FactUpdatesConfig(rank_margin=None)),
    )
    assert _ranked(always, namespace, named)[:2] == [new.id, old.id]
    # An episode's story says it too.
    r = mem.retrieve(
        namespace,
        "Where does Ana live with her cats in Porto?",
        kinds=("Note",),
        lam=0.0,
        open_episode=True,
    )
    assert r.episode_id is not None
    story = mem.explain_episode(namespace, r.episode_id)
    offers = {o.id: o for o in story.offered}
    assert offers[old.id].updated_by == new.id and f"updated by {new.id}" in story.render()
    # History tells it both ways.
    assert f"updated by {new.id}" in mem.history(namespace, old.id).render()
    links = mem.history(namespace, new.id).links
    assert [(link.kind, link.direction, link.other_id) for link in links] == [
        (EdgeKind.UPDATES, "out", old.id)
    ]


def test_recall_missing_the_newer_version_pulls_it_in(
    store: MemoryStore, embedder: HashingEmbedder, namespace: str
) -> None:
    mem = _mem(store, embedder)
    old = mem.add_note(namespace, "Ana drives a red Volvo to work.", valid_at=MARCH)
    new = mem.add_note(namespace, "Ana drives a red Tesla to work now.", valid_at=JUNE)
    query = "Ana drives a red car to work"
    for k2, want in ((3, [new.id, old.id]), (1, [new.id])):
        hits = mem.retrieve(namespace, query, kinds=("Note",), k1=1, k2=k2, lam=0.0).hits
        assert [h.memory.id for h in hits] == want, k2
        assert hits[0].newer_than == old.id and hits[0].sim < 1.0
    assert _ranked(_mem(store, embedder, on=False), namespace, query, k1=1) == [old.id]
    r = mem.retrieve(namespace, query, kinds=("Note",), k1=1, k2=3, lam=0.0, open_episode=True)
    assert r.episode_id is not None
    offered = mem.explain_episode(namespace, r.episode_id).offered
    assert [(o.id, o.newer_than) for o in offered] == [(new.id, old.id), (old.id, None)]


def test_a_chain_of_versions_ranks_newest_first_whatever_the_order_written(
    store: MemoryStore, embedder: HashingEmbedder, namespace: str
) -> None:
    mem = _mem(store, embedder)
    # Written out of order (an imported history): the dates decide which is newer.
    v3 = mem.add_note(namespace, "I work as a baker at the old mill now.", valid_at=AUGUST)
    v1 = mem.add_note(namespace, "I work as a nurse at the old mill.", valid_at=MARCH)
    v2 = mem.add_notes(
        namespace, [{"content": "I work as a pilot at the old mill since May.", "valid_at": JUNE}]
    )[0]
    assert v1.updated_by is not None  # returned as stored: already updated when written
    ranked = _ranked(mem, namespace, "Where do I work at the old mill?")
    # The newest first; the two it updates below it, by their own scores.
    assert ranked[0] == v3.id and set(ranked) == {v1.id, v2.id, v3.id}
    stored = store.get_many(namespace, [v1.id, v2.id])
    assert [m.updated_by for m in stored if isinstance(m, Note)] == [v3.id, v3.id]


def test_notes_of_different_people_or_said_at_once_are_not_versions(
    store: MemoryStore, embedder: HashingEmbedder, namespace: str
) -> None:
    mem = _mem(store, embedder)
    ana = mem.add_note(namespace, "Ana takes the early train to work.", valid_at=MARCH)
    bruno = mem.add_note(namespace, "Bruno takes the early train to work.", valid_at=JUNE)
    both = mem.add_notes(
        namespace,
        [
            {"content": "Carla takes the late bus to work.", "valid_at": AUGUST},
            {"content": "Carla takes the late bus home.", "valid_at": AUGUST},
        ],
    )
    long = " ".join(["Ana takes the early train to work."] * 10)
    mem.add_note(namespace, long, valid_at=AUGUST)  # a session, not a statement: never linked
    for note in (ana, bruno, *both):
        stored = store.get(namespace, note.id)
        assert isinstance(stored, Note) and stored.updated_by is None, note.content
    assert not any(e.kind is EdgeKind.UPDATES for e in store.iter_edges(namespace))


def test_a_second_event_of_a_kind_is_not_an_update(
    store: MemoryStore, embedder: HashingEmbedder, namespace: str
) -> None:
    mem = _mem(store, embedder)
    first = mem.add_note(namespace, "I watched a documentary about chess last night.")
    mem.add_note(namespace, "I watched a documentary about glaciers last night.")
    mem.add_note(namespace, "I tried a new recipe for polenta yesterday.")
    stored = store.get(namespace, first.id)
    assert isinstance(stored, Note) and stored.updated_by is None
    assert not any(e.kind is EdgeKind.UPDATES for e in store.iter_edges(namespace))


def test_switched_off_nothing_is_linked(
    store: MemoryStore, embedder: HashingEmbedder, namespace: str
) -> None:
    mem = _mem(store, embedder, on=False)
    mem.add_note(namespace, "Ana lives in Porto with her two cats.", valid_at=MARCH)
    mem.add_note(namespace, "Ana lives in Lisbon with her two cats now.", valid_at=JUNE)
    assert not any(e.kind is EdgeKind.UPDATES for e in store.iter_edges(namespace))


def test_a_deleted_or_demoted_newer_version_ranks_nothing(
    store: MemoryStore, embedder: HashingEmbedder, namespace: str
) -> None:
    mem = _mem(store, embedder)
    old = mem.add_note(namespace, "Ana lives in Porto with her two cats.", valid_at=MARCH)
    new = mem.add_note(namespace, "Ana lives in Lisbon with her two cats now.", valid_at=JUNE)
    store.patch(namespace, new.id, {"obsolete": True, "obsolete_reason": "demoted: low Q"})
    assert _ranked(mem, namespace, "Ana lives in Porto with her two cats") == [old.id]
    store.delete(namespace, [new.id])
    assert _ranked(mem, namespace, "Ana lives in Porto with her two cats") == [old.id]


@pytest.mark.parametrize("content", ["", "   "])
def test_bad_input_changes_nothing(
    store: MemoryStore, embedder: HashingEmbedder, namespace: str, content: str
) -> None:
    mem = _mem(store, embedder)
    mem.add_note(namespace, "Ana lives in Porto with her two cats.", valid_at=MARCH)
    before = list(store.iter_edges(namespace))
    with pytest.raises(GraphmemError, match=r"notes\[1\]"):
        mem.add_notes(namespace, [{"content": "Ana lives in Lisbon.", "valid_at": JUNE}, content])
    assert list(store.iter_edges(namespace)) == before
