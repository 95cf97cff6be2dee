"""The embedded store's files: a generation pointer, snapshots and a write-ahead log.

Layout of a store directory::

    lock                 fcntl lock file (never removed)
    CURRENT              {"format": ..., "generation": g}, replaced atomically
    snapshot-<g>.json    the state at the start of generation g (absent for an empty g)
    vectors-<g>.npy      the float32 rows that snapshot's nodes refer to
    wal-<g>.jsonl        one JSON line per write committed since that snapshot

``CURRENT`` is the commit point of a compaction: the new snapshot and an empty log are written
and fsynced first, then ``CURRENT`` is renamed over the old one and the directory fsynced, and
only then are the old generation's files removed. A crash at any point leaves either the old or
the new generation whole. Callers hold the store lock around every method here.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from pathlib import Path
from typing import Any

import numpy as np

from graphmem.errors import StoreError
from graphmem.stores._filelock import FileLock
from graphmem.stores._vectors import Vector

STORE_FORMAT = "graphmem-embedded/1"
_GEN_FILE = re.compile(r"^(snapshot|vectors|wal)-(\d{8})\.(json|npy|jsonl)$")


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes) -> None:
    """Write a file so that it appears whole or not at all (temp file, fsync, rename)."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class Journal:
    """One store directory, opened by one process."""

    def __init__(self, root: Path, lock_timeout: float) -> None:
        self.root = root
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StoreError(f"cannot create the store directory {root}: {e.strerror}") from e
        if not root.is_dir():
            raise StoreError(f"{root} is not a directory")
        self.lock = FileLock(root / "lock", lock_timeout)
        self.generation = -1  # nothing loaded yet
        self.offset = 0  # bytes of the WAL already applied in this process
        self.snapshot_bytes = 0  # size of the current generation's snapshot files
        self._wal_fd: int | None = None

    def _name(self, kind: str, generation: int) -> Path:
        ext = {"snapshot": "json", "vectors": "npy", "wal": "jsonl"}[kind]
        return self.root / f"{kind}-{generation:08d}.{ext}"

    # ---- the generation pointer ---------------------------------------------------------

    def initialise(self) -> None:
        """Create an empty generation 0 if the directory holds no store yet (exclusive lock)."""
        if (self.root / "CURRENT").exists():
            return
        leftovers = [
            p.name for p in self.root.iterdir() if _GEN_FILE.match(p.name) and p.stat().st_size
        ]
        if leftovers:
            # Only a first open that died before writing CURRENT leaves files, and those are
            # empty; anything else means CURRENT was lost, and starting afresh would hide data.
            raise StoreError(f"{self.root} holds store files ({leftovers[0]}, ...) but no CURRENT")
        self._create_wal(0)
        self._point_to(0)

    def read_current(self) -> int:
        try:
            data = json.loads((self.root / "CURRENT").read_bytes())
        except FileNotFoundError as e:
            raise StoreError(f"{self.root} holds no graphmem store (CURRENT is missing)") from e
        except (OSError, ValueError) as e:
            raise StoreError(f"cannot read {self.root / 'CURRENT'}: {e}") from e
        if not isinstance(data, dict) or data.get("format") != STORE_FORMAT:
            raise StoreError(f"{self.root} is not a {STORE_FORMAT} store")
        generation = data.get("generation")
        if not isinstance(generation, int) or generation < 0:
            raise StoreError(f"{self.root / 'CURRENT'} names no valid generation")
        return generation

    def _point_to(self, generation: int) -> None:
        body = json.dumps({"format": STORE_FORMAT, "generation": generation}).encode()
        write_atomic(self.root / "CURRENT", body + b"\n")
        fsync_dir(self.root)

    # ---- snapshots ----------------------------------------------------------------------

    def load_snapshot(self, generation: int) -> tuple[dict[str, Any], Vector] | None:
        path = self._name("snapshot", generation)
        self.snapshot_bytes = 0
        if not path.exists():
            return None
        try:
            body = path.read_bytes()
            record = json.loads(body)
            vectors = self._name("vectors", generation)
            matrix = np.load(vectors, allow_pickle=False)
            self.snapshot_bytes = len(body) + vectors.stat().st_size
        except (OSError, ValueError) as e:
            raise StoreError(f"cannot read snapshot {path}: {e}") from e
        return record, np.asarray(matrix, dtype=np.float32)

    def write_generation(self, record: dict[str, Any], matrix: Vector) -> None:
        """Write a snapshot as the next generation and switch to it (the compaction)."""
        generation = self.generation + 1
        vectors = self._name("vectors", generation)
        tmp = vectors.with_name(vectors.name + ".tmp")
        with open(tmp, "wb") as f:
            np.save(f, matrix.astype("<f4"), allow_pickle=False)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, vectors)
        body = json.dumps(record, separators=(",", ":"), allow_nan=False).encode("ascii")
        write_atomic(self._name("snapshot", generation), body)
        self._create_wal(generation)
        self._point_to(generation)
        self.open_wal(generation)
        self.snapshot_bytes = len(body) + vectors.stat().st_size
        self.remove_stale()

    def remove_stale(self) -> None:
        """Delete files of other generations and leftover temp files (exclusive lock)."""
        for path in self.root.iterdir():
            match = _GEN_FILE.match(path.name)
            stale_gen = match is not None and int(match.group(2)) != self.generation
            if stale_gen or path.name.endswith(".tmp"):
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()

    # ---- the write-ahead log ------------------------------------------------------------

    def _create_wal(self, generation: int) -> None:
        fd = os.open(self._name("wal", generation), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        fsync_dir(self.root)

    def open_wal(self, generation: int) -> None:
        self.close_wal()
        try:
            self._wal_fd = os.open(self._name("wal", generation), os.O_RDWR | os.O_APPEND)
        except OSError as e:
            raise StoreError(f"cannot open the write-ahead log: {e.strerror}") from e
        self.generation = generation
        self.offset = 0

    def _fd(self) -> int:
        if self._wal_fd is None:
            raise StoreError("the store is closed")
        return self._wal_fd

    def unread(self) -> bytes:
        """The log's bytes past what this process has applied."""
        fd = self._fd()
        size = os.fstat(fd).st_size
        if size <= self.offset:
            return b""
        chunks: list[bytes] = []
        pos = self.offset
        while pos < size:
            chunk = os.pread(fd, size - pos, pos)
            if not chunk:
                break
            chunks.append(chunk)
            pos += len(chunk)
        return b"".join(chunks)

    def truncate(self, length: int) -> None:
        """Cut a torn tail left by a writer that died mid-append (exclusive lock)."""
        fd = self._fd()
        os.ftruncate(fd, length)
        os.fsync(fd)

    def append(self, line: bytes) -> None:
        """Append one record and make it durable before returning."""
        fd = self._fd()
        start = os.fstat(fd).st_size
        try:
            view = memoryview(line)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        except OSError as e:
            # Leave no half record behind: the call fails as a whole.
            with contextlib.suppress(OSError):
                self.truncate(start)
            raise StoreError(f"cannot write the store's log: {e.strerror}") from e
        self.offset = start + len(line)

    def size(self) -> int:
        return os.fstat(self._fd()).st_size

    def close_wal(self) -> None:
        if self._wal_fd is not None:
            os.close(self._wal_fd)
            self._wal_fd = None

    def close(self) -> None:
        self.close_wal()
        self.lock.close()
