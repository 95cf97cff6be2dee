"""An fcntl file lock shared between processes: shared for reads, exclusive for writes.

``flock`` locks belong to an open file description, so two threads of one process would both
"hold" it; callers serialise their threads with their own mutex and this class only counts
nesting. A lock wait longer than ``timeout`` raises :class:`StoreLocked`.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from graphmem.errors import StoreError, StoreLocked


class FileLock:
    """A reader/writer lock on one file, re-entrant within the holder."""

    def __init__(self, path: Path, timeout: float) -> None:
        self.path = path
        self.timeout = timeout
        try:
            self._fd: int | None = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as e:
            raise StoreError(f"cannot open lock file {path}: {e.strerror}") from e
        self._depth = 0
        self._exclusive = False

    @contextmanager
    def hold(self, *, exclusive: bool) -> Iterator[None]:
        """Hold the lock (shared or exclusive) for the duration of the block."""
        if self._depth:
            if exclusive and not self._exclusive:
                # flock would silently convert the shared lock, letting a writer in between.
                raise RuntimeError("cannot upgrade a shared store lock to an exclusive one")
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        self._acquire(exclusive)
        self._depth, self._exclusive = 1, exclusive
        try:
            yield
        finally:
            self._depth = 0
            self._release()

    def _acquire(self, exclusive: bool) -> None:
        fd = self._require_fd()
        mode = (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB
        deadline = time.monotonic() + self.timeout
        delay = 0.0005
        while True:
            try:
                fcntl.flock(fd, mode)
                return
            except BlockingIOError:
                pass
            except OSError as e:
                raise StoreError(f"cannot lock {self.path}: {e.strerror}") from e
            if time.monotonic() >= deadline:
                raise StoreLocked(
                    f"the store at {self.path.parent} stayed locked by another process for more "
                    f"than {self.timeout:g}s"
                )
            time.sleep(delay)
            delay = min(delay * 2, 0.02)

    def _release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def _require_fd(self) -> int:
        if self._fd is None:
            raise StoreError("the store is closed")
        return self._fd

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor also drops any lock still held
            self._fd = None
