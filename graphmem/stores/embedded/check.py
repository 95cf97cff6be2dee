"""Checking and repairing an embedded store's files (``graphmem store check|repair``).

Why and how, in full: docs/design.md, "Module notes", ``graphmem.stores.embedded.check``.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path

from graphmem.errors import GraphmemError, InvalidInput, StoreError
from graphmem.stores.embedded import ann as _ann
from graphmem.stores.embedded.ann import AnnGraph
from graphmem.stores.embedded.ann_files import graph_files, load_graph
from graphmem.stores.embedded.fulltext_files import check_files as check_text_files
from graphmem.stores.embedded.fulltext_files import files_to_check as text_files_to_check
from graphmem.stores.embedded.journal import (
    FILE_MODE,
    Journal,
    LogDamage,
    crc32_hex,
    create_private,
    fsync_dir,
    iter_log,
    one_line,
)
from graphmem.stores.embedded.packed import unpack
from graphmem.stores.embedded.sqlite_log import LogGap, SqliteJournal, is_sqlite_store
from graphmem.stores.embedded.state import GraphState, decode_change, decode_line
from graphmem.stores.text_index import TextIndex, entry_of


def log_damage(wal: Path, offset: int, reason: str) -> str:
    return f"the store's log {wal} is corrupt at byte {offset} ({reason})"


def corrupt_log_message(wal: Path, root: Path, offset: int, reason: str) -> str:
    """The one line a user sees when opening a store whose log is corrupt."""
    return (
        f"{log_damage(wal, offset, reason)}; run `graphmem store check {root}`, then "
        f"`graphmem store repair {root}` to cut the log back to its last intact record"
    )


def load_snapshot_state(journal: Journal | SqliteJournal, generation: int) -> GraphState:
    """The state a generation's snapshot holds (an empty one if it has none)."""
    state = GraphState()
    snapshot = journal.load_snapshot(generation)
    if snapshot is not None:
        record, matrix = snapshot
        try:
            state.apply(decode_change(record, matrix))
        except (GraphmemError, IndexError, KeyError, TypeError, ValueError) as e:
            raise StoreError(
                f"snapshot {generation} of {journal.root} is corrupt: {one_line(str(e))}"
            ) from e
    return state


@dataclass
class CheckReport:
    """What a check found. ``problem`` is None when every byte of the store is intact."""

    root: Path
    generation: int = -1
    wal: Path | None = None
    records: int = 0  # intact log records
    intact_bytes: int = 0  # length of the log's intact prefix
    wal_bytes: int = 0
    problem: str | None = None
    repairable: bool = True  # False when the snapshot or pointer is damaged
    notes: list[str] = field(default_factory=list)
    indexes: list[str] = field(default_factory=list)  # approximate indexes found sound
    index_problems: dict[Path, str] = field(default_factory=dict)  # file → what is wrong
    text_index: str | None = None  # the keyword index, when found in step
    text_files: list[str] = field(default_factory=list)  # saved keyword indexes found sound
    text_problems: list[str] = field(default_factory=list)  # how it is not

    @property
    def intact(self) -> bool:
        """Every byte of the data is intact (the approximate index, derived data that is
        rebuilt when it is bad, is reported apart, in ``index_problems``)."""
        return self.problem is None


@dataclass(frozen=True)
class RepairResult:
    """What a repair cut: records and bytes dropped, and where they were saved."""

    report: CheckReport
    dropped_records: int
    dropped_bytes: int
    backup: Path | None
    removed_indexes: list[Path] = field(default_factory=list)


def check_store(root: str | Path, *, lock_timeout: float = 30.0) -> CheckReport:
    """Check the store in ``root`` under a shared lock; changes nothing."""
    journal = _open(Path(root), lock_timeout)
    try:
        damaged = _damaged(journal)
        if damaged is not None:
            return damaged
        with journal.lock.hold(exclusive=False):
            return _inspect(journal)
    finally:
        journal.close()


