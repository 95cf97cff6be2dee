"""Load: 8 processes run retrieve(open_episode=True) → finish_episode loops on one store.

Nothing may fail and no utility update may be lost: every memory's final ``uses``,
``q_updates`` and ``successes`` equal the number of finished episodes that retrieved it, and
its ``q`` equals the value obtained by replaying those updates. Each namespace always gets the
same reward, so the updates of one memory commute and the expected Q is exact whatever order the
processes interleaved in. Latency under load (p50/p95) is printed (``pytest -s``) and, when
``GRAPHMEM_RELIABILITY_RESULTS`` names a JSON file, recorded there; it is never asserted.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from graphmem.embedding import HashingEmbedder
from graphmem.models import EdgeKind, Episode, EpisodeStatus, Note
from graphmem.stores.base import MemoryStore

from ._workers import DIM, backend_of, fork_all, load_worker, store_spec

pytestmark = [pytest.mark.reliability, pytest.mark.slow]

PROCESSES = 8
OPS_PER_PROCESS = {"embedded": 25, "neo4j": 10}
"""Episodes per process: Neo4j round trips cost ~10x more on a shared 2-core box."""
NOTES_PER_NAMESPACE = 8
K1, K2 = 6, 3
ALPHA, Q0 = 0.1, 0.5
REWARDS = (1.0, 0.0)
TOPICS = ("lamp kitchen switch light", "garden water hose tap")


def expected_q(reward: float, n: int) -> float:
    """The store's own update ``q ← q + α(r − q)``, replayed n times from Q0."""
    q = Q0
    for _ in range(n):
        q = q + ALPHA * (reward - q)
    return q


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def spec_for(store: MemoryStore, namespaces: list[str]) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "namespaces": namespaces,
        "rewards": list(REWARDS),
        "topics": list(TOPICS),
        "ops": OPS_PER_PROCESS[backend_of(store)],
        "k1": K1,
        "k2": K2,
    }
    return {**spec, **store_spec(store)}


def seed_notes(store: MemoryStore, namespaces: list[str]) -> None:
    embedder = HashingEmbedder(DIM)
    for ns, topic in zip(namespaces, TOPICS, strict=True):
        texts = [f"{topic} note {i} detail {i * 7}" for i in range(NOTES_PER_NAMESPACE)]
        vectors = embedder.embed(texts)
        store.upsert(
            [
                Note(id=f"m{i}", namespace=ns, content=t, q=Q0, embedding=[float(x) for x in v])
                for i, (t, v) in enumerate(zip(texts, vectors, strict=True))
            ]
        )


def report(backend: str, records: list[dict[str, Any]], wall: float) -> dict[str, Any]:
    retrieve = [r["retrieve_s"] * 1000 for r in records]
    finish = [r["finish_s"] * 1000 for r in records]
    episode = [a + b for a, b in zip(retrieve, finish, strict=True)]
    figures = {
        "backend": backend,
        "processes": PROCESSES,
        "episodes": len(records),
        "store_calls_per_episode": "retrieve(open_episode=True) + finish_episode",
        "wall_s": round(wall, 2),
        "episodes_per_s": round(len(records) / wall, 1),
        "retrieve_ms": {"p50": statistics.median(retrieve), "p95": percentile(retrieve, 95)},
        "finish_ms": {"p50": statistics.median(finish), "p95": percentile(finish, 95)},
        "episode_ms": {"p50": statistics.median(episode), "p95": percentile(episode, 95)},
    }
    print(f"\nreliability load [{backend}]: {json.dumps(figures)}")
    target = os.environ.get("GRAPHMEM_RELIABILITY_RESULTS")
    if target:
        path = Path(target)
        previous = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
        previous[f"load_{backend}"] = figures
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(previous, indent=2) + "\n", encoding="utf-8")
    return figures


def test_eight_processes_lose_no_utility_update(
    store: MemoryStore, namespace: str, tmp_path: Path
) -> None:
    namespaces = [namespace, f"{namespace}-b"]
    seed_notes(store, namespaces)
    spec = spec_for(store, namespaces)
    outs = [tmp_path / f"worker-{i}.json" for i in range(PROCESSES)]

    started = time.perf_counter()
    codes = fork_all(PROCESSES, lambda i: load_worker(spec, i, outs[i]), timeout=240)
    wall = time.perf_counter() - started
    assert codes == [0] * PROCESSES, f"worker exit codes {codes}"

    records: list[dict[str, Any]] = []
    errors: list[str] = []
    for out in outs:
        data = json.loads(out.read_text(encoding="utf-8"))
        records += data["records"]
        errors += data["errors"]
    assert errors == [], f"{len(errors)} errors under load, e.g. {errors[:3]}"
    assert len(records) == PROCESSES * spec["ops"]
    for r in records:
        assert r["credited"] == sorted(r["hits"]), "an episode credited other than it retrieved"
        assert len(r["hits"]) == K2

    for ns, reward in zip(namespaces, REWARDS, strict=True):
        issued = Counter(i for r in records if r["namespace"] == ns for i in r["hits"])
        notes = {m.id: m for m in store.iter_nodes(ns, kinds=["Note"])}
        assert sorted(notes) == sorted(f"m{i}" for i in range(NOTES_PER_NAMESPACE))
        for memory_id, note in notes.items():
            n = issued[memory_id]
            assert (note.uses, note.q_updates) == (n, n), f"{ns}/{memory_id}: lost updates"
            assert note.successes == (n if reward >= 1.0 else 0)
            assert note.q == expected_q(reward, n), f"{ns}/{memory_id}: q {note.q} after {n}"
            retrieved_in = store.edges(ns, memory_id, kinds=[EdgeKind.RETRIEVED], direction="in")
            assert len(retrieved_in) == n
        episodes = [m for m in store.iter_nodes(ns, kinds=["Episode"])]
        assert len(episodes) == sum(1 for r in records if r["namespace"] == ns)
        assert all(isinstance(e, Episode) for e in episodes)
        assert all(e.status is EpisodeStatus.FINISHED for e in episodes)  # type: ignore[union-attr]
        assert {e.reward for e in episodes} == {reward}  # type: ignore[union-attr]

    report(backend_of(store), records, wall)
