"""The embeddings of the memories a store handed out last, kept as Python floats.

Why and how, in full: docs/design.md, "Module notes", ``graphmem.stores.embedded.recent_floats``.
"""

from __future__ import annotations

from graphmem.stores.embedded.vectors import Vector, row_floats

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
