"""A namespace's embeddings as one float32 matrix, searched by brute-force cosine similarity.

Rows hold the vectors exactly as stored (float32); a parallel array holds each row's inverse
norm, so a query costs one matrix-vector product. Freed rows are reused; capacity doubles.
Per-row kind codes and obsolete flags let recall filter before ranking, so a filter never
shrinks the top-k below what the namespace holds.

Above ``ann_threshold`` live rows (and with the optional ``usearch`` package) a search asks an
approximate graph (:mod:`graphmem.stores._ann`) for over-fetched candidates, filters them, and
re-scores them exactly; when too few survive the filters it falls back to the exact scan. Below
the threshold, or without the package, every search is the exact scan.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from graphmem.errors import InvalidVector
from graphmem.models import MAX_VECTOR_NORM, MIN_VECTOR_NORM, MemoryKind
from graphmem.stores import _ann

Vector = npt.NDArray[np.float32]

KIND_CODES: dict[str, int] = {kind.value: code for code, kind in enumerate(MemoryKind)}

DEFAULT_ANN_THRESHOLD = 20_000
"""A good ``EmbeddedStore(ann_threshold=...)``: live rows in a namespace from which a search
goes through the approximate index (stores are exact unless they opt in)."""
ANN_OVERFETCH = 4
"""Candidates asked of the approximate index per wanted result (at least ``ANN_MIN_FETCH``)."""
ANN_MIN_FETCH = 64


def as_float32(values: Sequence[float]) -> Vector:
    """A validated embedding (see ``check_vector``, which bounds the norm for every store) as
    the float32 row the store keeps; re-checked after rounding to float32."""
    vector = np.asarray(values, dtype=np.float32)
    norm = float(np.linalg.norm(vector.astype(np.float64)))
    if not (np.all(np.isfinite(vector)) and MIN_VECTOR_NORM <= norm <= MAX_VECTOR_NORM):
        raise InvalidVector(
            f"embedding norm {norm:.3g} is outside [{MIN_VECTOR_NORM:g}, {MAX_VECTOR_NORM:g}]"
        )
    return vector


class VectorIndex:
    """Embeddings of one namespace, by memory id."""

    def __init__(
        self, dimension: int, capacity: int = 16, *, ann_threshold: int | None = None
    ) -> None:
        self.dimension = dimension
        self.ann_threshold = ann_threshold  # None: always exact
        self._ann: _ann.AnnGraph | None = None
        self._matrix = np.zeros((capacity, dimension), dtype=np.float32)
        self._inv_norm = np.zeros(capacity, dtype=np.float32)
        self._live = np.zeros(capacity, dtype=bool)
        self._kind = np.zeros(capacity, dtype=np.int8)
        self._obsolete = np.zeros(capacity, dtype=bool)
        self._ids: list[str | None] = [None] * capacity
        self._row: dict[str, int] = {}
        self._free: list[int] = []
        self._used = 0  # rows [0, _used) have been handed out at least once

    def __len__(self) -> int:
        return len(self._row)

    def __contains__(self, memory_id: object) -> bool:
        return memory_id in self._row

    def put(self, memory_id: str, vector: Vector, kind: str, obsolete: bool) -> None:
        if vector.shape != (self.dimension,):
            raise InvalidVector(f"expected a {self.dimension}-dim vector, got {vector.shape}")
        row = self._row.get(memory_id)
        moved = True
        if row is None:
            row = self._take_row()
            self._row[memory_id] = row
            self._ids[row] = memory_id
        else:
            # A rewrite of a memory (a patch, a flag) usually keeps its embedding: the
            # approximate index is then left alone rather than given a tombstone.
            moved = not np.array_equal(self._matrix[row], vector)
        self._matrix[row] = vector
        self._inv_norm[row] = 1.0 / float(np.linalg.norm(vector.astype(np.float64)))
        self._live[row] = True
        self.set_flags(memory_id, kind, obsolete)
        if self._ann is not None and moved:
            self._ann.put(row, vector)

    def set_flags(self, memory_id: str, kind: str, obsolete: bool) -> None:
        row = self._row.get(memory_id)
        if row is not None:
            self._kind[row] = KIND_CODES[kind]
            self._obsolete[row] = obsolete

    def remove(self, memory_id: str) -> None:
        row = self._row.pop(memory_id, None)
        if row is not None:
            self._live[row] = False
            self._ids[row] = None
            self._free.append(row)
            if self._ann is not None:
                self._ann.remove(row)

    def get(self, memory_id: str) -> Vector | None:
        row = self._row.get(memory_id)
        return None if row is None else self._matrix[row].copy()

    def search(
        self,
        query: Vector,
        k: int,
        *,
        kinds: Sequence[str] | None = None,
        include_obsolete: bool = False,
        min_sim: float | None = None,
    ) -> list[tuple[str, float]]:
        """The top-k (id, cosine) among rows passing the filters, best first."""
        n = self._used
        if n == 0 or k <= 0:
            return []
        unit = (query / np.float32(np.linalg.norm(query.astype(np.float64)))).astype(np.float32)
        graph = self._graph()
        if graph is not None:
            found = self._approximate(graph, unit, k, kinds, include_obsolete, min_sim)
            if found is not None:
                return found
        sims = (self._matrix[:n] @ unit) * self._inv_norm[:n]
        np.clip(sims, -1.0, 1.0, out=sims)
        mask = self._live[:n].copy()
        if kinds is not None:
            mask &= np.isin(self._kind[:n], [KIND_CODES[k] for k in kinds])
        if not include_obsolete:
            mask &= ~self._obsolete[:n]
        if min_sim is not None:
            mask &= sims >= np.float32(min_sim)
        rows = np.flatnonzero(mask)
        if rows.size > k:
            rows = rows[np.argpartition(-sims[rows], k - 1)[:k]]
        return self._ranked(rows.tolist(), sims[rows].tolist())

    def _ranked(self, rows: list[int], sims: list[float]) -> list[tuple[str, float]]:
        found: list[tuple[str, float]] = []
        for row, sim in zip(rows, sims, strict=True):
            memory_id = self._ids[row]
            if memory_id is not None:
                found.append((memory_id, float(sim)))
        # Ties broken by id so every process and every reload ranks alike.
        found.sort(key=lambda t: (-t[1], t[0]))
        return found

    # ---- the approximate path -----------------------------------------------------------

    def _graph(self) -> _ann.AnnGraph | None:
        """The approximate index when this namespace is big enough for it, built on demand;
        dropped when the namespace shrinks below the threshold, rebuilt when removals have
        left too many tombstones in it."""
        if self.ann_threshold is None or len(self._row) < self.ann_threshold:
            self._ann = None
            return None
        if self._ann is not None and self._ann.removed > max(1024, len(self._row) // 4):
            self._ann = None
        if self._ann is None:
            if not _ann.available():
                return None
            graph = _ann.AnnGraph(self.dimension)
            rows = np.flatnonzero(self._live[: self._used])
            graph.add_many(rows, self._matrix[rows])
            self._ann = graph
        return self._ann

    def _approximate(
        self,
        graph: _ann.AnnGraph,
        unit: Vector,
        k: int,
        kinds: Sequence[str] | None,
        include_obsolete: bool,
        min_sim: float | None,
    ) -> list[tuple[str, float]] | None:
        """The top-k from over-fetched approximate candidates, re-scored exactly; ``None``
        when the filters leave too few candidates (or pass too few rows) to trust it."""
        n = self._used
        allowed = self._live[:n].copy()
        if kinds is not None:
            allowed &= np.isin(self._kind[:n], [KIND_CODES[k] for k in kinds])
        if not include_obsolete:
            allowed &= ~self._obsolete[:n]
        passing = int(np.count_nonzero(allowed))
        if passing == 0:
            return []
        # Ask for more when the filters pass only part of the namespace; a filter so narrow
        # that this approaches a scan is left to the exact scan.
        fetch = max(ANN_OVERFETCH * k, ANN_MIN_FETCH) * len(self._row) // passing
        if fetch * 4 > len(self._row):
            return None
        rows = graph.candidates(unit, fetch)
        rows = rows[(rows >= 0) & (rows < n)]
        rows = rows[allowed[rows]]
        if rows.size < min(k, passing):
            return None
        sims = (self._matrix[rows] @ unit) * self._inv_norm[rows]
        np.clip(sims, -1.0, 1.0, out=sims)
        if min_sim is not None:
            keep = sims >= np.float32(min_sim)
            rows, sims = rows[keep], sims[keep]
        if rows.size > k:
            top = np.argpartition(-sims, k - 1)[:k]
            rows, sims = rows[top], sims[top]
        return self._ranked(rows.tolist(), sims.tolist())

    def _take_row(self) -> int:
        if self._free:
            return self._free.pop()
        if self._used == len(self._ids):
            self._grow()
        self._used += 1
        return self._used - 1

    def _grow(self) -> None:
        capacity = max(16, 2 * len(self._ids))
        extra = capacity - len(self._ids)
        self._matrix = np.concatenate(
            [self._matrix, np.zeros((extra, self.dimension), dtype=np.float32)]
        )
        self._inv_norm = np.concatenate([self._inv_norm, np.zeros(extra, dtype=np.float32)])
        self._live = np.concatenate([self._live, np.zeros(extra, dtype=bool)])
        self._kind = np.concatenate([self._kind, np.zeros(extra, dtype=np.int8)])
        self._obsolete = np.concatenate([self._obsolete, np.zeros(extra, dtype=bool)])
        self._ids.extend([None] * extra)
