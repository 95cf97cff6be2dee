"""Keyword recall on Neo4j: the ``memory_text`` full-text index (Lucene, BM25) scoped like recall.

``graphmem schema apply`` creates the index (``schemas/002_indexes.cypher``) over the fields in
:data:`graphmem.stores.embedded.fulltext.TEXT_FIELDS`. :func:`recall_text` asks it with
``db.index.fulltext.queryNodes`` for the query's words (escaped by
:func:`~graphmem.stores.embedded.fulltext.lucene_query`, so user text is never Lucene syntax), at
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
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from graphmem.errors import StoreError
from graphmem.models import MemoryKind, check_namespace, construct
from graphmem.stores.base import TextRecall, check_text_query
from graphmem.stores.embedded.fulltext import TEXT_FIELDS, lucene_query, query_terms, rank_text
from graphmem.stores.neo4j import cypher
from graphmem.stores.neo4j.rows import read_memory
from graphmem.stores.neo4j.tx import Tx, single

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from graphmem.stores.neo4j.ops import Neo4jBase


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
    check_namespace(namespace)
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

    async def work(tx: Tx) -> list[TextRecall]:
        top = single(await tx.run(cypher.TEXT_RECALL_TOP, candidates=text_candidates(k), **params))
        assert top is not None
        rows: list[Any] = top["rows"]
        if len(rows) < k and top["raw"] >= text_candidates(k):
            # The best candidates were mostly other namespaces' (or kinds'): read on, in order.
            rows = [r.data() for r in await tx.run(cypher.TEXT_RECALL, **params)]
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
    ids = [m.id for m, _ in ranked]
    gone = await ops.superseded(store, namespace, ids) if ids else set()
    return [TextRecall(memory=m, score=score, superseded=m.id in gone) for m, score in ranked]


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
