"""Every Cypher statement the Neo4j store and schema setup run, in one place.

Values always travel as ``$params``. The only text ever interpolated is a node label or a
relationship type, and only through :func:`label` / :func:`rel_type`, which accept members of
:class:`MemoryKind` / :class:`EdgeKind` and nothing else; a few statements are joined from
constant fragments of this module that several of them share.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from typing import Final

from graphmem.errors import InvalidInput
from graphmem.models import EdgeKind, MemoryKind

META_NAME: Final = "graphmem"
"""``name`` of the one GraphmemMeta node that records schema version and dimension."""

VECTOR_INDEX: Final = "memory_embedding"
FULLTEXT_INDEX: Final = "memory_text"


def label(kind: MemoryKind | str) -> str:
    """A node label from the MemoryKind allow-list, safe to interpolate."""
    try:
        return MemoryKind(kind).value
    except ValueError as e:
        raise InvalidInput(f"unknown memory kind {str(kind)[:40]!r}") from e


def rel_type(kind: EdgeKind | str) -> str:
    """A relationship type from the EdgeKind allow-list, safe to interpolate."""
    try:
        return EdgeKind(kind).value
    except ValueError as e:
        raise InvalidInput(f"unknown edge kind {str(kind)[:40]!r}") from e


def _rel_types(kinds: Iterable[EdgeKind]) -> str:
    return "|".join(rel_type(k) for k in kinds)


# ---- schema and meta -------------------------------------------------------------------------

META_GET: Final = """
MATCH (g:GraphmemMeta {name: $name})
RETURN g.dimension AS dimension, g.schema_version AS version
"""

META_FIX_DIMENSION: Final = """
MERGE (g:GraphmemMeta {name: $name})
ON CREATE SET g.created_at = datetime()
WITH g
FOREACH (_ IN CASE WHEN g.dimension IS NULL THEN [1] ELSE [] END | SET g.dimension = $dimension)
RETURN g.dimension AS dimension
"""

# One GraphmemMeta node per namespace records the embedder that made its vectors, named
# EMBEDDER_PREFIX + namespace so the name uniqueness constraint keeps it single.
EMBEDDER_PREFIX: Final = "embedder:"

_EMBEDDER_FIELDS = """
RETURN g.embedder AS name, g.dimension AS dimension, g.probe AS probe, g.pending AS pending,
       g.recorded_at AS recorded_at
"""

EMBEDDER_GET: Final = "MATCH (g:GraphmemMeta {name: $name})" + _EMBEDDER_FIELDS

EMBEDDER_ADOPT: Final = (
    """
MERGE (g:GraphmemMeta {name: $name})
ON CREATE SET g += $props
"""
    + _EMBEDDER_FIELDS
)

EMBEDDER_REPLACE: Final = (
    """
