"""The embedded store on SQLite (``durability="sqlite"``): the journal's promises kept with a
database underneath. Kills and concurrency run on both durabilities in test_embedded_crash.py,
test_embedded_concurrency.py and reliability/test_faults.py; this file holds what differs:
damage inside the database, a real full disk, the lock, and which format a directory opens in."""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from graphmem.cli import main
from graphmem.errors import InvalidInput, StoreError, StoreLocked
from graphmem.models import Note
from graphmem.stores.embedded import DEFAULT_DURABILITY, EmbeddedStore
from graphmem.stores.embedded.check import check_store, repair_store
from graphmem.stores.embedded.sqlite_log import DB_NAME
from graphmem.stores.embedded.store import Durability
from graphmem.testing import vec


def note(i: int, size: int = 20) -> Note:
    return Note(
        id=f"n{i}", namespace="ns", content=f"note {i} " + "x" * size, embedding=vec(8, 1, i)
    )


def sqlite_store(path: Path, n: int) -> None:
    with EmbeddedStore.open(path, durability="sqlite") as store:
        for i in range(n):
            store.upsert([note(i)])


def log_rows(path: Path) -> list[tuple[int, bytes]]:
    with contextlib.closing(sqlite3.connect(path / DB_NAME)) as db:
        return list(db.execute("SELECT start, line FROM log ORDER BY start"))


def set_line(path: Path, start: int, line: bytes) -> None:
    with contextlib.closing(sqlite3.connect(path / DB_NAME)) as db, db:
        db.execute("UPDATE log SET line = ? WHERE start = ?", (line, start))


def test_a_new_directory_takes_the_durability_asked_and_an_existing_one_keeps_its_own(
    tmp_path: Path,
) -> None:
    sqlite_store(tmp_path / "s", 1)
    assert (tmp_path / "s" / DB_NAME).is_file() and not (tmp_path / "s" / "CURRENT").exists()
    with EmbeddedStore.open(tmp_path / "j") as journal:  # the default: DEFAULT_DURABILITY
        journal.upsert([note(0)])
    assert DEFAULT_DURABILITY == "journal" and (tmp_path / "j" / "CURRENT").is_file()
    for path, other in ((tmp_path / "s", "journal"), (tmp_path / "j", "sqlite")):
        with EmbeddedStore.open(path) as store:  # no choice: the format the directory holds
            assert [m.id for m in store.iter_nodes("ns")] == ["n0"]
        with pytest.raises(InvalidInput, match=f"holds a .* store, not a {other} one"):
            EmbeddedStore.open(path, durability=other)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="durability must be"):
        EmbeddedStore.open(tmp_path / "x", durability="paper")  # type: ignore[arg-type]


def test_a_flipped_byte_in_a_record_is_refused_and_repair_cuts_from_it(tmp_path: Path) -> None:
    path = tmp_path / "store"
    sqlite_store(path, 5)
    rows = log_rows(path)
    start, line = rows[2]
    set_line(path, start, line.replace(b"note 2", b"note 9"))
    cut = b"".join(line for s, line in log_rows(path) if s >= start)
    message = re.escape(f"the store's log {path / DB_NAME} is corrupt at byte {start} (")
    with pytest.raises(StoreError, match=message):
        EmbeddedStore.open(path)
    report = check_store(path)
    assert not report.intact and report.repairable and report.records == 2
    result = repair_store(path)
    assert result.dropped_records == 3 and result.backup is not None
    assert result.backup.read_bytes() == cut
    with EmbeddedStore.open(path) as store:
        assert sorted(m.id for m in store.iter_nodes("ns")) == ["n0", "n1"]
    assert check_store(path).intact


def test_a_flipped_byte_in_the_snapshot_is_refused_and_not_repaired(tmp_path: Path) -> None:
    path = tmp_path / "store"
    sqlite_store(path, 3)
    with EmbeddedStore.open(path) as store:
        store.compact()
    with contextlib.closing(sqlite3.connect(path / DB_NAME)) as db, db:
        (record,) = db.execute("SELECT record FROM snapshot").fetchone()
        db.execute("UPDATE snapshot SET record = ?", (record.replace(b"note 1", b"note 7"),))
    with pytest.raises(StoreError, match=r"snapshot 1 in .* is corrupt \(checksum mismatch\)"):
        EmbeddedStore.open(path)
    assert not check_store(path).repairable
    with pytest.raises(StoreError, match="cannot repair"):
        repair_store(path)


def test_a_damaged_database_page_is_a_one_line_error_and_check_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "store"
    sqlite_store(path, 300)  # a log of many pages; a clean close checkpoints them into the file
    db = path / DB_NAME
    data = bytearray(db.read_bytes())
    page = 4096
    assert len(data) > 8 * page
    data[3 * page : 6 * page] = b"\xa5" * (3 * page)  # three pages of the log's b-tree
    db.write_bytes(bytes(data))
    with pytest.raises(StoreError) as raised, EmbeddedStore.open(path) as store:
        list(store.iter_nodes("ns"))
    assert "\n" not in str(raised.value)
    assert re.search(r"corrupt|malformed|damaged", str(raised.value))
    report = check_store(path)
    assert not report.intact and not report.repairable
    assert report.problem is not None and str(db) in report.problem
    assert main(["store", "check", str(path)]) == 1
    out = capsys.readouterr().out
    assert f"{path}: damaged: the database {db} is damaged" in out and "not repairable" in out
    assert main(["store", "repair", str(path)]) == 2
    assert "cannot repair" in capsys.readouterr().err


