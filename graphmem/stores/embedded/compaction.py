"""When the embedded store tries a due compaction again after one failed (a full disk).

A compaction writes a whole snapshot, so it can fail for want of space while the small log
appends of ordinary writes still succeed. Retrying it on every write made each write take
seconds (a snapshot written, fsynced and removed again) and log a warning each time. After a
failure the store instead waits, doubling from :data:`FIRST_DELAY` up to :data:`MAX_DELAY`
seconds, and retries sooner when the file system has freed at least the space the snapshot
needs. The first failure of a streak is a warning; the retries that fail again are logged at
debug level, and the compaction that finally succeeds says how long it was put off. Nothing is
lost meanwhile: every write is in the log, which only grows until a compaction succeeds.

>>> clock = iter([0.0, 1.0, 31.0]).__next__
>>> backoff = CompactionBackoff("/tmp", clock=clock, free_bytes=lambda path: 0)
>>> backoff.failed(OSError(28, "No space left on device"), needed=10)
>>> backoff.due(), backoff.due()
(False, True)
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger("graphmem.stores.embedded")

FIRST_DELAY = 30.0
"""Seconds before the first retry of a failed compaction."""
MAX_DELAY = 600.0
"""The longest wait between retries."""


def free_bytes(path: str | Path) -> int:
    """Bytes an unprivileged writer may still use on the file system holding ``path``."""
    try:
        stats = os.statvfs(path)
    except OSError:
        return 0
    return stats.f_bavail * stats.f_frsize


class CompactionBackoff:
    """The retry schedule of one store's compaction (the caller holds the store's lock)."""

    def __init__(
        self,
        path: str | Path,
        *,
        clock: Callable[[], float] = time.monotonic,
        free_bytes: Callable[[str | Path], int] = free_bytes,
    ) -> None:
        self.path = path
        self._clock = clock
        self._free_bytes = free_bytes
        self.failures = 0
        """Failed attempts since the last success."""
        self._retry_at = 0.0
        self._free_then = 0
        self._needed = 0
        self._first_failure = 0.0

    def due(self) -> bool:
        """Whether a due compaction should be tried now."""
        if not self.failures:
            return True
        if self._clock() >= self._retry_at:
            return True
        return self._free_bytes(self.path) >= self._free_then + self._needed

    def failed(self, error: BaseException, *, needed: int) -> None:
        """Record a failed attempt (``needed``: bytes the snapshot takes) and log it."""
        now = self._clock()
        if not self.failures:
            self._first_failure = now
        self.failures += 1
        delay = min(MAX_DELAY, FIRST_DELAY * 2 ** (self.failures - 1))
        self._retry_at = now + delay
        self._needed = max(needed, 1)
        self._free_then = self._free_bytes(self.path)
        if self.failures == 1:
            log.warning(
                "compacting %s failed: %s; writes go on (each is in the log), and the "
                "compaction is retried in %.0f s or once %d bytes are free",
                self.path, error, delay, self._needed,
            )  # fmt: skip
        else:
            log.debug("compacting %s failed again (%d): %s", self.path, self.failures, error)

    def succeeded(self) -> None:
        """A compaction succeeded: back to compacting whenever one is due."""
        if self.failures:
            log.warning(
                "compacted %s after %d failed attempts over %.0f s",
                self.path, self.failures, self._clock() - self._first_failure,
            )  # fmt: skip
        self.failures = 0
        self._retry_at = 0.0