MERGE (g:GraphmemMeta {name: $name})
SET g += $props
"""
    + _EMBEDDER_FIELDS
)

EMBEDDER_REMOVE: Final = "MATCH (g:GraphmemMeta {name: $name}) DELETE g"

SET_EMBEDDINGS_MISSING: Final = """
UNWIND $ids AS id
OPTIONAL MATCH (m:Memory {namespace: $namespace, id: id})
WITH id, m WHERE m IS NULL
RETURN id LIMIT 1
"""

SET_EMBEDDINGS: Final = """
UNWIND $rows AS row
MATCH (m:Memory {namespace: $namespace, id: row.id})
SET m.embedding = row.embedding
"""

VECTOR_INDEX_INFO: Final = """
SHOW VECTOR INDEXES YIELD name, state, options, properties
WHERE name = $name
RETURN state, options, properties
"""

HTTP_SETTINGS: Final = """
SHOW SETTINGS YIELD name, value
WHERE name IN $names
RETURN name, value
"""

SERVER_VERSION: Final = """
CALL dbms.components() YIELD name, versions
RETURN name, versions
"""

FILTER_KEY: Final = "filter_key"
"""The property that combines a memory's namespace, kind and obsolete flag (as
:func:`graphmem.stores.neo4j.rows.filter_key` spells it),
which the vector index carries for in-index filtering (Neo4j 2026.01+): one predicate."""

FILTER_FIELDS: Final = ("namespace", "kind", "obsolete")
"""The filter properties of a vector index built before :data:`FILTER_KEY` (three predicates);
recall still reads such an index, and ``graphmem schema apply`` replaces it."""


_FILTER_KEY_OF = """m.namespace + '|' + m.kind + '|'
    + CASE WHEN coalesce(m.obsolete, false) THEN 'obsolete' ELSE 'live' END"""

# Every statement that creates a memory or changes its obsolete flag ends with this (namespace
# and kind never change), so the key is always derived from the stored values.
SET_FILTER_KEY: Final = "\nSET m.filter_key = " + _FILTER_KEY_OF + "\n"

# Neo4j 2026.01+: the vector index also holds the filter key, so recall filters inside the
# index (SEARCH ... WHERE m.filter_key IN ...), asking it for the store's search_width
# candidates (see RECALL_SEARCH). The rest of the schema
# (002_indexes.cypher) creates the plain index on older servers; with this one in place its
# IF NOT EXISTS makes it a no-op.
VECTOR_INDEX_FILTERED: Final = """
CYPHER 25
CREATE VECTOR INDEX memory_embedding IF NOT EXISTS
FOR (m:Memory) ON m.embedding
WITH [m.filter_key]
OPTIONS {indexConfig: {
  `vector.dimensions`: $dimension,
  `vector.similarity_function`: 'cosine',
  `vector.quantization.enabled`: false
}}
"""

# `graphmem schema apply` replaces a vector index that does not carry the filter key.
DROP_VECTOR_INDEX: Final = "DROP INDEX memory_embedding IF EXISTS"

AWAIT_INDEXES: Final = "CALL db.awaitIndexes($seconds)"

INDEXES_NOT_ONLINE: Final = """
SHOW INDEXES YIELD name, state, populationPercent
WHERE state <> 'ONLINE'
RETURN name, state, populationPercent
"""

# Any node uniqueness constraint (or node key) counts, whatever its name: the store needs the
# guarantee, not our spelling of it. Neo4j has named the type UNIQUENESS and later
# NODE_PROPERTY_UNIQUENESS.
UNIQUE_CONSTRAINTS: Final = """
SHOW CONSTRAINTS YIELD type, entityType, labelsOrTypes, properties
WHERE entityType = 'NODE' AND (type CONTAINS 'UNIQUE' OR type CONTAINS 'KEY')
RETURN labelsOrTypes AS labels, properties
"""

# Only run while the uniqueness constraint is missing (it scans every memory).
DUPLICATE_IDS: Final = """
MATCH (m:Memory)
WITH m.namespace AS namespace, m.id AS id, count(*) AS copies
WHERE copies > 1
WITH namespace, id, copies ORDER BY copies DESC, namespace, id
RETURN count(*) AS total, collect({namespace: namespace, id: id, copies: copies})[..$limit] AS shown
"""

DUPLICATE_META: Final = """
MATCH (g:GraphmemMeta)
WITH g.name AS name, count(*) AS copies
WHERE copies > 1
RETURN name, copies
"""

# Shown to users in the duplicates error: keeps the most recently updated node of each id.
DEDUPE_HINT: Final = (
    "MATCH (m:Memory) WITH m ORDER BY m.updated_at DESC "
    "WITH m.namespace AS ns, m.id AS id, collect(m) AS ms WHERE size(ms) > 1 "
    "UNWIND ms[1..] AS extra DETACH DELETE extra"
)
META_DEDUPE_HINT: Final = (
    "MATCH (g:GraphmemMeta) WITH g ORDER BY g.dimension IS NULL "
    "WITH g.name AS name, collect(g) AS gs WHERE size(gs) > 1 "
    "UNWIND gs[1..] AS extra DETACH DELETE extra"
)

# ---- writes ----------------------------------------------------------------------------------

KINDS_OF: Final = """
UNWIND $rows AS row
MATCH (m:Memory {namespace: row.namespace, id: row.id})
RETURN m.namespace AS namespace, m.id AS id, m.kind AS kind
"""


@cache
def upsert_nodes(kind: MemoryKind) -> str:
    """Insert nodes of one kind, or overwrite the content of those that exist.

    A new node gets ``row.utility`` (q, q_updates, uses, successes, q_label) and ``row.content``; an
    existing one only ``row.content``, which holds every other field of the kind, null where the
    memory has none (``+=`` with null removes a stale property). Nothing here reads the node, so
    a concurrent :data:`UPDATE_UTILITY` is never overwritten by a value read before it committed.
    An import (``keep_utility=False``) puts the utility in ``row.content`` too: a plain write of
    the values the file holds, which wins over increments committed before it, by design. The
    filter key follows the written values.
    """
    return (
        f"""
