"""What an operation needs to run: a store, an embedder behind ``embed``, a config and an
optional LLM. :class:`graphmem.GraphMemory` is one; a test or another facade can be another.

The operations take this, not the facade, so data flows one way: the facade calls the
operations, the operations call the store, and nothing calls back up. They take a checked
:class:`~graphmem.models.Namespace` and :data:`~graphmem.models.Reward` and check neither again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from graphmem.config import MemoryConfig
    from graphmem.llm import MemoryLLM
    from graphmem.models import Namespace
    from graphmem.stores.base import MemoryStore


class MemoryContext(Protocol):
    """The parts of a memory the operations use (read-only)."""

    @property
    def store(self) -> MemoryStore: ...

    @property
    def config(self) -> MemoryConfig: ...

    @property
    def llm(self) -> MemoryLLM | None: ...

    def embed(self, text: str, *, namespace: Namespace) -> list[float]:
        """One text's vector for ``namespace`` (the store's dimension checked once, and that
        the namespace's vectors were made by this embedder)."""
        ...

    def embed_many(self, texts: Sequence[str], *, namespace: Namespace) -> list[list[float]]:
        """Several texts' vectors for ``namespace``, in order."""
        ...
