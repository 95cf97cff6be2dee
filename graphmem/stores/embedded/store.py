"""The embedded store: packed memories in a graph and numpy vectors, kept crash-safe on disk.

>>> from graphmem.models import Note
>>> store = EmbeddedStore.in_memory()
>>> store.upsert([Note(id="n1", namespace="demo", content="hello", embedding=[1.0, 0.0])])
>>> [r.memory.id for r in store.recall("demo", [1.0, 0.1], k=1)]
['n1']

Persistence. Every committed call appends one JSON line (its effects, see ``state``) to a
write-ahead log and fsyncs it before returning, so an acknowledged write survives ``kill -9``
or a power cut. When the log outgrows both ``compact_bytes`` and the last snapshot (or on
:meth:`EmbeddedStore.compact`) the state is written as a snapshot of the next generation (temp
file, fsync, atomic rename, then the ``CURRENT`` pointer; see ``journal``). Opening loads the
snapshot and replays the log, verifying every checksum. An unfinished last line (no newline
yet: a writer killed mid-append, never acknowledged) is cut off; a whole line that fails its
checksum, the last one included, is corruption: the open is refused in one line naming the file
and byte offset, nothing on disk changes, and ``graphmem store repair`` is the way to cut it
(see ``check``). A compaction that fails (a full disk) leaves no files behind and the write
that triggered it stands; it is retried after a back-off, not on every write (``compaction``).

Concurrency. Several processes may open the same directory. Each call takes an fcntl lock on
``<dir>/lock`` (shared for reads, exclusive for writes), then catches up: if ``CURRENT`` names a
newer generation it reloads that snapshot, and it applies the log records other processes
appended since its last read. Only then does it validate, append, fsync and apply, and it
unlocks last. Writes are therefore serialised across processes and each sees every write before
it, so :meth:`update_utility` reads the current q under the exclusive lock and no update is lost.
A lock wait longer than ``lock_timeout`` raises :class:`StoreLocked`. Within a process a
``threading.RLock`` serialises threads. Callers always get private copies of the models.

Search. A namespace below ``ann_threshold`` memories (default ``DEFAULT_ANN_THRESHOLD``,
20,000) is scanned exactly. From that size on it gets an approximate index (usearch HNSW, see
``vectors`` and ``ann``) whose over-fetched candidates are filtered and re-scored exactly. The
index is built and kept in step by a background thread as memories are added, never on a
query's path: until it has caught up, and whenever the builder is mid-step, a search scans
exactly instead of waiting. It is derived data: saved beside the store (``ann-*.usearch``) at
a compaction and on :meth:`close` when in step, loaded on open if it was saved from this very
history (generation and log prefix), rebuilt otherwise; ``graphmem store check`` verifies it
against the vectors. ``ann_threshold=None`` keeps every search exact.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, cast

import numpy as np

from graphmem.embedding import EmbedderRecord
from graphmem.errors import (
    DimensionMismatch,
    GraphmemError,
    InvalidInput,
    MemoryNotFound,
    StoreError,
    WriteConflict,
)
from graphmem.models import (
    UTILITY_FIELDS,
    AnyMemory,
    CreditPolicy,
    Edge,
    EdgeKind,
    Episode,
    EpisodeStatus,
    MemoryKind,
    PropValue,
    check_id,
    check_vector,
    check_vector_norm,
    construct,
    memory_from_dict,
    utcnow,
)
from graphmem.stores.base import (
    Direction,
    EpisodeCredit,
    MemoryStore,
    Recall,
    TextRecall,
    check_credit,
    check_patch,
    check_prefixes,
    check_text_query,
    check_used,
    closed_episode,
    credited_ids,
    marked_order,
    plan_marks,
    replayed_q_after,
    upsert_batch,
)
from graphmem.stores.conditional import stale_read
from graphmem.stores.embedded.ann import AnnGraph
from graphmem.stores.embedded.ann_files import read_graphs, save_graphs
from graphmem.stores.embedded.check import corrupt_log_message, load_snapshot_state
from graphmem.stores.embedded.compaction import CompactionBackoff
from graphmem.stores.embedded.fulltext_files import PendingText
from graphmem.stores.embedded.fulltext_files import read_indexes as read_text_indexes
from graphmem.stores.embedded.fulltext_files import save_indexes as save_text_indexes
from graphmem.stores.embedded.journal import Journal, LogDamage, crc32_hex, iter_log, one_line
from graphmem.stores.embedded.sqlite_log import SqliteJournal, is_sqlite_store
from graphmem.stores.embedded.state import (
    GraphState,
    UtilityChange,
    decode_change,
    decode_line,
    encode_change,
    node_record,
)
from graphmem.stores.embedded.vectors import DEFAULT_ANN_THRESHOLD, Vector, as_float32
from graphmem.stores.words import query_terms

log = logging.getLogger(__name__)

DEFAULT_COMPACT_BYTES = 64 * 1024 * 1024
Durability = Literal["journal", "sqlite"]
DEFAULT_DURABILITY: Durability = "journal"
"""How a new store keeps its records: the hand-made journal (files) or one SQLite database; an
existing store is opened in the format it has (docs/design.md §3.1)."""
_ITER_CHUNK = 256


class EmbeddedStore(MemoryStore):
    """The zero-setup store. ``EmbeddedStore(path)`` persists to ``path``; ``None`` keeps
    everything in memory (see :meth:`in_memory`)."""

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        lock_timeout: float = 30.0,
        compact_bytes: int = DEFAULT_COMPACT_BYTES,
        ann_threshold: int | None = DEFAULT_ANN_THRESHOLD,
        durability: Durability | None = None,
    ) -> None:
        if ann_threshold is not None and (
            isinstance(ann_threshold, bool)
            or not isinstance(ann_threshold, int)
            or ann_threshold < 1
        ):
            raise InvalidInput(
                f"ann_threshold must be a positive integer or None, got {ann_threshold!r}"
            )
        self._mutex = threading.RLock()
        self._ann_threshold = ann_threshold
        # Graphs loaded from their files, waiting for the log replay to reach the offset they
        # reflect: (offset, crc32 of the log up to it, namespace → graph).
        self._ann_waiting: tuple[int, str, dict[str, AnnGraph]] | None = None
        # Keyword indexes loaded from their files, waiting likewise (fulltext_files).
        self._text_waiting: PendingText | None = None
        self._state = GraphState()
        self._state.set_ann_threshold(ann_threshold)
        self._compact_bytes = compact_bytes
        self._compaction = CompactionBackoff(path if path is not None else ".")
        self._closed = False
        self.path = None if path is None else Path(path)
        self._journal: Journal | SqliteJournal | None = None
        if self.path is not None:
            journal = _open_journal(self.path, lock_timeout, durability)
            try:
                with journal.lock.hold(exclusive=True):
                    journal.initialise()
                    self._journal = journal
                    self._catch_up(exclusive=True)
                    journal.upgrade()
                    journal.remove_stale()
            except BaseException:
                self._journal = None
                journal.close()
                raise

    @classmethod
    def in_memory(cls) -> EmbeddedStore:
        """A store that lives and dies with the process (tests, demos)."""
        return cls(None)

    @classmethod
    def open(
        cls,
        path: str | Path,
        *,
        lock_timeout: float = 30.0,
        compact_bytes: int = DEFAULT_COMPACT_BYTES,
        ann_threshold: int | None = DEFAULT_ANN_THRESHOLD,
        durability: Durability | None = None,
    ) -> EmbeddedStore:
        """Open (creating if needed) the store in directory ``path``; ``durability`` chooses
        the format of a new store (default :data:`DEFAULT_DURABILITY`), an existing one keeps
        its own."""
        return cls(
            path,
            lock_timeout=lock_timeout,
            compact_bytes=compact_bytes,
            ann_threshold=ann_threshold,
            durability=durability,
        )

    def __repr__(self) -> str:
        where = "in memory" if self.path is None else str(self.path)
        return f"EmbeddedStore({where})"

    def __enter__(self) -> EmbeddedStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- locking and catching up --------------------------------------------------------

    @contextmanager
    def _locked(self, *, exclusive: bool) -> Iterator[None]:
        """This process's lock, then the store's (shared to read, exclusive to write), caught
        up with what other processes wrote."""
        with self._mutex:
            self._check_open()
            if self._journal is None:
                yield
                return
            with self._journal.lock.hold(exclusive=exclusive):
                self._catch_up(exclusive=exclusive)
                yield

    def _read(self) -> AbstractContextManager[None]:
        return self._locked(exclusive=False)

    def _write(self) -> AbstractContextManager[None]:
        return self._locked(exclusive=True)

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("the store is closed")

    def _catch_up(self, *, exclusive: bool) -> None:
        """Apply what other processes committed since this one last looked.

        Every record's checksum is verified first. Bytes after the last newline are a write
        that never finished (its writer died before acknowledging it) and are cut off; a whole
        line that does not check is corruption wherever it is, refused in one line naming file
        and offset, with the log left as it is for ``graphmem store check|repair``.
        """
        journal = self._journal
        assert journal is not None
        generation = journal.read_current()
        if generation != journal.generation or journal.size() < journal.offset:
            # A new generation, or a log that `graphmem store repair` cut back: start over.
            self._load_generation(journal, generation)
        data = journal.unread()
        base, applied = journal.offset, 0
        waiting = self._ann_waiting
        if waiting is not None and (
            base != 0 or len(data) < waiting[0] or crc32_hex(data[: waiting[0]]) != waiting[1]
        ):
            waiting = self._ann_waiting = None  # the log is not the one the graphs reflect
            self._state.set_ann_threshold(self._ann_threshold)
        text, self._text_waiting = self._text_waiting, None
        if text is not None and base == 0:
            text.keep_fitting(data)
            text.reach(self._state, 0)
        try:
            if waiting is not None and waiting[0] == 0:
                self._attach_graphs()
            for start, end, change in iter_log(data, decode_line):
                try:
                    self._state.apply(change)
                except GraphmemError as e:
                    raise LogDamage(start, f"cannot be applied: {one_line(str(e))}") from e
                applied = end
                if waiting is not None and end == waiting[0]:
                    self._attach_graphs()
                if text is not None:
                    text.reach(self._state, end)
        except LogDamage as e:
            journal.offset = base + applied  # what was applied stays applied
            wal, offset = journal.wal_path(), base + e.offset
            raise StoreError(corrupt_log_message(wal, journal.root, offset, e.reason)) from e
        finally:
            if self._ann_waiting is not None:  # the replay never reached their offset
                self._ann_waiting = None
                self._state.set_ann_threshold(self._ann_threshold)
        journal.offset = base + applied
        if applied < len(data) and exclusive:
            log.warning(
                "dropping %d bytes of an unfinished write at byte %d of %s",
                len(data) - applied,
                journal.offset,
                journal.wal_path(),
            )
            journal.truncate(journal.offset)

    def _load_generation(self, journal: Journal | SqliteJournal, generation: int) -> None:
        journal.open_wal(generation)
        self._state.retire()
        self._ann_waiting = None
        try:
            self._state = load_snapshot_state(journal, generation)
        except BaseException:
            journal.generation = -1  # load again on the next call, never go on from a stale state
            raise
        if self._ann_threshold is not None:
            self._ann_waiting = read_graphs(journal.root, generation)
        self._text_waiting = read_text_indexes(journal.root, generation)
        if self._ann_waiting is None:
            self._state.set_ann_threshold(self._ann_threshold)

    def _attach_graphs(self) -> None:
        """The log replay reached the state the saved graphs reflect: give them to it."""
        assert self._ann_waiting is not None
        graphs = {
            ns: graph
            for ns, graph in self._ann_waiting[2].items()
            if graph.dimension == self._state.dimension
        }
        self._ann_waiting = None
        self._state.set_ann_threshold(self._ann_threshold, graphs)

    def _save_graphs(self, *, fresh: bool) -> None:
        """Save every approximate and keyword index that is in step with the state (the caller
        holds the store lock); ``fresh``: just after a compaction, when older files are stale."""
        journal = self._journal
        if journal is None:
            return
        try:
            if self._ann_threshold is not None:
                save_graphs(journal, self._state, fresh=fresh)
            save_text_indexes(journal, self._state, fresh=fresh)
        except OSError as e:  # derived data: the next open rebuilds what was not saved
            log.warning("saving the indexes of %s failed: %s", self.path, e)

    def _commit(self, line: bytes) -> None:
        """Make one change durable, then apply it (the caller holds the write lock)."""
        # The live path applies the decoded line, exactly what a replay will apply.
        change = decode_change(json.loads(line))
        if self._journal is not None:
            self._journal.append(line)
        self._state.apply(change)
        if self._should_compact() and self._compaction.due():
            try:
                self._compact_locked()
            except (OSError, StoreError) as e:
                # The write itself is durable; the compaction is retried later (_compaction).
                assert self._journal is not None
                needed = self._journal.offset + self._journal.snapshot_bytes
                self._compaction.failed(e, needed=needed)
            else:
                self._compaction.succeeded()

    def _should_compact(self) -> bool:
        # Only once the log also outgrows the snapshot: rewriting a large snapshot after every
        # few small writes would make writing quadratic.
        journal = self._journal
        return (
            journal is not None
            and journal.offset > self._compact_bytes
            and journal.offset > journal.snapshot_bytes
        )

    def compact(self) -> None:
        """Fold the write-ahead log into a fresh snapshot now."""
        with self._write():
            if self._journal is not None:
                self._compact_locked()
                self._compaction.succeeded()

    def _compact_locked(self) -> None:
        assert self._journal is not None
        record, matrix = self._state.snapshot()
        try:
            self._journal.write_generation(record, matrix)
        except OSError as e:
            raise StoreError(f"cannot compact the store {self.path}: {e.strerror}") from e
        self._save_graphs(fresh=True)

    def close(self) -> None:
        """Close the store; the approximate and keyword indexes in step with it (or nearly) are
        saved, so the next open loads them instead of building them again."""
        with self._mutex:
            if self._closed:
                return
            journal = self._journal
            if journal is not None:
                try:
                    with journal.lock.hold(exclusive=False):
                        if journal.read_current() == journal.generation:
                            self._save_graphs(fresh=False)
                except (OSError, StoreError) as e:
                    log.warning("not saving the indexes of %s: %s", self.path, e)
            self._closed = True
            self._state.retire()
            if journal is not None:
                journal.close()
                self._journal = None

    def wait_for_index(self, timeout: float | None = None) -> bool:
        """Wait until every namespace's approximate index is in step with its vectors (built
        in the background after the threshold is crossed, on open without a saved index, and
        after writes); True if it is, False if ``timeout`` seconds passed first. Searches
        never need this: until then they scan exactly. Benchmarks and tests use it."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._mutex:
                self._check_open()
                if self._state.ann_ready():
                    return True
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(0.01)

    # ---- schema -------------------------------------------------------------------------

    @property
    def dimension(self) -> int | None:
        with self._read():
            return self._state.dimension

    def check_dimension(self, dimension: int) -> None:
        if isinstance(dimension, bool) or not isinstance(dimension, int) or dimension < 1:
            raise InvalidInput(f"a dimension must be a positive integer, got {dimension!r}")
        with self._read():
            if self._state.dimension == dimension:
                return
        with self._write():
            current = self._state.dimension
            if current is None:
                self._commit(encode_change(dimension=dimension))
            elif current != dimension:
                raise DimensionMismatch(current, dimension)

    # ---- embedder records (one per namespace, in the journal like every write) --------------

    def embedder_record(self, namespace: str) -> EmbedderRecord | None:
        with self._read():
            data = self._state.embedders.get(namespace)
        return None if data is None else EmbedderRecord.from_json(data)

    def record_embedder(
        self, namespace: str, record: EmbedderRecord | None, *, replace: bool = False
    ) -> EmbedderRecord | None:
        if record is None and not replace:
            raise InvalidInput("record_embedder(None) removes a record only with replace=True")
        with self._write():
            current = self._state.embedders.get(namespace)
            if replace or current is None:
                data = None if record is None else record.to_json()
                if data != current:
                    self._commit(encode_change(embedders={namespace: data}))
            found = self._state.embedders.get(namespace)
        return None if found is None else EmbedderRecord.from_json(found)

    def set_embeddings(self, namespace: str, vectors: Mapping[str, Sequence[float]]) -> None:
        if not vectors:
            return
        with self._write():
            dim, records = self._state.dimension, []
            for memory_id, values in vectors.items():
                current = self._state.memory(namespace, check_id(memory_id))
                if current is None:
                    raise MemoryNotFound(memory_id, namespace)
                vector = as_float32(check_vector(values, dim))
                dim = len(vector)
                records.append(node_record(current, vector))
            new_dim = dim if self._state.dimension is None else None
            self._commit(encode_change(dimension=new_dim, nodes=records))

    # ---- writes -------------------------------------------------------------------------

    def upsert(
        self,
        nodes: Sequence[AnyMemory] = (),
        edges: Sequence[Edge] = (),
        *,
        keep_utility: bool = True,
        expect_live: Sequence[AnyMemory] = (),
    ) -> None:
        nodes, edges = upsert_batch(nodes, edges)
        if not nodes and not edges:
            return
        with self._write():
            state = self._state
            for read in expect_live:  # under the write lock, caught up: a compare-and-set
                now = state.memory(read.namespace, read.id)
                superseded = now is not None and state.is_superseded(read.namespace, read.id)
                problem = stale_read(read, now, superseded)
                if problem is not None:
                    raise WriteConflict(problem)
            new_dim: int | None = None  # fixed by this call's first vector if none is yet
            batch: dict[tuple[str, str], tuple[AnyMemory, Vector | None]] = {}
            for node in nodes:
                ns, memory_id = node.namespace, node.id  # a model's: checked already
                vector = None
                if node.embedding is not None:
                    dim = state.dimension if state.dimension is not None else new_dim
                    vector = as_float32(check_vector(node.embedding, dim))
                    if dim is None:
                        new_dim = len(vector)
                earlier = batch.get((ns, memory_id))
                before = earlier[0] if earlier is not None else state.memory(ns, memory_id)
                if before is not None and before.kind != node.kind:
                    raise InvalidInput(
                        f"memory {memory_id!r} in namespace {ns!r} is a {before.kind}; "
                        f"it cannot be replaced by a {node.kind}"
                    )
                batch[(ns, memory_id)] = (node, vector)
            merged: dict[tuple[str, str, str, str], Edge] = {}
            for edge in edges:
                for end in (edge.src, edge.dst):
                    if (edge.namespace, end) not in batch and not state.memory(edge.namespace, end):
                        raise MemoryNotFound(end, edge.namespace)
                merged[edge.key] = self._merge_edge(merged.get(edge.key), edge)
            records = []
            for key, (node, vector) in batch.items():
                record = node_record(node, vector)
                existing = state.memory(*key)
                if keep_utility and existing is not None:
                    for name in UTILITY_FIELDS:
                        record[name] = getattr(existing, name)
                records.append(record)
            self._commit(
                encode_change(dimension=new_dim, nodes=records, edges=list(merged.values()))
            )

    def _merge_edge(self, pending: Edge | None, edge: Edge) -> Edge:
        """The edge to store: props merged into an existing (or earlier in-batch) edge."""
        before = pending or self._state.edge(edge.namespace, edge.kind, edge.src, edge.dst)
        if before is None:
            return edge.model_copy(deep=True)
        return before.model_copy(update={"props": {**before.props, **edge.props}})

    def patch(self, namespace: str, memory_id: str, changes: dict[str, Any]) -> AnyMemory:
        check_id(memory_id)
        if not isinstance(changes, dict):
            raise InvalidInput("a patch is a dict of field names to new values")
        check_patch(changes)
        with self._write():
            current = self._state.memory(namespace, memory_id)
            if current is None:
                raise MemoryNotFound(memory_id, namespace)
            data = current.model_dump()
            data.update(changes)
            if "updated_at" not in changes:
                data["updated_at"] = utcnow()
            new = memory_from_dict(data)
            vector = self._state.vector(namespace, memory_id)
            self._commit(encode_change(nodes=[node_record(new, vector)]))
            out = self._state.copy_out(namespace, memory_id)
        assert out is not None
        return out

    def update_utility(
        self,
        namespace: str,
        memory_ids: Sequence[str],
        reward: float,
        alpha: float,
        *,
        success: bool | None = None,
    ) -> list[AnyMemory]:
        ids = _check_ids(memory_ids)
        if not ids:
            return []
        with self._write():
            updates = self._utility_changes(namespace, ids, reward, alpha, success, utcnow())
            self._commit(encode_change(utility=updates))
            return [self._copy(namespace, i) for i in ids]

    def _utility_changes(
        self,
        namespace: str,
        ids: Sequence[str],
        reward: float,
        alpha: float,
        success: bool | None,
        now: datetime,
    ) -> list[UtilityChange]:
        """``q ← q + α(r − q)`` and the counters, from the current state (write lock held)."""
        updates = []
        for memory_id in ids:
            m = self._state.memory(namespace, memory_id)
            if m is None:
                raise MemoryNotFound(memory_id, namespace)
            q = m.q + alpha * (reward - m.q)
            if not math.isfinite(q):
                raise InvalidInput(f"the update would make q of {memory_id!r} non-finite")
            updates.append(
                UtilityChange(
                    namespace,
                    memory_id,
                    q,
                    m.q_updates + 1,
                    m.uses + 1,
                    m.successes + (1 if success else 0),
                    now,
                )
            )
        return updates

    def finish_episode(
        self,
        namespace: str,
        episode_id: str,
        reward: float,
        alpha: float,
        *,
        success: bool,
        finished_at: datetime,
        used: Sequence[str] | None = None,
        credit: CreditPolicy = CreditPolicy.OFFERED,
    ) -> EpisodeCredit:
        check_id(episode_id)
        marks = check_used(used)
        policy = check_credit(credit)
        with self._write():
            episode = self._episode(namespace, episode_id)
            edges = self._state.edges_of(namespace, episode_id, [EdgeKind.RETRIEVED], "out")
            if episode.status is EpisodeStatus.FINISHED:
                return self._replay(namespace, episode, edges, reward, marks, policy)
            marked = {e.dst for e in plan_marks(namespace, episode, edges, marks)}
            ids = credited_ids(edges, marks, policy)
            updates = self._utility_changes(namespace, ids, reward, alpha, success, finished_at)
            closed = closed_episode(episode, reward, success, finished_at, policy)
            q_after = {u.memory_id: u.q for u in updates}
            annotated = [
                e.model_copy(
                    update={"props": {**e.props, **_finish_props(e.dst, marked, q_after, alpha)}}
                )
                for e in edges
                if e.dst in marked or e.dst in q_after
            ]
            vector = self._state.vector(namespace, episode_id)
            # One log record: the closed episode, the new utilities and the annotated edges are
            # applied (and replayed after a crash) together or not at all.
            self._commit(
                encode_change(nodes=[node_record(closed, vector)], edges=annotated, utility=updates)
            )
            return EpisodeCredit(
                episode=cast(Episode, self._copy(namespace, episode_id)),
                updated=[self._copy(namespace, i) for i in ids],
                q_after=q_after,
            )

    def mark_used(self, namespace: str, episode_id: str, memory_ids: Sequence[str]) -> list[str]:
        check_id(episode_id)
        ids = check_used(memory_ids)
        with self._write():
            episode = self._episode(namespace, episode_id)
            edges = self._state.edges_of(namespace, episode_id, [EdgeKind.RETRIEVED], "out")
            marks = plan_marks(namespace, episode, edges, ids)
            if marks:
                self._commit(encode_change(edges=marks))
            return marked_order(edges, ids)

    def _episode(self, namespace: str, episode_id: str) -> Episode:
        """The episode (the caller holds the write lock), or MemoryNotFound / InvalidInput."""
        episode = self._state.memory(namespace, episode_id)
        if episode is None:
            raise MemoryNotFound(episode_id, namespace)
        if not isinstance(episode, Episode):
            raise InvalidInput(f"memory {episode_id!r} is a {episode.kind}, not an Episode")
        return episode

    def _replay(
        self,
        namespace: str,
        episode: Episode,
        edges: list[Edge],
        reward: float,
        used: Sequence[str],
        credit: CreditPolicy,
    ) -> EpisodeCredit:
        """The recorded outcome of a finished episode, if this finish asks for the same."""
        q_after = replayed_q_after(namespace, episode, edges, reward, used, credit)
        return EpisodeCredit(
            episode=cast(Episode, self._copy(namespace, episode.id)),
            updated=[m for i in q_after if (m := self._state.copy_out(namespace, i)) is not None],
            q_after=q_after,
            replayed=True,
        )

    def delete(self, namespace: str, memory_ids: Sequence[str]) -> list[str]:
        ids = _check_ids(memory_ids)
        with self._write():
            present = [i for i in ids if self._state.memory(namespace, i) is not None]
            if not present:
                return []
            gone = self._state.cascade(namespace, present)
            self._commit(encode_change(deletes=[(namespace, i) for i in gone]))
            return gone

    # ---- reads --------------------------------------------------------------------------

    def _copy(self, namespace: str, memory_id: str) -> AnyMemory:
        out = self._state.copy_out(namespace, memory_id)
        if out is None:
            raise MemoryNotFound(memory_id, namespace)
        return out

    def get_many(self, namespace: str, memory_ids: Sequence[str]) -> list[AnyMemory]:
        if isinstance(memory_ids, str):
            raise InvalidInput("get_many takes a sequence of ids, not one string")
        ids = [check_id(i) for i in memory_ids]
        with self._read():
            found = (self._state.copy_out(namespace, i) for i in ids)
            return [m for m in found if m is not None]

    def edges(
        self,
        namespace: str,
        memory_id: str,
        *,
        kinds: Sequence[EdgeKind] | None = None,
        direction: Direction = "out",
    ) -> list[Edge]:
        check_id(memory_id)
        if direction not in ("out", "in", "both"):
            raise InvalidInput(f"direction must be 'out', 'in' or 'both', not {direction!r}")
        edge_kinds = None if kinds is None else [_edge_kind(k) for k in kinds]
        with self._read():
            # Unpacked from the state: private models already.
            return self._state.edges_of(namespace, memory_id, edge_kinds, direction)

    def superseded(self, namespace: str, memory_ids: Sequence[str]) -> set[str]:
        ids = _check_ids(memory_ids)
        with self._read():
            return {i for i in ids if self._state.is_superseded(namespace, i)}

    def recall(
        self,
        namespace: str,
        vector: Sequence[float],
        k: int,
        *,
        kinds: Sequence[MemoryKind] | None = None,
        include_obsolete: bool = False,
        min_sim: float | None = None,
    ) -> list[Recall]:
        kind_values = _recall_args(k, min_sim, kinds)
        with self._read():
            return self._recall(namespace, vector, k, kind_values, include_obsolete, min_sim)

    def _recall(
        self,
        namespace: str,
        vector: Sequence[float],
        k: int,
        kind_values: list[str] | None,
        include_obsolete: bool,
        min_sim: float | None,
    ) -> list[Recall]:
        """:meth:`recall` with its arguments checked, under the lock."""
        query, norm = check_vector_norm(vector, self._state.dimension)  # norm in bounds
        unit = (query / norm).astype(np.float32)
        space = self._state.spaces.get(namespace)
        if space is None or space.vectors is None:
            return []
        hits = space.vectors.search(
            unit, k, kinds=kind_values, include_obsolete=include_obsolete, min_sim=min_sim
        )
        # Built without validation: the copies are of validated memories and sim a float.
        # Whether each is superseded comes along, as from Neo4j: no second call for it.
        return [
            construct(
                Recall,
                {
                    "memory": self._copy(namespace, i),
                    "sim": s,
                    "superseded": self._state.is_superseded(namespace, i),
                },
            )
            for i, s in hits
        ]

    def recall_text(
        self,
        namespace: str,
        query: str,
        k: int,
        *,
        kinds: Sequence[MemoryKind] | None = None,
        include_obsolete: bool = False,
    ) -> list[TextRecall]:
        """Top-k memories by keyword relevance (BM25 on an in-memory index), best first; see
        :meth:`MemoryStore.recall_text` and :mod:`graphmem.stores.text_index`."""
        check_text_query(query, k)
        kind_values = None if kinds is None else [_memory_kind(x).value for x in kinds]
        terms = query_terms(query)
        if not terms or k == 0:
            return []
        with self._read():
            found = self._state.text_search(namespace, terms, k, kind_values, include_obsolete)
            return [
                construct(
                    TextRecall,
                    {
                        "memory": self._copy(namespace, i),
                        "score": score,
                        "superseded": self._state.is_superseded(namespace, i),
                    },
                )
                for i, score in found
            ]

    def recall_text_ids(
        self,
        namespace: str,
        query: str,
        k: int,
        *,
        kinds: Sequence[MemoryKind] | None = None,
        include_obsolete: bool = False,
    ) -> list[tuple[str, float, bool]]:
        """:meth:`recall_text`'s answer without the memories: (memory id, score, whether
        vector recall could return it: not superseded and with an embedding), best first.
        Hybrid recall (``ops.fusion``) reads the memories of only the few that can reach its
        pool: a copy of a memory costs more than scoring the query's words."""
        check_text_query(query, k)
        kind_values = None if kinds is None else [_memory_kind(x).value for x in kinds]
        terms = query_terms(query)
        if not terms or k == 0:
            return []
        with self._read():
            return self._text_ids(namespace, terms, k, kind_values, include_obsolete)

    def _text_ids(
        self,
        namespace: str,
        terms: list[str],
        k: int,
        kind_values: list[str] | None,
        include_obsolete: bool,
    ) -> list[tuple[str, float, bool]]:
        """:meth:`recall_text_ids` with its arguments checked, under the lock."""
        if not terms or k == 0:
            return []
        state = self._state
        found = state.text_search(namespace, terms, k, kind_values, include_obsolete)
        return [
            (i, score, state.recallable(namespace, i) and not state.is_superseded(namespace, i))
            for i, score in found
        ]

    def recall_hybrid_ids(
        self,
        namespace: str,
        vector: Sequence[float],
        query: str,
        k: int,
        text_k: int,
        *,
        kinds: Sequence[MemoryKind] | None = None,
        min_sim: float | None = None,
    ) -> tuple[list[Recall], list[tuple[str, float, bool]]]:
        """:meth:`recall` of k and :meth:`recall_text_ids` of text_k (live memories only) in
        one read of the store (hybrid recall's phase A, :mod:`graphmem.ops.fusion`), as
        Neo4j's ``recall_hybrid_ids`` answers them in one statement."""
        check_text_query(query, text_k)
        check_text_query(query, k)  # k within bounds, as on Neo4j
        kind_values = _recall_args(k, min_sim, kinds)
        terms = query_terms(query)
        with self._read():
            return (
                self._recall(namespace, vector, k, kind_values, False, min_sim),
                self._text_ids(namespace, terms, text_k, kind_values, False),
            )

    def find_by_hash(self, namespace: str, kind: MemoryKind, content_hash: str) -> AnyMemory | None:
        memory_kind = _memory_kind(kind)
        if not isinstance(content_hash, str) or not content_hash:
            raise InvalidInput("a content hash is a non-empty string")
        with self._read():
            memory_id = self._state.find_hash(namespace, memory_kind, content_hash)
            return None if memory_id is None else self._copy(namespace, memory_id)

    def iter_nodes(
        self, namespace: str | None = None, kinds: Sequence[MemoryKind] | None = None
    ) -> Iterator[AnyMemory]:
        wanted = None if kinds is None else {_memory_kind(k).value for k in kinds}
        with self._read():
            namespaces = self._state.namespaces() if namespace is None else [namespace]
            # Only the wanted kinds are copied out (a copy is most of a walk's cost).
            keys = [(ns, i) for ns in namespaces for i in self._state.ids(ns, wanted)]
        return self._iter_copies(keys, wanted)

    def _iter_copies(
        self, keys: list[tuple[str, str]], wanted: set[str] | None
    ) -> Iterator[AnyMemory]:
        # Copies are made a chunk at a time under the lock, so a long export neither holds the
        # lock throughout nor materialises every embedding at once.
        for start in range(0, len(keys), _ITER_CHUNK):
            with self._read():
                chunk = [
                    self._state.copy_out(ns, i, keep=False)
                    for ns, i in keys[start : start + _ITER_CHUNK]
                ]
            for memory in chunk:
                if memory is not None and (wanted is None or memory.kind in wanted):
                    yield memory

    def iter_edges(self, namespace: str | None = None) -> Iterator[Edge]:
        with self._read():
            namespaces = self._state.namespaces() if namespace is None else [namespace]
            return iter([e for ns in namespaces for e in self._state.iter_edges(ns)])

    def namespaces(self, *prefixes: str) -> list[str]:
        heads = check_prefixes(prefixes)
        with self._read():
            listed = self._state.namespaces()
            return [ns for ns in listed if ns.startswith(heads)] if heads else listed


