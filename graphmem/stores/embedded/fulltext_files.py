"""Saving and loading an embedded store's keyword index (``text-*.bm25``, see ``fulltext``).

The same scheme as the approximate indexes' files (``ann_files``): a namespace's keyword index
is saved only as the state stands at a known point of the store's history, generation ``g``
replayed up to byte ``offset`` of its log, and the header keeps the crc32 of those ``offset``
log bytes. A compaction saves every index at offset 0 of the new generation (and removes the
older files), a close saves the ones that changed since they were loaded or saved, at the end of
what its process applied. Opening loads the files of the store's generation and hands them to
the state when the log replay reaches their offset; the rest of the replay (writes, patches,
deletes and re-embeds made after the save, by any process) keeps them in step, as it keeps an
index built in memory. A file that is damaged (checksum, layout), of another generation or of
another log is ignored: that namespace's index is built from its memories on its first keyword
search, as if there were no file, and saved at the next close. ``graphmem store check`` compares
each file with the memories of its namespace at its offset; ``graphmem store repair`` deletes a
bad one.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from graphmem.stores.embedded.index_files import read_checked, write_checked
from graphmem.stores.embedded.journal import crc32_hex
from graphmem.stores.embedded.state import GraphState
from graphmem.stores.text_index import TextIndex

log = logging.getLogger(__name__)

FILE_FORMAT = "graphmem-text/2"  # 2: CJK ideographs are words of one character
FILE_PREFIX = "text-"
FILE_SUFFIX = ".bm25"
_HEADER = (
    ("namespace", str),
    ("generation", int),
    ("offset", int),
    ("wal", str),
    ("rows", int),
    ("terms", int),
    ("postings", int),
    ("strings", int),
)


class Log(Protocol):
    """What saving needs of the store's journal: where it is and how far the state reflects."""

    root: Path
    generation: int
    offset: int

    def read_prefix(self, length: int) -> bytes: ...


@dataclass
class SavedText:
    """Keyword indexes loaded from their files, saved at one point of the log: byte ``offset``,
    the crc32 of the bytes before it ``wal``."""

    offset: int
    wal: str
    index: TextIndex

    def fits(self, log_bytes: bytes) -> bool:
        """Whether ``log_bytes`` (the log from its start) is the log these were saved from."""
        return len(log_bytes) >= self.offset and crc32_hex(log_bytes[: self.offset]) == self.wal


class PendingText:
    """Saved keyword indexes waiting for a log replay from the start of the generation to
    reach the points they were saved at, where :meth:`reach` hands them to the state."""

    def __init__(self, saved: list[SavedText]) -> None:
        self._by_offset = {s.offset: s.index for s in saved}
        self._saved = saved

    def keep_fitting(self, log_bytes: bytes) -> None:
        """Drop those saved from another log than ``log_bytes`` (the log from its start)."""
        self._by_offset = {s.offset: s.index for s in self._saved if s.fits(log_bytes)}

    def reach(self, state: GraphState, offset: int) -> None:
        """The replay has applied the log up to ``offset``: the indexes saved there join
        ``state``, which keeps them in step with what the replay applies next."""
        index = self._by_offset.pop(offset, None)
        if index is not None:
            index.drop_except(state.spaces)
            state.text.adopt(index)


def file_for(root: Path, namespace: str) -> Path:
    digest = hashlib.blake2b(namespace.encode("utf-8"), digest_size=12).hexdigest()
    return root / f"{FILE_PREFIX}{digest}{FILE_SUFFIX}"


def text_files(root: Path) -> list[Path]:
    return sorted(
        p for p in root.iterdir() if p.name.startswith(FILE_PREFIX) and p.name.endswith(FILE_SUFFIX)
    )


def write_file(path: Path, header: dict[str, Any], body: bytes) -> None:
    """Header line and body over ``path`` (atomic; no fsync: an index lost in a crash is built
    again)."""
    write_checked(path, FILE_FORMAT, header, body)