UNWIND $rows AS row
MERGE (m:Memory {{namespace: row.namespace, id: row.id}})
ON CREATE SET m += row.utility
SET m += row.content
SET m:{label(kind)}"""
        + SET_FILTER_KEY
    )


MISSING_ENDPOINTS: Final = """
UNWIND $rows AS row
UNWIND [row.src, row.dst] AS end
WITH DISTINCT row.namespace AS namespace, end
WHERE NOT EXISTS { MATCH (:Memory {namespace: namespace, id: end}) }
RETURN namespace, end AS id
LIMIT 1
"""


@cache
def upsert_edges(kind: EdgeKind) -> str:
    """Create edges of one kind, or merge the props of edges that exist."""
    return f"""
UNWIND $rows AS row
MATCH (a:Memory {{namespace: row.namespace, id: row.src}})
MATCH (b:Memory {{namespace: row.namespace, id: row.dst}})
MERGE (a)-[r:{rel_type(kind)}]->(b)
ON CREATE SET r.created_at = row.created_at
SET r += row.props
"""


PATCH: Final = (
    """
MATCH (m:Memory {namespace: $namespace, id: $id})
SET m += $props
"""
    + SET_FILTER_KEY
    + "RETURN properties(m) AS props\n"
)

EXISTING_IDS: Final = """
UNWIND $ids AS id
MATCH (m:Memory {namespace: $namespace, id: id})
RETURN m.id AS id
"""

# Neo4j Browser styles (GraSS) print numbers as stored: `q_label` is Q with two decimals, for
# captions. Only the store writes it, with Q (new nodes and imports: rows.node_row).
Q_LABEL: Final = "q_label"

# Each SET item reads the property it writes ("direct dependency"), so Neo4j takes the node's
# write lock before reading: concurrent updates serialise and none is lost. Ids come sorted so
# concurrent calls lock in the same order.
UPDATE_UTILITY: Final = """
UNWIND $ids AS id
MATCH (m:Memory {namespace: $namespace, id: id})
SET m.q = m.q + $alpha * ($reward - m.q),
    m.q_updates = m.q_updates + 1,
    m.uses = m.uses + 1,
    m.successes = m.successes + $success_inc,
    m.updated_at = $now
SET m.q_label = CASE size(split(toString(round(m.q, 2)), '.')[1]) WHEN 1
    THEN toString(round(m.q, 2)) + '0' ELSE toString(round(m.q, 2)) END
RETURN properties(m) AS props
"""

# `graphmem schema apply` gives nodes written before q_label existed their caption, a batch
# per transaction; it returns how many it set (0 when every label is in step with Q).
BACKFILL_Q_LABEL: Final = """
MATCH (m:Memory)
WHERE m.q IS NOT NULL AND m.q_label IS NULL
WITH m LIMIT $batch
SET m.q_label = CASE size(split(toString(round(m.q, 2)), '.')[1]) WHEN 1
    THEN toString(round(m.q, 2)) + '0' ELSE toString(round(m.q, 2)) END
