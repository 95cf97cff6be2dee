"""Keyword recall on Neo4j: the ``memory_text`` full-text index (Lucene, BM25) scoped like recall.

``graphmem schema apply`` creates the index (``schemas/002_indexes.cypher``) over the fields in
:data:`graphmem.stores.words.TEXT_FIELDS`. :func:`recall_text` asks it with
``db.index.fulltext.queryNodes`` for the query's words (escaped by
:func:`~graphmem.stores.words.lucene_query`, so user text is never Lucene syntax), at
most
:func:`text_candidates` of them (a limit lets Lucene keep a top list instead of ranking every
match), and keeps the namespace's live memories of the kinds asked, the first k, each row saying
whether it is superseded, in one round trip; when those candidates held fewer than k of the
namespace, it reads the index on without a limit, in score order, until k have passed.
Without the index (schema not applied), the namespace is scanned and ranked here instead, as
:meth:`MemoryStore.recall_text` does for any store, with a warning. :func:`text_index_problems`
checks the index is there, online, and covers those fields.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from graphmem.errors import InvalidInput, StoreError
from graphmem.models import MemoryKind, check_vector, construct
from graphmem.stores.base import Recall, TextRecall, check_text_query
from graphmem.stores.neo4j import cypher, recall
from graphmem.stores.neo4j import rows as mapping
from graphmem.stores.neo4j.rows import read_memory
from graphmem.stores.neo4j.tx import Tx, single
from graphmem.stores.text_index import rank_text
from graphmem.stores.words import TEXT_FIELDS, lucene_query, query_terms

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from graphmem.stores.neo4j.ops import Neo4jBase


TextId = tuple[str, float, bool]
"""A keyword match without its memory: (memory id, score, whether vector recall could return
it: not superseded and with an embedding), as ``recall_text_ids`` answers."""


async def recall_text(
    store: Neo4jBase,
    namespace: str,
    query: str,
    k: int,
    *,
    kinds: Sequence[MemoryKind] | None,
    include_obsolete: bool,
) -> list[TextRecall]:
    """Top-k memories of the namespace by Lucene's BM25 for the query's words, best first,
    ties by id (see the module doc)."""
    found = await _recall_text(store, namespace, query, k, kinds, include_obsolete, ids=False)
    return cast(list[TextRecall], found)


async def recall_text_ids(
    store: Neo4jBase,
    namespace: str,
    query: str,
    k: int,
    *,
    kinds: Sequence[MemoryKind] | None,
    include_obsolete: bool,
) -> list[TextId]:
    """:func:`recall_text`'s answer without the memories (:data:`TextId` rows): what hybrid
    recall reads, fetching the few memories that can enter its pool."""
    found = await _recall_text(store, namespace, query, k, kinds, include_obsolete, ids=True)
    return cast(list[TextId], found)


async def _recall_text(
    store: Neo4jBase,
    namespace: str,
    query: str,
    k: int,
    kinds: Sequence[MemoryKind] | None,
    include_obsolete: bool,
    *,
    ids: bool,
) -> list[TextRecall] | list[TextId]:
    check_text_query(query, k)
    kind_values = None if kinds is None else [cypher.label(x) for x in kinds]
    terms = query_terms(query)
    if k == 0 or not terms or kind_values == []:
        return []
    params: dict[str, Any] = {
        "index": cypher.FULLTEXT_INDEX,
        "query": lucene_query(terms),
        "namespace": namespace,
        "kinds": kind_values,
        "include_obsolete": include_obsolete,
        "k": k,
    }

    top_statement = cypher.TEXT_RECALL_TOP_IDS if ids else cypher.TEXT_RECALL_TOP

    async def work(tx: Tx) -> list[TextRecall] | list[TextId]:
        top = single(await tx.run(top_statement, candidates=text_candidates(k), **params))
        assert top is not None
        rows: list[Any] = top["rows"]
        if len(rows) < k and top["raw"] >= text_candidates(k):
            # The best candidates were mostly other namespaces' (or kinds'): read on, in order.
            rows = await _read_on(tx, ids, params)
        return _text_ids(rows) if ids else _text_recalls(rows)

    try:
        return await store._read(work, "keyword recall")
    except StoreError as e:
        if await text_index_problems(store) == []:
            raise
        log.warning("keyword recall scans namespace %r: %s", namespace, e)
    from graphmem.stores.neo4j import ops

    memories = [m async for m in ops.iter_nodes(store, namespace, None)]
    ranked = rank_text(
        memories, namespace, query, k, kinds=kind_values, include_obsolete=include_obsolete
    )
    ranked_ids = [m.id for m, _ in ranked]
    gone = await ops.superseded(store, namespace, ranked_ids) if ranked_ids else set()
    found = [TextRecall(memory=m, score=score, superseded=m.id in gone) for m, score in ranked]
    return _as_ids(found) if ids else found


async def _read_on(tx: Tx, ids: bool, params: dict[str, Any]) -> list[Any]:
    """Keyword recall's rows read on without a limit, in score order (TEXT_RECALL)."""
    statement = cypher.TEXT_RECALL_IDS if ids else cypher.TEXT_RECALL
    return [r.data() for r in await tx.run(statement, **params)]