def test_a_writer_holding_the_database_makes_a_write_raise_store_locked(tmp_path: Path) -> None:
    path = tmp_path / "store"
    sqlite_store(path, 1)
    store = EmbeddedStore.open(path, lock_timeout=0.2)
    other = sqlite3.connect(path / DB_NAME, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")  # another process's write transaction
        with pytest.raises(StoreLocked):
            store.upsert([note(1)])
        assert store.get("ns", "n0").id == "n0"  # WAL: a read never waits for a writer
        other.execute("ROLLBACK")
        store.upsert([note(1)])
        assert len(list(store.iter_nodes("ns"))) == 2
    finally:
        other.close()
        store.close()


def test_the_database_files_are_owner_only(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        path = tmp_path / "store"
        with EmbeddedStore.open(path, durability="sqlite") as store:
            store.upsert([note(0)])
            files = [p for p in path.iterdir() if p.name.startswith(DB_NAME)]
            assert {p.name for p in files} >= {DB_NAME, f"{DB_NAME}-wal"}
            for p in files:
                assert stat.S_IMODE(p.stat().st_mode) == 0o600, p
    finally:
        os.umask(old)


# ---- a real full disk: a small tmpfs (needs root; skipped otherwise) ----------------------


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def fill(disk: Path) -> Path:
    """Fill the disk to its last byte with one file."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        for size in (4096, 1):
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, b"\0" * size)
    finally:
        os.close(fd)
    return filler


@pytest.mark.parametrize("durability", ["journal", "sqlite"])
def test_a_write_on_a_full_disk_fails_in_one_line_and_changes_nothing(
    small_disk: Path, durability: Durability
) -> None:
    path = small_disk / "store"
    with EmbeddedStore.open(path, durability=durability) as store:
        for i in range(5):
            store.upsert([note(i)])
        filler = fill(small_disk)
        failures = 0
        for i in range(5, 40):  # some may still fit in space the store holds already
            try:
                store.upsert([note(i, size=3000)])
            except StoreError as e:
                assert "No space left on device" in str(e) and "\n" not in str(e)
                failures += 1
        assert failures
        kept = sorted(m.id for m in store.iter_nodes("ns"))
        filler.unlink()
        store.upsert([note(99)])  # room again: writes go on
    with EmbeddedStore.open(path) as store:
        assert sorted(m.id for m in store.iter_nodes("ns")) == sorted([*kept, "n99"])


def test_the_derived_indexes_are_saved_and_checked_beside_the_database(tmp_path: Path) -> None:
    pytest.importorskip("usearch")
    path = tmp_path / "store"
    with EmbeddedStore.open(path, durability="sqlite", ann_threshold=20) as store:
        store.upsert([note(i) for i in range(60)])
        assert store.wait_for_index(60)
        assert [r.memory.id for r in store.recall_text("ns", "note 7", 1)] == ["n7"]
    assert list(path.glob("ann-*.usearch")) and list(path.glob("text-*.bm25"))
    report = check_store(path)
    assert report.intact and len(report.indexes) == 1 and not report.index_problems
    assert report.text_index is not None and not report.text_problems
    with EmbeddedStore.open(path, ann_threshold=20) as store:
        assert store.wait_for_index(0)  # loaded from its file, in step at once
        assert [r.memory.id for r in store.recall("ns", vec(8, 1, 7), 1)] == ["n7"]


def test_two_handles_see_each_others_writes_and_compactions(tmp_path: Path) -> None:
    path = tmp_path / "store"
    sqlite_store(path, 1)
    with EmbeddedStore.open(path) as a, EmbeddedStore.open(path) as b:
        assert b.get("ns", "n0").id == "n0"
        a.upsert([note(1)])
        assert b.get("ns", "n1").id == "n1"  # b's next call reads what a committed
        b.update_utility("ns", ["n1"], 1.0, 0.5)
        b.compact()
        a.upsert([note(2)])  # on b's new generation
        assert a.get("ns", "n1").q == 0.75
        assert sorted(m.id for m in b.iter_nodes("ns")) == ["n0", "n1", "n2"]


def test_a_record_damaged_under_an_open_store_is_refused_on_every_call(tmp_path: Path) -> None:
    path = tmp_path / "store"
    sqlite_store(path, 2)
    with EmbeddedStore.open(path) as store:
        (start, line), end = log_rows(path)[-1], sum(len(r[1]) for r in log_rows(path))
        with contextlib.closing(sqlite3.connect(path / DB_NAME)) as db, db:
            db.execute("INSERT INTO log VALUES (?, ?)", (end, line.replace(b"note", b"nute")))
        for _ in range(2):  # a call that finds nothing new must not skip the damage
            with pytest.raises(StoreError, match=f"corrupt at byte {end} "):
                store.get("ns", "n0")
        assert start < end
