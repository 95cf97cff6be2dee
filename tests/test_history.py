"""History of a memory on both stores: its versions (both ways), links, tips and the episodes
that moved its Q, as data and as text."""

from __future__ import annotations

import json

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel

from graphmem import GraphMemory, HashingEmbedder
from graphmem.errors import MemoryNotFound
from graphmem.llm import MemoryLLM
from graphmem.models import EdgeKind
from graphmem.ops.history import history
from graphmem.stores.base import MemoryStore

LAMP = "light the lamp in the study"


def lamp(actions: list[str], success: bool) -> dict[str, object]:
    return {
        "task": LAMP,
        "reward": 1.0 if success else 0.0,
        "success": success,
        "steps": [{"action": a} for a in actions],
    }


@pytest.fixture
def mem(store: MemoryStore, embedder: HashingEmbedder) -> GraphMemory:
    return GraphMemory(store, embedder=embedder)


def test_history_of_an_adjusted_procedure(mem: GraphMemory, namespace: str) -> None:
    """Failure → tip + correction → success → supersession, all visible from either end."""
    built = mem.update(
        namespace, lamp(["go to study", "press lamp"], False), strategy="vanilla"
    ).built
    assert built is not None
    original = built.procedure.id
    # Abstention off: this is the history of one procedure, handed over each time (with it on,
    # the retrieval after the failure is a probe that hands nothing over).
    r1 = mem.retrieve(namespace, LAMP, open_episode=True, abstain=False)
    assert r1.episode_id is not None
    mem.finish_episode(namespace, r1.episode_id, 0.0)
    failed = lamp(["go to study", "press lamp"], False)
    out = mem.update(namespace, failed, strategy="adjustment", episode_id=r1.episode_id)
    (fix,) = out.adjusted
    (tip,) = out.tips
    r2 = mem.retrieve(namespace, LAMP, k2=1, open_episode=True, abstain=False)
    assert r2.episode_id is not None and r2.hits[0].memory.id == fix.procedure.id
    mem.finish_episode(namespace, r2.episode_id, 1.0)
    good = lamp(["go to study", "flip switch"], True)
    mem.update(namespace, good, strategy="adjustment", episode_id=r2.episode_id)

    old = mem.history(namespace, original)
    assert old.memory.obsolete
    assert [v.id for v in old.versions] == [original, fix.procedure.id]
    assert old.versions[1].evolved_from == [original] and old.versions[1].change
    assert old.latest.id == fix.procedure.id
    assert [t.id for t in old.tips] == [tip.id]
    kinds = {(link.kind, link.direction, link.other_id) for link in old.links}
    assert (EdgeKind.SUPERSEDES, "in", fix.procedure.id) in kinds
    assert (EdgeKind.ABOUT, "in", tip.id) in kinds
    assert any(k == EdgeKind.SOLVED_BY and d == "in" for k, d, _ in kinds)
    # Both episodes, each on the version it retrieved, with the Q it moved.
    assert [(e.memory_id, e.reward) for e in old.episodes] == [
        (original, 0.0),
        (fix.procedure.id, 1.0),
    ]
    assert old.episodes[0].q_before == pytest.approx(0.5)
    assert old.episodes[0].q_after == pytest.approx(0.45)
    assert old.episodes[1].q_after == pytest.approx(0.55)

    new = history(mem, namespace, fix.procedure.id)
    assert [v.id for v in new.versions] == [v.id for v in old.versions]
    assert (EdgeKind.SUPERSEDES, "out", original) in {
        (link.kind, link.direction, link.other_id) for link in new.links
    }

    text = old.render()
    assert text.splitlines()[0].startswith(f"Procedure {original} (v1, obsolete: superseded by")
    assert f"<- SUPERSEDES Procedure {fix.procedure.id}" in text
    assert "reward 0 (failure)" in text and "q 0.500 -> 0.450" in text
    assert str(old) == text


