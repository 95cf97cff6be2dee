"""The store conformance suite: what every :class:`MemoryStore` must do, as pytest tests.

Subclass :class:`StoreConformance` in a test module and provide a ``store`` fixture::

    import pytest
    from graphmem.testing import StoreConformance

    class TestMyStore(StoreConformance):
        @pytest.fixture
        def store(self):
            store = MyStore(...)
            yield store
            store.close()

Every test writes only to namespaces that start with the ``namespace`` fixture's value (fresh
per test), so a store shared between tests (a Neo4j database) can be cleaned by deleting those
namespaces. Vectors have ``store.dimension`` dimensions when the store already has one, else
:attr:`StoreConformance.dimension` (8).
"""

from __future__ import annotations

from typing import ClassVar

import pytest

from graphmem.stores.base import MemoryStore
from graphmem.testing._consolidation import ConsolidationConformance
from graphmem.testing._credit import CreditConformance, UsedCreditConformance
from graphmem.testing._reads import ReadConformance
from graphmem.testing._text import TextConformance
from graphmem.testing._writes import WriteConformance
from graphmem.testing.helpers import unique_namespace


class StoreConformance(
    WriteConformance,
    CreditConformance,
    UsedCreditConformance,
    ReadConformance,
    TextConformance,
    ConsolidationConformance,
):
    """Base class of the conformance tests; consumers provide the ``store`` fixture."""

    dimension: ClassVar[int] = 8
    """Vector dimension the suite uses when the store has none fixed yet."""

    @pytest.fixture
    def namespace(self) -> str:
        return unique_namespace()

    @pytest.fixture
    def dim(self, store: MemoryStore) -> int:
        return store.dimension or self.dimension
