"""The embedded store: the memory graph in this process, kept crash-safe in a directory.

:class:`EmbeddedStore` is the store (``store.py``); the other modules are its parts: the
in-memory graph (``state``, ``graph``, ``packed``, ``vectors``, ``ann``, ``fulltext``) and its
persistence (``journal`` and ``filelock``, or ``sqlite_log`` when a store is made with
``durability="sqlite"``; ``check``, ``compaction`` and ``ann_files`` serve both).
"""

from graphmem.stores.embedded.store import (
    DEFAULT_COMPACT_BYTES,
    DEFAULT_DURABILITY,
    Durability,
    EmbeddedStore,
)

__all__ = ["DEFAULT_COMPACT_BYTES", "DEFAULT_DURABILITY", "Durability", "EmbeddedStore"]
