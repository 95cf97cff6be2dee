"""The embedded store's graph of one namespace: packed memories and typed, directed edges.

Why and how, in full: docs/design.md, "Module notes", ``graphmem.stores.embedded.graph``.
"""

from __future__ import annotations

import gc
from collections.abc import Hashable, Iterator
from typing import Generic, TypeVar

from graphmem.stores.embedded.packed import Packed

EdgeKey = tuple[str, str, str]
"""(src, dst, kind)."""
Neighbours = tuple[tuple[str, str], ...]
"""(the other end, kind) of each of a node's edges one way."""

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

SETTLE_EVERY = 1024
"""New entries a :class:`SettlingMap` gathers before it moves the untracked ones."""


class SettlingMap(Generic[K, V]):
    """A map of keys and values the garbage collector can untrack (strings, tuples of them),
    held in two dicts: ``_new`` gets every write; ``_settle`` moves the entries the collector
    has untracked (by then it has seen them) into ``_old``, which thus holds nothing tracked
    and is never walked by a collection. A key is in one of the two, never both."""

    __slots__ = ("_limit", "_new", "_old")

    def __init__(self) -> None:
        self._old: dict[K, V] = {}
        self._new: dict[K, V] = {}
        self._limit = SETTLE_EVERY

    def __contains__(self, key: object) -> bool:
        return key in self._new or key in self._old

    def __len__(self) -> int:
        return len(self._old) + len(self._new)

    def __iter__(self) -> Iterator[K]:
        yield from self._old
        yield from self._new

    def __getitem__(self, key: K) -> V:
        new = self._new
        return new[key] if key in new else self._old[key]

    def get(self, key: K) -> V | None:
        new = self._new
        return new[key] if key in new else self._old.get(key)

    def __setitem__(self, key: K, value: V) -> None:
        self._old.pop(key, None)
        self._new[key] = value
        if len(self._new) >= self._limit:
            self._settle()

    def __delitem__(self, key: K) -> None:
        if key in self._new:
            del self._new[key]
        else:
            del self._old[key]

    def pop(self, key: K) -> V | None:
        """The key's value, removed (None if it had none)."""
        if key in self._new:
            return self._new.pop(key)
        return self._old.pop(key, None)

    def items(self) -> Iterator[tuple[K, V]]:
        yield from self._old.items()
        yield from self._new.items()

    def values(self) -> Iterator[V]:
        yield from self._old.values()
        yield from self._new.values()

    def _settle(self) -> None:
        tracked = gc.is_tracked
        old, new = self._old, self._new
        for key in [k for k, v in new.items() if not (tracked(k) or tracked(v))]:
            old[key] = new.pop(key)
        # Entries the collector has not seen yet stay; try again once as many more have come.
        self._limit = max(SETTLE_EVERY, 2 * len(new))


Adjacency = SettlingMap[str, Neighbours]
"""A node → (the other end, kind) of each of its edges one way."""


class PackedGraph:
    """Memory id → packed memory, and (src, dst, kind) → packed edge, with adjacency both ways."""

    __slots__ = ("_edges", "_nodes", "_pred", "_succ")

    def __init__(self) -> None:
        self._nodes: SettlingMap[str, Packed] = SettlingMap()
        self._edges: SettlingMap[EdgeKey, Packed] = SettlingMap()
        self._succ: Adjacency = SettlingMap()  # src → ((dst, kind), ...)
        self._pred: Adjacency = SettlingMap()  # dst → ((src, kind), ...)

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
        return self._nodes.items()

    def ids(self) -> list[str]:
        return list(self._nodes)

    def remove_node(self, memory_id: str) -> None:
        """The node and every edge at it."""
        del self._nodes[memory_id]
        for dst, kind in self._succ.pop(memory_id) or ():
            del self._edges[(memory_id, dst, kind)]
            self._drop(self._pred, dst, (memory_id, kind))
        for src, kind in self._pred.pop(memory_id) or ():
            if src == memory_id:  # a loop, gone with the edges out
                continue
            del self._edges[(src, memory_id, kind)]
            self._drop(self._succ, src, (memory_id, kind))

    # ---- edges --------------------------------------------------------------------------

    def set_edge(self, src: str, dst: str, kind: str, packed: Packed) -> None:
        """Add or replace the edge (both ends must be nodes: the caller checks)."""
        key = (src, dst, kind)
        if key not in self._edges:
            self._succ[src] = (*(self._succ.get(src) or ()), (dst, kind))
            self._pred[dst] = (*(self._pred.get(dst) or ()), (src, kind))
        self._edges[key] = packed

    def edge(self, src: str, dst: str, kind: str) -> Packed | None:
        return self._edges.get((src, dst, kind))

    def out_edges(self, memory_id: str) -> list[Packed]:
        edges = self._edges
        return [edges[(memory_id, dst, kind)] for dst, kind in (self._succ.get(memory_id) or ())]

    def in_edges(self, memory_id: str) -> list[Packed]:
        edges = self._edges
        return [edges[(src, memory_id, kind)] for src, kind in (self._pred.get(memory_id) or ())]

    def successors(self, memory_id: str) -> list[tuple[str, str]]:
        """(dst, kind) of every edge out of the node."""
        return list(self._succ.get(memory_id) or ())

    def predecessors(self, memory_id: str) -> list[tuple[str, str]]:
        """(src, kind) of every edge into the node."""
        return list(self._pred.get(memory_id) or ())

    def has_in_edge(self, memory_id: str, kind: str) -> bool:
        return any(k == kind for _, k in (self._pred.get(memory_id) or ()))

    def edges(self) -> Iterator[Packed]:
        return self._edges.values()

    @staticmethod
    def _drop(index: Adjacency, at: str, entry: tuple[str, str]) -> None:
        rest = tuple(e for e in index[at] if e != entry)
        if rest:
            index[at] = rest
        else:
            del index[at]
