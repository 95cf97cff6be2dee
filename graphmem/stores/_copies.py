"""The memories a store handed out last, kept unpacked so that handing one out again is a
few shallow copies.

Every read of the embedded store hands out a private model. Built from the packed tuple, a
memory costs its field dict (enums, lists and dicts made anew) and its embedding as a list of
Python floats (384 of them from a float32 row); at 1,000 memories that was half of a two-phase
retrieval's own work beside the vector search. An agent recalls the same few memories again
and again, so recall keeps the unpacked fields and the embedding list of the last
:data:`COPIES_KEPT` memories it handed out, and a later copy shares their immutable values
(strings, numbers, datetimes, enum members, the floats) in new containers.

An entry holds the packed tuple it was unpacked from and the bytes of the vector row: it is used
only while the graph still holds that very tuple (every write replaces a node's tuple, and the
entry's reference keeps the old one from being freed and its identity reused) and the row still
holds those bytes, so no write path has to tell the cache anything.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from graphmem.models import AnyMemory
from graphmem.stores._packed import Packed, copy_fields, unpack_fields
from graphmem.stores._vectors import Vector, row_floats

COPIES_KEPT = 1024
"""Memories kept unpacked per store, all namespaces together (about 14 KB each with a 384-float
embedding: 14 MB at most)."""


class _Entry(NamedTuple):
    packed: Packed
    raw: bytes | None
    fields: dict[str, Any]
    embedding: list[float] | None


class RecentCopies:
    """The unpacked form of the memories a store handed out last, by (namespace, id) (see
    module doc)."""

    __slots__ = ("_entries", "limit")

    def __init__(self, limit: int = COPIES_KEPT) -> None:
        self.limit = limit
        self._entries: dict[tuple[str, str], _Entry] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def copy(self, key: tuple[str, str], packed: Packed, row: Vector | None) -> AnyMemory:
        """A new model of the memory ``packed`` with the embedding ``row`` (read at once, under
        the store's lock), from the kept entry when it is still the memory's."""
        raw = None if row is None else row.tobytes()
        entry = self._entries.get(key)
        if entry is None or entry.packed is not packed or entry.raw != raw:
            embedding = None if row is None else row_floats(row)
            entry = _Entry(packed, raw, unpack_fields(packed), embedding)
            if key not in self._entries and len(self._entries) >= self.limit:
                del self._entries[next(iter(self._entries))]  # the oldest entry
            self._entries[key] = entry
        embedding = None if entry.embedding is None else list(entry.embedding)
        return copy_fields(entry.packed, entry.fields, embedding)

    def clear(self) -> None:
        self._entries.clear()
