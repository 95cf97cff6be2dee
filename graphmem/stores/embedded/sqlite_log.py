"""The embedded store's files in one SQLite database (``durability="sqlite"``).

The same records as the journal (:mod:`graphmem.stores.embedded.journal`): a snapshot per
generation and a log of framed, checksummed change lines after it, but kept in SQLite tables
(WAL mode, ``synchronous=FULL``) instead of hand-written files. SQLite gives the atomic write,
the torn-write recovery and the cross-process lock; the checksums stay, because SQLite checks
the structure of its pages, not the bytes of a record. The interface is the journal's, so the
store replays either the same way. Why it is not the default: docs/design.md §3.1.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from graphmem.errors import StoreError, StoreLocked
from graphmem.stores.embedded.journal import (
    DIR_MODE,
    check_matrix,
    crc32_hex,
    create_private,
    frame,
    one_line,
)
from graphmem.stores.embedded.vectors import Vector

DB_NAME = "graphmem.sqlite"
SQLITE_FORMAT = "graphmem-embedded-sqlite/1"
SYNCHRONOUS = "FULL"
"""``PRAGMA synchronous``: FULL fsyncs the WAL at every commit, so an acknowledged write survives
a power cut as the journal's does; NORMAL only at checkpoints (it survives ``kill -9``, not a
power cut). Benchmarks compare the two; the store uses FULL."""
_CHUNK_ROWS = 4096  # vector rows per blob: a million 384-d rows would pass SQLite's 1 GB limit

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS snapshot (
    generation INTEGER PRIMARY KEY, record BLOB NOT NULL, crc TEXT NOT NULL,
    vectors_crc TEXT NOT NULL, rows INTEGER NOT NULL, width INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS vectors (
    generation INTEGER NOT NULL, chunk INTEGER NOT NULL, data BLOB NOT NULL,
    PRIMARY KEY (generation, chunk));
CREATE TABLE IF NOT EXISTS log (start INTEGER PRIMARY KEY, line BLOB NOT NULL);
"""
# A log row's key is its byte offset in the virtual file its lines would make, one after the
# other: the store keeps its place in the log as an offset, for either backend.


def is_sqlite_store(root: Path) -> bool:
    return (root / DB_NAME).is_file()


class LogGap(StoreError):
    """Log rows that do not follow one another (a row lost, or holding no bytes): ``intact``
    is the log before the gap, from where the read began; ``at`` the byte the gap is at."""

    def __init__(self, message: str, intact: bytes, at: int, reason: str) -> None:
        super().__init__(message)
        self.intact, self.at, self.reason = intact, at, reason


def _is_busy(e: sqlite3.Error) -> bool:
    text = str(e)
    return "locked" in text or "busy" in text


class _Hold:
    """The store lock as SQLite transactions: shared = a read transaction (a consistent view,
    never waiting for a writer in WAL mode), exclusive = ``BEGIN IMMEDIATE`` (one writer across
    processes, waiting up to the lock timeout). Re-entrant within the holder, like FileLock."""

    def __init__(self, db: SqliteJournal) -> None:
        self._db = db
        self._depth = 0
        self._exclusive = False

    @contextlib.contextmanager
    def hold(self, *, exclusive: bool) -> Iterator[None]:
        if self._depth:
            if exclusive and not self._exclusive:
                raise RuntimeError("cannot upgrade a shared store lock to an exclusive one")
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        self._db.begin(exclusive)
        self._depth, self._exclusive = 1, exclusive
        try:
            yield
        except BaseException:
            self._depth = 0
            self._db.rollback()
            raise
        self._depth = 0
        self._db.commit()


