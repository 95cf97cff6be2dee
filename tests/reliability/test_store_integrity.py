"""Integrity of the embedded store's files: every log record and snapshot carries a checksum, so
a flipped byte is an error naming the file and offset (never a silently changed record or a raw
IndexError); ``graphmem store check|repair`` find and cut the damage; files are owner-only."""

from __future__ import annotations

import argparse
import io
import json
import os
import stat
import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from graphmem.cli import main
from graphmem.errors import StoreError
from graphmem.launcher.server import Neo4jServer
from graphmem.models import Note
from graphmem.stores.embedded import EmbeddedStore
from graphmem.testing import vec

from .conftest import PrivateServer

pytestmark = pytest.mark.reliability

NS = "integrity"
DIM = 8


def note(i: int) -> Note:
    return Note(id=f"n{i}", namespace=NS, content=f"content {i:03d}", embedding=vec(DIM, 1, i))


def export(store: EmbeddedStore) -> str:
    out = io.StringIO()
    store.export_jsonl(out, NS)
    return out.getvalue()


def build(path: Path, n: int) -> list[str]:
    """A store of ``n`` one-note writes (every third also credited); the export after each."""
    exports = []
    with EmbeddedStore.open(path) as store:
        exports.append(export(store))
        for i in range(n):
            store.upsert([note(i)])
            if i % 3 == 2:
                store.update_utility(NS, [f"n{i}"], 1.0, 0.5)
            exports.append(export(store))
    return exports


def wal_of(path: Path) -> Path:
    (wal,) = path.glob("wal-*.jsonl")
    return wal


def record_starts(wal: Path) -> list[int]:
    data = wal.read_bytes()
    starts, pos = [], 0
    for line in data.splitlines(keepends=True):
        starts.append(pos)
        pos += len(line)
    return starts


def flip_content(wal: Path, line_no: int) -> int:
    """Change one letter of a note's content in record ``line_no``, keeping the JSON valid
    (without a checksum this would load as a different note). Returns the record's offset."""
    data = bytearray(wal.read_bytes())
    start = record_starts(wal)[line_no]
    at = data.index(b'"content ', start) + len('"content ')
    data[at] = ord("9") if data[at] != ord("9") else ord("8")
    wal.write_bytes(bytes(data))
    return start


def one_line_error(excinfo: pytest.ExceptionInfo[StoreError]) -> str:
    message = str(excinfo.value)
    assert "\n" not in message
    return message


# ---- the write-ahead log ------------------------------------------------------------------


def test_a_changed_record_mid_log_is_refused_with_file_and_offset(tmp_path: Path) -> None:
    path = tmp_path / "store"
    build(path, 6)
    wal = wal_of(path)
    offset = flip_content(wal, 2)
    with pytest.raises(StoreError) as excinfo:
        EmbeddedStore.open(path)
    message = one_line_error(excinfo)
    assert f"{wal} is corrupt at byte {offset} (checksum mismatch)" in message
    assert f"graphmem store repair {path}" in message