RETURN count(m) AS set
"""

# `graphmem schema apply` gives nodes written before the filter key existed theirs (and mends
# any out of step), in one pass committed every $batch rows; it runs as an auto-commit statement.
BACKFILL_FILTER_KEY: Final = (
    """
MATCH (m:Memory)
WHERE m.kind IS NOT NULL AND m.namespace IS NOT NULL
  AND coalesce(m.filter_key, '') <> """
    + _FILTER_KEY_OF
    + """
CALL (m) {"""
    + SET_FILTER_KEY
    + """} IN TRANSACTIONS OF $batch ROWS
"""
)

DETACH_DELETE: Final = """
MATCH (m:Memory {namespace: $namespace})
WHERE m.id IN $ids
DETACH DELETE m
"""


@cache
def owned_candidates(kind: MemoryKind, owners: tuple[EdgeKind, ...]) -> str:
    """Nodes of ``kind`` owned (via ``owners`` edges) by the memories about to be deleted."""
    return f"""
MATCH (d:Memory {{namespace: $namespace}})-[:{_rel_types(owners)}]->(c:{label(kind)})
WHERE d.id IN $ids AND NOT c.id IN $ids
RETURN DISTINCT c.id AS id
"""


@cache
def owned_orphans(kind: MemoryKind, owners: tuple[EdgeKind, ...]) -> str:
    """Candidates of ``kind`` left with no incoming ``owners`` edge."""
    return f"""
MATCH (c:{label(kind)} {{namespace: $namespace}})
WHERE c.id IN $ids AND NOT EXISTS {{ MATCH (c)<-[:{_rel_types(owners)}]-(:Memory) }}
RETURN c.id AS id
"""


@cache
def about_candidates(kind: MemoryKind) -> str:
    """Nodes of ``kind`` that are ABOUT the memories about to be deleted."""
    return f"""
MATCH (c:{label(kind)})-[:{rel_type(EdgeKind.ABOUT)}]->(d:Memory {{namespace: $namespace}})
WHERE d.id IN $ids AND NOT c.id IN $ids
RETURN DISTINCT c.id AS id
"""


@cache
def about_orphans(kind: MemoryKind) -> str:
    """Candidates of ``kind`` left ABOUT nothing."""
    return f"""
MATCH (c:{label(kind)} {{namespace: $namespace}})
WHERE c.id IN $ids AND NOT EXISTS {{ MATCH (c)-[:{rel_type(EdgeKind.ABOUT)}]->(:Memory) }}
RETURN c.id AS id
"""


# ---- reads -----------------------------------------------------------------------------------

# `m.kind IS NOT NULL` (here and below): a node deleted while the statement runs reads as having
# no properties; the store skips such rows too (rows.live), this keeps most from travelling.
GET_MANY: Final = """
UNWIND $ids AS id
MATCH (m:Memory {namespace: $namespace, id: id})
WHERE m.kind IS NOT NULL
RETURN properties(m) AS props
"""

# A conditional write (upsert's ``expect_live``) write-locks what its writer read, then reads
# it again: a concurrent writer retiring the same memories has committed or waits for this one.
# Ids come sorted so concurrent calls lock in the same order.
LOCK_READ: Final = """
UNWIND $rows AS row
MATCH (m:Memory {namespace: row.namespace, id: row.id})
SET m.cas_lock = true
REMOVE m.cas_lock
RETURN properties(m) AS props, EXISTS { (m)<-[:SUPERSEDES]-(:Memory) } AS superseded
"""

EDGES_OF: Final = """
MATCH (a:Memory {namespace: $namespace, id: $id})
MATCH (a)-[r]-(b:Memory)
WHERE type(r) IN $kinds
  AND ($direction = 'both'
       OR ($direction = 'out' AND startNode(r) = a)
       OR ($direction = 'in' AND endNode(r) = a))
