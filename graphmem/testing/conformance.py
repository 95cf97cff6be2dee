"""The store conformance suite: what every :class:`MemoryStore` must do, as pytest tests.

Why and how, in full: docs/design.md, "Module notes", ``graphmem.testing.conformance``.
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