def _open_journal(
    path: Path, lock_timeout: float, durability: Durability | None
) -> Journal | SqliteJournal:
    """The directory's journal, in the format it holds, or in ``durability`` if it is new."""
    if durability not in (None, "journal", "sqlite"):
        raise InvalidInput(f"durability must be 'journal' or 'sqlite', got {durability!r}")
    held: Durability | None = None
    if is_sqlite_store(path):
        held = "sqlite"
    elif (path / "CURRENT").exists():
        held = "journal"
    if held is not None and durability is not None and held != durability:
        raise InvalidInput(f"{path} holds a {held} store, not a {durability} one")
    if (held or durability or DEFAULT_DURABILITY) == "sqlite":
        return SqliteJournal(path, lock_timeout)
    return Journal(path, lock_timeout)


def _finish_props(
    dst: str, marked: set[str], q_after: dict[str, float], alpha: float
) -> dict[str, PropValue]:
    """What a finish adds to one RETRIEVED edge: the used mark, and the credit it got."""
    props: dict[str, PropValue] = {"used": True} if dst in marked else {}
    if dst in q_after:
        props.update(q_after=q_after[dst], alpha=alpha)
    return props


def _recall_args(
    k: int, min_sim: float | None, kinds: Sequence[MemoryKind] | None
) -> list[str] | None:
    """Recall's k and similarity floor checked; the kinds' values (None: every kind)."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise InvalidInput(f"k must be a non-negative integer, got {k!r}")
    if min_sim is not None and not math.isfinite(min_sim):
        raise InvalidInput(f"min_sim must be a finite number, got {min_sim!r}")
    return None if kinds is None else [_memory_kind(x).value for x in kinds]


def _check_ids(memory_ids: Sequence[str]) -> list[str]:
    if isinstance(memory_ids, str):
        raise InvalidInput("expected a sequence of memory ids, not one string")
    return list(dict.fromkeys(check_id(i) for i in memory_ids))


def _memory_kind(kind: Any) -> MemoryKind:
    try:
        return MemoryKind(kind)
    except ValueError as e:
        raise InvalidInput(f"unknown memory kind {kind!r}") from e


def _edge_kind(kind: Any) -> EdgeKind:
    try:
        return EdgeKind(kind)
    except ValueError as e:
        raise InvalidInput(f"unknown edge kind {kind!r}") from e
