"""Re-embed a namespace with another embedder, and record that embedder.

Why and how, in full: docs/design.md, "Module notes", ``graphmem.ops.reembed``.

>>> from graphmem import EmbeddedStore, GraphMemory, HashingEmbedder
>>> store = EmbeddedStore.in_memory()
>>> mem = GraphMemory(store, embedder=HashingEmbedder(64))
>>> _ = mem.add_note("demo", "the key is under the pot")
>>> reembed(store, "demo", HashingEmbedder(64, ngrams=1)).reembedded
1
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import islice

from graphmem.embedding import Embedder, EmbedderRecord, fingerprint
from graphmem.errors import InvalidInput
from graphmem.models import AnyMemory, Namespace
from graphmem.stores.base import MemoryStore

Progress = Callable[[int, int], None]
"""Called after each batch with (memories re-embedded so far, memories in the namespace)."""

DEFAULT_BATCH = 256


@dataclass(frozen=True)
class ReembedResult:
    namespace: str
    before: EmbedderRecord | None
    after: EmbedderRecord
    reembedded: int


def reembed(
    store: MemoryStore,
    namespace: str,
    embedder: Embedder,
    *,
    batch_size: int = DEFAULT_BATCH,
    progress: Progress | None = None,
) -> ReembedResult:
    """Re-embed every memory of ``namespace`` with ``embedder`` and record it as the
    namespace's embedder.

    Each batch is one atomic write; the whole run is made safe by the ``pending`` record (see
    the module docstring): run it again after an interruption. The embedder must have the
    store's dimension (DimensionMismatch otherwise, before anything is written). Writers in
    other processes should be stopped meanwhile: one that checked the namespace earlier would
    go on writing vectors of the old embedder.
    """
    namespace = Namespace(namespace)  # a public entry (graphmem.reembed): input is checked here
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InvalidInput(f"batch_size must be a positive integer, got {batch_size!r}")
    store.check_dimension(embedder.dimension)
    target = fingerprint(embedder)
    before = store.embedder_record(namespace)
    total = sum(n for kind, n in store.counts(namespace).items() if kind != "edges")
    store.record_embedder(namespace, target.model_copy(update={"pending": True}), replace=True)
    done = 0
    for batch in _batches(store.iter_nodes(namespace), batch_size):
        embedded = [m for m in batch if m.embedding is not None]
        if embedded:
            vectors = embedder.embed([m.embed_text() for m in embedded])
            store.set_embeddings(
                namespace,
                {m.id: [float(x) for x in row] for m, row in zip(embedded, vectors, strict=True)},
            )
        done += len(embedded)
        if progress is not None:
            progress(done, total)
    after = store.record_embedder(namespace, target, replace=True)
    assert after is not None
    return ReembedResult(namespace, before, after, done)


def _batches(memories: Iterator[AnyMemory], size: int) -> Iterator[list[AnyMemory]]:
    while batch := list(islice(memories, size)):
        yield batch
