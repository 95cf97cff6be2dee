"""An episode explains itself (``GraphMemory.explain_episode``, ``graphmem episode``): what it
was offered in rank order, what the agent used, its reward, and each credited memory's Q
before → after — on both stores."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graphmem import GraphMemory, HashingEmbedder
from graphmem.config import RetrievalConfig
from graphmem.errors import InvalidInput
from graphmem.models import CreditPolicy, EpisodeStatus
from graphmem.stores.base import MemoryStore

TEA = {"task": "make green tea", "reward": 1.0, "success": True}
COFFEE = {"task": "make green coffee", "reward": 1.0, "success": True}


def _two_procedures(mem: GraphMemory, namespace: str) -> None:
    mem.build(namespace, {**TEA, "steps": [{"action": "boil water"}, {"action": "steep tea"}]})
    mem.build(namespace, {**COFFEE, "steps": [{"action": "grind beans"}, {"action": "brew"}]})


def test_a_finished_episode_lists_offers_used_marks_and_q_moves(
    store: MemoryStore, namespace: str, embedder: HashingEmbedder
) -> None:
    mem = GraphMemory(store, embedder=embedder)
    _two_procedures(mem, namespace)
    cfg = RetrievalConfig(k1=5, k2=2, lam=0.0)
    r = mem.retrieve(namespace, "make green tea", cfg, open_episode=True)
    assert r.episode_id is not None and len(r.hits) == 2
    used = r.hits[1].memory.id  # the agent used the second offer, not the first
    before = mem.explain_episode(namespace, r.episode_id)
    assert before.status is EpisodeStatus.OPEN
    assert [o.id for o in before.offered] == [h.memory.id for h in r.hits]
    assert not any(o.used or o.credited for o in before.offered)

    mem.finish_episode(namespace, r.episode_id, 1.0, used=[used])
    report = mem.explain_episode(namespace, r.episode_id)
    assert report.status is EpisodeStatus.FINISHED and report.credit is CreditPolicy.USED
    assert [o.rank for o in report.offered] == [0, 1]
    first, second = report.offered
    assert (first.used, first.credited, first.q_after) == (False, False, None)
    assert second.used and second.credited
    q0, alpha = mem.config.q0, mem.config.alpha
    assert second.q_before == pytest.approx(q0)
    assert second.q_after == pytest.approx(q0 + alpha * (1.0 - q0))
    assert second.q_after == pytest.approx(store.get(namespace, used).q)
    assert first.sim == pytest.approx(r.hits[0].sim) and first.score is not None
    text = report.render()
    assert "offered 2, used 1" in text and "not credited" in text
    assert f"Q {q0:.3f} → {second.q_after:.3f}" in text


def test_offered_credit_moves_every_offer_and_a_non_episode_is_refused(
    store: MemoryStore, namespace: str, embedder: HashingEmbedder
) -> None:
    mem = GraphMemory(store, embedder=embedder)
    _two_procedures(mem, namespace)
    r = mem.retrieve(namespace, "make green tea", RetrievalConfig(k2=2), open_episode=True)
    assert r.episode_id is not None
    mem.finish_episode(namespace, r.episode_id, 0.0)  # default policy: every offer credited
    report = mem.explain_episode(namespace, r.episode_id)
    assert all(o.credited and not o.used for o in report.offered)
    assert all(o.q_after is not None and o.q_after < o.q_before for o in report.offered)  # type: ignore[operator]
    with pytest.raises(InvalidInput, match="not an Episode"):
        mem.explain_episode(namespace, r.hits[0].memory.id)


def test_episode_command_shows_the_latest_episode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from graphmem.cli import main
    from graphmem.stores.embedded import EmbeddedStore

    path = tmp_path / "store"
    with GraphMemory(EmbeddedStore.open(path), embedder=HashingEmbedder(384)) as mem:
        _two_procedures(mem, "cli")
        r = mem.retrieve("cli", "make green tea", RetrievalConfig(k2=2), open_episode=True)
        assert r.episode_id is not None
        mem.finish_episode("cli", r.episode_id, 1.0, used=[r.hits[0].memory.id])
    monkeypatch.delenv("GRAPHMEM_NEO4J_URI", raising=False)
    monkeypatch.setenv("GRAPHMEM_STORE", str(path))
    assert main(["episode", "cli"]) == 0
    out = capsys.readouterr().out
    assert f"Episode {r.episode_id} (finished)" in out and "credit: used" in out
    assert main(["episode", "cli", r.episode_id, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [o["used"] for o in data["offered"]] == [True, False]
    assert main(["episode", "empty-ns"]) == 0
    assert "no episodes" in capsys.readouterr().out
