"""Several processes (and threads) sharing one embedded store directory lose no update."""

from __future__ import annotations

import fcntl
import os
import threading
import traceback
from collections.abc import Callable
from pathlib import Path

import pytest

from graphmem.errors import StoreLocked
from graphmem.models import Note
from graphmem.stores.embedded import EmbeddedStore
from graphmem.stores.embedded.store import Durability
from graphmem.testing import vec

Q0, REWARD, ALPHA = 0.5, 1.0, 0.001
"""A small alpha keeps (1 - alpha)^n far from 0, so a single lost update shows in q."""


def in_processes(n: int, work: Callable[[int], None]) -> None:
    """Run ``work(i)`` in ``n`` forked processes released together; fail if any failed.

    Forking keeps start-up to milliseconds; the children still share nothing but the store
    directory (each opens its own store, its own descriptors and locks).
    """
    go_read, go_write = os.pipe()
    pids = []
    for i in range(n):
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.close(go_write)
                os.read(go_read, 1)  # wait until every child exists
                work(i)
                code = 0
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(code)
        pids.append(pid)
    os.close(go_read)
    os.write(go_write, b"g" * n)
    os.close(go_write)
    failed = [pid for pid in pids if os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) != 0]
    assert not failed, f"{len(failed)} of {n} worker processes failed (see captured stderr)"


@pytest.mark.parametrize("durability", ["journal", "sqlite"])
def test_concurrent_utility_updates_from_eight_processes_lose_nothing(
    tmp_path: Path, durability: Durability
) -> None:
    path = tmp_path / "store"
    with EmbeddedStore.open(path, durability=durability) as store:
        store.upsert([Note(id="m", namespace="ns", content="shared", embedding=vec(8, 1))])

    def work(_: int) -> None:
        # A small compact_bytes makes the processes switch generations under each other too.
        with EmbeddedStore.open(path, compact_bytes=40_000) as mine:
            for _ in range(200):
                mine.update_utility("ns", ["m"], REWARD, ALPHA, success=True)

    in_processes(8, work)
    with EmbeddedStore.open(path) as store:
        m = store.get("ns", "m")
    assert m.q == pytest.approx(REWARD + (Q0 - REWARD) * (1 - ALPHA) ** 1600, abs=1e-9)
    assert (m.uses, m.q_updates, m.successes) == (1600, 1600, 1600)


@pytest.mark.parametrize("durability", ["journal", "sqlite"])
def test_concurrent_writers_of_different_memories_lose_none(
    tmp_path: Path, durability: Durability
) -> None:
    path = tmp_path / "store"
    EmbeddedStore.open(path, durability=durability).close()

    def work(worker: int) -> None:
        with EmbeddedStore.open(path, compact_bytes=30_000) as mine:
            for i in range(100):
                note = Note(
                    id=f"w{worker}-{i}", namespace="ns", content="x", embedding=vec(8, 1, worker, i)
                )
                mine.upsert([note])

    in_processes(4, work)
    with EmbeddedStore.open(path) as store:
        ids = {m.id for m in store.iter_nodes("ns")}
        assert len(store.recall("ns", vec(8, 1), 400)) == 400
    assert ids == {f"w{w}-{i}" for w in range(4) for i in range(100)}


def test_threads_sharing_one_store_lose_no_update(tmp_path: Path) -> None:
    with EmbeddedStore.open(tmp_path / "store") as store:
        store.upsert([Note(id="m", namespace="ns", content="shared")])
        errors: list[BaseException] = []

        def work() -> None:
            try:
                for _ in range(50):
                    store.update_utility("ns", ["m"], REWARD, ALPHA)
            except BaseException as e:
                errors.append(e)

        threads = [threading.Thread(target=work) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        m = store.get("ns", "m")
    assert m.uses == 400
    assert m.q == pytest.approx(REWARD + (Q0 - REWARD) * (1 - ALPHA) ** 400, abs=1e-9)


def test_two_handles_on_one_directory_see_each_others_writes(tmp_path: Path) -> None:
    path = tmp_path / "store"
    with EmbeddedStore.open(path) as a, EmbeddedStore.open(path) as b:
        a.upsert([Note(id="x", namespace="ns", content="from a", embedding=vec(8, 1))])
        assert b.get("ns", "x").namespace == "ns"
        assert b.dimension == 8
        a.compact()  # b must notice the new generation
        b.upsert([Note(id="y", namespace="ns", content="from b", embedding=vec(8, 0, 1))])
        assert [m.id for m in a.iter_nodes("ns")] == ["x", "y"]
        assert b.delete("ns", ["x"]) == ["x"]
        assert a.get_many("ns", ["x", "y"])[0].id == "y"
        b.compact()
        a.update_utility("ns", ["y"], 1.0, 0.5)
        assert b.get("ns", "y").q == 0.75


def test_a_reader_sees_every_new_generation_and_holds_one_pointer_open(tmp_path: Path) -> None:
    # A read checks CURRENT with one stat and keeps the file it last read open: each compaction
    # elsewhere renames a new CURRENT over it, and each must be noticed, without descriptors
    # piling up.
    path = tmp_path / "store"
    with EmbeddedStore.open(path) as writer, EmbeddedStore.open(path) as reader:
        writer.upsert([Note(id="m0", namespace="ns", content="0", embedding=vec(8, 1))])
        assert [m.id for m in reader.iter_nodes("ns")] == ["m0"]
        descriptors = len(os.listdir("/proc/self/fd"))
        for i in range(1, 6):
            writer.upsert([Note(id=f"m{i}", namespace="ns", content=str(i), embedding=vec(8, 1))])
            writer.compact()
            assert len(reader.recall("ns", vec(8, 1), 10)) == i + 1
            assert reader.get("ns", f"m{i}").content == str(i)
        assert len(os.listdir("/proc/self/fd")) == descriptors
    # Closing the stores closes the pointer they held, too.
    assert len(os.listdir("/proc/self/fd")) < descriptors


def test_a_lock_held_too_long_raises_store_locked(tmp_path: Path) -> None:
    path = tmp_path / "store"
    store = EmbeddedStore.open(path, lock_timeout=0.2)
    store.upsert([Note(id="x", namespace="ns", content="x")])
    fd = os.open(path / "lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # another "process" holding the write lock
        with pytest.raises(StoreLocked):
            store.get("ns", "x")
        with pytest.raises(StoreLocked):
            EmbeddedStore.open(path, lock_timeout=0.2)
        fcntl.flock(fd, fcntl.LOCK_UN)
        assert store.get("ns", "x").id == "x"
    finally:
        os.close(fd)
        store.close()
