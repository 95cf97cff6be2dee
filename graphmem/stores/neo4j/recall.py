"""Vector recall on Neo4j: the shared vector index first, an exact scan when it cannot answer.

Why and how, in full: docs/design.md, "Module notes", ``graphmem.stores.neo4j.recall``.
"""

from __future__ import annotations

from typing import Any, Literal

import neo4j
import numpy as np

from graphmem.errors import InvalidInput
from graphmem.models import MAX_VECTOR_NORM, MIN_VECTOR_NORM, AnyMemory, MemoryKind, construct
from graphmem.stores.base import Recall
from graphmem.stores.neo4j import cypher
from graphmem.stores.neo4j.rows import filter_key, live, read_memory
from graphmem.stores.neo4j.tx import TornRead, Tx, single, sync_work

ALL_KINDS = [kind.value for kind in MemoryKind]

MIN_CANDIDATES = 32
SEARCH_CANDIDATES_MIN = 50
"""In-index filtered search of a database of more than ``SMALL_DATABASE`` memories asks the
index for at least this many candidates (and k), unless the store fixes its ``search_width``.
Chosen by
``bench/neo4j_index_recall.py`` on a million synthetic memories (query seed 101): a search of
the whole index for exactly 5 found 84 % of the true top 5, for 20 96 %, for 50 99 % (1 ms
more); in a namespace holding a fifth of it 98 %, 99.8 % and 99.8 % (3.4 ms more); in smaller
namespaces the filtered search is exact already. The smallest width with ≥ 98 % everywhere on
that seed; on held-out seed 202 the whole index gets 97.8 % (``bench/results/
neo4j_index_recall.md``)."""
SMALL_DATABASE = 10_000
"""Up to this many memories in the database (all namespaces), in-index search asks for k
candidates, not ``SEARCH_CANDIDATES_MIN``: on 10,000 synthetic memories a beam of 5 found
every one of the true top 5 in the whole index and in namespaces of 25 to 2,158 memories
(query seed 101, ``bench/results/neo4j_index_recall_10k_dev101.md``; held-out seed 202 the
same, ``neo4j_index_recall_10k.md``), where a beam of 50 cost up to 1 ms a query more. At
100,000 a beam of 5 found 97 % in the whole index and 76 % in a namespace of 2 % of it."""
MAX_INDEX_CANDIDATES = 8192
"""Beyond this many vector-index candidates, recall switches to an exact scan of the namespace."""
EXACT_MAX = 1000
"""Without in-index filtering, a namespace of at most this many memories (or holding at most
this many of the kinds asked for) that the first candidates did not fill is scanned exactly:
the shared index would have to hand over about (total / namespace)·k candidates to find k of it
(on Neo4j 5.26 with 10k memories, 43 ms for a namespace of 500 and 200 ms for one of 100, where
the scan takes 12 ms and 5 ms)."""


IndexMode = Literal["search", "search-fields", "procedure", "exact"]
"""How recall reaches candidates: in-index filtered SEARCH on the filter key or, on an index built
before it, on namespace, kind and obsolete flag (2026.01+); the vector-index procedure with
post-filtering; or an exact scan of the namespace."""

IndexFilter = Literal["key", "fields"]
"""What the vector index carries for in-index filtering: the filter key, or the three fields."""


async def read_index_state(tx: Tx) -> tuple[str, int | None, IndexFilter | None] | None:
    """The vector index's state, dimension and the filter properties it carries (None: none),
    or None if it does not exist."""
    record = single(await tx.run(cypher.VECTOR_INDEX_INFO, name=cypher.VECTOR_INDEX))
    if record is None:
        return None
    dims = ((record["options"] or {}).get("indexConfig") or {}).get("vector.dimensions")
    carried = set(record["properties"] or ())
    filtered: IndexFilter | None = None
    if cypher.FILTER_KEY in carried:
        filtered = "key"
    elif carried.issuperset(cypher.FILTER_FIELDS):
        filtered = "fields"
    return str(record["state"]), None if dims is None else int(dims), filtered


async def read_supports_search(tx: Tx) -> bool:
    """True on servers with in-index filtered vector search (Neo4j 2026.01 and later)."""
    kernel: list[str] = []
    languages: list[str] = []
    for record in await tx.run(cypher.SERVER_VERSION):
        if record["name"] == "Neo4j Kernel":
            kernel = list(record["versions"] or [])
        elif record["name"] == "Cypher":
            languages = list(record["versions"] or [])
    if not kernel or "25" not in languages:
        return False
    parts = kernel[0].split(".")
    try:
        year, month = int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return False
    return (year, month) >= (2026, 1)


index_state = sync_work(read_index_state)
""":func:`read_index_state` as a transaction function of the blocking driver."""
supports_search = sync_work(read_supports_search)
""":func:`read_supports_search` as a transaction function of the blocking driver."""