def test_every_command_on_a_corrupt_store_fails_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "store"
    build(path, 4)
    offset = flip_content(wal_of(path), 1)
    monkeypatch.setenv("GRAPHMEM_STORE", str(path))
    monkeypatch.delenv("GRAPHMEM_NEO4J_URI", raising=False)
    assert main(["stats"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"corrupt at byte {offset}" in err
    assert main(["store", "check"]) == 1  # the directory comes from GRAPHMEM_STORE


def damage_last_record(wal: Path, where: str) -> int:
    """Flip one byte of the log's last (complete, fsynced) record: a letter of its content, a
    digit of its checksum, or its closing newline. Returns the record's offset."""
    data = bytearray(wal.read_bytes())
    start = record_starts(wal)[-1]
    if where == "content":
        return flip_content(wal, len(record_starts(wal)) - 1)
    at = {"checksum": start, "newline": len(data) - 1}[where]
    data[at] = ord("0") if data[at] != ord("0") else ord("1")
    wal.write_bytes(bytes(data))
    return start


def files_of(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(path.iterdir()) if p.name != "lock"}


@pytest.mark.parametrize("where", ["content", "checksum", "newline"])
def test_a_flipped_byte_in_the_last_complete_record_is_refused_not_dropped(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    where: str,
) -> None:
    # An acknowledged write is corruption when damaged, not an unfinished write: opening must
    # refuse it (naming file and offset) and change nothing, never drop it quietly.
    path = tmp_path / "store"
    exports = build(path, 4)  # 4 upserts + 1 credit: the last record is n3's upsert
    wal = wal_of(path)
    whole = wal.read_bytes()
    starts = record_starts(wal)
    offset = damage_last_record(wal, where)
    assert offset == starts[-1]
    damaged = files_of(path)
    with pytest.raises(StoreError) as excinfo:
        EmbeddedStore.open(path)
    message = one_line_error(excinfo)
    assert f"the store's log {wal} is corrupt at byte {offset} (" in message
    assert f"graphmem store repair {path}" in message
    assert files_of(path) == damaged  # the damaged bytes are kept, nothing else was written

    monkeypatch.setenv("GRAPHMEM_STORE", str(path))
    monkeypatch.delenv("GRAPHMEM_NEO4J_URI", raising=False)
    assert main(["stats"]) == 2  # a read-only command refuses too
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{wal} is corrupt at byte {offset}" in err
    assert files_of(path) == damaged

    assert main(["store", "check", str(path)]) == 1
    out = capsys.readouterr().out
    assert f"damaged: the store's log {wal} is corrupt at byte {offset}" in out
    assert f"{len(starts) - 1} intact log records" in out
    assert files_of(path) == damaged

    assert main(["store", "repair", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"kept {len(starts) - 1} records, dropped 1 ({len(whole) - offset} bytes)" in out
    (backup,) = path.glob("wal-*.jsonl.corrupt-*")
    assert backup.read_bytes() == damaged[wal.name][offset:]
    assert wal.read_bytes() == whole[:offset]
    assert main(["store", "check", str(path)]) == 0
    with EmbeddedStore.open(path) as store:
        assert export(store) == exports[3]  # n3's upsert is gone, as the repair said


def test_check_and_repair_cut_the_log_back_to_the_last_intact_record(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "store"
    exports = build(path, 9)
    assert main(["store", "check", str(path)]) == 0
    assert "intact" in capsys.readouterr().out
    wal = wal_of(path)
    whole = wal.read_bytes()
    starts = record_starts(wal)
    bad = 4  # records: n0 n1 n2 credit(n2) n3 ... -> record 4 is n3's upsert
    offset = flip_content(wal, bad)

    assert main(["store", "check", str(path)]) == 1
    out = capsys.readouterr().out
    assert f"corrupt at byte {offset}" in out and str(wal) in out
    assert f"{bad} intact log records" in out

    assert main(["store", "repair", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"kept {bad} records, dropped {len(starts) - bad}" in out
    (backup,) = path.glob("wal-*.jsonl.corrupt-*")
    assert wal.read_bytes() == whole[:offset]
    assert backup.read_bytes()[:20] == whole[offset : offset + 20]
    assert len(backup.read_bytes()) == len(whole) - offset
    assert stat.S_IMODE(backup.stat().st_mode) == 0o600

    assert main(["store", "check", str(path)]) == 0
    with EmbeddedStore.open(path) as store:
        assert export(store) == exports[3]  # n0..n2 and n2's credit, nothing after
        store.upsert([note(50)])  # and the store takes writes again
    assert main(["store", "repair", str(path)]) == 0
    assert "nothing to repair" in capsys.readouterr().out


def test_a_store_open_during_a_repair_follows_the_cut_log(tmp_path: Path) -> None:
    path = tmp_path / "store"
    exports = build(path, 5)
    with EmbeddedStore.open(path) as running:
        assert export(running) == exports[-1]  # it has applied every record
        flip_content(wal_of(path), 2)
        assert main(["store", "repair", str(path)]) == 0
        with EmbeddedStore.open(path) as other:
            other.upsert([note(99)])
            want = export(other)
        assert export(running) == want  # replayed from the cut log, n99 included
        assert [m.id for m in running.iter_nodes(NS)] == ["n0", "n1", "n99"]


def test_check_reports_an_unfinished_write_and_the_next_open_drops_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "store"
    exports = build(path, 2)
    wal = wal_of(path)
    with wal.open("ab") as f:
        f.write(b'0badc0de {"put":[{"id":"torn"')
    assert main(["store", "check", str(path)]) == 1
    assert "never finished" in capsys.readouterr().out
    with EmbeddedStore.open(path) as store:
        assert export(store) == exports[-1]
    assert main(["store", "check", str(path)]) == 0


def test_check_of_a_directory_without_a_store_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["store", "check", str(tmp_path / "nothing")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "holds no embedded graphmem store" in err
    assert not (tmp_path / "nothing").exists()


def test_a_format_1_store_without_checksums_still_loads_and_is_upgraded(tmp_path: Path) -> None:
    path = tmp_path / "store"
    exports = build(path, 5)
    wal = wal_of(path)
    legacy = b"".join(line[9:] for line in wal.read_bytes().splitlines(keepends=True))
    assert legacy.startswith(b"{")
    wal.write_bytes(legacy)
    (path / "CURRENT").write_text('{"format": "graphmem-embedded/1", "generation": 0}\n')
    assert main(["store", "check", str(path)]) == 0
    with EmbeddedStore.open(path) as store:
        assert export(store) == exports[-1]
        store.upsert([note(7)])  # appended with a checksum after the legacy lines
        after = export(store)
    assert json.loads((path / "CURRENT").read_text())["format"] == "graphmem-embedded/2"
    lines = wal.read_bytes().splitlines()
    assert lines[0].startswith(b"{") and not lines[-1].startswith(b"{")
    with EmbeddedStore.open(path) as store:
        assert export(store) == after


def test_a_format_1_store_with_a_garbled_last_line_is_refused_and_left_as_it_was(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store"
    build(path, 2)
    wal = wal_of(path)
    legacy = b"".join(line[9:] for line in wal.read_bytes().splitlines(keepends=True))
    wal.write_bytes(legacy + b'{"put": [{"id": "n9"\n')  # a whole line, but not JSON
    (path / "CURRENT").write_text('{"format": "graphmem-embedded/1", "generation": 0}\n')
    before = files_of(path)
    with pytest.raises(StoreError) as excinfo:
        EmbeddedStore.open(path)
    assert f"{wal} is corrupt at byte {len(legacy)} (bad change record" in one_line_error(excinfo)
    assert files_of(path) == before  # not even the pointer was moved to format 2


# ---- snapshots and vectors ----------------------------------------------------------------


def compacted(path: Path, n: int) -> str:
    build(path, n)
    with EmbeddedStore.open(path) as store:
        store.compact()
        return export(store)


def set_checksum(path: Path, kind: str, data: bytes) -> None:
    pointer = json.loads((path / "CURRENT").read_text())
    pointer["crc32"][kind] = f"{zlib.crc32(data):08x}"
    (path / "CURRENT").write_text(json.dumps(pointer))


def test_a_compacted_store_records_checksums_and_reloads(tmp_path: Path) -> None:
    path = tmp_path / "store"
    before = compacted(path, 5)
    pointer = json.loads((path / "CURRENT").read_text())
    assert set(pointer["crc32"]) == {"snapshot", "vectors"}
    with EmbeddedStore.open(path) as store:
        assert export(store) == before


def test_a_flipped_byte_in_the_snapshot_is_refused_and_not_repaired(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "store"
    compacted(path, 5)
    (snapshot,) = path.glob("snapshot-*.json")
    data = bytearray(snapshot.read_bytes())
    at = data.index(b"content 003") + len("content 00")
    data[at] = ord("4")  # still valid JSON: only the checksum can tell
    snapshot.write_bytes(bytes(data))
    with pytest.raises(StoreError) as excinfo:
        EmbeddedStore.open(path)
    assert f"snapshot file {snapshot} is corrupt (checksum mismatch" in one_line_error(excinfo)
    assert main(["store", "check", str(path)]) == 1
    assert "not repairable (a damaged snapshot" in capsys.readouterr().out
    assert main(["store", "repair", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("graphmem: error: cannot repair") and err.count("\n") == 1
    assert snapshot.read_bytes() == bytes(data)  # a refused repair changed nothing


def test_a_vectors_file_with_too_few_rows_is_a_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "store"
    compacted(path, 5)
    (vectors,) = path.glob("vectors-*.npy")
    buffer = io.BytesIO()
    np.save(buffer, np.load(vectors)[:2], allow_pickle=False)
    vectors.write_bytes(buffer.getvalue())
    with pytest.raises(StoreError) as excinfo:
        EmbeddedStore.open(path)
    assert f"vectors file {vectors} is corrupt (checksum mismatch" in one_line_error(excinfo)
    # With a matching checksum (or a store from before checksums) the shape check still holds.
    set_checksum(path, "vectors", buffer.getvalue())
    with pytest.raises(StoreError) as excinfo:
        EmbeddedStore.open(path)
    message = one_line_error(excinfo)
    assert f"vectors file {vectors} does not match its snapshot: it has 2 rows" in message
    assert "refers to row 2" in message


@pytest.mark.parametrize("damage", ["empty", "truncated", "garbage"])
def test_a_damaged_vectors_file_without_a_checksum_is_a_one_line_error(
    tmp_path: Path, damage: str
) -> None:
    path = tmp_path / "store"
    compacted(path, 5)
    pointer = json.loads((path / "CURRENT").read_text())
    del pointer["crc32"]  # as a store written before checksums existed
    (path / "CURRENT").write_text(json.dumps(pointer))
    (vectors,) = path.glob("vectors-*.npy")
    raw = vectors.read_bytes()
    vectors.write_bytes({"empty": b"", "truncated": raw[:-9], "garbage": b"\x93NUMPY junk"}[damage])
    with pytest.raises(StoreError) as excinfo:
        EmbeddedStore.open(path)
    assert f"the store's vectors file {vectors} is corrupt: " in one_line_error(excinfo)


def test_a_vectors_file_of_the_wrong_dimension_is_a_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "store"
    compacted(path, 3)
    (vectors,) = path.glob("vectors-*.npy")
    buffer = io.BytesIO()
    np.save(buffer, np.zeros((3, DIM - 1), dtype="<f4"), allow_pickle=False)
    vectors.write_bytes(buffer.getvalue())
    set_checksum(path, "vectors", buffer.getvalue())
    with pytest.raises(StoreError) as excinfo:
        EmbeddedStore.open(path)
    assert f"rows have {DIM - 1} values, the store's dimension is {DIM}" in one_line_error(excinfo)


# ---- owner-only files ---------------------------------------------------------------------


@pytest.fixture
def open_umask() -> Iterator[None]:
    """Umask 0: the modes must come from graphmem, not from a careful user's umask."""
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def modes(root: Path) -> dict[str, int]:
    return {p.name: stat.S_IMODE(p.stat().st_mode) for p in [root, *root.iterdir()]}


@pytest.mark.usefixtures("open_umask")
def test_store_files_are_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "store"
    with EmbeddedStore.open(path, compact_bytes=2_000) as store:
        for i in range(30):
            store.upsert([note(i)])
        store.compact()
    found = modes(path)
    assert {p.split("-")[0] for p in found} >= {"store", "lock", "CURRENT", "snapshot", "wal"}
    assert found.pop("store") == 0o700
    assert set(found.values()) == {0o600}, found


@pytest.mark.usefixtures("open_umask")
def test_an_existing_directory_keeps_its_mode_and_check_points_it_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "store"
    path.mkdir(mode=0o755)
    build(path, 1)
    assert stat.S_IMODE(path.stat().st_mode) == 0o755  # a user's directory is not changed
    assert set(modes(path).values()) == {0o755, 0o600}
    assert main(["store", "check", str(path)]) == 0
    assert f"chmod 700 {path}" in capsys.readouterr().out


@pytest.mark.usefixtures("open_umask")
def test_the_neo4j_launcher_creates_its_directories_and_files_owner_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from graphmem.cli.neo4j import _password

    server = Neo4jServer(tmp_path / "neo4j", bolt_port=17694, http_port=17481)
    server.write_conf(tmp_path / "lib")
    monkeypatch.delenv("GRAPHMEM_NEO4J_PASSWORD", raising=False)
    args = argparse.Namespace(no_auth=False, password=None, password_env=None)
    assert _password(args, server.data_dir)  # a generated password, saved
    dirs = [server.data_dir, *(server.data_dir / d for d in ("conf", "data", "logs", "run"))]
    assert {stat.S_IMODE(d.stat().st_mode) for d in dirs} == {0o700}
    files = [server.conf_file, server.data_dir / "conf" / "password"]
    assert {stat.S_IMODE(f.stat().st_mode) for f in files} == {0o600}


@pytest.mark.neo4j
@pytest.mark.slow
def test_a_running_neo4j_keeps_its_data_directory_private(private_neo4j: PrivateServer) -> None:
    data_dir: Path = private_neo4j.server.data_dir  # type: ignore[attr-defined]
    shared = [
        str(p.relative_to(data_dir))
        for p in [data_dir, *data_dir.rglob("*")]
        if not p.is_symlink() and stat.S_IMODE(p.stat().st_mode) & 0o077
    ]
    assert stat.S_IMODE(data_dir.stat().st_mode) == 0o700
    assert not shared, f"readable by other users: {shared[:10]}"
