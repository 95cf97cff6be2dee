"""Test support for graphmem and for users' own stores: the store conformance suite and helpers.

Needs pytest (a dev dependency). See :mod:`graphmem.testing.conformance`.
"""

from graphmem.testing.conformance import StoreConformance
from graphmem.testing.helpers import (
    HOSTILE_TEXTS,
    angled,
    assert_same_memory,
    chain,
    note,
    unique_namespace,
    vec,
)
from graphmem.testing.loop import LoopBackedStore

__all__ = [
    "HOSTILE_TEXTS",
    "LoopBackedStore",
    "StoreConformance",
    "angled",
    "assert_same_memory",
    "chain",
    "note",
    "unique_namespace",
    "vec",
]
