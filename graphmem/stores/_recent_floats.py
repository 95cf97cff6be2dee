"""The embeddings of the memories a store handed out last, kept as Python floats.

Every read of the embedded store hands out a private model, its embedding a list of Python
floats made from the stored float32 row: 384 of them cost ~10 µs (6 µs through the buffer
protocol, :func:`~graphmem.stores._vectors.row_floats`), as much as the rest of the model. An
agent recalls the same few memories again and again, so the store keeps the floats of the last
:data:`FLOATS_KEPT` embeddings it handed out, and a later copy is a new list of the same
(immutable) floats, ~1 µs.

They are kept in tuples, never lists: a list stays tracked by CPython's collector for good and
every full collection visits each of its items, so 1,024 embeddings kept as lists of 384 floats
made each full collection of a 2,000-memory store 17 ms longer (25 → 42 ms, median of 5 × 15 on a
slow day); a tuple of floats (and the tuple holding it with the row's bytes) is untracked once a
collection has seen it.

An entry holds the bytes of the row it was made from and is used only while the row still holds
them, so no write path has to tell it anything.
"""

from __future__ import annotations

from graphmem.stores._vectors import Vector, row_floats

FLOATS_KEPT = 1024
"""Embeddings kept per store, all namespaces together (about 14 KB each with 384 floats)."""


class RecentFloats:
    """The floats of the embeddings a store handed out last, by (namespace, id) (see module
    doc)."""

    __slots__ = ("_entries", "limit")

    def __init__(self, limit: int = FLOATS_KEPT) -> None:
        self.limit = limit
        self._entries: dict[tuple[str, str], tuple[bytes, tuple[float, ...]]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def floats(self, key: tuple[str, str], row: Vector) -> list[float]:
        """The row (read at once, under the store's lock) as a new list of Python floats."""
        raw = row.tobytes()
        entry = self._entries.get(key)
        if entry is None or entry[0] != raw:
            entry = (raw, tuple(row_floats(row)))
            if key not in self._entries and len(self._entries) >= self.limit:
                del self._entries[next(iter(self._entries))]  # the oldest entry
            self._entries[key] = entry
        return list(entry[1])