RETURN DISTINCT type(r) AS kind, startNode(r).id AS src, endNode(r).id AS dst,
       properties(r) AS props
"""

# Which of these memories another one SUPERSEDES: retrieval drops them, in one round trip.
SUPERSEDED: Final = """
UNWIND $ids AS id
MATCH (m:Memory {namespace: $namespace, id: id})<-[:SUPERSEDES]-(:Memory)
RETURN DISTINCT id
"""

# Each recall row carries whether another memory SUPERSEDES it, so retrieval needs no second
# round trip to drop superseded memories.
# (written out in each query: cypher.py interpolates nothing but allow-listed labels)

# What travels back of the candidates `m` and their `score` (the server's exact cosine): of the
# `$ship` best, only those within `$margin` of the k-th best's score (all of them when there are
# fewer than k). Embeddings are most of a row's bytes, and neo4j_recall.ship_margin says why no
# other candidate can rank among the top k; the caller re-scores these in float64. Leaves `m`.
_RANKABLE: Final = """
ORDER BY score DESC, m.id
LIMIT $ship
WITH collect({m: m, score: score}) AS top
WITH top, top[$k - 1].score AS kth
UNWIND top AS t
WITH t WHERE kth IS NULL OR t.score >= kth - $margin
WITH t.m AS m
"""

# The vector index holds every namespace: ask it for `$candidates` neighbours and keep those of
# this namespace (and kinds, and not obsolete); `raw` tells the caller whether it ran dry and
# `found` how many passed the filter. Of those, only the rankable ones travel back (_RANKABLE).
RECALL_INDEX: Final = (
    """
CALL db.index.vector.queryNodes($index, $candidates, $vector) YIELD node
WITH count(*) AS raw,
     collect(CASE WHEN node.namespace = $namespace
                   AND ($kinds IS NULL OR node.kind IN $kinds)
                   AND ($include_obsolete OR NOT coalesce(node.obsolete, false))
              THEN node END) AS kept
CALL (kept) {
  UNWIND kept AS m
  WITH m, vector.similarity.cosine(m.embedding, $vector) AS score"""
    + _RANKABLE
    + """  RETURN collect({props: properties(m),
                  superseded: EXISTS { (m)<-[:SUPERSEDES]-(:Memory) }}) AS rows
}
RETURN raw, size(kept) AS found, rows
"""
)

# How many memories the namespace holds, counted up to $cap (an index seek that stops there):
# whether recall without in-index filtering scans a small namespace instead of the shared index.
# The memories recall may return (of the kinds asked for; None: every kind), counted up to $cap.
NAMESPACE_SIZE_UPTO: Final = """
MATCH (m:Memory {namespace: $namespace})
WHERE $kinds IS NULL OR m.kind IN $kinds
WITH m LIMIT $cap
RETURN count(m) AS size
"""

# What an in-index search ships: _RANKABLE's rows, each with the database's count of memories
# (`memories`, read before the search) carried along.
_SEARCH_SHIPPED: Final = """
WITH m, score, memories
ORDER BY score DESC, m.id
LIMIT $ship
WITH collect({m: m, score: score}) AS top, memories
WITH top, memories, top[$k - 1].score AS kth
UNWIND top AS t
WITH t, memories WHERE kth IS NULL OR t.score >= kth - $margin
WITH t.m AS m, memories
RETURN properties(m) AS props, EXISTS { (m)<-[:SUPERSEDES]-(:Memory) } AS superseded, memories
"""

# In-index filtering (Neo4j 2026.01+, index created with VECTOR_INDEX_FILTERED): the index
# itself keeps only this namespace's live memories of these kinds. It is asked for more
# candidates than k in a large database (neo4j_recall.search_candidates: an HNSW search for
# exactly k misses some of the true top k there), and of the `$ship` best by its score only the
# ones within `$margin` of the k-th best's travel back. Every row carries the database's count
# of memories (a count-store read, no scan): the store sizes the next search's beam by it.
# One predicate on the filter key (the keys of every kind and flag asked for) where the three
# of RECALL_SEARCH_FIELDS cost ~1 ms per query more at 100k.
RECALL_SEARCH: Final = (
    """