def _as_ids(found: Sequence[TextRecall]) -> list[TextId]:
    return [
        (r.memory.id, r.score, not r.superseded and r.memory.embedding is not None) for r in found
    ]


def _text_ids(rows: list[Any]) -> list[TextId]:
    """Keyword recall's id rows as :data:`TextId` tuples, best first, ties by id (a row whose
    node was deleted while it was read has no id and is skipped)."""
    out = [
        (row["id"], float(row["score"]), not row["superseded"] and bool(row["embedded"]))
        for row in rows
        if isinstance(row["id"], str)
    ]
    out.sort(key=lambda r: (-r[1], r[0]))
    return out


def _text_recalls(rows: list[Any]) -> list[TextRecall]:
    """Keyword recall's rows as TextRecalls, best first, ties by id."""
    out = []
    for row in rows:
        memory = read_memory(row["props"])
        if memory is not None:
            out.append(
                construct(
                    TextRecall,
                    {
                        "memory": memory,
                        "score": float(row["score"]),
                        "superseded": bool(row["superseded"]),
                    },
                )
            )
    out.sort(key=lambda r: (-r.score, r.memory.id))
    return out


async def recall_hybrid(
    store: Neo4jBase,
    namespace: str,
    vector: Sequence[float],
    query: str,
    k: int,
    text_k: int,
    *,
    kinds: Sequence[MemoryKind] | None,
    min_sim: float | None,
) -> tuple[list[Recall], list[TextRecall]]:
    """Vector recall of k and keyword recall of text_k in one round trip: the first statement
    of each (as :func:`~graphmem.stores.neo4j.ops.recall_memories` and :func:`recall_text`
    run them), each in its own subquery of one scoped statement; a channel whose first
    statement did not settle it reads on in the same transaction, as it would alone."""
    recalled, found = await _recall_hybrid(
        store, namespace, vector, query, k, text_k, kinds, min_sim, ids=False
    )
    return recalled, cast(list[TextRecall], found)


async def recall_hybrid_ids(
    store: Neo4jBase,
    namespace: str,
    vector: Sequence[float],
    query: str,
    k: int,
    text_k: int,
    *,
    kinds: Sequence[MemoryKind] | None,
    min_sim: float | None,
) -> tuple[list[Recall], list[TextId]]:
    """:func:`recall_hybrid` with the keyword list as :func:`recall_text_ids` answers it
    (what hybrid recall asks: it reads only the keyword-only memories that can enter its
    pool, usually none)."""
    recalled, found = await _recall_hybrid(
        store, namespace, vector, query, k, text_k, kinds, min_sim, ids=True
    )
    return recalled, cast(list[TextId], found)