class SqliteJournal:
    """One store directory whose records live in ``graphmem.sqlite``, opened by one process.

    Writes go into the open transaction and become durable when the exclusive hold ends
    (COMMIT, fsynced). If that fails (a full disk), nothing changed on disk, the call raises,
    and ``generation`` is reset so the next call reloads what the disk holds.
    """

    def __init__(self, root: Path, lock_timeout: float) -> None:
        self.root = root
        try:
            if not root.exists():
                root.parent.mkdir(parents=True, exist_ok=True)
                with contextlib.suppress(FileExistsError):
                    root.mkdir(mode=DIR_MODE)
        except OSError as e:
            raise StoreError(f"cannot create the store directory {root}: {e.strerror}") from e
        if not root.is_dir():
            raise StoreError(f"{root} is not a directory")
        self.path = root / DB_NAME
        self.lock_timeout = lock_timeout
        self._db: sqlite3.Connection | None = None
        try:
            if not self.path.exists():
                os.close(create_private(self.path, os.O_WRONLY))  # owner-only, as SQLite's own
            new = self.path.stat().st_size == 0
            self._db = sqlite3.connect(
                self.path, timeout=lock_timeout, isolation_level=None, check_same_thread=False
            )
            if new:  # before the first table: a compaction's commit gives the log's pages back
                self._db.execute("PRAGMA auto_vacuum=FULL")  # (a write: never on an old store)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(f"PRAGMA synchronous={SYNCHRONOUS}")
        except (OSError, sqlite3.Error, UnicodeDecodeError) as e:
            self._drop()
            if isinstance(e, sqlite3.Error) and _is_busy(e):
                raise self._error(e) from e
            if isinstance(e, UnicodeDecodeError):  # SQLite's message quotes a damaged schema
                raise self._damage("its schema is not text") from e
            raise StoreError(f"cannot open the store database {self.path}: {e}") from e
        self.lock = _Hold(self)
        self.generation = -1
        self.offset = 0
        self.snapshot_bytes = 0
        self.format = SQLITE_FORMAT
        # What makes a read that finds nothing new cheap: the database's data_version when this
        # process last read it, and the log's end then; _quiet while neither moved.
        self._version: int | None = None
        self._end = 0
        self._quiet = False
        self._dirty = False  # this transaction wrote what this process has applied already

    def _drop(self) -> None:
        """Close the connection of an open that failed (before anything was read)."""
        if self._db is not None:
            self._db.close()
            self._db = None

    # ---- transactions -------------------------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            raise StoreError("the store is closed")
        return self._db

    def _run(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        try:
            return self._conn().execute(sql, params).fetchall()
        except sqlite3.DatabaseError as e:
            raise self._error(e) from e
        except UnicodeDecodeError as e:  # a TEXT value (or SQLite's message) with bad bytes
            raise self._damage(f"{one_line(str(e))} reading {sql.split()[0]}") from e

    def _error(self, e: sqlite3.Error) -> StoreError:
        text = str(e)
        if _is_busy(e):
            return StoreLocked(
                f"the store at {self.root} stayed locked by another process for more than "
                f"{self.lock_timeout:g} s"
            )
        if isinstance(e, sqlite3.OperationalError) and "full" in text:
            return StoreError(f"cannot write the store {self.path}: No space left on device")
        if isinstance(e, sqlite3.DatabaseError) and not isinstance(e, sqlite3.OperationalError):
            return StoreError(
                f"the store's database {self.path} is corrupt ({one_line(text)}); run "
                f"`graphmem store check {self.root}`"
            )
        return StoreError(f"cannot use the store's database {self.path}: {one_line(text)}")

    def begin(self, exclusive: bool) -> None:
        self._run("BEGIN IMMEDIATE" if exclusive else "BEGIN")
        self._dirty = False

    def commit(self) -> None:
        try:
            self._conn().execute("COMMIT")
        except sqlite3.Error as e:
            self.rollback()
            raise self._error(e) from e
        self._dirty = False

    def rollback(self) -> None:
        db = self._db
        if db is not None and db.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                db.execute("ROLLBACK")
        if self._dirty:  # what this process applied was not written: reload on the next call
            self.generation, self._dirty = -1, False

    # ---- the generation pointer ---------------------------------------------------------

    def initialise(self) -> None:
        """Create the tables and generation 0 in an empty database (exclusive hold)."""
        for statement in _SCHEMA.split(";"):
            if statement.strip():
                self._run(statement)
        if not self._run("SELECT 1 FROM meta WHERE key = 'generation'"):
            self._run(
                "INSERT INTO meta VALUES ('format', ?), ('generation', '0')", (SQLITE_FORMAT,)
            )

    def read_current(self) -> int:
        """The generation in ``meta``; without a query when nobody else wrote since this
        process last read the whole log (``PRAGMA data_version``: one page-cache check).

        The first read refuses a database whose pages are damaged (``PRAGMA quick_check``,
        0.3-1.5 % of the time an open takes): a b-tree cell lost to a flipped bit leaves the
        rows under it unread, not unreadable, so nothing else would notice."""
        if self._version is None:  # this process's first read: are the pages sound?
            problem = self.quick_problem()
            if problem is not None:
                raise StoreError(f"{problem}; run `graphmem store check {self.root}`")
        version = self._run("PRAGMA data_version")[0][0]
        self._quiet = version == self._version and self.generation >= 0 and self.offset == self._end
        self._version = version
        if self._quiet:
            return self.generation
        rows = self._run("SELECT key, value FROM meta WHERE key IN ('format', 'generation')")
        found = dict(rows)
        if found.get("format") != SQLITE_FORMAT:
            raise StoreError(f"{self.path} is not a {SQLITE_FORMAT} store")
        try:
            return int(found["generation"])
        except (KeyError, ValueError) as e:
            raise StoreError(f"{self.path} names no valid generation") from e

    def upgrade(self) -> None:
        """Nothing to upgrade: the first SQLite format."""

    def remove_stale(self) -> None:
        """Nothing is left behind: a compaction replaces a generation in one transaction."""

    # ---- snapshots ----------------------------------------------------------------------

    def load_snapshot(self, generation: int) -> tuple[dict[str, Any], Vector] | None:
        self.snapshot_bytes = 0
        rows = self._run(
            "SELECT record, crc, vectors_crc, rows, width FROM snapshot WHERE generation = ?",
            (generation,),
        )
        if not rows:
            return None
        body, crc, vectors_crc, n, width = rows[0]
        where = f"snapshot {generation} in {self.path}"
        if not isinstance(body, bytes) or crc32_hex(body) != crc:
            raise StoreError(f"the store's {where} is corrupt (checksum mismatch)")
        chunks = self._run(
            "SELECT data FROM vectors WHERE generation = ? ORDER BY chunk", (generation,)
        )
        data = b"".join(c if isinstance(c, bytes) else b"" for (c,) in chunks)
        if crc32_hex(data) != vectors_crc:
            raise StoreError(f"the store's vectors of {where} are corrupt (checksum mismatch)")
        try:
            record = json.loads(body)
            matrix = np.frombuffer(data, dtype="<f4").reshape(n, width)
        except ValueError as e:
            raise StoreError(f"the store's {where} is corrupt: {one_line(str(e))}") from e
        check_matrix(record, matrix, self.path, self.path)
        self.snapshot_bytes = len(body) + len(data)
        return record, matrix.astype(np.float32)

    def write_generation(self, record: dict[str, Any], matrix: Vector) -> None:
        """Replace the snapshot and empty the log in the open exclusive transaction; a failure
        rolls back to the savepoint, leaving the generation (and this call's write) as they
        were."""
        generation = self.generation + 1
        body = json.dumps(record, separators=(",", ":"), allow_nan=False).encode("ascii")
        rows = np.ascontiguousarray(matrix, dtype="<f4")
        width = rows.shape[1] if rows.ndim == 2 else 0
        db = self._conn()
        try:
            db.execute("SAVEPOINT compaction")
            crc = 0
            for chunk, start in enumerate(range(0, len(rows), _CHUNK_ROWS)):
                data = rows[start : start + _CHUNK_ROWS].tobytes()
                crc = zlib.crc32(data, crc)
                db.execute("INSERT INTO vectors VALUES (?, ?, ?)", (generation, chunk, data))
            db.execute(
                "INSERT INTO snapshot VALUES (?, ?, ?, ?, ?, ?)",
                (generation, body, crc32_hex(body), f"{crc:08x}", len(rows), width),
            )
            db.execute("DELETE FROM snapshot WHERE generation <> ?", (generation,))
            db.execute("DELETE FROM vectors WHERE generation <> ?", (generation,))
            db.execute("DELETE FROM log")
            db.execute("UPDATE meta SET value = ? WHERE key = 'generation'", (str(generation),))
            db.execute("RELEASE compaction")
        except sqlite3.Error as e:
            if db.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    db.execute("ROLLBACK TO compaction")
                    db.execute("RELEASE compaction")
            else:  # SQLite rolled back the whole transaction: this call's write is gone too
                self.generation = -1
            raise OSError(str(e)) from e
        self.generation, self.offset, self._end = generation, 0, 0
        self.snapshot_bytes = len(body) + rows.nbytes

    # ---- the log ------------------------------------------------------------------------

    def wal_path(self, generation: int | None = None) -> Path:
        return self.path

    def open_wal(self, generation: int) -> None:
        self.generation = generation
        self.offset = 0

    def unread(self) -> bytes:
        if self._quiet:
            return b""
        rows = self._run(
            "SELECT start, line FROM log WHERE start >= ? ORDER BY start", (self.offset,)
        )
        return self._joined(rows, self.offset)

    def read_prefix(self, length: int) -> bytes:
        rows = self._run("SELECT start, line FROM log WHERE start < ? ORDER BY start", (length,))
        return self._joined(rows, 0)[:length]

    def _joined(self, rows: list[Any], at: int) -> bytes:
        """The log's lines from byte ``at`` on, one after the other. Each row must start where
        the one before it ends and hold bytes: a row a damaged page hides (a b-tree cell lost)
        leaves a gap, which is refused rather than replayed as if those writes never were."""
        lines: list[bytes] = []
        for start, line in rows:
            if start != at or not isinstance(line, bytes):
                found = "no bytes" if not isinstance(line, bytes) else f"a row at byte {start}"
                reason = f"log record at byte {at} missing, {found} instead"
                raise LogGap(str(self._damage(reason)), b"".join(lines), at, reason)
            lines.append(line)
            at += len(line)
        return b"".join(lines)

    def rows_from(self, start: int) -> bytes:
        """Every log row from byte ``start`` on that holds bytes, gaps or not (what a repair
        cuts and keeps beside the store)."""
        rows = self._run("SELECT line FROM log WHERE start >= ? ORDER BY start", (start,))
        return b"".join(line for (line,) in rows if isinstance(line, bytes))

    def _damage(self, what: str) -> StoreError:
        return StoreError(
            f"the store's database {self.path} is damaged ({what}); run "
            f"`graphmem store check {self.root}`"
        )

    def size(self) -> int:
        if not self._quiet:
            rows = self._run("SELECT start + length(line) FROM log ORDER BY start DESC LIMIT 1")
            if rows and not isinstance(rows[0][0], int):
                raise self._damage("the log's last record holds no bytes")
            self._end = int(rows[0][0]) if rows else 0
        return self._end

    def truncate(self, length: int) -> None:
        """Drop the records from ``length`` on (a repair; the exclusive hold commits it)."""
        self._run("DELETE FROM log WHERE start >= ?", (length,))
        self._end, self._dirty = min(self._end, length), True

    def append(self, record: bytes) -> None:
        """Add one record to the open exclusive transaction; durable at its COMMIT."""
        line = frame(record)
        start = self.size()
        self._run("INSERT INTO log VALUES (?, ?)", (start, line))
        self._dirty = True
        self.offset = self._end = start + len(line)

    def integrity_problem(self) -> str | None:
        """What ``PRAGMA integrity_check`` finds wrong with the database, or None."""
        return self._check("integrity_check")

    def quick_problem(self) -> str | None:
        """What ``PRAGMA quick_check`` finds wrong with the database's pages, or None: the
        b-trees' structure (a lost cell leaves a page no tree uses), not index contents."""
        return self._check("quick_check")

    def _check(self, pragma: str) -> str | None:
        try:
            rows = self._conn().execute(f"PRAGMA {pragma}").fetchall()
        except sqlite3.DatabaseError as e:
            if _is_busy(e):
                raise
            return f"the database {self.path} is damaged: {one_line(str(e))}"
        found = [str(r[0]) for r in rows]
        if found == ["ok"]:
            return None
        return f"the database {self.path} is damaged: {one_line('; '.join(found))}"

    def close(self) -> None:
        if self._db is not None:
            self.rollback()
            self._db.close()
            self._db = None