def repair_store(root: str | Path, *, lock_timeout: float = 30.0) -> RepairResult:
    """Cut the log back to its last intact record, saving the cut bytes beside it first."""
    journal = _open(Path(root), lock_timeout)
    try:
        damaged = _damaged(journal)
        if damaged is not None:
            raise StoreError(_cannot_repair(damaged))
        with journal.lock.hold(exclusive=True):
            report = _inspect(journal)
            if not report.repairable:
                raise StoreError(_cannot_repair(report))
            removed = []
            for path in report.index_problems:  # derived data: the next open rebuilds it
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
                    removed.append(path)
            if report.wal is None or report.intact_bytes == report.wal_bytes:
                return RepairResult(report, 0, 0, None, removed)
            result = _cut(journal, report)
            result.removed_indexes.extend(removed)
            return result
    finally:
        journal.close()


def _cannot_repair(report: CheckReport) -> str:
    return (
        f"cannot repair {report.root}: {report.problem}. A repair only cuts a damaged log; "
        "restore this store from a backup or a `graphmem export`"
    )


def _open(root: Path, lock_timeout: float) -> Journal | SqliteJournal:
    if is_sqlite_store(root):
        return SqliteJournal(root, lock_timeout)
    if not (root / "CURRENT").is_file():
        raise InvalidInput(
            f"{root} holds no embedded graphmem store (no CURRENT file, no graphmem.sqlite)"
        )
    return Journal(root, lock_timeout)


def _damaged(journal: Journal | SqliteJournal) -> CheckReport | None:
    """A report of a SQLite database whose pages are damaged (``PRAGMA integrity_check``):
    not repairable here, since the records cannot be read in order to cut them."""
    if not isinstance(journal, SqliteJournal):
        return None
    problem = journal.integrity_problem()
    if problem is None:
        return None
    notes = _permission_notes(journal.root)
    return CheckReport(journal.root, problem=problem, repairable=False, notes=notes)


def _inspect(journal: Journal | SqliteJournal) -> CheckReport:
    report = CheckReport(journal.root, notes=_permission_notes(journal.root))
    try:
        report.generation = journal.read_current()
        journal.open_wal(report.generation)
        state = load_snapshot_state(journal, report.generation)
    except StoreError as e:
        report.problem, report.repairable = str(e), False
        return report
    report.wal = journal.wal_path()
    gap: LogGap | None = None
    try:
        data = journal.unread()
    except LogGap as e:  # SQLite: a row lost between sound pages; what precedes it is checked
        data, gap = e.intact, e
    report.wal_bytes = len(data) if gap is None else journal.size()
    graphs = _graphs(journal, state, data, report)
    _follow_text(state)
    texts = text_files_to_check(journal.root, report.generation, data, report.index_problems)
    try:
        _check_graphs(state, graphs.pop(0, []), report)
        check_text_files(state, texts.pop(0, []), report.index_problems, report.text_files)
        for start, end, change in iter_log(data, decode_line):
            try:
                state.apply(change)
            except GraphmemError as e:
                raise LogDamage(start, f"cannot be applied: {one_line(str(e))}") from e
            report.records, report.intact_bytes = report.records + 1, end
            _check_graphs(state, graphs.pop(end, []), report)
            check_text_files(state, texts.pop(end, []), report.index_problems, report.text_files)
    except LogDamage as e:
        report.problem = log_damage(report.wal, e.offset, e.reason)
        return report
    finally:
        left = [(o, p) for o, found in graphs.items() for p, _, _ in found]
        left += [(o, p) for o, found in texts.items() for p, _, _ in found]
        for offset, path in left:
            report.index_problems[path] = (
                f"it reflects byte {offset} of the log, which is no record boundary"
            )
    _check_text(state, report)
    if gap is not None:
        report.problem = log_damage(report.wal, gap.at, gap.reason)
        return report
    tail = report.wal_bytes - report.intact_bytes
    if tail:
        report.problem = (
            f"the last {tail} bytes of {report.wal} (from byte {report.intact_bytes}) are not "
            "a whole record: a write that never finished, which the next open or write drops"
        )
    return report


Found = list[tuple[Path, str, AnnGraph]]


def _follow_text(state: GraphState) -> None:
    """Index every namespace's text now, and every change the replay applies from here on."""
    state.text.close()
    state.text = TextIndex(everything=True)
    for ns, space in state.spaces.items():
        state.text.build(ns, (unpack(p) for _, p in space.graph.nodes()))


