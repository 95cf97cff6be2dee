"""An optional approximate-nearest-neighbour graph (usearch HNSW) over a namespace's rows.

Only an acceleration structure: it is built in memory from the vector matrix the first time a
large namespace is searched, kept in step with every put and remove, and never persisted, so
it can never disagree with the log. It proposes candidate rows; the caller filters them and
re-scores them exactly, so a similarity it returns is always the exact cosine. Without the
``usearch`` package (the ``ann`` extra) :func:`available` is false and callers search exactly.

usearch over faiss-cpu's HNSW (bench/results/ann_embedded.md, 100k MiniLM embeddings): faiss
searched faster (p50 0.37 vs 0.84 ms) at recall@5 1.0 vs 0.99, both far inside the 5 ms budget;
usearch removes and re-adds by key, which freed and reused rows need (faiss HNSW cannot remove),
and its wheel is a tenth of the size.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np
import numpy.typing as npt

log = logging.getLogger(__name__)

# HNSW parameters: measured on MiniLM embeddings of real text (bench/ann_embedded.py).
CONNECTIVITY = 16
EXPANSION_ADD = 128
EXPANSION_SEARCH = 128


def _load() -> Any:
    try:
        from usearch.index import Index
    except ImportError:
        return None
    return Index


def available() -> bool:
    """Whether the approximate index can be built here (``pip install graphmem[ann]``)."""
    return _load() is not None


class AnnGraph:
    """Rows of one :class:`~graphmem.stores._vectors.VectorIndex`, keyed by row number."""

    def __init__(self, dimension: int) -> None:
        index_class = _load()
        if index_class is None:
            raise RuntimeError("usearch is not installed")
        self._index: Any = index_class(
            ndim=dimension,
            metric="cos",
            dtype="f32",
            connectivity=CONNECTIVITY,
            expansion_add=EXPANSION_ADD,
            expansion_search=EXPANSION_SEARCH,
        )
        self.removed = 0  # removals since the build: tombstones that slow the graph down

    def __len__(self) -> int:
        return len(self._index)

    def add_many(self, rows: npt.NDArray[np.int64], vectors: npt.NDArray[np.float32]) -> None:
        if rows.size:
            start = time.perf_counter()
            self._index.add(rows.astype(np.uint64), vectors, threads=0)
            if rows.size > 1000:
                log.info(
                    "built an approximate index of %d rows in %.1f s",
                    rows.size,
                    time.perf_counter() - start,
                )

    def put(self, row: int, vector: npt.NDArray[np.float32]) -> None:
        if row in self._index:
            self._index.remove(row)
            self.removed += 1
        self._index.add(row, vector)

    def remove(self, row: int) -> None:
        if row in self._index:
            self._index.remove(row)
            self.removed += 1

    def candidates(self, query: npt.NDArray[np.float32], count: int) -> npt.NDArray[np.int64]:
        """Up to ``count`` rows nearest to ``query`` (approximately), nearest first."""
        count = min(count, len(self._index))
        if count <= 0:
            return np.zeros(0, dtype=np.int64)
        matches = self._index.search(query, count)
        keys: npt.NDArray[np.int64] = np.asarray(matches.keys, dtype=np.int64)
        return keys
