"""A-MEM evolution on both stores: links to neighbours, neighbours refreshed as new versions
(never in place), the similarity floor, and the neighbour / LLM-call / update budgets."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from openai_stub import OpenAIStub

from graphmem import GraphMemory, HashingEmbedder
from graphmem.config import EvolutionConfig, MemoryConfig
from graphmem.errors import InvalidInput, MemoryNotFound
from graphmem.llm import MemoryLLM
from graphmem.models import Edge, EdgeKind, MemoryKind, Note
from graphmem.ops.evolve import evolve, evolve_many
from graphmem.stores.base import MemoryStore

TEA = [
    "Green tea is best brewed at 80 degrees.",
    "Brew green tea at 80 degrees, never boiling.",
    "Green tea brewed with boiling water turns bitter.",
    "Brew green tea for two minutes at 80 degrees.",
    "Green tea leaves can be brewed twice at 80 degrees.",
]


@pytest.fixture
def stub() -> Iterator[OpenAIStub]:
    with OpenAIStub() as server:
        yield server


def stub_llm(stub: OpenAIStub) -> MemoryLLM:
    return MemoryLLM.from_openai(
        base_url=stub.base_url, model="stub-model", api_key="sk-test", max_retries=0, timeout=10
    )


def fake_llm(*replies: dict[str, Any], name: str = "fake-model") -> MemoryLLM:
    return MemoryLLM(FakeListChatModel(responses=[json.dumps(r) for r in replies]), name=name)


def notes(mem: GraphMemory, namespace: str, texts: list[str]) -> list[Note]:
    return [mem.add_note(namespace, t, id=f"n{i}") for i, t in enumerate(texts)]


def edges(store: MemoryStore, namespace: str, kind: EdgeKind) -> list[Edge]:
    return [e for e in store.iter_edges(namespace) if e.kind is kind]


def test_offline_links_similar_neighbours_and_refreshes_none(
    store: MemoryStore, embedder: HashingEmbedder, namespace: str
) -> None:
    mem = GraphMemory(store, embedder=embedder)
    a, b = notes(mem, namespace, TEA[:2])
    other = mem.add_note(namespace, "The train to Leeds leaves from platform four.")
    out = mem.evolve(namespace, b.id)
    assert out.skipped is None and out.created_by == "fallback" and out.llm_calls == 0
    assert [n.id for n in out.neighbours] == [a.id]  # the unrelated note is below the floor
    (link,) = out.links
    assert (link.src, link.dst) == (b.id, a.id) and 0.0 < float(link.props["strength"]) <= 1.0
    assert out.versions == [] and edges(store, namespace, EdgeKind.EVOLVED_FROM) == []
    assert [(e.src, e.dst) for e in edges(store, namespace, EdgeKind.LINKS_TO)] == [(b.id, a.id)]
    # Already linked: a second evolution has no neighbour left to decide about.
    assert mem.evolve(namespace, b.id).skipped
    assert mem.evolve(namespace, other.id).skipped == "no Note neighbour with similarity >= 0.3"


def test_evolution_refreshes_neighbours_as_new_versions_never_losing_the_old(
    store: MemoryStore, embedder: HashingEmbedder, namespace: str, stub: OpenAIStub
) -> None:
    plain = GraphMemory(store, embedder=embedder)
    old, third = notes(plain, namespace, [TEA[0], TEA[2]])
    # The old note has a history worth keeping: utility, a link, a tip about it, an episode.
    plain.store.upsert(
        (),
        [
            Edge(
                namespace=namespace,
                kind=EdgeKind.LINKS_TO,
                src=third.id,
                dst=old.id,
                props={"reason": "both about tea", "strength": 0.7},
            )
        ],
    )
    retrieval = plain.retrieve(namespace, TEA[0], kinds=("Note",), k2=1, open_episode=True)
    assert retrieval.episode_id is not None and retrieval.hits[0].memory.id == old.id
    plain.finish_episode(namespace, retrieval.episode_id, 1.0)
    before = plain.get(namespace, old.id)
    assert isinstance(before, Note) and before.q == pytest.approx(0.55)

    new_note = plain.add_note(namespace, TEA[1], id="new")
    mem = GraphMemory(store, embedder=embedder, llm=stub_llm(stub))
    versions_before = plain.store.counts(namespace)["Note"]
    out = mem.evolve(namespace, new_note.id)

    assert out.created_by == "stub-model" and out.llm_calls == 1 == len(stub.requests)
    (version,) = out.versions
    assert version.old_id == old.id  # the stub refreshes the first (most similar) neighbour
    assert plain.store.counts(namespace)["Note"] == versions_before + 1

    # The old version: still there, every field as it was, only marked obsolete.
    kept = mem.get(namespace, old.id)
    assert isinstance(kept, Note) and kept.obsolete
    assert kept.obsolete_reason == f"evolved into {version.new_id}"
    same = ("content", "context", "tags", "keywords", "version", "q", "uses", "created_at")
    assert {f: getattr(kept, f) for f in same} == {f: getattr(before, f) for f in same}
    # The new version: same content, refreshed context, version + 1, the learned Q carried.
    fresh = mem.get(namespace, version.new_id)
    assert isinstance(fresh, Note) and not fresh.obsolete
    # The stub's refreshed context names words of the new note (the link check asks for that).
    assert fresh.content == before.content
    assert fresh.context == "stub refreshed context about brew green"
    assert fresh.version == before.version + 1 and fresh.source == "evolve"
    assert (fresh.q, fresh.uses, fresh.successes) == (before.q, before.uses, before.successes)
    (evolved,) = mem.store.edges(namespace, fresh.id, kinds=[EdgeKind.EVOLVED_FROM])
    assert (
        evolved.dst == old.id and evolved.props["at"] and "context" in str(evolved.props["change"])
    )
    # Links follow the live version; the episode stays with the version it retrieved.
    assert [(e.src, e.dst) for e in out.links] == [(new_note.id, fresh.id)]
    linked_in = mem.store.edges(namespace, fresh.id, kinds=[EdgeKind.LINKS_TO], direction="in")
    assert {e.src for e in linked_in} == {new_note.id, third.id}
    assert mem.store.edges(namespace, fresh.id, kinds=[EdgeKind.RETRIEVED], direction="in") == []
    assert mem.store.edges(namespace, old.id, kinds=[EdgeKind.RETRIEVED], direction="in")
    # Retrieval sees the new version only.
    hits = mem.retrieve(namespace, TEA[0], kinds=("Note",), k2=5).hits
    assert fresh.id in {h.memory.id for h in hits} and old.id not in {h.memory.id for h in hits}
    # Evolving the obsolete version does nothing.
    assert mem.evolve(namespace, old.id).skipped


def test_budgets_cap_neighbours_llm_calls_and_updates(
    store: MemoryStore, embedder: HashingEmbedder, namespace: str, stub: OpenAIStub
) -> None:
    plain = GraphMemory(store, embedder=embedder)
    *olds, newest = notes(plain, namespace, TEA)
    budget = EvolutionConfig(max_neighbours=2, max_llm_calls=2, max_updates=1)

    # Neighbours shown to the model: at most max_neighbours.
    mem = GraphMemory(
        store, embedder=embedder, llm=stub_llm(stub), config=MemoryConfig(evolution=budget)
    )
    out = mem.evolve(namespace, newest.id)
    assert len(out.neighbours) == 2 and out.llm_calls == 1
    user = next(m for m in stub.requests[0]["body"]["messages"] if m["role"] == "user")
    assert sum(f'"id": "{o.id}"' in user["content"] for o in olds) == 2

    # A model that keeps failing: exactly max_llm_calls requests, then the offline rule.
    stub.always("invalid_json")
    again = GraphMemory(
        store, embedder=embedder, llm=stub_llm(stub), config=MemoryConfig(evolution=budget)
    )
    extra = plain.add_note(namespace, "Green tea at 80 degrees tastes sweet.", id="extra")
    n = len(stub.requests)
    out = again.evolve(namespace, extra.id)
    assert len(stub.requests) - n == 2 and out.llm_calls == 2 and out.created_by == "fallback"


def test_max_updates_caps_new_versions(
    store: MemoryStore, embedder: HashingEmbedder, namespace: str
) -> None:
    plain = GraphMemory(store, embedder=embedder)
    olds = notes(plain, namespace, TEA[:4])
    new = plain.add_note(namespace, TEA[4], id="new")
    reply = {
        "links": [
            {"id": o.id, "reason": "both say how to brew green tea", "strength": 0.8} for o in olds
        ],
        "updates": [{"id": o.id, "context": f"Brewing green tea, refreshed {o.id}."} for o in olds],
    }
    llm = fake_llm(reply)
    config = MemoryConfig(evolution=EvolutionConfig(max_updates=2))
    mem = GraphMemory(store, embedder=embedder, llm=llm, config=config)
    out = mem.evolve(namespace, new.id)
    assert len(out.links) == 4 and len(out.versions) == 2 and llm.usage.calls == 1
    assert sum(1 for m in store.iter_nodes(namespace, [MemoryKind.NOTE]) if m.obsolete) == 2
    assert store.counts(namespace)["Note"] == 5 + 2


def test_unchanged_updates_write_no_version(
    store: MemoryStore, embedder: HashingEmbedder, namespace: str
) -> None:
    plain = GraphMemory(store, embedder=embedder)
    (old,) = notes(plain, namespace, TEA[:1])
    new = plain.add_note(namespace, TEA[1], id="new")
    reply = {"links": [], "updates": [{"id": old.id, "context": old.context, "tags": old.tags}]}
    mem = GraphMemory(store, embedder=embedder, llm=fake_llm(reply))
    out = mem.evolve(namespace, new.id)
    assert out.versions == [] and out.links == [] and not mem.get(namespace, old.id).obsolete


def test_procedures_evolve_links_only(
    store: MemoryStore, embedder: HashingEmbedder, namespace: str
) -> None:
    plain = GraphMemory(store, embedder=embedder)
    steps = [{"action": "go to fridge"}, {"action": "open fridge"}]
    a = plain.build(namespace, {"task": "put a clean apple in the fridge", "steps": steps})
    b = plain.build(namespace, {"task": "put a clean mug in the fridge", "steps": steps})
    reply = {
        "links": [{"id": a.procedure.id, "reason": "same routine", "strength": 0.9}],
        "updates": [{"id": a.procedure.id, "context": "ignored: procedures have no context"}],
    }
    mem = GraphMemory(store, embedder=embedder, llm=fake_llm(reply))
    out = mem.evolve(namespace, b.procedure.id)
    assert [(e.src, e.dst) for e in out.links] == [(b.procedure.id, a.procedure.id)]
    assert out.versions == [] and not mem.get(namespace, a.procedure.id).obsolete


def test_evolve_refuses_what_cannot_evolve(
    store: MemoryStore, embedder: HashingEmbedder, namespace: str
) -> None:
    mem = GraphMemory(store, embedder=embedder)
    built = mem.build(namespace, {"task": "feed the cat", "steps": [{"action": "open tin"}]})
    with pytest.raises(InvalidInput, match="do not evolve"):
        evolve(mem, namespace, built.steps[0].id)
    with pytest.raises(MemoryNotFound):
        evolve(mem, namespace, "missing")
    # The trajectory half of a proceduralized build has no embedding: nothing to do.
    assert evolve(mem, namespace, built.procedures[1].id).skipped
    assert [r.memory_id for r in evolve_many(mem, namespace, [built.steps[0].id, "gone"])] == []
