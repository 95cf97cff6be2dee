"""A full disk makes the embedded store's compaction back off (issue 47): one warning, later
writes at their normal speed, nothing lost, and the compaction retried after a while or once
space is free.

The full disk is simulated as in ``test_embedded_crash``: ``os.fsync`` fails with ENOSPC, here
for every file but the live log (a snapshot needs far more room than a log record, so on a disk
filling up the compaction fails first), and the clock and the free-space probe of the back-off
are the test's.
"""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path

import pytest

from graphmem.models import Note
from graphmem.stores.embedded import EmbeddedStore
from graphmem.stores.embedded import compaction as _compaction
from graphmem.stores.embedded.journal import Journal


def vec(i: int) -> list[float]:
    return [1.0, float(i % 7), float(i % 3), 0.5, 0.0, 1.0, float(i % 5), 2.0]


class FullDisk:
    """fsync fails with ENOSPC except on the store's live log; counts compaction attempts."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, live_log: Path) -> None:
        self.live_log = live_log
        self.attempts = 0
        self.full = True
        real_fsync, real_write = os.fsync, Journal.write_generation

        def fsync(fd: int) -> None:
            target = os.readlink(f"/proc/self/fd/{fd}")
            if self.full and target != str(self.live_log):
                time.sleep(0.05)  # a failing snapshot write takes time on a real disk
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            real_fsync(fd)

        def write_generation(journal: Journal, *args: object, **kw: object) -> None:
            self.attempts += 1
            real_write(journal, *args, **kw)  # type: ignore[arg-type]

        monkeypatch.setattr(os, "fsync", fsync)
        monkeypatch.setattr(Journal, "write_generation", write_generation)


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc/self/fd")
def test_a_full_disk_makes_compaction_back_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    now = [1000.0]
    free = [0]
    monkeypatch.setattr(_compaction.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(_compaction, "free_bytes", lambda path: free[0])
    path = tmp_path / "store"
    store = EmbeddedStore.open(path, compact_bytes=2_000, ann_threshold=None)
    # The default arguments were bound at import: give this store the test's probes.
    store._compaction = _compaction.CompactionBackoff(
        path, clock=lambda: now[0], free_bytes=lambda p: free[0]
    )
    disk = FullDisk(monkeypatch, path / "wal-00000000.jsonl")

    def write(i: int) -> float:
        started = time.perf_counter()
        store.upsert([Note(id=f"n{i}", namespace="ns", content="x" * 300, embedding=vec(i))])
        return time.perf_counter() - started

    with caplog.at_level("DEBUG", logger="graphmem.stores.embedded"):
        times = [write(i) for i in range(60)]  # the log passes compact_bytes early on
        assert disk.attempts == 1, "a failed compaction was retried on the next writes"
        warnings = [r for r in caplog.records if r.levelname == "WARNING"]
        assert len(warnings) == 1 and "No space left on device" in warnings[0].getMessage()
        assert "retried in 30 s" in warnings[0].getMessage()
        # Writes after the failure take what a write takes, not a snapshot's failed attempt.
        after = sorted(times[10:])
        assert after[len(after) // 2] < 0.05, after

        now[0] += 31  # the back-off has passed: one retry, which fails again, quietly
        write(60)
        write(61)
        assert disk.attempts == 2
        assert len([r for r in caplog.records if r.levelname == "WARNING"]) == 1
        now[0] += 40  # the next delay doubled to 60 s: not yet
        write(62)
        assert disk.attempts == 2

        disk.full = False  # space is freed: the next write compacts, without waiting
        free[0] = 10**12
        write(63)
        assert disk.attempts == 3
        assert "compacted" in caplog.records[-1].getMessage()
        assert "after 2 failed attempts" in caplog.records[-1].getMessage()
    store.close()
    names = sorted(p.name for p in path.iterdir())
    assert "wal-00000001.jsonl" in names and "wal-00000000.jsonl" not in names
    assert not [n for n in names if n.endswith(".tmp")]
    with EmbeddedStore.open(path) as again:
        assert sorted(m.id for m in again.iter_nodes("ns")) == sorted(f"n{i}" for i in range(64))


def test_an_explicit_compact_is_never_put_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "store"
    with EmbeddedStore.open(path, compact_bytes=10**9) as store:
        store.upsert([Note(id="a", namespace="ns", content="a", embedding=vec(1))])
        store._compaction.failed(OSError(errno.ENOSPC, "full"), needed=10**15)
        assert not store._compaction.due()
        store.compact()  # asked for: tried now, and it resets the back-off
        assert store._compaction.failures == 0 and store._compaction.due()
