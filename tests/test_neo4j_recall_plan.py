"""How recall without in-index filtering (Neo4j 5.26) plans its round trips: a small namespace
that the first index candidates do not fill is scanned exactly; a larger one is asked again
for as many candidates as its share needs. Checked on the statements sent (no server needed);
the results themselves are checked against a real Neo4j by the conformance suite."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from graphmem.stores.neo4j import cypher
from graphmem.stores.neo4j.recall import EXACT_MAX, MIN_CANDIDATES, candidates

PARAMS = {"namespace": "ns", "kinds": None, "include_obsolete": False, "vector": [1.0, 0.0]}


class ScriptedTx:
    """Answers each statement from a script and records what was sent."""

    def __init__(self, size: int, found: list[int], kinds_size: int | None = None) -> None:
        self.size = size
        self.kinds_size = size if kinds_size is None else kinds_size
        """How many memories of the kinds asked for the namespace holds."""
        self.found = list(found)
        self.sent: list[tuple[str, dict[str, Any]]] = []

    async def run(self, query: str, /, **params: Any) -> list[Any]:
        self.sent.append((query, params))
        if query == cypher.RECALL_INDEX:
            found = self.found.pop(0)
            rows = [{"props": {"id": f"m{i}"}, "superseded": False} for i in range(found)]
            return [{"raw": params["candidates"], "found": found, "rows": rows}]
        if query == cypher.NAMESPACE_SIZE_UPTO:
            size = self.size if params["kinds"] is None else self.kinds_size
            return [{"size": min(size, params["cap"])}]
        assert query == cypher.RECALL_EXACT
        return []


def _plan(tx: ScriptedTx, k: int, kinds: list[str] | None = None) -> list[tuple[str, Any]]:
    asyncio.run(candidates(tx, PARAMS | {"kinds": kinds}, k, 2, mode="procedure"))
    names = {cypher.RECALL_INDEX: "index", cypher.NAMESPACE_SIZE_UPTO: "size"}
    names[cypher.RECALL_EXACT] = "exact"
    return [(names[q], p.get("candidates", p.get("cap"))) for q, p in tx.sent]


def test_a_namespace_that_fills_k_takes_one_index_query() -> None:
    assert _plan(ScriptedTx(size=50_000, found=[10]), k=10) == [("index", 40)]


def test_a_small_namespace_crowded_out_of_the_index_is_scanned_exactly() -> None:
    first = max(4 * 10, MIN_CANDIDATES)
    assert _plan(ScriptedTx(size=120, found=[1]), k=10) == [
        ("index", first),
        ("size", EXACT_MAX + 1),
        ("exact", None),
    ]


def test_a_large_namespace_is_asked_for_as_many_candidates_as_its_share_needs() -> None:
    # 4 of 40 candidates were its own: a 10% share, so 2k = 20 of it need 200 candidates.
    assert _plan(ScriptedTx(size=5_000, found=[4, 25]), k=10) == [
        ("index", 40),
        ("size", EXACT_MAX + 1),
        ("index", 200),
    ]
    # Still short after that: the count grows fourfold, as before.
    assert _plan(ScriptedTx(size=5_000, found=[4, 8, 30]), k=10)[-1] == ("index", 800)


def test_few_memories_of_the_kinds_asked_for_are_scanned_exactly() -> None:
    """A task cluster's recall: 1,000 Task nodes in a namespace of 11,000 memories. The index
    holds them thinly, so they are scanned, not hunted for through ever wider searches."""
    tx = ScriptedTx(size=11_000, found=[2], kinds_size=EXACT_MAX)
    assert _plan(tx, k=20, kinds=["Task"]) == [
        ("index", 80),
        ("size", EXACT_MAX + 1),
        ("exact", None),
    ]
    assert tx.sent[1][1]["kinds"] == ["Task"]
    # More of them than EXACT_MAX: the index is asked again, for their share.
    tx = ScriptedTx(size=11_000, found=[2, 40], kinds_size=EXACT_MAX + 1)
    assert [name for name, _ in _plan(tx, k=20, kinds=["Task"])] == ["index", "size", "index"]


def test_in_index_search_sends_one_filter_key_per_kind_and_flag_asked_for() -> None:
    from graphmem.stores.neo4j.recall import (
        SEARCH_CANDIDATES_MIN,
        SMALL_DATABASE,
        _search,
        search_candidates,
        shipped,
    )

    params = dict(PARAMS, kinds=["Note", "Task"], include_obsolete=True)
    query, args = _search(params, 5, "search")
    assert query == cypher.RECALL_SEARCH and "m.filter_key IN $keys" in query
    assert args["keys"] == ["ns|Note|live", "ns|Note|obsolete", "ns|Task|live", "ns|Task|obsolete"]
    # Before the database's size is known, a wider beam than k (in a large index HNSW misses
    # some of the true top k with a beam of k); the best shipped(k) of them travel back.
    assert args["candidates"] == SEARCH_CANDIDATES_MIN and args["ship"] == shipped(5)
    # Sized by the count of memories the last search carried: k up to SMALL_DATABASE.
    for memories, width in ((0, 5), (SMALL_DATABASE, 5), (SMALL_DATABASE + 1, 50)):
        sized = _search(params | {"memories": memories}, 5, "search")[1]["candidates"]
        assert sized == width == search_candidates(5, None, memories)
    assert _search(params | {"memories": 10}, 70, "search")[1]["candidates"] == 70
    # The store's search_width when it sets one, whatever the size; never fewer than k.
    for memories in (None, 10, 10**6):
        fixed = params | {"search_width": 10, "memories": memories}
        assert _search(fixed, 5, "search")[1]["candidates"] == 10
        assert _search(fixed, 20, "search")[1]["candidates"] == 20
    query, args = _search(dict(PARAMS), 5, "search-fields")  # an index from before the key
    assert query == cypher.RECALL_SEARCH_FIELDS and args["obsolete"] == [False]


def test_the_count_a_search_carries_is_kept_and_an_exact_scan_keeps_the_last() -> None:
    from graphmem.stores.neo4j.recall import memories_counted

    searched = [{"props": {}, "superseded": False, "memories": 12_345}]
    assert memories_counted(searched, None) == 12_345
    assert memories_counted(searched, 7) == 12_345
    assert memories_counted([{"props": {}, "superseded": False}], 7) == 7  # an exact scan
    assert memories_counted([], 7) == 7  # nothing found, nothing learnt


def test_rank_checks_the_embeddings_it_reads_and_keeps_them_exact() -> None:
    import math

    import pytest

    from graphmem.stores.neo4j.recall import rank
    from graphmem.stores.neo4j.tx import TornRead

    def row(memory_id: str, embedding: Any) -> dict[str, Any]:
        props = {"kind": "Note", "namespace": "ns", "id": memory_id, "content": memory_id}
        return {"props": props | {"embedding": embedding}, "superseded": False}

    hits = rank([row("a", [0.1, 0.3]), row("b", [1.0, 0.0])], [1.0, 0.0], 2, None)
    assert [h.memory.id for h in hits] == ["b", "a"]
    assert hits[1].memory.embedding == [0.1, 0.3]
    assert hits[1].sim == pytest.approx(0.1 / math.hypot(0.1, 0.3), abs=1e-12)
    for bad in ([0.0, 0.0], [math.nan, 1.0], [math.inf, 1.0], [1.0], ["x", 1.0]):
        with pytest.raises(TornRead):
            rank([row("a", [1.0, 0.0]), row("b", bad)], [1.0, 0.0], 2, None)


def test_the_ship_margin_covers_float32_rounding_of_the_servers_cosine_many_times_over() -> None:
    """A candidate the server's float32 score puts more than ship_margin below the k-th best
    cannot rank among the top k by float64 cosine: the margin (in the server's (1 + cos) / 2
    units) must exceed twice the score's rounding error, that is the cosine's error."""
    import numpy as np

    from graphmem.stores.neo4j.recall import ship_args, ship_margin

    rng = np.random.default_rng(7)
    for n in (8, 384, 1536):
        a, b = rng.standard_normal((2, 2000, n))
        exact = np.einsum("ij,ij->i", a, b) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
        a32, b32 = a.astype(np.float32), b.astype(np.float32)
        dots = np.einsum("ij,ij->i", a32, b32)
        rounded = dots / np.sqrt(np.einsum("ij,ij->i", a32, a32) * np.einsum("ij,ij->i", b32, b32))
        assert np.abs(rounded.astype(np.float64) - exact).max() * 8 < ship_margin(n)
    assert ship_args(5, 384) == {"ship": 14, "k": 5, "margin": ship_margin(384)}
    assert ship_margin(384) == pytest.approx(9.2e-5, rel=0.01)
