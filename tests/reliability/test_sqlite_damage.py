"""A damaged SQLite store is refused, never opened with acknowledged writes missing.

SQLite checks the structure of a page only when it reads it, and a b-tree page whose cell count
lost a bit still reads: the leaves its lost cells pointed at are simply never visited, so the
log table reads as if those writes had never been made. The store therefore runs
``PRAGMA quick_check`` on open (it finds the pages no tree uses) and, on every read of the log,
refuses rows that are not contiguous or hold no bytes. Either way the refusal is one line naming
the database and ``graphmem store check``, and no CLI verb prints a traceback.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import pytest

from graphmem.cli import main
from graphmem.config import MemoryConfig
from graphmem.embedding import HashingEmbedder
from graphmem.errors import StoreError, StoreLocked
from graphmem.memory import GraphMemory
from graphmem.models import MemoryKind
from graphmem.stores.embedded import EmbeddedStore
from graphmem.stores.embedded.check import check_store, repair_store
from graphmem.stores.embedded.sqlite_log import DB_NAME

pytestmark = pytest.mark.reliability

NS = "damage"
NOTE = MemoryKind.NOTE


def build(path: Path) -> dict[str, int]:
    """The issue's store: 30 notes, then 3 finished episodes crediting 6 of them (each write
    acknowledged); returns every note's uses."""
    with EmbeddedStore.open(path, durability="sqlite") as store:
        memory = GraphMemory(store, embedder=HashingEmbedder(64), config=MemoryConfig(alpha=0.5))
        ids = [memory.add_note(NS, f"note {i} on topic {i % 7}").id for i in range(30)]
        for e in range(3):
            episode = memory.start_episode(NS, f"task {e}")
            memory.retrieve(NS, f"topic {e}", episode_id=episode.id, k1=4, k2=2, kinds=[NOTE])
            memory.finish_episode(NS, episode.id, 1.0, success=True)
        uses = {i: m.uses for i in ids if (m := store.get(NS, i)) is not None}
    assert sum(uses.values()) == 6
    return uses


def checkpoint(db: Path) -> None:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def one_line(excinfo: pytest.ExceptionInfo[StoreError]) -> str:
    message = str(excinfo.value)
    assert "\n" not in message
    return message


def test_a_bit_cleared_in_the_log_tables_interior_page_is_refused_on_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "store"
    build(path)
    db = path / DB_NAME
    checkpoint(db)
    with contextlib.closing(sqlite3.connect(db)) as conn:
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        (page,) = conn.execute(
            "SELECT pageno FROM dbstat WHERE name = 'log' AND pagetype = 'internal'"
        ).fetchone()
    data = bytearray(db.read_bytes())
    at = (page - 1) * page_size + 4  # the low byte of the page's cell count
    assert data[at] > 1, "the interior page points at several leaves"
    data[at] &= data[at] - 1  # clear its lowest set bit: fewer cells, leaves left unreachable
    db.write_bytes(bytes(data))

    with pytest.raises(StoreError) as excinfo:
        EmbeddedStore.open(path)
    message = one_line(excinfo)
    assert f"the database {db} is damaged" in message
    assert f"run `graphmem store check {path}`" in message

    monkeypatch.setenv("GRAPHMEM_STORE", str(path))
    monkeypatch.delenv("GRAPHMEM_NEO4J_URI", raising=False)
    for argv in (["stats"], ["export", "-"], ["history", NS, "x"]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "is damaged" in err, (argv, err)
    assert main(["store", "check", str(path)]) == 1
    assert f"{path}: damaged: the database {db} is damaged" in capsys.readouterr().out
    report = check_store(path)
    assert not report.intact and not report.repairable


def test_a_log_row_missing_from_sound_pages_is_refused_not_skipped(tmp_path: Path) -> None:
    # Pages that check but a row gone from the middle (another tool's DELETE, a lost cell
    # quick_check cannot see): the records after the gap are not replayed as if it were not.
    path = tmp_path / "store"
    build(path)
    db = path / DB_NAME
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        starts = [s for (s,) in conn.execute("SELECT start FROM log ORDER BY start")]
        conn.execute("DELETE FROM log WHERE start = ?", (starts[10],))
    with pytest.raises(StoreError) as excinfo:
        EmbeddedStore.open(path)
    message = one_line(excinfo)
    assert f"the store's database {db} is damaged (log record at byte {starts[10]} missing" in (
        message
    )
    assert f"`graphmem store check {path}`" in message
    report = check_store(path)  # the pages are sound: the log before the gap is repairable
    assert not report.intact and report.repairable and report.intact_bytes == starts[10]
    assert f"is corrupt at byte {starts[10]} (log record at byte" in str(report.problem)
    result = repair_store(path)
    assert result.backup is not None and result.dropped_records == len(starts) - 11
    assert result.backup.read_bytes().count(b"\n") == len(starts) - 11  # kept beside
    with EmbeddedStore.open(path) as store:  # what preceded the gap, nothing after it
        assert 0 < len(list(store.iter_nodes(NS))) < 30
    assert check_store(path).intact


@pytest.mark.parametrize("value", ["text, not bytes", None])
def test_a_log_row_of_the_wrong_type_is_one_line_from_every_verb(
    tmp_path: Path,
    value: str | None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # What a flipped type byte in a record header reads as: a TEXT or NULL line (before the
    # fix, `graphmem stats` printed a raw TypeError traceback).
    path = tmp_path / "store"
    build(path)
    db = path / DB_NAME
    with contextlib.closing(sqlite3.connect(db, isolation_level=None)) as conn:
        conn.execute("PRAGMA writable_schema = ON")  # lift NOT NULL, as damage would
        conn.execute(
            "UPDATE sqlite_schema SET sql = replace(sql, 'line BLOB NOT NULL', 'line BLOB') "
            "WHERE name = 'log'"
        )
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        (start,) = conn.execute("SELECT start FROM log ORDER BY start LIMIT 1 OFFSET 5").fetchone()
        conn.execute("UPDATE log SET line = ? WHERE start = ?", (value, start))
    monkeypatch.setenv("GRAPHMEM_STORE", str(path))
    monkeypatch.delenv("GRAPHMEM_NEO4J_URI", raising=False)
    for argv in (["stats"], ["stats", "--json"], ["export", "-"], ["episode", NS, "x"]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"log record at byte {start} missing" in err, err


def test_opening_a_sqlite_store_another_process_writes_raises_store_locked(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store"
    with EmbeddedStore.open(path, durability="sqlite"):
        pass
    other = sqlite3.connect(path / DB_NAME, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")  # another process in the middle of a write
        other.execute("INSERT INTO log VALUES (0, x'00')")
        with pytest.raises(StoreLocked, match="locked by another process"):
            EmbeddedStore.open(path, lock_timeout=0.2)
    finally:
        other.close()
    with EmbeddedStore.open(path, lock_timeout=0.2) as store:  # the writer gone: it opens
        assert store.namespaces() == []