CYPHER 25
CALL () { MATCH (each:Memory) RETURN count(each) AS memories }
MATCH (m:Memory)
  SEARCH m IN (
    VECTOR INDEX memory_embedding
    FOR $vector
    WHERE m.filter_key IN $keys
    LIMIT $candidates
  ) SCORE AS score
"""
    + _SEARCH_SHIPPED
)

# The same on an index that carries namespace, kind and the obsolete flag (FILTER_FIELDS), as
# schema apply built it before the filter key.
RECALL_SEARCH_FIELDS: Final = (
    """
CYPHER 25
CALL () { MATCH (each:Memory) RETURN count(each) AS memories }
MATCH (m:Memory)
  SEARCH m IN (
    VECTOR INDEX memory_embedding
    FOR $vector
    WHERE m.namespace = $namespace AND m.kind IN $kind_list AND m.obsolete IN $obsolete
    LIMIT $candidates
  ) SCORE AS score
"""
    + _SEARCH_SHIPPED
)

# Exact cosine over the namespace alone, for when the index is missing or cannot fill k; only
# the rankable candidates travel back (_RANKABLE).
RECALL_EXACT: Final = (
    """
MATCH (m:Memory {namespace: $namespace})
WHERE m.embedding IS NOT NULL AND size(m.embedding) = $dimension
  AND ($kinds IS NULL OR m.kind IN $kinds) AND m.kind IS NOT NULL
  AND ($include_obsolete OR NOT coalesce(m.obsolete, false))
WITH m, vector.similarity.cosine(m.embedding, $vector) AS score"""
    + _RANKABLE
    + """RETURN properties(m) AS props, EXISTS { (m)<-[:SUPERSEDES]-(:Memory) } AS superseded
"""
)

FIND_BY_HASH: Final = """
MATCH (m:Memory {namespace: $namespace, content_hash: $hash})
WHERE m.kind = $kind
RETURN properties(m) AS props
ORDER BY coalesce(m.obsolete, false), m.created_at, m.id
LIMIT 1
"""

# Keyset pagination: stable (namespace, id) order without SKIP's quadratic cost.
ITER_NODES: Final = """
MATCH (m:Memory)
WHERE ($namespace IS NULL OR m.namespace = $namespace)
  AND ($kinds IS NULL OR m.kind IN $kinds) AND m.kind IS NOT NULL
  AND (m.namespace > $after_namespace
       OR (m.namespace = $after_namespace AND m.id > $after_id))
RETURN properties(m) AS props
ORDER BY m.namespace, m.id
LIMIT $limit
"""

ITER_EDGES: Final = """
MATCH (a:Memory)-[r]->(b:Memory)
WHERE ($namespace IS NULL OR a.namespace = $namespace) AND type(r) IN $kinds
RETURN a.namespace AS namespace, type(r) AS kind, a.id AS src, b.id AS dst,
       properties(r) AS props
