"""Saving and loading an embedded store's approximate indexes (``ann-*.usearch``, see ``ann``).

A graph is saved only when it is in step with the state, which is then a known point of the
store's history: generation ``g`` replayed up to byte ``offset`` of its log (a compaction saves
at offset 0 of the new generation, a close at the end of what its process applied). The header
keeps the crc32 of those ``offset`` log bytes, so a graph is used only on the very history it
reflects: opening loads the snapshot, replays the log up to ``offset``, hands the graphs over,
and replays the rest, whose writes the builder then puts into them. A file that is damaged, of
another generation or another log is ignored (and replaced at the next save): the index is
rebuilt in the background, exactly as if there had been no file.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path
from typing import Any

from graphmem.stores.embedded import ann as _ann
from graphmem.stores.embedded.journal import Journal, crc32_hex
from graphmem.stores.embedded.sqlite_log import SqliteJournal
from graphmem.stores.embedded.state import GraphState

log = logging.getLogger(__name__)


def graph_files(root: Path) -> list[Path]:
    return sorted(
        p
        for p in root.iterdir()
        if p.name.startswith(_ann.FILE_PREFIX) and p.name.endswith(_ann.FILE_SUFFIX)
    )


def load_graph(path: Path) -> tuple[dict[str, Any], _ann.AnnGraph]:
    """A graph file's header and graph; ValueError (or OSError) if it is damaged."""
    header, body = _ann.read_file(path)
    fields = (("namespace", str), ("dim", int), ("generation", int), ("offset", int), ("wal", str))
    for name, kind in fields:
        if not isinstance(header.get(name), kind):
            raise ValueError(f"its header has no valid {name}")
    return header, _ann.AnnGraph.from_bytes(body, header["dim"])


def read_graphs(root: Path, generation: int) -> tuple[int, str, dict[str, _ann.AnnGraph]] | None:
    """The saved graphs of ``generation``, by namespace, with the log offset and crc they
    reflect; None if there are none (or the library is missing)."""
    if not _ann.available():
        return None
    found: dict[tuple[int, str], dict[str, _ann.AnnGraph]] = {}
    for path in graph_files(root):
        try:
            header, graph = load_graph(path)
        except (OSError, RuntimeError, ValueError) as e:
            log.warning("ignoring the approximate index %s (%s): it will be rebuilt", path, e)
            continue
        if header["generation"] == generation:
            found.setdefault((header["offset"], header["wal"]), {})[header["namespace"]] = graph
    if not found:
        return None
    # Graphs are saved together, so one point of history holds them all; keep the largest set.
    (offset, wal), graphs = max(found.items(), key=lambda item: len(item[1]))
    return offset, wal, graphs


def save_graphs(journal: Journal | SqliteJournal, state: GraphState, *, fresh: bool) -> None:
    """Save every graph in step with ``state``, which is ``journal``'s generation replayed to
    ``journal.offset`` (the caller holds the store lock). ``fresh``: a compaction just made a
    new generation, so every other graph file is stale and removed."""
    offset = journal.offset
    wal = crc32_hex(journal.read_prefix(offset))
    written: set[Path] = set()
    for ns, space in sorted(state.spaces.items()):
        vectors = space.vectors
        if vectors is None or not vectors.ann_active:
            continue
        path = _ann.file_for(journal.root, ns)
        if not fresh and not vectors.ann_changed and path.exists():
            written.add(path)  # the file still holds this very graph
            continue
        vectors.finish_ann()
        data = vectors.ann_bytes()
        if data is None:
            continue
        header = {
            "namespace": ns,
            "dim": vectors.dimension,
            "generation": journal.generation,
            "offset": offset,
            "wal": wal,
        }
        _ann.write_file(path, header, data)
        written.add(path)
    if fresh:
        for path in graph_files(journal.root):
            if path not in written:
                with contextlib.suppress(OSError):
                    os.unlink(path)
