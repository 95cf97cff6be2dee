"""The embedded store's graph of one namespace: packed memories and typed, directed edges.

Every container here maps strings to tuples of strings or to packed records (``_packed``), so
CPython's garbage collector can stop tracking all of them. A networkx graph kept three
dicts of dicts per namespace (nodes, successors, predecessors); the collector never untracks a
dict that holds dicts, and a full collection walked those three dicts' 100k entries each,
touching every entry's header: 35-90 ms per collection at 100k memories, with every thread
stopped. Adjacency here is a tuple per node, rebuilt when an edge comes or goes (a node's
degree is small; a hub retrieved ten thousand times rebuilds a ten-thousand-entry tuple, a few
microseconds).
"""

from __future__ import annotations

from collections.abc import Iterator

from graphmem.stores._packed import Packed

EdgeKey = tuple[str, str, str]
"""(src, dst, kind)."""
Adjacency = dict[str, tuple[tuple[str, str], ...]]
"""A node → (the other end, kind) of each of its edges one way."""


class PackedGraph:
    """Memory id → packed memory, and (src, dst, kind) → packed edge, with adjacency both ways."""

    __slots__ = ("_edges", "_nodes", "_pred", "_succ")

    def __init__(self) -> None:
        self._nodes: dict[str, Packed] = {}
        self._edges: dict[EdgeKey, Packed] = {}
        self._succ: Adjacency = {}  # src → ((dst, kind), ...)
        self._pred: Adjacency = {}  # dst → ((src, kind), ...)

    # ---- nodes --------------------------------------------------------------------------

    def __contains__(self, memory_id: object) -> bool:
        return memory_id in self._nodes

    def __len__(self) -> int:
        return len(self._nodes)

    def node(self, memory_id: str) -> Packed:
        return self._nodes[memory_id]

    def set_node(self, memory_id: str, packed: Packed) -> None:
        self._nodes[memory_id] = packed

    def nodes(self) -> Iterator[tuple[str, Packed]]:
        return iter(self._nodes.items())

    def ids(self) -> list[str]:
        return list(self._nodes)

    def remove_node(self, memory_id: str) -> None:
        """The node and every edge at it."""
        del self._nodes[memory_id]
        for dst, kind in self._succ.pop(memory_id, ()):
            del self._edges[(memory_id, dst, kind)]
            self._drop(self._pred, dst, (memory_id, kind))
        for src, kind in self._pred.pop(memory_id, ()):
            if src == memory_id:  # a loop, gone with the edges out
                continue
            del self._edges[(src, memory_id, kind)]
            self._drop(self._succ, src, (memory_id, kind))

    # ---- edges --------------------------------------------------------------------------

    def set_edge(self, src: str, dst: str, kind: str, packed: Packed) -> None:
        """Add or replace the edge (both ends must be nodes: the caller checks)."""
        key = (src, dst, kind)
        if key not in self._edges:
            self._succ[src] = (*self._succ.get(src, ()), (dst, kind))
            self._pred[dst] = (*self._pred.get(dst, ()), (src, kind))
        self._edges[key] = packed

    def edge(self, src: str, dst: str, kind: str) -> Packed | None:
        return self._edges.get((src, dst, kind))

    def out_edges(self, memory_id: str) -> list[Packed]:
        edges = self._edges
        return [edges[(memory_id, dst, kind)] for dst, kind in self._succ.get(memory_id, ())]

    def in_edges(self, memory_id: str) -> list[Packed]:
        edges = self._edges
        return [edges[(src, memory_id, kind)] for src, kind in self._pred.get(memory_id, ())]

    def successors(self, memory_id: str) -> list[tuple[str, str]]:
        """(dst, kind) of every edge out of the node."""
        return list(self._succ.get(memory_id, ()))

    def predecessors(self, memory_id: str) -> list[tuple[str, str]]:
        """(src, kind) of every edge into the node."""
        return list(self._pred.get(memory_id, ()))

    def has_in_edge(self, memory_id: str, kind: str) -> bool:
        return any(k == kind for _, k in self._pred.get(memory_id, ()))

    def edges(self) -> Iterator[Packed]:
        return iter(self._edges.values())

    @staticmethod
    def _drop(index: Adjacency, at: str, entry: tuple[str, str]) -> None:
        rest = tuple(e for e in index[at] if e != entry)
        if rest:
            index[at] = rest
        else:
            del index[at]
