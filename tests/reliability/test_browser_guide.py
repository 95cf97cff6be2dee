"""The Neo4j Browser extras as a new user meets them (issue 55): the guide counts the saved
queries there are, and "From failure to tip to fix" shows what an agent's failures left, as the
demo writes it (a tip ABOUT the task and the procedures the failing run followed, which were
themselves built from successes), not only a failed attempt stored as a procedure."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

from graphmem.embedding import HashingEmbedder
from graphmem.memory import GraphMemory
from graphmem.models import EdgeKind, MemoryKind
from graphmem.stores.base import MemoryStore

pytestmark = pytest.mark.reliability

BROWSER = Path(__file__).resolve().parents[2] / "schemas" / "browser"
QUERIES = (BROWSER / "saved_queries.cypher").read_text(encoding="utf-8")
DIM = 384


def saved_query(name: str) -> str:
    block = QUERIES[QUERIES.index(f"// name: {name}\n") :]
    code = "\n".join(line for line in block.splitlines() if not line.startswith("//"))
    return code[: code.index(";")].strip()


def test_the_guide_counts_the_saved_queries_there_are() -> None:
    guide = (BROWSER / "GUIDE.md").read_text(encoding="utf-8")
    (said,) = re.findall(r"\| (\d+) parameterised queries", guide)
    assert int(said) == len(re.findall(r"^// name: ", QUERIES, flags=re.M)) == 16


def trajectory(success: bool) -> dict[str, Any]:
    return {
        "task": "heat the soup in the kitchen",
        "success": success,
        "reward": 1.0 if success else 0.0,
        "steps": [
            {"action": "take soup", "observation": "You take the soup."},
            {"action": "put soup in stove", "observation": "The stove is off." * (not success)},
        ],
    }


@pytest.mark.neo4j
def test_from_failure_to_tip_to_fix_shows_a_failure_in_use(
    neo4j_store: MemoryStore, namespace: str
) -> None:
    mem = GraphMemory(neo4j_store, embedder=HashingEmbedder(DIM))
    try:
        built = mem.build(namespace, trajectory(True))
        found = mem.retrieve(namespace, "heat the soup in the kitchen", open_episode=True)
        offered = {h.memory.id for h in found.hits}
        assert found.episode_id is not None and built.procedure.id in offered
        mem.finish_episode(namespace, found.episode_id, 0.0)  # it failed in use
        mem.update(namespace, trajectory(False), episode_id=found.episode_id)
        tips = list(neo4j_store.iter_nodes(namespace, kinds=[MemoryKind.TIP]))
        assert tips, "the failure left a tip"
        about = neo4j_store.edges(namespace, tips[0].id, kinds=[EdgeKind.ABOUT])
        assert {e.dst for e in about} >= {built.task.id}
        driver = neo4j_store.driver  # type: ignore[attr-defined]
        records, _, _ = driver.execute_query(
            saved_query("From failure to tip to fix"),
            {"namespace": namespace, "limit": 10},
            database_=os.environ.get("GRAPHMEM_NEO4J_DATABASE") or None,
        )
        rows = [r.data() for r in records]
        assert rows, "the query showed nothing of the failure"
        shown = str(rows)
        assert tips[0].id in shown and built.task.id in shown
        assert found.episode_id in shown  # the failed episode that taught it
    finally:
        neo4j_store.delete(namespace, [m.id for m in neo4j_store.iter_nodes(namespace)])