ORDER BY namespace, kind, src, dst
SKIP $skip
LIMIT $limit
"""

NAMESPACES: Final = """
MATCH (m:Memory)
RETURN DISTINCT m.namespace AS namespace
ORDER BY namespace
"""

# The same under text prefixes: a seek on the namespace range index per prefix, so only the
# memories of those namespaces are read, not the whole graph (a LangGraph search under a
# user's namespace), in one round trip.
NAMESPACES_UNDER: Final = """
UNWIND $prefixes AS prefix
CALL (prefix) {
  MATCH (m:Memory)
  WHERE m.namespace STARTS WITH prefix
  RETURN DISTINCT m.namespace AS namespace
}
RETURN DISTINCT namespace
ORDER BY namespace
"""


# ---- finishing an episode (one transaction; see Neo4jStore.finish_episode) -------------------

# Writing a property takes the node's write lock, held to the end of the transaction: a second
# finish of the same episode waits here until the first commits, then reads its result.
LOCK_EPISODE: Final = """
MATCH (e:Memory {namespace: $namespace, id: $id})
SET e.finish_lock = true
REMOVE e.finish_lock
RETURN properties(e) AS props
"""

RETRIEVED_BY: Final = """
MATCH (e:Memory {namespace: $namespace, id: $id})-[r:RETRIEVED]->(m:Memory)
RETURN m.id AS dst, properties(r) AS props
"""

# The status condition sits in the MATCH: a finish that is not the first changes nothing.
CLOSE_EPISODE: Final = """
MATCH (e:Memory {namespace: $namespace, id: $id})
WHERE e.status = 'open'
SET e += $props
RETURN properties(e) AS props
"""

ANNOTATE_RETRIEVED: Final = """
UNWIND $rows AS row
MATCH (e:Memory {namespace: $namespace, id: $id})-[r:RETRIEVED]->(m:Memory {id: row.id})
WHERE m.namespace = $namespace
SET r.q_after = row.q, r.alpha = $alpha
"""

MARK_USED: Final = """
UNWIND $ids AS mid
MATCH (e:Memory {namespace: $namespace, id: $id})-[r:RETRIEVED]->(m:Memory {id: mid})
WHERE m.namespace = $namespace
SET r.used = true
"""

# ---- keyword recall (hybrid retrieval's full-text channel) -----------------------------------


# The full-text index holds every namespace, in Lucene's BM25 order: ask it for its
# `$candidates` best (a limit lets Lucene keep only a top list instead of ranking every match),
# keep this namespace's live memories of these kinds, the first k of them; `raw` tells the caller
# whether the index ran dry. `$query` is built by graphmem.stores.words.lucene_query
# (escaped words, never syntax from user text).
TEXT_RECALL_TOP: Final = """
CALL db.index.fulltext.queryNodes($index, $query, {limit: $candidates}) YIELD node, score
WITH count(*) AS raw,
     collect(CASE WHEN node.namespace = $namespace
                   AND ($kinds IS NULL OR node.kind IN $kinds)
                   AND ($include_obsolete OR NOT coalesce(node.obsolete, false))
              THEN {m: node, score: score} END)[..$k] AS kept
CALL (kept) {
  UNWIND kept AS t
  WITH t.m AS m, t.score AS score
  RETURN collect({props: properties(m), score: score,
                  superseded: EXISTS { (m)<-[:SUPERSEDES]-(:Memory) }}) AS rows
}
RETURN raw, rows
"""

# TEXT_RECALL_TOP with its own parameter names for the index, the candidates and k, so that it
# can share a statement with a vector recall, whose names these are too.
_TEXT_RECALL_TOP_BESIDE: Final = (
    TEXT_RECALL_TOP.replace("($index,", "($text_index,")
    .replace("{limit: $candidates}", "{limit: $text_candidates}")
    .replace("[..$k]", "[..$text_k]")
)

# The same without a limit, for when the best candidates held fewer than k of the namespace:
# the procedure streams in score order, and the statement stops once k have passed the filter.
TEXT_RECALL: Final = """
CALL db.index.fulltext.queryNodes($index, $query) YIELD node, score
WITH node AS m, score
WHERE m.namespace = $namespace
  AND ($kinds IS NULL OR m.kind IN $kinds)
  AND ($include_obsolete OR NOT coalesce(m.obsolete, false))
