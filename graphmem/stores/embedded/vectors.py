"""A namespace's embeddings as float32 rows, searched by brute-force cosine similarity or, above
a size threshold, through an approximate index.

Why and how, in full: docs/design.md, "Module notes", ``graphmem.stores.embedded.vectors``.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from graphmem.errors import InvalidVector
from graphmem.models import MAX_VECTOR_NORM, MIN_VECTOR_NORM, MemoryKind
from graphmem.stores.embedded import ann as _ann

Vector = npt.NDArray[np.float32]

KIND_CODES: dict[str, int] = {kind.value: code for code, kind in enumerate(MemoryKind)}

DEFAULT_ANN_THRESHOLD = 20_000
"""Live rows in a namespace from which searches go through the approximate index (the
``EmbeddedStore(ann_threshold=...)`` default; ``None`` keeps every search exact)."""
BLOCK_ROWS = 4096
"""Rows per block of vectors (a power of two)."""
SMALL_SCAN = 4096
"""Rows up to which the exact scan is one BLAS matrix-vector product. Above that it is numpy's
own single-threaded loop (einsum), a block at a time: OpenBLAS splits a large product over
threads that busy-wait for each other, and on a loaded machine a 30k scan's p95 went from 1.4
to 24 ms (and a query during a build past 100 ms); einsum is as fast as one BLAS thread on a
product this memory-bound."""
ANN_OVERFETCH = 4
"""Candidates asked of the approximate index per wanted result (at least ``ANN_MIN_FETCH``)."""
ANN_MIN_FETCH = 64
ANN_PENDING_LIMIT = 2048
"""Pending keys a search scores exactly beside the graph's candidates; more: an exact scan."""
ANN_CHUNK = 128
"""Keys the builder puts into a graph per step (one step holds the index lock), on one core."""
ANN_BULK_CHUNK = 2048
"""Keys per step, on every core, while more than ``ANN_PENDING_LIMIT`` are pending (a first
build): searches scan exactly then anyway, so a longer step delays none of them."""
ANN_CLOSE_FINISH = 4096
"""Pending keys a close still puts into the graph so it can be saved in step."""


def as_float32(values: Sequence[float] | npt.NDArray[np.float64]) -> Vector:
    """A validated embedding (see ``check_vector``, which bounds the norm for every store) as
    the float32 row the store keeps; re-checked after rounding to float32."""
    vector = np.asarray(values, dtype=np.float32)
    norm = float(np.linalg.norm(vector.astype(np.float64)))
    if not (np.all(np.isfinite(vector)) and MIN_VECTOR_NORM <= norm <= MAX_VECTOR_NORM):
        raise InvalidVector(
            f"embedding norm {norm:.3g} is outside [{MIN_VECTOR_NORM:g}, {MAX_VECTOR_NORM:g}]"
        )
    return vector


def row_floats(row: Vector) -> list[float]:
    """A row as a list of Python floats: the values numpy's ``tolist`` gives, made through
    the buffer protocol in about half its time (6 against 10 µs for 384 floats)."""
    values: list[float] = memoryview(row).tolist()  # type: ignore[arg-type, assignment]
    return values


FEW_PASS = 4
"""A filtered search that at most 1/FEW_PASS of the rows pass (e.g. the Task nodes of a task
cluster, or one kind among many) scores those rows alone, exactly, instead of scanning them all
(or asking the approximate graph, which would have to skip the rest)."""


class _Passing(NamedTuple):
    """The rows a search's filters pass: as a mask over [0, n), and as their indices."""

    mask: npt.NDArray[np.bool_]
    rows: npt.NDArray[np.intp]


