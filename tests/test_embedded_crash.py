"""Crash safety of the embedded store: a writer killed with SIGKILL loses nothing acknowledged,
and torn or corrupt log tails are handled on reopen."""

from __future__ import annotations

import errno
import os
import random
import re
import signal
import time
from pathlib import Path

import pytest

from graphmem.errors import StoreError
from graphmem.models import Edge, EdgeKind, Note
from graphmem.stores.embedded import EmbeddedStore
from graphmem.stores.embedded.store import Durability
from graphmem.testing import vec


def writer(path: Path, prefix: str, ack_fd: int) -> None:
    """Upsert notes one by one (each linked to the one before) and report each id only after
    the call returned, i.e. once the write is acknowledged. A tiny compact_bytes makes
    compactions frequent, so kills also land in the middle of snapshot writes."""
    store = EmbeddedStore.open(path, compact_bytes=16_000)
    previous = None
    for i in range(100_000):
        note = Note(
            id=f"{prefix}-{i}",
            namespace="crash",
            content=f"note {i} " * 5,
            embedding=[1.0, float(i % 7), float(i % 11), 0.5, 0.0, 1.0, 2.0, float(i)],
        )
        edges = []
        if previous is not None:
            edges = [Edge(namespace="crash", kind=EdgeKind.LINKS_TO, src=note.id, dst=previous)]
        store.upsert([note], edges)
        if i % 5 == 4:
            store.update_utility("crash", [note.id], 1.0, 0.5)
        os.write(ack_fd, f"{note.id}\n".encode())
        previous = note.id


def run_and_kill(path: Path, prefix: str, rng: random.Random) -> list[str]:
    """Fork a writer process and SIGKILL it after a random number of acknowledged writes.

    Forking (rather than starting a fresh interpreter) keeps each round to milliseconds; the
    child is a separate process all the same, killed without any chance to clean up.
    """
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: write until killed, never return into pytest
        os.close(read_fd)
        try:
            writer(path, prefix, write_fd)
        finally:
            os._exit(1)
    os.close(write_fd)
    acked: list[str] = []
    wanted = rng.randint(1, 30)
    with os.fdopen(read_fd, "r") as acks:
        try:
            while len(acked) < wanted:
                line = acks.readline()
                if not line:
                    pytest.fail("the writer died before it was killed")
                acked.append(line.strip())
            time.sleep(rng.uniform(0, 0.004))  # land the kill at a random point of a write
        finally:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        # Ids reported before the kill were acknowledged too.
        acked.extend(line.strip() for line in acks.read().splitlines() if line.strip())
    return acked


def check_consistent(path: Path, acked: list[str]) -> dict[str, int]:
    with EmbeddedStore.open(path) as store:
        present = {m.id for m in store.iter_nodes("crash")}
        missing = [i for i in acked if i not in present]
        assert not missing, f"{len(missing)} acknowledged writes lost, e.g. {missing[:3]}"
        for edge in store.iter_edges("crash"):
            assert edge.src in present and edge.dst in present
        hits = store.recall("crash", vec(8, 1.0, 1.0), 5)
        assert len(hits) == min(5, len(present))
        counts = store.counts("crash")
    with EmbeddedStore.open(path) as again:
        assert again.counts("crash") == counts
    return counts


def kill_rounds(path: Path, rounds: int, seed: int) -> None:
    rng = random.Random(seed)
    acked: list[str] = []
    for round_no in range(rounds):
        acked += run_and_kill(path, f"r{round_no}", rng)
        counts = check_consistent(path, acked)
        assert counts["Note"] >= len(acked)
        assert counts["edges"] >= len(acked) - (round_no + 1)


@pytest.mark.parametrize("durability", ["journal", "sqlite"])
def test_killed_writers_lose_no_acknowledged_write(tmp_path: Path, durability: Durability) -> None:
    EmbeddedStore.open(tmp_path / "store", durability=durability).close()
    kill_rounds(tmp_path / "store", rounds=10, seed=20240601)


