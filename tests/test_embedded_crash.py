"""Crash safety of the embedded store: a writer killed with SIGKILL loses nothing acknowledged,
and torn or corrupt log tails are handled on reopen."""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path

import pytest

from graphmem.errors import StoreError
from graphmem.models import Edge, EdgeKind, Note
from graphmem.stores.embedded import EmbeddedStore
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


def test_killed_writers_lose_no_acknowledged_write(tmp_path: Path) -> None:
    kill_rounds(tmp_path / "store", rounds=10, seed=20240601)


@pytest.mark.reliability
@pytest.mark.slow
def test_many_killed_writers_lose_no_acknowledged_write(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if "reliability" not in str(request.config.getoption("markexpr") or ""):
        pytest.skip("a few minutes long: run with -m reliability")
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


def test_a_garbled_last_line_is_dropped_but_corruption_before_data_is_an_error(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store"
    with EmbeddedStore.open(path) as store:
        store.upsert([Note(id="a", namespace="ns", content="a", embedding=vec(8, 1))])
    wal = wal_of(path)
    good = wal.read_bytes()
    wal.write_bytes(good + b"\x00\x00garbage\n")
    with EmbeddedStore.open(path) as store:
        assert [m.id for m in store.iter_nodes("ns")] == ["a"]
    wal.write_bytes(b"garbage\n" + good)
    with pytest.raises(StoreError, match="corrupt"):
        EmbeddedStore.open(path)


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


def test_a_crash_between_snapshot_and_pointer_switch_keeps_the_old_generation(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store"
    with EmbeddedStore.open(path) as store:
        store.upsert([Note(id="a", namespace="ns", content="a", embedding=vec(8, 1))])
    # What a compaction killed before renaming CURRENT leaves: next-generation files.
    (path / "snapshot-00000001.json").write_bytes(b'{"put": [')
    (path / "wal-00000001.jsonl").write_bytes(b"")
    (path / "CURRENT.tmp").write_bytes(b"{")
    with EmbeddedStore.open(path) as store:
        assert [m.id for m in store.iter_nodes("ns")] == ["a"]
    assert sorted(p.name for p in path.iterdir() if "00000001" in p.name or ".tmp" in p.name) == []
    assert os.path.exists(path / "wal-00000000.jsonl")