async def _recall_hybrid(
    store: Neo4jBase,
    namespace: str,
    vector: Sequence[float],
    query: str,
    k: int,
    text_k: int,
    kinds: Sequence[MemoryKind] | None,
    min_sim: float | None,
    *,
    ids: bool,
) -> tuple[list[Recall], list[TextRecall] | list[TextId]]:
    from graphmem.stores.neo4j import ops

    async def text_alone() -> list[TextRecall] | list[TextId]:
        return await _recall_text(store, namespace, query, text_k, kinds, False, ids=ids)

    check_text_query(query, text_k)
    check_text_query(query, k)
    if min_sim is not None and not math.isfinite(min_sim):
        raise InvalidInput(f"min_sim must be a finite number, got {min_sim!r}")
    kind_values = None if kinds is None else [cypher.label(x) for x in kinds]
    dimension = await ops.get_dimension(store)
    checked = check_vector(vector, dimension)
    terms = query_terms(query)
    if k == 0 or text_k == 0 or not terms or dimension is None or kind_values == []:
        # One channel has nothing to do: the other alone, as it runs by itself.
        found = await text_alone()
        recalled = await ops.recall_memories(
            store, namespace, vector, k, kinds=kinds, include_obsolete=False, min_sim=min_sim
        )
        return recalled, found
    mode = await ops.index_mode(store, dimension)
    params: dict[str, Any] = {
        "namespace": namespace,
        "kinds": kind_values,
        "include_obsolete": False,
        "vector": mapping.FloatList(checked),
        "search_width": store.search_width,
        "memories": store._memories_seen,
    }
    text_params = {
        "text_index": cypher.FULLTEXT_INDEX,
        "query": lucene_query(terms),
        "text_candidates": text_candidates(text_k),
        "text_k": text_k,
    }
    statement, args = recall.first_statement(params, k, dimension, mode)

    both = cypher.hybrid(statement, ids=ids)

    async def work(tx: Tx) -> tuple[list[Recall], list[TextRecall] | list[TextId]]:
        record = single(await tx.run(both, **(params | args | text_params)))
        assert record is not None
        rows = await recall.candidates(tx, params, k, dimension, mode=mode, first=record["vector"])
        store._memories_seen = recall.memories_counted(rows, store._memories_seen)
        recalled = recall.rank(rows, checked, k, min_sim)
        text_rows: list[Any] = record["text_rows"]
        if len(text_rows) < text_k and record["text_raw"] >= text_candidates(text_k):
            text_rows = await _read_on(
                tx,
                ids,
                {
                    "index": cypher.FULLTEXT_INDEX,
                    "query": text_params["query"],
                    "namespace": namespace,
                    "kinds": kind_values,
                    "include_obsolete": False,
                    "k": text_k,
                },
            )
        return recalled, _text_ids(text_rows) if ids else _text_recalls(text_rows)

    try:
        return await store._read(work, "hybrid recall")
    except StoreError:
        # A missing full-text index, or a vector index replaced meanwhile: each channel by
        # itself, with its own way around it.
        found = await text_alone()
        recalled = await ops.recall_memories(
            store, namespace, vector, k, kinds=kinds, include_obsolete=False, min_sim=min_sim
        )
        return recalled, found


def text_candidates(k: int) -> int:
    """How many of the full-text index's best matches keyword recall first asks for, to find
    k of one namespace (and kinds) among them; fewer than k there, and it reads on unlimited."""
    return max(4 * k, 32)


async def read_text_index(tx: Tx) -> dict[str, Any] | None:
    record = single(await tx.run(cypher.FULLTEXT_INDEX_INFO, name=cypher.FULLTEXT_INDEX))
    return None if record is None else dict(record)


async def text_index_problems(store: Neo4jBase) -> list[str]:
    """What is wrong with the ``memory_text`` full-text index (an empty list: nothing)."""
    info = await store._read(read_text_index, "full-text index lookup")
    name = cypher.FULLTEXT_INDEX
    if info is None:
        return [f"full-text index {name!r} is missing: run `graphmem schema apply`"]
    problems = []
    if info["state"] != "ONLINE":
        problems.append(f"full-text index {name!r} is {info['state']}, not ONLINE")
    if list(info["labelsOrTypes"] or []) != ["Memory"]:
        problems.append(f"full-text index {name!r} is on {info['labelsOrTypes']}, not Memory")
    missing = sorted(set(TEXT_FIELDS) - set(info["properties"] or []))
    if missing:
        problems.append(f"full-text index {name!r} does not cover {', '.join(missing)}")
    return problems