def test_history_follows_evolution_to_the_new_version(
    store: MemoryStore, embedder: HashingEmbedder, namespace: str
) -> None:
    plain = GraphMemory(store, embedder=embedder)
    old = plain.add_note(namespace, "Green tea is best brewed at 80 degrees.", id="old")
    r = plain.retrieve(namespace, "green tea", kinds=("Note",), open_episode=True)
    assert r.episode_id is not None
    plain.finish_episode(namespace, r.episode_id, 1.0)
    new = plain.add_note(namespace, "Brew green tea at 80 degrees, never boiling.", id="new")
    reply = {
        "links": [{"id": old.id, "reason": "both brew green tea at 80 degrees", "strength": 0.9}],
        "updates": [{"id": old.id, "context": "How hot to brew green tea.", "tags": ["tea"]}],
    }
    llm = MemoryLLM(FakeListChatModel(responses=[json.dumps(reply)]), name="fake")
    evolved = GraphMemory(store, embedder=embedder, llm=llm).evolve(namespace, new.id)
    (version,) = evolved.versions

    h = plain.history(namespace, version.new_id)
    assert [v.id for v in h.versions] == [old.id, version.new_id]
    assert [v.version for v in h.versions] == [1, 2]
    assert h.versions[0].obsolete and h.versions[0].obsolete_reason == f"evolved into {h.memory.id}"
    assert h.versions[1].change and "How hot to brew green tea." in h.versions[1].change
    # The episode retrieved the old version; it shaped the lineage's Q, so it is listed.
    assert [(e.memory_id, e.episode_id) for e in h.episodes] == [(old.id, r.episode_id)]
    assert h.memory.q == pytest.approx(0.55)  # carried over to the new version
    links = {(link.kind, link.direction, link.other_id) for link in h.links}
    assert links == {(EdgeKind.LINKS_TO, "in", new.id)}
    assert "evolved from old" in h.render()


def test_history_of_a_plain_memory_and_unknown_ids(mem: GraphMemory, namespace: str) -> None:
    note = mem.add_note(namespace, "Parcels go to the back door.")
    h = mem.history(namespace, note.id)
    assert [v.id for v in h.versions] == [note.id] and h.links == [] and h.episodes == []
    assert "Links: none" in h.render() and "Episodes: none" in h.render()
    with pytest.raises(MemoryNotFound):
        mem.history(namespace, "missing")


def _note_chain(mem: GraphMemory, namespace: str, versions: int) -> list[str]:
    from graphmem.ops.build import revise_note

    note = mem.add_note(namespace, "Soup: heat it on the stove.")
    ids = [note.id]
    for n in range(2, versions + 1):
        content = f"Soup: heat it on the stove, {n} minutes."
        ids.append(revise_note(mem, namespace, [ids[-1]], content, change=f"to {n} min").id)
    return ids


def test_version_chains_lists_the_longest_first(mem: GraphMemory, namespace: str) -> None:
    from graphmem.ops.history import version_chains

    long = _note_chain(mem, namespace, 3)
    other = mem.add_note(namespace, "Bread: bake at 220 degrees.")
    from graphmem.ops.build import revise_note

    short = revise_note(mem, namespace, [other.id], f"{other.content} For 30 min.", change="time")
    chains = version_chains(mem, namespace)
    assert [c.ids for c in chains] == [long[::-1], [short.id, other.id]]
    assert chains[0].length == 3 and chains[0].version == 3 and chains[0].kind == "Note"
    assert chains[0].changes == ["to 2 min", "to 3 min"]
    assert version_chains(mem, namespace, limit=1)[0].ids == long[::-1]


def test_history_command_shows_the_longest_chain(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from pathlib import Path

    from graphmem.cli import main
    from graphmem.stores.embedded import EmbeddedStore

    path = Path(str(tmp_path)) / "store"
    with GraphMemory(EmbeddedStore.open(path), embedder=HashingEmbedder(384)) as mem:
        ids = _note_chain(mem, "cli", 3)
    monkeypatch.delenv("GRAPHMEM_NEO4J_URI", raising=False)
    monkeypatch.setenv("GRAPHMEM_STORE", str(path))
    assert main(["history", "cli"]) == 0
    out = capsys.readouterr().out
    assert f"3 versions: Note {ids[-1]} v3" in out
    assert f"evolved from {ids[0]}: to 2 min" in out and "v3 " in out
    assert main(["history", "cli", ids[0], "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [v["version"] for v in data["history"]["versions"]] == [1, 2, 3]
    assert main(["history", "empty-ns"]) == 0
    assert "no version chains" in capsys.readouterr().out