class VectorIndex:
    """Embeddings of one namespace, by memory id."""

    def __init__(
        self,
        dimension: int,
        capacity: int = 16,
        *,
        ann_threshold: int | None = None,
        block_rows: int | None = None,
    ) -> None:
        block_rows = BLOCK_ROWS if block_rows is None else block_rows
        if block_rows < 1 or block_rows & (block_rows - 1):
            raise ValueError(f"block_rows must be a power of two, not {block_rows}")
        self.dimension = dimension
        self.ann_threshold = ann_threshold  # None: always exact
        capacity = min(max(1, capacity), block_rows)
        # Row r is self._blocks[r >> self._shift][r & self._offset]: the first block holds rows
        # [0, block_rows) once it is full, and only then does a second one come.
        self._blocks: list[Vector] = [np.zeros((capacity, dimension), dtype=np.float32)]
        self._block_rows = block_rows
        self._shift = block_rows.bit_length() - 1
        self._offset = block_rows - 1
        self._inv_norm = np.zeros(capacity, dtype=np.float32)
        self._live = np.zeros(capacity, dtype=bool)
        self._kind = np.zeros(capacity, dtype=np.int8)
        self._obsolete = np.zeros(capacity, dtype=bool)
        # row → memory id: a dict of str, which CPython's collector untracks (a list of 100k ids
        # is walked by every full collection)
        self._ids: dict[int, str] = {}
        self._capacity = capacity
        self._row: dict[str, int] = {}
        self._free: list[int] = []
        self._used = 0  # rows [0, _used) have been handed out at least once
        # (kinds, include_obsolete) → the rows those filters pass, as a mask and as indices;
        # emptied by every write.
        self._masks: dict[tuple[tuple[str, ...] | None, bool], _Passing] = {}
        # The approximate index, while this namespace has one (see the module docstring).
        self._ann: _ann.AnnGraph | None = None
        self._ann_lock = threading.Lock()  # a builder step, a search through the graph
        self._pending_lock = threading.Lock()  # held for microseconds
        self._pending: dict[int, None] = {}  # keys whose graph entry may differ from the rows
        self._key_row: dict[int, int] = {}  # graph key → row, for every keyed live row
        self._unkeyed: dict[str, None] = {}  # ids whose key another id holds: always scored
        self._scheduled = 0  # pid of the process whose builder has this index queued
        self._retired = False
        self.ann_changed = False  # the graph moved since it was loaded or saved

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
            # approximate index is then left alone.
            moved = not np.array_equal(self._view(row), vector)
        self._view(row)[:] = vector
        self._inv_norm[row] = 1.0 / float(np.linalg.norm(vector.astype(np.float64)))
        self._live[row] = True
        self.set_flags(memory_id, kind, obsolete)  # and drops the kept filter masks
        if self._ann is not None:
            if moved:
                self._key(memory_id, row)
        elif self.ann_threshold is not None and len(self._row) >= self.ann_threshold:
            self.start_ann()

    def set_flags(self, memory_id: str, kind: str, obsolete: bool) -> None:
        row = self._row.get(memory_id)
        if row is not None:
            self._kind[row] = KIND_CODES[kind]
            self._obsolete[row] = obsolete
            self._masks.clear()

    def remove(self, memory_id: str) -> None:
        row = self._row.pop(memory_id, None)
        if row is None:
            return
        self._live[row] = False
        self._masks.clear()
        del self._ids[row]
        self._free.append(row)
        if self._ann is None:
            return
        if memory_id in self._unkeyed:
            del self._unkeyed[memory_id]
        else:
            key = _ann.key_of(memory_id)
            if self._key_row.get(key) == row:
                del self._key_row[key]
                self._mark((key,))
        assert self.ann_threshold is not None
        if len(self._row) < self.ann_threshold // 2:
            self.stop_ann()
        elif self._ann.removed > max(1024, len(self._row) // 4):
            self.start_ann()  # too many tombstones: a fresh graph, built in the background

    def get(self, memory_id: str) -> Vector | None:
        row = self._row.get(memory_id)
        return None if row is None else self._view(row).copy()

    def row(self, memory_id: str) -> Vector | None:
        """The stored row itself (a view: read it at once, under the store's lock)."""
        row = self._row.get(memory_id)
        return None if row is None else self._view(row)

    def _view(self, row: int) -> Vector:
        view: Vector = self._blocks[row >> self._shift][row & self._offset]
        return view

    def _gather(self, rows: npt.NDArray[np.int64]) -> Vector:
        """The vectors of ``rows`` (a new matrix, one row each)."""
        blocks = self._blocks
        if len(blocks) == 1:
            gathered: Vector = blocks[0][rows]
            return gathered
        out = np.empty((rows.size, self.dimension), dtype=np.float32)
        shift, offset = self._shift, self._offset
        if rows.size <= 4 * len(blocks):  # few rows, likely in as many blocks: one by one
            for i, r in enumerate(rows.tolist()):
                out[i] = blocks[r >> shift][r & offset]
            return out
        which = rows >> shift
        order = np.argsort(which, kind="stable")
        cuts = np.flatnonzero(np.diff(which[order])) + 1
        for part in np.split(order, cuts):  # the rows of one block at a time
            out[part] = blocks[int(which[part[0]])][rows[part] & offset]
        return out

    def _scan(self, unit: Vector, n: int) -> npt.NDArray[np.float32]:
        """The raw products of rows [0, n) with ``unit`` (see SMALL_SCAN)."""
        if n <= min(SMALL_SCAN, len(self._blocks[0])):
            small: npt.NDArray[np.float32] = self._blocks[0][:n] @ unit
            return small
        raw = np.empty(n, dtype=np.float32)
        for lo, block in zip(range(0, n, self._block_rows), self._blocks, strict=False):
            hi = min(n, lo + len(block))
            np.einsum("ij,j->i", block[: hi - lo], unit, out=raw[lo:hi])
        return raw

    def search(
        self,
        unit: Vector,
        k: int,
        *,
        kinds: Sequence[str] | None = None,
        include_obsolete: bool = False,
        min_sim: float | None = None,
    ) -> list[tuple[str, float]]:
        """The top-k (id, cosine) among rows passing the filters, best first, for a query of
        unit length (float32; the store checks and normalises it)."""
        n = self._used
        if n == 0 or k <= 0:
            return []
        passing = self._passing(n, kinds, include_obsolete)
        if passing.rows.size * FEW_PASS <= n:
            return self._search_few(unit, k, passing.rows, min_sim)
        # Never waits: while the builder holds the lock, or lags, the exact scan answers.
        if self._ann is not None and self._ann_lock.acquire(blocking=False):
            try:
                found = self._approximate(unit, k, passing, min_sim)
            finally:
                self._ann_lock.release()
            if found is not None:
                return found
        sims = self._scan(unit, n)
        sims *= self._inv_norm[:n]
        sims.clip(-1.0, 1.0, out=sims)
        rows = passing.rows
        if min_sim is not None:
            rows = rows[sims[rows] >= np.float32(min_sim)]
        if rows.size > k:
            if rows.size == n:  # every row passes: rows[i] == i
                rows = np.argpartition(-sims, k - 1)[:k]
            else:
                rows = rows[np.argpartition(-sims[rows], k - 1)[:k]]
        return self._ranked(rows.tolist(), sims[rows].tolist())

    def _search_few(
        self, unit: Vector, k: int, rows: npt.NDArray[np.int64], min_sim: float | None
    ) -> list[tuple[str, float]]:
        """The exact top-k among ``rows`` alone (few rows pass the filters): their vectors are
        gathered and scored, the other rows never read."""
        if rows.size == 0:
            return []
        matrix = self._gather(rows)
        if rows.size <= SMALL_SCAN:
            sims: npt.NDArray[np.float32] = matrix @ unit
        else:
            sims = np.einsum("ij,j->i", matrix, unit)
        sims *= self._inv_norm[rows]
        return self._best(rows, sims, k, min_sim)

    def _best(
        self,
        rows: npt.NDArray[np.int64],
        sims: npt.NDArray[np.float32],
        k: int,
        min_sim: float | None,
    ) -> list[tuple[str, float]]:
        """The top-k of ``rows`` by their cosine ``sims`` (clipped to [-1, 1] here), at least
        ``min_sim``, ranked."""
        sims.clip(-1.0, 1.0, out=sims)
        if min_sim is not None:
            keep = sims >= np.float32(min_sim)
            rows, sims = rows[keep], sims[keep]
        if rows.size > k:
            top = np.argpartition(-sims, k - 1)[:k]
            rows, sims = rows[top], sims[top]
        return self._ranked(rows.tolist(), sims.tolist())

    def _passing(self, n: int, kinds: Sequence[str] | None, include_obsolete: bool) -> _Passing:
        """The rows of [0, n) that the filters pass (kept until the next write; read-only)."""
        key = (None if kinds is None else tuple(kinds), include_obsolete)
        kept = self._masks.get(key)
        if kept is not None and len(kept.mask) == n:
            return kept
        mask = self._live[:n].copy()
        if kinds is not None:
            wanted = np.zeros(len(KIND_CODES), dtype=bool)
            wanted[[KIND_CODES[k] for k in kinds]] = True
            mask &= wanted[self._kind[:n]]
        if not include_obsolete:
            mask &= ~self._obsolete[:n]
        if len(self._masks) >= 16:
            self._masks.clear()
        kept = self._masks[key] = _Passing(mask, np.flatnonzero(mask))
        return kept

    def _ranked(self, rows: list[int], sims: list[float]) -> list[tuple[str, float]]:
        # Rows are live rows (the filters start from the live mask), so each has an id.
        ids = self._ids
        found = [(ids[row], sim) for row, sim in zip(rows, sims, strict=True)]
        # Ties broken by id so every process and every reload ranks alike.
        found.sort(key=lambda t: (-t[1], t[0]))
        return found

    # ---- the approximate path -----------------------------------------------------------

    @property
    def ann_active(self) -> bool:
        """Whether this namespace has a graph (built, or being built)."""
        return self._ann is not None

    @property
    def ann_pending(self) -> int:
        """Keys the builder has yet to put into the graph (0: in step with the rows)."""
        return len(self._pending)

    def _approximate(
        self, unit: Vector, k: int, filtered: _Passing, min_sim: float | None
    ) -> list[tuple[str, float]] | None:
        """The top-k from over-fetched graph candidates and the pending rows, re-scored
        exactly (the caller holds the index lock); ``None`` when too much is pending, or the
        filters leave too few candidates (or pass too few rows) to trust it."""
        graph = self._ann
        if graph is None or len(self._pending) > ANN_PENDING_LIMIT:
            return None
        allowed = filtered.mask
        passing = int(filtered.rows.size)
        if passing == 0:
            return []
        # Ask for more when the filters pass only part of the namespace; a filter so narrow
        # that this approaches a scan is left to the exact scan.
        live = len(self._row)
        fetch = max(ANN_OVERFETCH * k, ANN_MIN_FETCH) * live // passing
        if fetch * 4 > live:
            return None
        key_row = self._key_row
        with self._pending_lock:
            extra = [key_row[key] for key in self._pending if key in key_row]
        extra.extend(self._row[i] for i in self._unkeyed)
        found = [key_row.get(key, -1) for key in graph.candidates(unit, fetch).tolist()]
        rows = np.asarray(found + extra, dtype=np.int64)
        if extra:
            rows = np.unique(rows)
        rows = rows[rows >= 0]
        rows = rows[allowed[rows]]
        if rows.size < min(k, passing):
            return None
        return self._best(rows, (self._gather(rows) @ unit) * self._inv_norm[rows], k, min_sim)

    def start_ann(self, graph: _ann.AnnGraph | None = None) -> None:
        """Give this namespace a graph: ``graph`` (loaded from a file, in step with the rows
        as they are now), or a new one the builder fills in the background."""
        if not _ann.available() or self._retired:
            return
        with self._ann_lock, self._pending_lock:
            self._pending.clear()
            self._key_row.clear()
            self._unkeyed.clear()
            for memory_id, row in self._row.items():
                key = _ann.key_of(memory_id)
                if key in self._key_row:  # a 64-bit hash collision: never in practice
                    self._unkeyed[memory_id] = None
                else:
                    self._key_row[key] = row
            self._ann = graph if graph is not None else _ann.AnnGraph(self.dimension)
            self.ann_changed = graph is None
        if graph is None:
            self._mark(list(self._key_row))

    def stop_ann(self) -> None:
        """Drop the graph (waits for the builder's step, if one is running)."""
        with self._ann_lock, self._pending_lock:
            self._ann = None
            self._pending.clear()
            self._key_row.clear()
            self._unkeyed.clear()

    def retire(self) -> None:
        """This index is no longer used (its store closed or reloaded): stop building it."""
        self._retired = True
        self.stop_ann()

    def _key(self, memory_id: str, row: int) -> None:
        """Record a new or moved vector for the builder (a write, graph present)."""
        if memory_id in self._unkeyed:
            return
        key = _ann.key_of(memory_id)
        owner = self._key_row.get(key)
        if owner is not None and owner != row:
            self._unkeyed[memory_id] = None
            return
        self._key_row[key] = row
        self._mark((key,))

    def _mark(self, keys: Sequence[int]) -> None:
        with self._pending_lock:
            self._pending.update(dict.fromkeys(keys))
            self.ann_changed = True
            pid = os.getpid()
            if self._scheduled == pid or not self._pending:
                return
            self._scheduled = pid
        _ann.BUILDER.submit(self)

    def build_step(self) -> bool:
        """Put up to ``ANN_CHUNK`` pending keys into the graph (the builder thread); True
        while more are pending."""
        with self._ann_lock:
            graph = self._ann
            with self._pending_lock:
                if graph is None or self._retired or not self._pending:
                    self._scheduled = 0
                    return False
                bulk = len(self._pending) > ANN_PENDING_LIMIT
                keys = list(itertools.islice(self._pending, ANN_BULK_CHUNK if bulk else ANN_CHUNK))
                for key in keys:
                    del self._pending[key]
            self._apply(graph, keys)
            with self._pending_lock:
                if self._pending:
                    return True
                self._scheduled = 0
                return False

    def build_failed(self, error: BaseException) -> None:
        self.stop_ann()
        with self._pending_lock:
            self._scheduled = 0

    def _apply(self, graph: _ann.AnnGraph, keys: list[int], threads: int = 1) -> None:
        """Bring ``keys``' graph entries in step with their rows (index lock held). Rows are
        read after the keys left the pending set, so a write racing this re-marks its key."""
        rows = [self._key_row.get(key, -1) for key in keys]
        gone = np.asarray([k for k, r in zip(keys, rows, strict=True) if r < 0], dtype=np.uint64)
        put = np.asarray([k for k, r in zip(keys, rows, strict=True) if r >= 0], dtype=np.uint64)
        graph.remove(gone)
        if put.size:
            # Read after the keys left the pending set: a row written since is pending again.
            kept = np.asarray([r for r in rows if r >= 0], dtype=np.int64)
            graph.put(put, self._gather(kept), threads=threads)

    def finish_ann(self, limit: int = ANN_CLOSE_FINISH) -> bool:
        """Put what is pending into the graph now, if no more than ``limit`` keys are (a
        close, before saving); True if the graph is then in step."""
        with self._ann_lock:
            graph = self._ann
            with self._pending_lock:
                if graph is None or len(self._pending) > limit:
                    return False
                keys = list(self._pending)
                self._pending.clear()
            self._apply(graph, keys, threads=0)
            return True

    def ann_ready(self) -> bool:
        """Whether a search would now go through the graph: present, in step, not mid-step
        (or no graph at all: nothing to wait for)."""
        if self._ann is None:
            return True
        if not self._ann_lock.acquire(blocking=False):
            return False  # the builder is mid-step
        try:
            with self._pending_lock:
                return self._ann is None or not self._pending
        finally:
            self._ann_lock.release()

    def ann_bytes(self) -> bytes | None:
        """The graph, serialised, if it is in step with the rows (else None)."""
        with self._ann_lock, self._pending_lock:
            if self._ann is None or self._pending:
                return None
            data = self._ann.to_bytes()
            self.ann_changed = False
            return data

    def check_graph(self, graph: _ann.AnnGraph) -> list[str]:
        """How ``graph`` differs from these rows: missing or extra keys, other vectors."""
        keys, rows = [], []
        seen: set[int] = set()
        for memory_id, row in self._row.items():
            key = _ann.key_of(memory_id)
            if key not in seen:
                seen.add(key)
                keys.append(key)
                rows.append(row)
        want = np.asarray(keys, dtype=np.uint64)
        present = graph.contains(want)
        problems = []
        if not present.all():
            problems.append(f"{int((~present).sum())} of {want.size} vectors are missing")
        if len(graph) != int(present.sum()):
            problems.append(f"it holds {len(graph) - int(present.sum())} vectors of no memory")
        wrong = 0
        have = np.asarray(rows, dtype=np.int64)[present]
        for lo in range(0, have.size, 8192):
            got = graph.vectors(want[present][lo : lo + 8192])
            part = have[lo : lo + 8192]
            mine = self._gather(part) * self._inv_norm[part, None]
            norms = np.linalg.norm(got, axis=1)
            cos = np.einsum("ij,ij->i", got, mine) / np.where(norms > 0, norms, 1)
            wrong += int(np.count_nonzero(cos < 1 - 1e-4))
        if wrong:
            problems.append(f"{wrong} vectors differ from the memories' embeddings")
        return problems

    def _take_row(self) -> int:
        if self._free:
            return self._free.pop()
        if self._used == self._capacity:
            self._grow()
        self._used += 1
        return self._used - 1

    def _grow(self) -> None:
        """Room for more rows: the first block doubled (a copy of at most half a block), or
        once it is full, one more block. A new block's pages are faulted in row by row as rows
        are written, not all at once under the write lock."""
        first = self._blocks[0]
        if len(first) < self._block_rows:
            grown = np.zeros((min(2 * len(first), self._block_rows), self.dimension), np.float32)
            grown[: len(first)] = first
            self._blocks[0] = grown
        else:
            self._blocks.append(np.zeros((self._block_rows, self.dimension), dtype=np.float32))
        self._capacity = sum(len(block) for block in self._blocks)
        if len(self._live) < self._capacity:  # the per-row arrays double (7 bytes a row)
            extra = max(self._capacity, 2 * len(self._live)) - len(self._live)
            self._inv_norm = np.concatenate([self._inv_norm, np.zeros(extra, dtype=np.float32)])
            self._live = np.concatenate([self._live, np.zeros(extra, dtype=bool)])
            self._kind = np.concatenate([self._kind, np.zeros(extra, dtype=np.int8)])
            self._obsolete = np.concatenate([self._obsolete, np.zeros(extra, dtype=bool)])