@pytest.mark.reliability
@pytest.mark.slow
@pytest.mark.parametrize("durability", ["journal", "sqlite"])
def test_many_killed_writers_lose_no_acknowledged_write(
    tmp_path: Path, request: pytest.FixtureRequest, durability: Durability
) -> None:
    if "reliability" not in str(request.config.getoption("markexpr") or ""):
        pytest.skip("a few minutes long: run with -m reliability")
    EmbeddedStore.open(tmp_path / "store", durability=durability).close()
    kill_rounds(tmp_path / "store", rounds=60, seed=7)


def wal_of(path: Path) -> Path:
    (wal,) = path.glob("wal-*.jsonl")
    return wal


def test_a_torn_last_record_is_dropped_on_reopen(tmp_path: Path) -> None:
    path = tmp_path / "store"
    with EmbeddedStore.open(path) as store:
        store.upsert([Note(id="kept", namespace="ns", content="kept", embedding=vec(8, 1))])
    wal = wal_of(path)
    size = wal.stat().st_size
    with wal.open("ab") as f:
        f.write(b'{"put":[{"id":"torn","namespace":"ns","kind":"No')  # no newline: torn
    with EmbeddedStore.open(path) as store:
        assert [m.id for m in store.iter_nodes("ns")] == ["kept"]
        assert wal.stat().st_size == size  # the torn tail was cut off
        store.upsert([Note(id="after", namespace="ns", content="after", embedding=vec(8, 1))])
    with EmbeddedStore.open(path) as store:
        assert [m.id for m in store.iter_nodes("ns")] == ["after", "kept"]


@pytest.mark.parametrize("cut", [1, 20, -1])
def test_a_log_cut_inside_its_last_record_loses_only_that_record(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, cut: int
) -> None:
    # What a crash mid-append leaves: fewer bytes than the last record's line (its newline at
    # least is missing). That write was never acknowledged, so it is dropped on the next open.
    path = tmp_path / "store"
    with EmbeddedStore.open(path) as store:
        store.upsert([Note(id="a", namespace="ns", content="a", embedding=vec(8, 1))])
        store.upsert([Note(id="b", namespace="ns", content="b", embedding=vec(8, 2))])
    wal = wal_of(path)
    whole = wal.read_bytes()
    start = whole.rstrip(b"\n").rfind(b"\n") + 1  # the last record's offset
    wal.write_bytes(whole[: start + cut if cut > 0 else len(whole) + cut])
    with (
        caplog.at_level("WARNING", logger="graphmem.stores.embedded"),
        EmbeddedStore.open(path) as store,
    ):
        assert [m.id for m in store.iter_nodes("ns")] == ["a"]
    assert f"unfinished write at byte {start} of {wal}" in caplog.text
    assert wal.read_bytes() == whole[:start]


def test_a_garbled_complete_line_is_corruption_wherever_it_is(tmp_path: Path) -> None:
    # A line with its newline was written whole; a bad checksum there is damage, not a torn
    # write, even as the last line: opening refuses it and leaves the bytes for `store repair`.
    path = tmp_path / "store"
    with EmbeddedStore.open(path) as store:
        store.upsert([Note(id="a", namespace="ns", content="a", embedding=vec(8, 1))])
    wal = wal_of(path)
    good = wal.read_bytes()
    for damaged in (good + b"\x00\x00garbage\n", good + b"\n", b"garbage\n" + good):
        wal.write_bytes(damaged)
        offset = len(good) if damaged.startswith(good) else 0
        with pytest.raises(StoreError, match=re.escape(f"{wal} is corrupt at byte {offset} (")):
            EmbeddedStore.open(path)
        assert wal.read_bytes() == damaged
    wal.write_bytes(good + b"\x00\x00garb")  # no newline: an unfinished write
    with EmbeddedStore.open(path) as store:
        assert [m.id for m in store.iter_nodes("ns")] == ["a"]
    assert wal.read_bytes() == good


def test_compaction_keeps_everything_and_drops_old_generations(tmp_path: Path) -> None:
    path = tmp_path / "store"
    with EmbeddedStore.open(path, compact_bytes=4_000) as store:
        for i in range(40):
            store.upsert(
                [Note(id=f"n{i}", namespace="ns", content="x" * 50, embedding=vec(8, 1, i))]
            )
        store.update_utility("ns", ["n3"], 1.0, 0.5)
        before = store.counts("ns")
    names = sorted(p.name for p in path.iterdir())
    assert len([n for n in names if n.startswith("wal-")]) == 1
    assert len([n for n in names if n.startswith("snapshot-")]) == 1
    assert not [n for n in names if n.endswith(".tmp")]
    with EmbeddedStore.open(path) as store:
        assert store.counts("ns") == before
        assert store.get("ns", "n3").q == 0.75
        assert store.dimension == 8


