"""The embedded store's files: a generation pointer, snapshots and a write-ahead log.

Why and how, in full: docs/design.md, "Module notes", ``graphmem.stores.embedded.journal``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

import numpy as np

from graphmem.errors import StoreError
from graphmem.stores.embedded.filelock import FileLock
from graphmem.stores.embedded.vectors import Vector

STORE_FORMAT = "graphmem-embedded/2"
"""Format 2 added checksums. A format-1 store is read, and its pointer is rewritten as format 2
on the first open, so an older graphmem refuses it cleanly instead of misreading framed lines."""
LEGACY_FORMATS = ("graphmem-embedded/1",)
_GEN_FILE = re.compile(r"^(snapshot|vectors|wal)-(\d{8})\.(json|npy|jsonl)$")
FILE_MODE = 0o600
DIR_MODE = 0o700

T = TypeVar("T")


def crc32_hex(data: bytes) -> str:
    return f"{zlib.crc32(data):08x}"


# ---- log records ----------------------------------------------------------------------------


def frame(payload: bytes) -> bytes:
    """One JSON record as a log line: its crc32 in hex, a space, the JSON, a newline."""
    body = payload.rstrip(b"\n")
    if b"\n" in body:
        raise ValueError("a log record must be a single line")
    return crc32_hex(body).encode("ascii") + b" " + body + b"\n"


def unframe(line: bytes) -> bytes:
    """The JSON of one log line (newline excluded); ValueError if its checksum fails."""
    if line.startswith(b"{"):
        return line  # written before checksums existed
    header, sep, body = line.partition(b" ")
    if not sep or len(header) != 8 or not re.fullmatch(rb"[0-9a-f]{8}", header):
        raise ValueError("no checksum header")
    if crc32_hex(body).encode("ascii") != header:
        raise ValueError("checksum mismatch")
    return body


class LogDamage(ValueError):
    """A record that was written whole but does not check: corruption, not an unfinished write."""

    def __init__(self, offset: int, reason: str) -> None:
        super().__init__(f"bad record at byte {offset}: {reason}")
        self.offset = offset
        self.reason = reason


def iter_log(data: bytes, decode: Callable[[bytes], T]) -> Iterator[tuple[int, int, T]]:
    """``(start, end, decoded)`` of each intact record of ``data``, in order.

    Bytes after the last newline end the iteration quietly: a write that never finished, since
    a record's newline is written last. A line with its newline that fails its checksum or
    ``decode`` raises :class:`LogDamage`, the last line too: it was written whole, so it is
    corruption, and so is a tail that is a whole record but for its newline byte. ``decode``
    gets the record's JSON and raises ValueError if it is bad.
    """
    pos = 0
    while pos < len(data):
        end = data.find(b"\n", pos)
        if end < 0:
            if whole_but_its_newline(data[pos:]):
                raise LogDamage(pos, "a whole record whose closing newline is damaged")
            return  # torn tail: a writer died mid-append
        try:
            item = decode(unframe(data[pos:end]))
        except ValueError as e:
            raise LogDamage(pos, one_line(str(e))) from e
        yield pos, end + 1, item
        pos = end + 1


def whole_but_its_newline(tail: bytes) -> bool:
    """Whether a log's unfinished last line is a whole framed record whose newline byte was
    changed: a torn write is a prefix of its line, so all but its last byte never checks."""
    if tail.startswith(b"{"):
        return False  # a format-1 line carries no checksum to tell
    try:
        unframe(tail[:-1])
    except ValueError:
        return False
    return True


def one_line(text: str, limit: int = 200) -> str:
    """A message squeezed onto one line (validation errors span several)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def create_private(path: Path, flags: int = os.O_WRONLY | os.O_TRUNC) -> int:
    """Open (creating) a file readable by its owner only; a reused file is made so too."""
    fd = os.open(path, flags | os.O_CREAT, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
    except OSError:
        os.close(fd)
        raise
    return fd


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def check_matrix(record: Any, matrix: Any, snapshot: Path, vectors: Path) -> None:
    """Refuse a vectors matrix that does not fit its snapshot: wrong shape or too few rows
    (replaying it would fail with a raw IndexError, or silently pick a wrong row)."""
    if not isinstance(record, dict):
        raise StoreError(f"the store's snapshot {snapshot} is corrupt: not a JSON object")
    if getattr(matrix, "ndim", None) != 2:
        raise StoreError(f"the store's vectors file {vectors} is corrupt: not a 2-d matrix")
    rows, width = matrix.shape
    dim = record.get("dim")
    if isinstance(dim, int) and width != dim:
        raise StoreError(
            f"the store's vectors file {vectors} is corrupt: its rows have {width} values, "
            f"the store's dimension is {dim}"
        )
    nodes = record.get("put")
    for node in nodes if isinstance(nodes, list) else ():
        vec = node.get("vec") if isinstance(node, dict) else None
        if vec is None or isinstance(vec, str):
            continue
        if isinstance(vec, bool) or not isinstance(vec, int) or not 0 <= vec < rows:
            raise StoreError(
                f"the store's vectors file {vectors} does not match its snapshot: it has "
                f"{rows} rows, the snapshot {snapshot.name} refers to row {vec!r}"
            )


def file_crc32(path: Path) -> tuple[int, int]:
    """The crc32 and size of a file, read in chunks."""
    crc, size = 0, 0
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            crc, size = zlib.crc32(chunk, crc), size + len(chunk)
    return crc, size


class _CrcWriter:
    """A file that keeps the crc32 of what is written to it (numpy writes it in chunks)."""

    def __init__(self, out: BinaryIO) -> None:
        self.out, self.crc, self.size = out, 0, 0

    def write(self, data: bytes) -> int:
        self.crc, self.size = zlib.crc32(data, self.crc), self.size + len(data)
        return self.out.write(data)

    @classmethod
    def save(cls, path: Path, matrix: Vector) -> _CrcWriter:
        """Write a matrix as ``.npy`` atomically (like :func:`write_atomic`)."""
        with replacing(path) as f:
            writer = cls(f)
            np.save(writer, matrix.astype("<f4"), allow_pickle=False)
        return writer


@contextlib.contextmanager
def replacing(path: Path) -> Iterator[BinaryIO]:
    """A temp file beside ``path`` to write, then fsynced and renamed over ``path``, so the file
    appears whole or not at all. If writing fails (a full disk) the temp file is removed."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        with os.fdopen(create_private(tmp), "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def write_atomic(path: Path, data: bytes) -> None:
    """Write a file so that it appears whole or not at all (temp file, fsync, rename)."""
    with replacing(path) as f:
        f.write(data)


def pointer(generation: int, checksums: dict[str, str] | None = None) -> bytes:
    """The contents of ``CURRENT`` naming ``generation``."""
    record: dict[str, Any] = {"format": STORE_FORMAT, "generation": generation}
    if checksums:
        record["crc32"] = checksums
    return json.dumps(record).encode() + b"\n"


def _pread_range(fd: int, start: int, stop: int) -> bytes:
    """Bytes ``start`` to ``stop`` of ``fd`` (fewer if the file ends first)."""
    chunks: list[bytes] = []
    pos = start
    while pos < stop:
        chunk = os.pread(fd, stop - pos, pos)
        if not chunk:
            break
        chunks.append(chunk)
        pos += len(chunk)
    return b"".join(chunks)


def _identity(st: os.stat_result) -> tuple[int, int, int, int]:
    """What tells one version of a file from another that replaced it (see read_current)."""
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


class Journal:
    """One store directory, opened by one process."""

    def __init__(self, root: Path, lock_timeout: float) -> None:
        self.root = root
        try:
            if not root.exists():
                root.parent.mkdir(parents=True, exist_ok=True)
                with contextlib.suppress(FileExistsError):  # another process was first
                    root.mkdir(mode=DIR_MODE)
        except OSError as e:
            raise StoreError(f"cannot create the store directory {root}: {e.strerror}") from e
        if not root.is_dir():
            raise StoreError(f"{root} is not a directory")
        self.lock = FileLock(root / "lock", lock_timeout)
        self.generation = -1  # nothing loaded yet
        self.offset = 0  # bytes of the WAL already applied in this process
        self.snapshot_bytes = 0  # size of the current generation's snapshot files
        self.checksums: dict[str, str] = {}  # crc32 of the snapshot files, from CURRENT
        self.format = STORE_FORMAT  # the format CURRENT names
        self._wal_fd: int | None = None
        self._current_path = str(root / "CURRENT")
        self._current_fd: int | None = None  # the CURRENT last read, held open (read_current)
        self._current_seen: tuple[tuple[int, int, int, int], int] | None = None

    def wal_path(self, generation: int | None = None) -> Path:
        return self._name("wal", self.generation if generation is None else generation)

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
        """The generation ``CURRENT`` names; also keeps its format and snapshot checksums.

        Every read of the store asks, so the answer is remembered: ``CURRENT`` is only ever
        replaced whole (a rename), and the file last read is held open, so its inode cannot
        be reused. While the path still names that inode, with the same size and modification
        time, it names the same generation: one ``stat`` instead of an open, a read and a
        parse (at 1k memories that was a twentieth of a retrieval).
        """
        try:
            seen = _identity(os.stat(self._current_path))
        except FileNotFoundError as e:
            raise StoreError(f"{self.root} holds no graphmem store (CURRENT is missing)") from e
        except OSError as e:
            raise StoreError(f"cannot read {self.root / 'CURRENT'}: {e.strerror}") from e
        if self._current_seen is not None and self._current_seen[0] == seen:
            return self._current_seen[1]
        try:
            fd = os.open(self._current_path, os.O_RDONLY)
        except FileNotFoundError as e:
            raise StoreError(f"{self.root} holds no graphmem store (CURRENT is missing)") from e
        except OSError as e:
            raise StoreError(f"cannot read {self.root / 'CURRENT'}: {e.strerror}") from e
        try:
            generation, st = self._parse_current(fd)
        except BaseException:
            os.close(fd)
            raise
        self._forget_current()
        self._current_fd, self._current_seen = fd, (_identity(st), generation)
        return generation

    def _forget_current(self) -> None:
        if self._current_fd is not None:
            os.close(self._current_fd)
        self._current_fd, self._current_seen = None, None

    def _parse_current(self, fd: int) -> tuple[int, os.stat_result]:
        """The generation in the open ``CURRENT`` and the file's status; keeps its format and
        checksums."""
        try:
            st = os.fstat(fd)
            data = json.loads(_pread_range(fd, 0, st.st_size))
        except (OSError, ValueError) as e:
            raise StoreError(f"cannot read {self.root / 'CURRENT'}: {one_line(str(e))}") from e
        formats = (STORE_FORMAT, *LEGACY_FORMATS)
        if not isinstance(data, dict) or data.get("format") not in formats:
            raise StoreError(f"{self.root} is not a {STORE_FORMAT} store")
        generation = data.get("generation")
        if isinstance(generation, bool) or not isinstance(generation, int) or generation < 0:
            raise StoreError(f"{self.root / 'CURRENT'} names no valid generation")
        checksums = data.get("crc32", {})
        if not isinstance(checksums, dict) or not all(
            isinstance(v, str) for v in checksums.values()
        ):
            raise StoreError(f"{self.root / 'CURRENT'} holds no valid checksums")
        self.format = str(data["format"])
        self.checksums = {str(k): v for k, v in checksums.items()}
        return generation, st

    def upgrade(self) -> None:
        """Move a format-1 pointer to the current format, once the store has loaded whole
        (exclusive lock): a store refused as corrupt is left exactly as it was."""
        if self.format != STORE_FORMAT:
            self._point_to(self.generation, self.checksums)

    def _point_to(self, generation: int, checksums: dict[str, str] | None = None) -> None:
        write_atomic(self.root / "CURRENT", pointer(generation, checksums))
        fsync_dir(self.root)
        self.format = STORE_FORMAT

    # ---- snapshots ----------------------------------------------------------------------

    def load_snapshot(self, generation: int) -> tuple[dict[str, Any], Vector] | None:
        """The snapshot record and vector matrix of a generation, checked against each other
        and against the checksums in ``CURRENT``; StoreError naming the bad file otherwise."""
        path = self._name("snapshot", generation)
        vectors = self._name("vectors", generation)
        self.snapshot_bytes = 0
        if not path.exists():
            return None
        try:
            body = path.read_bytes()
            self._verify(path, "snapshot", zlib.crc32(body), len(body))
            record = json.loads(body)
        except OSError as e:
            raise StoreError(f"cannot read the store's snapshot {path}: {e.strerror}") from e
        except ValueError as e:
            raise StoreError(f"the store's snapshot {path} is corrupt: {one_line(str(e))}") from e
        try:
            # The matrix can be large: checksum it in chunks rather than hold its bytes twice.
            crc, size = file_crc32(vectors)
            self._verify(vectors, "vectors", crc, size)
            matrix = np.load(vectors, allow_pickle=False)
        except OSError as e:
            raise StoreError(f"cannot read the store's vectors file {vectors}: {e.strerror}") from e
        except (EOFError, ValueError) as e:
            raise StoreError(
                f"the store's vectors file {vectors} is corrupt: {one_line(str(e))}"
            ) from e
        check_matrix(record, matrix, path, vectors)
        self.snapshot_bytes = len(body) + size
        return record, np.asarray(matrix, dtype=np.float32)

    def _verify(self, path: Path, kind: str, crc: int, size: int) -> None:
        expected = self.checksums.get(kind)  # absent for a snapshot written before checksums
        if expected is not None and f"{crc:08x}" != expected:
            raise StoreError(
                f"the store's {kind} file {path} is corrupt (checksum mismatch over its "
                f"{size} bytes)"
            )

    def write_generation(self, record: dict[str, Any], matrix: Vector) -> None:
        """Write a snapshot as the next generation and switch to it (the compaction).

        Until ``CURRENT`` is renamed nothing refers to the new generation's files, so a failure
        before that (a full disk) removes them, temp files included, and the store goes on
        from the generation it had.
        """
        generation = self.generation + 1
        try:
            vectors = _CrcWriter.save(self._name("vectors", generation), matrix)
            body = json.dumps(record, separators=(",", ":"), allow_nan=False).encode("ascii")
            write_atomic(self._name("snapshot", generation), body)
            self._create_wal(generation)
            checksums = {"snapshot": crc32_hex(body), "vectors": f"{vectors.crc:08x}"}
            write_atomic(self.root / "CURRENT", pointer(generation, checksums))  # the switch
        except Exception:  # not KeyboardInterrupt: it may come just after the switch
            self._remove_generation(generation)
            raise
        fsync_dir(self.root)
        self.format, self.checksums = STORE_FORMAT, checksums
        self.open_wal(generation)
        self.snapshot_bytes = len(body) + vectors.size
        self.remove_stale()

    def _remove_generation(self, generation: int) -> None:
        """Delete the files of a generation that ``CURRENT`` does not name, and their temp files."""
        for kind in ("vectors", "snapshot", "wal"):
            path = self._name(kind, generation)
            for leftover in (path, path.with_name(path.name + ".tmp")):
                with contextlib.suppress(OSError):
                    leftover.unlink()

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
        fd = create_private(self._name("wal", generation))
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
        return _pread_range(fd, self.offset, os.fstat(fd).st_size)

    def read_prefix(self, length: int) -> bytes:
        """The log's first ``length`` bytes (fewer if it is shorter)."""
        return _pread_range(self._fd(), 0, length)

    def truncate(self, length: int) -> None:
        """Cut a torn tail left by a writer that died mid-append (exclusive lock)."""
        fd = self._fd()
        os.ftruncate(fd, length)
        os.fsync(fd)

    def append(self, record: bytes) -> None:
        """Append one JSON record (framed with its checksum) and make it durable."""
        fd = self._fd()
        line = frame(record)
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
        self._forget_current()
        self.lock.close()