def _check_text(state: GraphState, report: CheckReport) -> None:
    """The keyword index the replay kept in step against the memories the replay ends with."""
    memories = 0
    for ns in sorted(set(state.spaces) | set(state.text.namespaces())):
        space = state.spaces.get(ns)
        expected = {}
        if space is not None:
            expected = {m.id: entry_of(m) for m in (unpack(p) for _, p in space.graph.nodes())}
        kept = state.text.entries(ns)
        memories += len(expected)
        for problem in state.text.integrity_problems(ns):
            report.text_problems.append(f"keyword index of namespace {ns!r}: {problem}")
        if kept != expected:
            wrong = sorted(
                i for i in kept.keys() | expected.keys() if kept.get(i) != expected.get(i)
            )
            report.text_problems.append(
                f"keyword index of namespace {ns!r}: {len(wrong)} memories indexed otherwise "
                f"than they read (first {wrong[0]!r})"
            )
    if not report.text_problems:
        report.text_index = f"{memories} memories in {len(state.spaces)} namespaces"


def _graphs(
    journal: Journal | SqliteJournal, state: GraphState, log: bytes, report: CheckReport
) -> dict[int, Found]:
    """The store's approximate-index files that belong to this generation and log, by the
    log offset they reflect; the others go to ``report.index_problems``."""
    found: dict[int, Found] = {}
    if not _ann.available():
        return found
    for path in graph_files(journal.root):
        try:
            header, graph = load_graph(path)
        except (OSError, RuntimeError, ValueError) as e:
            report.index_problems[path] = f"it is damaged ({one_line(str(e))})"
            continue
        offset = header["offset"]
        if header["generation"] != report.generation:
            report.index_problems[path] = (
                f"it is of generation {header['generation']}, the store of {report.generation}"
            )
        elif offset > len(log) or crc32_hex(log[:offset]) != header["wal"]:
            report.index_problems[path] = "it was made from another log than this one"
        else:
            found.setdefault(offset, []).append((path, header["namespace"], graph))
    return found


def _check_graphs(state: GraphState, found: Found, report: CheckReport) -> None:
    """Each graph against the vectors of its namespace, in the state it was saved from."""
    for path, namespace, graph in found:
        space = state.spaces.get(namespace)
        if space is None or space.vectors is None:
            report.index_problems[path] = f"namespace {namespace!r} holds no vectors"
            continue
        if graph.dimension != space.vectors.dimension:
            report.index_problems[path] = (
                f"it holds {graph.dimension}-dim vectors, the store {space.vectors.dimension}"
            )
            continue
        problems = space.vectors.check_graph(graph)
        if problems:
            report.index_problems[path] = f"namespace {namespace!r}: " + "; ".join(problems)
        else:
            report.indexes.append(f"{namespace!r}: {len(graph)} vectors ({path.name})")


def _cut(journal: Journal | SqliteJournal, report: CheckReport) -> RepairResult:
    assert report.wal is not None
    if isinstance(journal, SqliteJournal):
        cut = journal.rows_from(report.intact_bytes)
    else:
        cut = journal.unread()[report.intact_bytes :]
    stamp = time.strftime("%Y%m%dT%H%M%S")
    backup = report.wal.with_name(f"{report.wal.name}.corrupt-{stamp}")
    n = 1
    while backup.exists():
        n += 1
        backup = report.wal.with_name(f"{report.wal.name}.corrupt-{stamp}-{n}")
    fd = create_private(backup, os.O_WRONLY | os.O_EXCL)
    with os.fdopen(fd, "wb") as out:
        out.write(cut)
        out.flush()
        os.fsync(out.fileno())
    fsync_dir(journal.root)
    journal.truncate(report.intact_bytes)
    lines = cut.count(b"\n") + (0 if cut.endswith(b"\n") else 1)
    return RepairResult(report, lines, len(cut), backup)


def _permission_notes(root: Path) -> list[str]:
    """Warnings for store files others can read (stores made before files were owner-only)."""
    notes = []
    try:
        if stat.S_IMODE(root.stat().st_mode) & 0o077:
            notes.append(f"{root} is open to other users; `chmod 700 {root}` makes it private")
        shared = [
            p.name
            for p in sorted(root.iterdir())
            if p.is_file() and stat.S_IMODE(p.stat().st_mode) & ~FILE_MODE & 0o777
        ]
    except OSError:
        return notes
    if shared:
        notes.append(f"files readable by other users: {', '.join(shared)} (chmod 600 them)")
    return notes
