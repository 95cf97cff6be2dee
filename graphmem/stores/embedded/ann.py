"""The approximate-nearest-neighbour graph (usearch HNSW) over a namespace's vectors, the
thread that builds it, and its file.

Why and how, in full: docs/design.md, "Module notes", ``graphmem.stores.embedded.ann``.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import logging
import os
import queue
import threading
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from graphmem.stores.embedded.index_files import read_checked, write_checked

log = logging.getLogger(__name__)

# HNSW parameters: measured on MiniLM embeddings of real text (bench/ann_embedded.py).
CONNECTIVITY = 16
EXPANSION_ADD = 128
EXPANSION_SEARCH = 128

FILE_FORMAT = "graphmem-ann/1"
FILE_PREFIX = "ann-"
FILE_SUFFIX = ".usearch"

Keys = npt.NDArray[np.uint64]


@functools.cache
def _load() -> Any:
    try:
        from usearch.index import Index
    except ImportError:
        return None
    return Index


def available() -> bool:
    """Whether the approximate index can be built here (the ``usearch`` package)."""
    return _load() is not None


def key_of(memory_id: str) -> int:
    """The graph key of a memory: the first 8 bytes of its id's BLAKE2b hash."""
    digest = hashlib.blake2b(memory_id.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little")


class AnnGraph:
    """One namespace's graph, keyed by :func:`key_of`. Not thread-safe: its owner serialises
    every call (``VectorIndex``'s index lock)."""

    def __init__(self, dimension: int, index: Any = None) -> None:
        index_class = _load()
        if index_class is None:
            raise RuntimeError("usearch is not installed")
        self.dimension = dimension
        if index is None:
            index = index_class(
                ndim=dimension,
                metric="cos",
                dtype="f32",
                connectivity=CONNECTIVITY,
                expansion_add=EXPANSION_ADD,
                expansion_search=EXPANSION_SEARCH,
            )
        self._index: Any = index
        self.removed = 0  # removals since the build: tombstones that slow the graph down

    def __len__(self) -> int:
        return len(self._index)

    def put(self, keys: Keys, vectors: npt.NDArray[np.float32], *, threads: int = 1) -> None:
        """Insert, replacing what a key held before."""
        if keys.size:
            self.remove(keys[self._index.contains(keys)])
            self._index.add(keys, vectors, threads=threads)

    def remove(self, keys: Keys) -> None:
        keys = keys[self._index.contains(keys)] if keys.size else keys
        if keys.size:
            self._index.remove(keys)
            self.removed += int(keys.size)

    def contains(self, keys: Keys) -> npt.NDArray[np.bool_]:
        if not keys.size:
            return np.zeros(0, dtype=bool)
        found: npt.NDArray[np.bool_] = np.asarray(self._index.contains(keys), dtype=bool)
        return found

    def vectors(self, keys: Keys) -> npt.NDArray[np.float32]:
        """The vectors held under ``keys`` (all present), one row each."""
        if not keys.size:
            return np.zeros((0, self.dimension), dtype=np.float32)
        got = self._index.get(keys, dtype=np.float32)
        return np.stack([np.asarray(v, dtype=np.float32).reshape(-1) for v in got])

    def candidates(self, query: npt.NDArray[np.float32], count: int) -> Keys:
        """Up to ``count`` keys nearest to ``query`` (approximately), nearest first."""
        count = min(count, len(self._index))
        if count <= 0:
            return np.zeros(0, dtype=np.uint64)
        matches = self._index.search(query, count)
        keys: Keys = np.asarray(matches.keys, dtype=np.uint64)
        return keys

    def to_bytes(self) -> bytes:
        return bytes(self._index.save())

    @classmethod
    def from_bytes(cls, data: bytes, dimension: int) -> AnnGraph:
        index_class = _load()
        if index_class is None:
            raise RuntimeError("usearch is not installed")
        index = index_class.restore(bytearray(data))
        if index is None or index.ndim != dimension:
            raise ValueError("not a graph of this dimension")
        return cls(dimension, index)


# ---- the file ---------------------------------------------------------------------------


def file_for(root: Path, namespace: str) -> Path:
    digest = hashlib.blake2b(namespace.encode("utf-8"), digest_size=12).hexdigest()
    return root / f"{FILE_PREFIX}{digest}{FILE_SUFFIX}"


def write_file(path: Path, header: dict[str, Any], graph_bytes: bytes) -> None:
    """Write header and graph over ``path`` (atomic; no fsync: a graph lost in a crash is
    rebuilt)."""
    write_checked(path, FILE_FORMAT, header, graph_bytes)


def read_file(path: Path) -> tuple[dict[str, Any], bytes]:
    """Header and graph bytes of a graph file; ValueError if it is damaged (checksum, header)."""
    return read_checked(path, FILE_FORMAT, "graph", "graph")


# ---- the builder thread ----------------------------------------------------------------


class BuildJob(Protocol):
    def build_step(self) -> bool:
        """Do one bounded piece of index work; True if more is left."""

    def build_failed(self, error: BaseException) -> None: ...


class Builder:
    """One daemon thread for the whole process, working through the jobs submitted to it in
    bounded steps, round robin. A job is submitted again whenever it has work; it keeps
    itself from being queued twice."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[BuildJob] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._stopping = False

    def submit(self, job: BuildJob) -> None:
        if self._stopping:
            return  # the interpreter is exiting: the index is derived data, rebuilt on open
        self._queue.put(job)
        with self._start_lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="graphmem-ann-builder", daemon=True
                )
                self._thread.start()

    def _run(self) -> None:
        while True:
            job = self._queue.get()
            if self._stopping:
                return
            try:
                more = job.build_step()
            except Exception as e:  # the index is derived data: searches go on exactly
                log.exception("building an approximate index failed; searching exactly")
                job.build_failed(e)
                more = False
            if more:
                self._queue.put(job)

    def stop(self, timeout: float = 60.0) -> None:
        """At interpreter exit: finish the step under way and start no other. A daemon thread
        still inside the index library's native code when the interpreter finalises aborts
        the whole process ("terminate called without an active exception", exit status 134),
        so a script that ends without closing its store while an index is being built would
        crash on its way out."""
        self._stopping = True
        thread = self._thread
        if thread is not None and thread.is_alive():
            self._queue.put(_STOP)  # wakes the thread if it waits for work
            thread.join(timeout)

    def _after_fork(self) -> None:
        # A forked child has the parent's queue but not its thread.
        self._queue = queue.SimpleQueue()
        self._thread = None
        self._start_lock = threading.Lock()
        self._stopping = False


class _Stop:
    """Wakes the builder thread so that it sees it is stopping."""

    def build_step(self) -> bool:
        return False

    def build_failed(self, error: BaseException) -> None:
        return None


_STOP = _Stop()
BUILDER = Builder()
atexit.register(BUILDER.stop)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=BUILDER._after_fork)