async def candidates(
    tx: Tx,
    params: dict[str, Any],
    k: int,
    dimension: int,
    *,
    mode: IndexMode,
    first: Any = None,
) -> list[dict[str, Any]]:
    """Rows ``{props, superseded}`` of at least k candidates when the namespace has them (see
    module doc); ``superseded`` says whether another memory SUPERSEDES the candidate.

    ``params`` holds namespace, kinds, include_obsolete and the query vector. ``first``: what
    :func:`first_statement`'s statement returned, run already (hybrid recall runs it beside
    keyword recall), as the ``vector`` of the statement that carried it.
    """
    if mode in ("search", "search-fields"):
        if first is None:
            query, args = _search(params, k, mode)
            found = [_row(r) | {"memories": r["memories"]} for r in await tx.run(query, **args)]
        else:
            found = list(first)
        if len(found) >= k:
            return found
        # Fewer than k: the namespace holds fewer, or the approximate search missed some (or
        # memories lack the flag the filter reads): the exact scan settles it.
    elif mode == "procedure":
        count = index_candidates(k)
        sized = False
        while True:
            record = first or single(
                await tx.run(
                    cypher.RECALL_INDEX,
                    index=cypher.VECTOR_INDEX,
                    candidates=count,
                    **ship_args(k, len(params["vector"])),
                    **params,
                )
            )
            first = None
            assert record is not None
            if record["found"] >= k:
                rows: list[dict[str, Any]] = record["rows"]
                return rows
            if record["raw"] < count or count >= MAX_INDEX_CANDIDATES:
                break
            if not sized:
                # What is asked for is a small share of the index. A small namespace, or a
                # few memories of the kinds asked for (a task cluster's Task nodes), is
                # scanned (below); a larger one is asked for as many candidates as should hold
                # 2k of it, judging its share by this answer, so the next round trip usually
                # does.
                sized = True
                upto = single(
                    await tx.run(
                        cypher.NAMESPACE_SIZE_UPTO,
                        namespace=params["namespace"],
                        kinds=params["kinds"],
                        cap=EXACT_MAX + 1,
                    )
                )
                if upto is not None and int(upto["size"]) <= EXACT_MAX:
                    break
                count = max(4 * count, -(-2 * k * count // max(int(record["found"]), 1)))
            else:
                count *= 4
            count = min(count, MAX_INDEX_CANDIDATES)
    elif first is not None:
        return list(first)
    result = await tx.run(
        cypher.RECALL_EXACT, dimension=dimension, **ship_args(k, dimension), **params
    )
    return [_row(r) for r in result]


def first_statement(
    params: dict[str, Any], k: int, dimension: int, mode: IndexMode
) -> tuple[str, dict[str, Any]]:
    """The statement :func:`candidates` runs first in ``mode``, and its parameters (beside
    ``params``): hybrid recall runs it in one statement with keyword recall's."""
    if mode in ("search", "search-fields"):
        return _search(params, k, mode)
    if mode == "procedure":
        args = {"index": cypher.VECTOR_INDEX, "candidates": index_candidates(k)}
        return cypher.RECALL_INDEX, args | ship_args(k, len(params["vector"]))
    return cypher.RECALL_EXACT, {"dimension": dimension, **ship_args(k, dimension)}


def _search(params: dict[str, Any], k: int, mode: IndexMode) -> tuple[str, dict[str, Any]]:
    """The in-index filtered search for k candidates and its parameters: one predicate on the
    filter keys of every kind and flag asked for, or three on an index built before the key."""
    kinds = params["kinds"] if params["kinds"] is not None else ALL_KINDS
    obsolete = [False, True] if params["include_obsolete"] else [False]
    width = search_candidates(k, params.get("search_width"), params.get("memories"))
    base = {"vector": params["vector"], "candidates": width, **ship_args(k, len(params["vector"]))}
    if mode == "search-fields":
        fields = {"namespace": params["namespace"], "kind_list": kinds, "obsolete": obsolete}
        return cypher.RECALL_SEARCH_FIELDS, base | fields
    keys = [filter_key(params["namespace"], kind, o) for kind in kinds for o in obsolete]
    return cypher.RECALL_SEARCH, base | {"keys": keys}


def _row(record: neo4j.Record) -> dict[str, Any]:
    # Not record.data(): it walks every float of the embedding in Python, which cost as much
    # as the whole query (10 ms for 5 rows on a busy 2-core machine).
    return {"props": record["props"], "superseded": record["superseded"]}


def search_candidates(k: int, width: int | None = None, memories: int | None = None) -> int:
    """How many candidates in-index filtered search asks the index for, to return k: the
    store's fixed ``width`` when it sets one; else k when the database is known to hold at most
    :data:`SMALL_DATABASE` memories, :data:`SEARCH_CANDIDATES_MIN` when it holds more or its
    size is not known yet (the search's beam is as wide as its limit, and in a large index a
    beam of k misses some of the true top k). Never fewer than k."""
    if width is None:
        small = memories is not None and memories <= SMALL_DATABASE
        width = k if small else SEARCH_CANDIDATES_MIN
    return max(k, width)


def index_candidates(k: int) -> int:
    """How many candidates recall first asks the shared index for without in-index filtering
    (older servers), to find k of one namespace after filtering."""
    return max(4 * k, MIN_CANDIDATES)


def memories_counted(rows: list[dict[str, Any]], before: int | None) -> int | None:
    """The database's count of memories that an in-index search's rows carry; ``before``
    when they carry none (an exact scan, or no rows)."""
    counted = rows[0].get("memories") if rows else None
    return int(counted) if isinstance(counted, int) else before


def shipped(k: int) -> int:
    """The most of the server's best candidates that travel back for the exact float64 re-rank:
    k, plus room for near-ties that the server's cosine may order differently (those within
    :func:`ship_margin` of the k-th best; the others stay on the server)."""
    return 2 * k + 4


def ship_margin(dimension: int) -> float:
    """How far below the k-th best's score a candidate the server ranked may be and still travel
    back for the exact re-rank: ``4·n·2⁻²⁴`` of Neo4j's cosine score ((1 + cos) / 2) for
    n-dimensional vectors (9.2e-5 at 384, 1.8e-4 of cosine). The server scores in float32, whose
    dot product of unit-norm vectors is off by at most about n·2⁻²⁴ of cosine (and its norms
    by as much again): a candidate further below the line than that has a float64 cosine below
    the k that scored above it, and cannot rank among the top k. Near-ties within it all travel,
    to be ordered exactly here.

    Each row past k cost ~0.1 ms of client CPU (its embedding's floats decoded) and server
    time: at a beam of 50, rows shipped 14 → 5.04, statement p50 6.9 → 5.8 ms, client CPU per
    query 3.4 → 2.3 ms against shipping all of :func:`shipped` (1,000 memories, 300 queries
    × 3, interleaved)."""
    return 4 * dimension * 2.0**-24


def ship_args(k: int, dimension: int) -> dict[str, Any]:
    """The recall statements' parameters for what travels back: at most :func:`shipped` rows,
    those within :func:`ship_margin` of the k-th best's score."""
    return {"ship": shipped(k), "k": k, "margin": ship_margin(dimension)}


def rank(
    rows: list[dict[str, Any]], query: list[float], k: int, min_sim: float | None
) -> list[Recall]:
    """Exact cosine ranking of candidate rows: best first, ties by id, at most k."""
    # A candidate deleted while the query ran comes back with no properties: skip it. One
    # caught half-deleted or half-written is read again (TornRead; rank runs in the read body).
    rows = [r for r in rows if live(r["props"])]
    for r in rows:
        if not isinstance(r["props"].get("embedding"), list):
            raise TornRead(
                InvalidInput(f"memory {r['props']['id']!r} was read without its embedding")
            )
    if not rows:
        return []
    unique = list({(r["props"]["namespace"], r["props"]["id"]): r for r in rows}.values())
    # Rank the raw rows and build models only for the ones kept: validating every candidate's
    # embedding cost more than the query itself.
    matrix, norms = _embeddings(unique)
    q = np.asarray(query, dtype=np.float64)
    sims = matrix @ q / (norms * np.linalg.norm(q))
    order = sorted(range(len(unique)), key=lambda i: (-sims[i], unique[i]["props"]["id"]))
    out = []
    for i in order:
        sim = float(sims[i])
        if min_sim is not None and sim < min_sim:
            break
        row = unique[i]
        out.append(
            # to_memory validated the memory; validating the Recall around it would do so again.
            construct(
                Recall,
                {
                    "memory": _memory(row["props"], matrix[i].tolist()),
                    "sim": sim,
                    "superseded": bool(row["superseded"]),
                },
            )
        )
        if len(out) == k:
            break
    return out


def _embeddings(rows: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
    """The rows' embeddings as a matrix and their norms, checked as a memory's embedding is
    (finite, not zero, norm in bounds) for all rows at once; TornRead for any that is not."""
    try:
        matrix = np.array([r["props"]["embedding"] for r in rows], dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise TornRead(InvalidInput("memories were read with malformed embeddings")) from e
    norms = np.linalg.norm(matrix, axis=1)
    bad = ~((norms >= MIN_VECTOR_NORM) & (norms <= MAX_VECTOR_NORM))  # NaN and inf included
    if matrix.ndim != 2 or bad.any():
        raise TornRead(InvalidInput("memories were read with embeddings that are not vectors"))
    return matrix, norms


def _memory(props: dict[str, Any], embedding: list[float]) -> AnyMemory:
    """The memory of a live row with its ``embedding`` as :func:`_embeddings` checked it: the
    rest validated, the embedding attached (pydantic's check of 384 floats was half of each
    model's cost)."""
    rest = {key: value for key, value in props.items() if key != "embedding"}
    memory = read_memory(rest)
    assert memory is not None  # live, checked by rank
    # Ours alone (just built from the row): attached in place, not through a model copy.
    memory.__dict__["embedding"] = embedding
    memory.__pydantic_fields_set__.add("embedding")
    return memory
