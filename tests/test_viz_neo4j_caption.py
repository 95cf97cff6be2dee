"""Neo4j Browser captions: every Memory node carries ``q_label``, Q with two decimals, in step
with Q through creation, imports, utility updates and episode credit (GraSS cannot format
numbers). Reading a memory back ignores it. Needs Neo4j (``GRAPHMEM_NEO4J_URI``)."""

from __future__ import annotations

from typing import Any

import pytest

from graphmem.models import Edge, EdgeKind, Episode, Note, utcnow
from graphmem.stores.base import MemoryStore

pytestmark = pytest.mark.neo4j


def labels(store: MemoryStore, namespace: str) -> dict[str, Any]:
    driver = store.driver  # type: ignore[attr-defined]
    records, _, _ = driver.execute_query(
        "MATCH (m:Memory {namespace: $ns}) RETURN m.id AS id, m.q_label AS label, m.q AS q",
        ns=namespace,
    )
    return {r["id"]: (r["label"], r["q"]) for r in records}


def test_q_label_follows_q(neo4j_store: MemoryStore, namespace: str) -> None:
    store = neo4j_store
    try:
        note = Note(namespace=namespace, content="roast means cook in the oven")
        imported = Note(namespace=namespace, content="dice means chop", q=0.123)
        store.upsert([note])
        store.upsert([imported], keep_utility=False)
        found = labels(store, namespace)
        assert found[note.id][0] == "0.50" and found[imported.id][0] == "0.12"
        store.update_utility(namespace, [note.id], reward=1.0, alpha=0.1, success=True)
        label, q = labels(store, namespace)[note.id]
        assert label == f"{q:.2f}" == "0.55"
        episode = Episode(namespace=namespace, task_text="cook")
        store.upsert(
            [episode],
            [
                Edge(
                    namespace=namespace,
                    kind=EdgeKind.RETRIEVED,
                    src=episode.id,
                    dst=note.id,
                    props={"rank": 1, "sim": 0.9, "q": 0.55, "score": 1.0},
                )
            ],
        )
        store.finish_episode(namespace, episode.id, 0.0, 0.5, success=False, finished_at=utcnow())
        label, q = labels(store, namespace)[note.id]
        assert label == f"{q:.2f}" == "0.28"  # 0.275 → 0.28 (half away from zero)
        store.upsert([note.model_copy(update={"content": "roast: oven"})])  # content write
        assert labels(store, namespace)[note.id][0] == "0.28"
        back = store.get(namespace, note.id)
        assert isinstance(back, Note) and back.q == pytest.approx(0.275)
    finally:
        store.delete(namespace, [m.id for m in store.iter_nodes(namespace)])


def test_schema_apply_back_fills_q_label(neo4j_store: MemoryStore, namespace: str) -> None:
    """Nodes written before q_label existed get it from `graphmem schema apply` (setup)."""
    from graphmem.stores.neo4j.schema import _backfill_q_label
    from graphmem.stores.neo4j.tx import sync_work

    store = neo4j_store
    driver = store.driver  # type: ignore[attr-defined]
    try:
        note = Note(namespace=namespace, content="grill means barbeque", q=0.456)
        store.upsert([note], keep_utility=False)
        driver.execute_query("MATCH (m:Memory {namespace: $ns}) REMOVE m.q_label", ns=namespace)
        assert labels(store, namespace)[note.id][0] is None
        with driver.session() as session:
            while session.execute_write(sync_work(_backfill_q_label)):
                pass
        assert labels(store, namespace)[note.id][0] == "0.46"
    finally:
        store.delete(namespace, [m.id for m in store.iter_nodes(namespace)])