def load_file(path: Path) -> tuple[dict[str, Any], TextIndex]:
    """A file's header and its namespace's index; ValueError (or OSError) if it is damaged."""
    header, body = read_checked(path, FILE_FORMAT, "keyword index", "index")
    for name, kind in _HEADER:
        value = header.get(name)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise ValueError(f"its header has no valid {name}")
    layout = {name: header[name] for name in ("rows", "terms", "postings", "strings")}
    index = TextIndex()
    try:
        index.load(header["namespace"], layout, body)
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"its index does not read: {e}") from e
    return header, index


def read_indexes(root: Path, generation: int) -> PendingText | None:
    """The saved keyword indexes of ``generation``, grouped by the point of its log they
    reflect (processes that closed one after the other saved theirs at different points);
    None if there are none."""
    found: dict[tuple[int, str], TextIndex] = {}
    for path in text_files(root):
        try:
            header, index = load_file(path)
        except (OSError, ValueError) as e:
            log.warning("ignoring the keyword index %s (%s): it will be built again", path, e)
            continue
        if header["generation"] == generation:
            found.setdefault((header["offset"], header["wal"]), TextIndex()).adopt(index)
    if not found:
        return None
    return PendingText([SavedText(offset, wal, index) for (offset, wal), index in found.items()])


def save_indexes(journal: Log, state: GraphState, *, fresh: bool) -> None:
    """Save the keyword index of every namespace that has one and changed since it was loaded
    or saved (every one if ``fresh``: a compaction just made a new generation, and the other
    files are removed). ``state`` is ``journal``'s generation replayed to ``journal.offset``;
    the caller holds the store lock."""
    offset = journal.offset
    wal = crc32_hex(journal.read_prefix(offset))
    written: set[Path] = set()
    for ns in state.text.namespaces():
        if ns not in state.spaces:
            continue
        path = file_for(journal.root, ns)
        if not fresh and not state.text.changed(ns) and path.exists():
            written.add(path)  # the file holds this very index
            continue
        layout, body = state.text.dump(ns)
        header = {"namespace": ns, "generation": journal.generation, "offset": offset, "wal": wal}
        write_file(path, {**header, **layout}, body)
        written.add(path)
    if fresh:
        for path in text_files(journal.root):
            if path not in written:
                with contextlib.suppress(OSError):
                    os.unlink(path)


# ---- store check ----------------------------------------------------------------------------

Found = dict[int, list[tuple[Path, str, TextIndex]]]
"""Keyword index files by the log offset they reflect: (file, namespace, its index)."""


def files_to_check(
    root: Path, generation: int, log_bytes: bytes, problems: dict[Path, str]
) -> Found:
    """The keyword index files that belong to ``generation`` and this log, by offset; the others
    go to ``problems`` (file → what is wrong), as ``graphmem store check`` reports them."""
    found: Found = {}
    for path in text_files(root):
        try:
            header, index = load_file(path)
        except (OSError, ValueError) as e:
            problems[path] = f"it is damaged ({' '.join(str(e).split())[:200]})"
            continue
        offset = header["offset"]
        if header["generation"] != generation:
            problems[path] = (
                f"it is of generation {header['generation']}, the store of {generation}"
            )
        elif offset > len(log_bytes) or crc32_hex(log_bytes[:offset]) != header["wal"]:
            problems[path] = "it was made from another log than this one"
        else:
            found.setdefault(offset, []).append((path, header["namespace"], index))
    return found


def check_files(
    state: GraphState,
    found: list[tuple[Path, str, TextIndex]],
    problems: dict[Path, str],
    sound: list[str],
) -> None:
    """Each file's index against the keyword index a replay kept of its namespace, in the state
    it was saved from (``state.text`` indexes every namespace, as ``store check`` builds it)."""
    for path, ns, index in found:
        wrong = index.integrity_problems(ns)
        if ns not in state.spaces:
            wrong.append(f"namespace {ns!r} holds no memories")
        else:
            kept, expected = index.entries(ns), state.text.entries(ns)
            if kept != expected:
                ids = sorted(
                    i for i in kept.keys() | expected.keys() if kept.get(i) != expected.get(i)
                )
                wrong.append(
                    f"{len(ids)} memories indexed otherwise than they read (first {ids[0]!r})"
                )
        if wrong:
            problems[path] = f"keyword index of namespace {ns!r}: " + "; ".join(wrong)
        else:
            sound.append(f"{ns!r}: {len(index.entries(ns))} memories ({path.name})")