WITH m, score LIMIT $k
RETURN properties(m) AS props, score, EXISTS { (m)<-[:SUPERSEDES]-(:Memory) } AS superseded
"""

# Keyword recall's answer without the memories (recall_text_ids, hybrid recall): each row's id,
# score, superseded flag and whether it holds an embedding. Decoding a memory's embedding cost
# the client ~0.1 ms a row, and hybrid recall reads few of the keyword list's memories.
_TEXT_ID_ROW: Final = "id: m.id, embedded: m.embedding IS NOT NULL"
TEXT_RECALL_TOP_IDS: Final = TEXT_RECALL_TOP.replace("props: properties(m)", _TEXT_ID_ROW)
TEXT_RECALL_IDS: Final = TEXT_RECALL.replace(
    "RETURN properties(m) AS props,", "RETURN m.id AS id, m.embedding IS NOT NULL AS embedded,"
)


def _with_text(vector: str, returns: str, *, ids: bool = False) -> str:
    """Hybrid recall's one round trip: the first vector recall statement and TEXT_RECALL_TOP
    (as ``$text_index``, ``$text_candidates``, ``$text_k``; its rows as TEXT_RECALL_TOP_IDS's
    if ``ids``), each in its own subquery. The vector statement's rows are collected as
    ``returns`` says (one map a row), or, for a statement that returns one row already
    (RECALL_INDEX), passed as ``vector``. Both are constants of this module (no value reaches
    the text)."""
    head, body = "", vector.strip()
    if body.startswith("CYPHER 25"):
        head, body = "CYPHER 25\n", body.removeprefix("CYPHER 25").strip()
    text = _TEXT_RECALL_TOP_BESIDE.strip()
    if ids:
        text = text.replace("props: properties(m)", _TEXT_ID_ROW)
    return (
        head
        + "CALL () {\n  CALL () {\n"
        + text
        + "\n  }\n  RETURN raw AS text_raw, rows AS text_rows\n}\n"
        + "CALL () {\n  CALL () {\n"
        + body
        + "\n  }\n  RETURN "
        + returns
        + " AS vector\n}\nRETURN text_raw, text_rows, vector\n"
    )


# How each first vector-recall statement's rows come back in hybrid recall's statement.
_VECTOR_ROWS: Final = {
    RECALL_SEARCH: "collect({props: props, superseded: superseded, memories: memories})",
    RECALL_SEARCH_FIELDS: "collect({props: props, superseded: superseded, memories: memories})",
    RECALL_INDEX: "{raw: raw, found: found, rows: rows}",
    RECALL_EXACT: "collect({props: props, superseded: superseded})",
}
HYBRID_SEARCH: Final = _with_text(RECALL_SEARCH, _VECTOR_ROWS[RECALL_SEARCH])
HYBRID_SEARCH_FIELDS: Final = _with_text(RECALL_SEARCH_FIELDS, _VECTOR_ROWS[RECALL_SEARCH_FIELDS])
HYBRID_INDEX: Final = _with_text(RECALL_INDEX, _VECTOR_ROWS[RECALL_INDEX])
HYBRID_EXACT: Final = _with_text(RECALL_EXACT, _VECTOR_ROWS[RECALL_EXACT])

_HYBRID: Final = {
    RECALL_SEARCH: HYBRID_SEARCH,
    RECALL_SEARCH_FIELDS: HYBRID_SEARCH_FIELDS,
    RECALL_INDEX: HYBRID_INDEX,
    RECALL_EXACT: HYBRID_EXACT,
}
_HYBRID_IDS: Final = {
    first: _with_text(first, rows, ids=True) for first, rows in _VECTOR_ROWS.items()
}


def hybrid(first: str, *, ids: bool = False) -> str:
    """The statement that runs ``first`` (one of the vector recall statements above) beside
    keyword recall, in one round trip (keyword rows as TEXT_RECALL_TOP_IDS's if ``ids``)."""
    return (_HYBRID_IDS if ids else _HYBRID)[first]


FULLTEXT_INDEX_INFO: Final = """
SHOW FULLTEXT INDEXES YIELD name, state, labelsOrTypes, properties
WHERE name = $name
RETURN state, labelsOrTypes, properties
"""
