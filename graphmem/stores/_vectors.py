"""A namespace's embeddings as one float32 matrix, searched by brute-force cosine similarity.

Rows hold the vectors exactly as stored (float32); a parallel array holds each row's inverse
norm, so a query costs one matrix-vector product. Freed rows are reused; capacity doubles.
Per-row kind codes and obsolete flags let recall filter before ranking, so a filter never
shrinks the top-k below what the namespace holds.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from graphmem.errors import InvalidVector
from graphmem.models import MAX_VECTOR_NORM, MIN_VECTOR_NORM, MemoryKind

Vector = npt.NDArray[np.float32]

KIND_CODES: dict[str, int] = {kind.value: code for code, kind in enumerate(MemoryKind)}


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

    def __init__(self, dimension: int, capacity: int = 16) -> None:
        self.dimension = dimension
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
        if row is None:
            row = self._take_row()
            self._row[memory_id] = row
            self._ids[row] = memory_id
        self._matrix[row] = vector
        self._inv_norm[row] = 1.0 / float(np.linalg.norm(vector.astype(np.float64)))
        self._live[row] = True
        self.set_flags(memory_id, kind, obsolete)

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
        found: list[tuple[str, float]] = []
        for row in rows.tolist():
            memory_id = self._ids[row]
            if memory_id is not None:
                found.append((memory_id, float(sims[row])))
        # Ties broken by id so every process and every reload ranks alike.
        found.sort(key=lambda t: (-t[1], t[0]))
        return found

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
