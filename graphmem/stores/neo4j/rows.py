"""Conversions between graphmem's models and the rows the Neo4j store sends and receives.

Pure functions, no I/O: a memory becomes flat primitive properties (its JSON form without nulls,
since Neo4j stores no null) and rows are grouped per kind for UNWIND.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from graphmem.errors import DimensionMismatch, InvalidInput
from graphmem.models import (
    UTILITY_FIELDS,
    AnyMemory,
    Edge,
    EdgeKind,
    MemoryKind,
    check_id,
    check_vector,
    memory_from_dict,
)
from graphmem.stores.neo4j.cypher import FILTER_KEY, Q_LABEL
from graphmem.stores.neo4j.tx import TornRead

RESERVED_EDGE_PROPS = frozenset({"created_at"})
"""Relationship property names the store uses itself (user props may not take them)."""


class FloatList(list[float]):
    """A vector on its way to Neo4j: a list, which the driver packs as one, whose repr is short.

    The driver formats each RUN's parameters for its debug log whether or not debug logging is
    on; the repr of 384 floats costs ~140 µs, a seventh of a recall's client time, and 130 ms of
    every upsert of 1,000 embedded memories (66 ms with this, 195 ms without).
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return f"<{len(self)} floats>"


def check_ids(memory_ids: Sequence[str]) -> list[str]:
    """Validated ids, duplicates dropped, order kept."""
    if isinstance(memory_ids, str):
        raise InvalidInput("expected a sequence of memory ids, not one string")
    return list(dict.fromkeys(check_id(i) for i in memory_ids))


def call_dimension(nodes: Sequence[AnyMemory]) -> int | None:
    """The one embedding dimension used in a call (mixed dimensions are rejected)."""
    # Re-check: a validated list can still be edited in place before it reaches the store.
    dims = {len(check_vector(m.embedding)) for m in nodes if m.embedding is not None}
    if len(dims) > 1:
        first, *rest = sorted(dims)
        raise DimensionMismatch(first, rest[0], where="call")
    return dims.pop() if dims else None


def props(memory: AnyMemory) -> dict[str, Any]:
    """A memory as flat Neo4j properties: its JSON form without nulls (Neo4j stores no null),
    the embedding as a :class:`FloatList`."""
    out = {k: v for k, v in memory.model_dump(mode="json").items() if v is not None}
    if "embedding" in out:
        out["embedding"] = FloatList(out["embedding"])
    return out


def node_row(memory: AnyMemory, *, keep_utility: bool = True) -> dict[str, Any]:
    """One UNWIND row of :func:`graphmem.stores.neo4j.cypher.upsert_nodes`.

    ``content`` names every field of the memory's kind except the MERGE key and (unless
    ``keep_utility`` is False) the utility fields, with None for those the memory lacks, so
    that writing it onto an existing node removes stale properties and leaves utility alone.
    ``utility`` is what a new node starts with.
    """
    dumped = props(memory)
    skip = {"namespace", "id"} | (UTILITY_FIELDS if keep_utility else set())
    fields = type(memory).model_fields
    utility = {k: dumped[k] for k in sorted(UTILITY_FIELDS)} | {Q_LABEL: q_label(memory.q)}
    content = {k: dumped.get(k) for k in fields if k not in skip}
    if not keep_utility:
        content[Q_LABEL] = utility[Q_LABEL]
    return {"namespace": memory.namespace, "id": memory.id, "utility": utility, "content": content}


def q_label(q: float) -> str:
    """Q as Neo4j Browser captions show it (the ``q_label`` property): two decimals."""
    return f"{q:.2f}"


def node_rows(
    nodes: Sequence[AnyMemory], *, keep_utility: bool = True
) -> tuple[dict[MemoryKind, list[dict[str, Any]]], dict[tuple[str, str], str]]:
    """Rows per kind for UNWIND (the last of a repeated id wins, as in the embedded store),
    and the kind the call writes for each (namespace, id)."""
    kinds: dict[tuple[str, str], str] = {}
    last: dict[tuple[str, str], AnyMemory] = {}
    for memory in nodes:
        key = (memory.namespace, memory.id)
        if kinds.setdefault(key, memory.kind) != memory.kind:
            raise InvalidInput(
                f"memory {memory.id!r} appears twice in one call with kinds "
                f"{kinds[key]} and {memory.kind}"
            )
        last[key] = memory
    out: dict[MemoryKind, list[dict[str, Any]]] = {}
    for memory in last.values():
        row = node_row(memory, keep_utility=keep_utility)
        out.setdefault(MemoryKind(memory.kind), []).append(row)
    return out, kinds


def edge_rows(edges: Sequence[Edge]) -> dict[EdgeKind, list[dict[str, Any]]]:
    out: dict[EdgeKind, list[dict[str, Any]]] = {}
    for edge in edges:
        reserved = RESERVED_EDGE_PROPS & set(edge.props)
        if reserved:
            raise InvalidInput(f"edge property name {sorted(reserved)[0]!r} is reserved")
        props = {k: v for k, v in edge.props.items() if v is not None}
        out.setdefault(edge.kind, []).append(
            {
                "namespace": edge.namespace,
                "src": edge.src,
                "dst": edge.dst,
                "props": props,
                "created_at": edge.created_at.isoformat(),
            }
        )
    return out


def filter_key(namespace: str, kind: str, obsolete: bool) -> str:
    """A memory's :data:`~graphmem.stores.neo4j.cypher.FILTER_KEY`, as
    :data:`~graphmem.stores.neo4j.cypher.SET_FILTER_KEY` writes it: namespace, kind and
    ``live``/``obsolete`` joined by ``|``, which no namespace or kind contains."""
    return f"{namespace}|{kind}|{'obsolete' if obsolete else 'live'}"


def live(props: Any) -> bool:
    """Whether a node's ``properties(m)`` from a read describe a memory.

    A read runs without locks (read committed): a node that a concurrent transaction deletes
    after the statement matched it comes back as an empty map (or null), which is no memory to
    validate but one that no longer exists, so every read skips it.
    """
    return bool(props) and props.get("kind") is not None and props.get("id") is not None


def to_memory(props: Any) -> AnyMemory:
    data = dict(props)
    data.pop(Q_LABEL, None)  # display only, derived from q
    data.pop(FILTER_KEY, None)  # for the vector index, derived from namespace, kind, obsolete
    return memory_from_dict(data)


def read_memory(props: Any) -> AnyMemory | None:
    """The memory a read's ``properties(m)`` describe, for use inside a read body: None for a
    node deleted while it was read (see :func:`live`), :class:`~graphmem.stores.neo4j.tx.
    TornRead` for one caught half-written or half-deleted, so that the read runs again."""
    if not live(props):
        return None
    try:
        return to_memory(props)
    except InvalidInput as e:
        raise TornRead(e) from e


def to_edge(namespace: str, row: dict[str, Any]) -> Edge:
    props = dict(row["props"])
    created_at = props.pop("created_at", None)
    data: dict[str, Any] = {
        "namespace": namespace,
        "kind": row["kind"],
        "src": row["src"],
        "dst": row["dst"],
        "props": props,
    }
    if created_at is not None:
        data["created_at"] = created_at
    return Edge(**data)