def full_disk_at(monkeypatch: pytest.MonkeyPatch, failing: int) -> None:
    """Make the ``failing``-th fsync from now on fail as on a full disk (ENOSPC)."""
    real_fsync, calls = os.fsync, [0]

    def fsync(fd: int) -> None:
        calls[0] += 1
        if calls[0] == failing:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)


def store_files(path: Path) -> list[str]:
    return sorted(p.name for p in path.iterdir())


# A compaction fsyncs: 1 the vectors, 2 the snapshot, 3 the new log, 4 the directory, 5 the
# CURRENT pointer (renamed over the old one next: from there on the new generation is live).
@pytest.mark.parametrize("failing", [1, 2, 3, 4, 5])
def test_a_compaction_failing_on_a_full_disk_leaves_no_files_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: int
) -> None:
    path = tmp_path / "store"
    with EmbeddedStore.open(path) as store:
        for i in range(5):
            store.upsert([Note(id=f"n{i}", namespace="ns", content="x", embedding=vec(8, 1, i))])
        before = store_files(path)
        full_disk_at(monkeypatch, failing)
        with pytest.raises(StoreError, match=r"cannot compact .*No space left on device"):
            store.compact()
        monkeypatch.undo()
        assert store_files(path) == before  # no .tmp, no half-written generation
        store.upsert([Note(id="n5", namespace="ns", content="x", embedding=vec(8, 1, 5))])
        assert len(list(store.iter_nodes("ns"))) == 6
    with EmbeddedStore.open(path) as store:
        assert sorted(m.id for m in store.iter_nodes("ns")) == [f"n{i}" for i in range(6)]
        store.compact()  # and it compacts once there is room
    assert [n for n in store_files(path) if n.startswith("wal-")] == ["wal-00000001.jsonl"]


def test_a_write_whose_compaction_fails_is_kept_and_leaves_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "store"
    with EmbeddedStore.open(path, compact_bytes=2_000) as store:
        store.upsert([Note(id="n0", namespace="ns", content="x" * 1_000, embedding=vec(8, 1))])
        full_disk_at(monkeypatch, 2)  # 1: this write's log record; 2: the vectors file
        with caplog.at_level("WARNING", logger="graphmem.stores.embedded"):
            # The log now outgrows compact_bytes: this write compacts, on a full disk.
            store.upsert([Note(id="n1", namespace="ns", content="y" * 1_500, embedding=vec(8, 2))])
        monkeypatch.undo()
        assert "compacting" in caplog.text and "No space left on device" in caplog.text
        assert not [n for n in store_files(path) if n.endswith(".tmp")]
        assert store_files(path) == ["CURRENT", "lock", "wal-00000000.jsonl"]
    with EmbeddedStore.open(path) as store:
        assert sorted(m.id for m in store.iter_nodes("ns")) == ["n0", "n1"]


def test_a_crash_between_snapshot_and_pointer_switch_keeps_the_old_generation(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store"
    with EmbeddedStore.open(path) as store:
        store.upsert([Note(id="a", namespace="ns", content="a", embedding=vec(8, 1))])
    # What a compaction killed before renaming CURRENT leaves: next-generation files.
    (path / "snapshot-00000001.json").write_bytes(b'{"put": [')
    (path / "wal-00000001.jsonl").write_bytes(b"")
    (path / "vectors-00000001.npy.tmp").write_bytes(b"\x93NUMPY")
    (path / "CURRENT.tmp").write_bytes(b"{")
    with EmbeddedStore.open(path) as store:
        assert [m.id for m in store.iter_nodes("ns")] == ["a"]
    assert sorted(p.name for p in path.iterdir() if "00000001" in p.name or ".tmp" in p.name) == []
    assert os.path.exists(path / "wal-00000000.jsonl")
