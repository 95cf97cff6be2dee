"""BM25 over memories' text, in memory: the embedded store's keyword index and the scan every
other store falls back on (docs/design.md).

A memory's words and a query's terms are :mod:`graphmem.stores.words`' (the same for every
store); a memory matches when it holds any of the query's terms, and matches rank by BM25
(k1 = 1.2, b = 0.75 and idf = ln(1 + (N − df + ½) / (df + ½)), Lucene's).

:class:`TextIndex` is derived data, like the embedded store's approximate vector index: an
inverted index per namespace (each term's memories and counts in compact arrays, scored with
numpy), built from the namespace's memories on its first keyword search and kept in step from
then on by the one path every change takes (``GraphState.apply``: writes, patches, deletes,
re-embeds, a replayed log, another process's writes, a reloaded snapshot). The embedded store
saves it beside the store as it saves the approximate index (``text-*.bm25``,
:mod:`graphmem.stores.embedded.fulltext_files`: at a compaction and at close, loaded on open at
the point of the log it reflects), so an open does not build it again; a missing, stale or
damaged file only means the next keyword search builds it. ``graphmem store check`` checks each
file against the memories at that point, and follows a replay with a fresh index that it
compares with the memories the replay ends with. :func:`rank_text` ranks a scan with a
throw-away index (what :meth:`MemoryStore.recall_text` does for a store without an index, and
Neo4j without its full-text index).
SQLite FTS5 was the first choice and was measured: its ``bm25()`` ranking took 90 ms a query
at 20k memories of a small vocabulary, this index well under one.

>>> from graphmem.models import Note
>>> from graphmem.stores.words import query_terms
>>> index = TextIndex()
>>> index.build("demo", [Note(id="a", namespace="demo", content="Invoice INV-4471 paid"),
...                      Note(id="b", namespace="demo", content="The blue pot")])
>>> [i for i, _ in index.search("demo", query_terms("where is inv-4471?"), 5)]
['a']
"""

from __future__ import annotations

import heapq
import json
import math
from array import array
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from graphmem.models import AnyMemory, MemoryKind
from graphmem.stores.words import memory_text, query_terms, tokens

MAX_POSTINGS_SHARE = 0.2
"""In a namespace of more than :data:`MIN_PRUNED_POSTINGS` memories, a term held by more than
this share of them is left out of the embedded store's search: its BM25 weight is small
(idf ≤ ln 5 where a rare word's is ~10) and scoring it touches that many memories."""
MIN_PRUNED_POSTINGS = 2000
"""Namespaces of at most this many memories are searched on every term (the benchmarks' 80
sessions and 612 turns among them)."""

K1 = 1.2
B = 0.75

KIND_CODES: tuple[str, ...] = tuple(kind.value for kind in MemoryKind)

_StoredTerms = tuple[list[str], npt.NDArray[np.int64], npt.NDArray[np.int32]]
"""A loaded table's terms: the vocabulary, each row's span and the term numbers."""


# The saved arrays are little-endian whatever the machine (a file may move between machines).
_I8, _I32, _I64 = np.dtype("<i1"), np.dtype("<i4"), np.dtype("<i8")


def _ints(values: Iterable[int] | array[int], dtype: np.dtype[Any]) -> bytes:
    return np.asarray(values, dtype=dtype).tobytes()


def _offsets(sizes: Sequence[int]) -> bytes:
    out = np.zeros(len(sizes) + 1, dtype=_I64)
    np.cumsum(sizes, out=out[1:])
    return out.tobytes()


def _strings(values: object, count: int) -> bool:
    return (
        isinstance(values, list)
        and len(values) == count
        and all(isinstance(x, str) for x in values)
        and len(set(values)) == count
    )


def _ranges(offsets: np.ndarray, total: int, *, empty: bool) -> bool:
    """Offsets from 0 to ``total`` that never go down (never stay, unless ``empty``)."""
    steps = np.diff(offsets)
    return (
        int(offsets[0]) == 0
        and int(offsets[-1]) == total
        and bool((steps >= (0 if empty else 1)).all())
    )


def _within(values: np.ndarray, bound: int) -> bool:
    return values.size == 0 or (int(values.min()) >= 0 and int(values.max()) < bound)


def _kind_code(kind: str) -> int:
    return KIND_CODES.index(kind) if kind in KIND_CODES else -1


def _kth_best(scores: npt.NDArray[np.float64], k: int) -> float:
    """The k-th largest of ``scores`` (1 <= k <= len). Partitioned negated, so the k-th place
    from the start: numpy's selection of a place near the end of an array whose low values
    repeat by the thousand (one common word's matches) took ten times longer."""
    return -float(np.partition(-scores, k - 1)[k - 1])


class _Scoring:
    """A table's arrays as numpy reads them, and each searched term's live rows with their
    BM25 score for the term, idf · tf·(k1 + 1) / (tf + k1·(1 − b + b·length / avgdl)):
    computed by the first search that needs them and reused until the table changes (a write
    drops them; the idf depends only on the table), so a search of an unchanged table only
    adds them up."""

    MAX_TERMS = 4096  # terms kept; past this many the cache starts afresh

    def __init__(self, table: _Table) -> None:
        n = len(table.rows)
        self.avgdl = max(table.total_length / n, 1e-9) if n else 1.0
        self.alive = np.frombuffer(table.alive, dtype=np.int8).astype(bool)
        self.lengths = np.frombuffer(table.lengths, dtype=np.intc).astype(np.float64)
        self.kinds = np.frombuffer(table.kinds, dtype=np.int8).copy()
        self.obsolete = np.frombuffer(table.obsolete, dtype=np.int8).copy()
        self.terms: dict[str, tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]] = {}
        self.masks: dict[tuple[tuple[int, ...] | None, bool], npt.NDArray[np.bool_]] = {}

    def allowed(self, kinds: Sequence[str] | None, include_obsolete: bool) -> npt.NDArray[np.bool_]:
        """Which rows hold memories of these kinds (live ones only unless ``include_obsolete``)."""
        codes = None if kinds is None else tuple(sorted({_kind_code(x) for x in kinds}))
        mask = self.masks.get((codes, include_obsolete))
        if mask is None:
            mask = self.alive.copy()
            if codes is not None:
                mask &= np.isin(self.kinds, codes)
            if not include_obsolete:
                mask &= self.obsolete == 0
            if len(self.masks) >= 16:
                self.masks.clear()
            self.masks[(codes, include_obsolete)] = mask
        return mask

    def term(
        self, table: _Table, term: str
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        held = self.terms.get(term)
        if held is None:
            if len(self.terms) >= self.MAX_TERMS:
                self.terms.clear()
            rows_a, counts_a = table.postings[term]
            rows = np.frombuffer(rows_a, dtype=np.intc).astype(np.int64)
            tf = np.frombuffer(counts_a, dtype=np.intc).astype(np.float64)
            live = self.alive[rows]
            rows, tf = rows[live], tf[live]
            norm = K1 * (1.0 - B + B * self.lengths[rows] / self.avgdl)
            n, df = len(table.rows), table.df[term]
            idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
            held = self.terms[term] = (rows, idf * (tf * (K1 + 1.0) / (tf + norm)))
        return held


class _Table:
    """One namespace's inverted index. Memories get row numbers in the order they are put;
    a changed or removed memory's row goes dead (its postings are skipped, and dropped when
    dead rows outnumber live ones)."""

    def __init__(self) -> None:
        self.rows: dict[str, int] = {}  # memory id -> its live row
        self.ids: list[str] = []  # row -> memory id
        self.terms: list[tuple[str, ...] | None] = []  # row -> its distinct terms (row_terms)
        self.stored: _StoredTerms | None = None  # the rows' terms as loaded, read on demand
        self.lengths = array("i")  # row -> its number of terms
        self.kinds = array("b")  # row -> index of its kind in KIND_CODES
        self.obsolete = array("b")
        self.alive = array("b")
        self.postings: dict[str, tuple[array[int], array[int]]] = {}  # term -> rows, counts
        self.df: Counter[str] = Counter()  # term -> live memories holding it
        self.total_length = 0
        self.dead = 0
        self.changed = True  # since it was last saved or loaded
        # What searches reuse while the table does not change (see _scoring).
        self._scoring: _Scoring | None = None

    def row_terms(self, row: int) -> tuple[str, ...]:
        held = self.terms[row]
        if held is None:
            assert self.stored is not None
            vocab, offsets, ids = self.stored
            span = ids[int(offsets[row]) : int(offsets[row + 1])].tolist()
            held = self.terms[row] = tuple(vocab[i] for i in span)
        return held

    def insert(self, memory: AnyMemory) -> None:
        counts = Counter(tokens(memory_text(memory)))
        row = len(self.ids)
        self.rows[memory.id] = row
        self.ids.append(memory.id)
        self.terms.append(tuple(counts))
        length = sum(counts.values())
        self.lengths.append(length)
        self.kinds.append(_kind_code(str(memory.kind)))
        self.obsolete.append(int(memory.obsolete))
        self.alive.append(1)
        self.total_length += length
        for term, count in counts.items():
            held = self.postings.get(term)
            if held is None:
                held = self.postings[term] = (array("i"), array("i"))
            held[0].append(row)
            held[1].append(count)
        self.df.update(counts.keys())
        self.changed = True
        self._scoring = None

    def delete(self, memory_id: str) -> None:
        row = self.rows.pop(memory_id, None)
        if row is None:
            return
        self.alive[row] = 0
        self.dead += 1
        self.changed = True
        self._scoring = None
        self.total_length -= self.lengths[row]
        for term in self.row_terms(row):
            self.df[term] -= 1
            if self.df[term] <= 0:
                del self.df[term]
        if self.dead > max(64, len(self.rows)):
            self._compact()

    def _compact(self) -> None:
        """Renumber the live rows and drop the dead ones' postings."""
        live = sorted(self.rows.values())
        new = {old: i for i, old in enumerate(live)}
        postings: dict[str, tuple[array[int], array[int]]] = {}
        for term, (rows, counts) in self.postings.items():
            kept = [(new[r], c) for r, c in zip(rows, counts, strict=True) if r in new]
            if kept:
                postings[term] = (
                    array("i", [r for r, _ in kept]),
                    array("i", [c for _, c in kept]),
                )
        self.postings = postings
        self.ids = [self.ids[r] for r in live]
        self.terms = [self.row_terms(r) for r in live]
        self.stored = None
        self.lengths = array("i", [self.lengths[r] for r in live])
        self.kinds = array("b", [self.kinds[r] for r in live])
        self.obsolete = array("b", [self.obsolete[r] for r in live])
        self.alive = array("b", [1] * len(live))
        self.rows = {self.ids[i]: i for i in range(len(live))}
        self.dead = 0
        self._scoring = None

    def search(
        self, terms: Sequence[str], k: int, kinds: Sequence[str] | None, include_obsolete: bool
    ) -> list[tuple[str, float]]:
        n = len(self.rows)
        if n == 0:
            return []
        cap = n * MAX_POSTINGS_SHARE if n > MIN_PRUNED_POSTINGS else math.inf
        scoring = self._scoring
        if scoring is None:
            scoring = self._scoring = _Scoring(self)
        parts = [
            scoring.term(self, term)
            for term in dict.fromkeys(terms)
            if 0 < self.df.get(term, 0) <= cap
        ]
        if not parts:
            return []
        # Each row's terms added up in the query's order, as one scattered sum (of floats:
        # the stubs type bincount as counting).
        scores: npt.NDArray[np.float64] = np.bincount(  # type: ignore[assignment]
            np.concatenate([rows for rows, _ in parts]),
            weights=np.concatenate([term_scores for _, term_scores in parts]),
            minlength=len(self.ids),
        )
        rarest = min((rows for rows, _ in parts), key=len)
        allowed = scoring.allowed(kinds, include_obsolete)
        # A floor at or below the k-th best score: the k-th best of some of the rarest term's
        # rows (a subset of the matches, so its k-th best is no better; every few of them
        # where they run to thousands). Only the rows that reach it are partitioned, a few of
        # the many a common word matches.
        floor = 0.0
        if len(rarest) > 4 * k:
            sample = rarest[:: max(1, len(rarest) // (100 * k))]
            held = scores[sample[allowed[sample]]]
            if len(held) >= k:
                floor = _kth_best(held, k)
        found = np.flatnonzero(((scores >= floor) if floor > 0 else (scores > 0)) & allowed)
        ids = self.ids
        tied: list[tuple[str, float]] = []
        if len(found) > k:
            # The k-th best score: what beats it is in, and the places left go to the memories
            # that tie with it, by id (texts of one template tie by the hundred).
            held = scores[found]
            kth = _kth_best(held, k)
            level = found[held == kth].tolist()
            found = found[held > kth]
            tied = [(i, kth) for i in heapq.nsmallest(k - len(found), (ids[r] for r in level))]
        ranked = sorted((-float(scores[r]), ids[r]) for r in found.tolist())
        return [(memory_id, -neg) for neg, memory_id in ranked] + tied

    def problems(self) -> list[str]:
        """Where the postings, counts and lengths disagree with the rows' terms."""
        expected: Counter[str] = Counter()
        length = 0
        for memory_id, row in self.rows.items():
            if not self.alive[row] or self.ids[row] != memory_id:
                return [f"memory {memory_id!r} points at a wrong or dead row"]
            expected.update(self.row_terms(row))
            length += self.lengths[row]
        if expected != self.df:
            return ["its document frequencies disagree with its memories' terms"]
        if length != self.total_length:
            return ["its total length disagrees with its memories' lengths"]
        for term, held in self.df.items():
            rows = [
                r for r in self.postings.get(term, (array("i"), array("i")))[0] if self.alive[r]
            ]
            if len(rows) != held or len(set(rows)) != held:
                return [f"the postings of {term!r} disagree with its document frequency"]
        return []

    def dump(self) -> tuple[dict[str, int], bytes]:
        """The table (its dead rows dropped first) as a layout and bytes :meth:`load` reads:
        the memory ids and terms as JSON, then each row's length, kind and obsolete flag, each
        term's postings (rows, counts) and each row's terms (term numbers), as arrays."""
        if self.dead:
            self._compact()
        n = len(self.ids)
        vocab = list(self.postings)
        number = {term: i for i, term in enumerate(vocab)}
        row_terms = [[number[t] for t in self.row_terms(r)] for r in range(n)]
        strings = json.dumps({"ids": self.ids, "terms": vocab}, ensure_ascii=False).encode()
        posting_sizes = [len(self.postings[t][0]) for t in vocab]
        parts = [
            strings,
            _ints(self.lengths, _I32),
            _ints(self.kinds, _I8),
            _ints(self.obsolete, _I8),
            _offsets(posting_sizes),
            *(_ints(self.postings[t][0], _I32) for t in vocab),
            *(_ints(self.postings[t][1], _I32) for t in vocab),
            _offsets([len(ids) for ids in row_terms]),
            np.fromiter(
                (i for ids in row_terms for i in ids), dtype=_I32, count=sum(posting_sizes)
            ).tobytes(),
        ]
        self.changed = False
        layout = {"rows": n, "terms": len(vocab), "postings": sum(posting_sizes)}
        return {**layout, "strings": len(strings)}, b"".join(parts)

    @classmethod
    def load(cls, layout: dict[str, int], body: bytes) -> _Table:
        """A table from :meth:`dump`'s layout and bytes; ValueError if they do not fit."""
        n, v, p, size = (layout[name] for name in ("rows", "terms", "postings", "strings"))
        if min(n, v, p, size) < 0 or len(body) != size + 6 * n + 8 * (v + n + 2) + 12 * p:
            raise ValueError("its length does not fit its layout")
        strings = json.loads(body[:size])
        ids, vocab = strings["ids"], strings["terms"]
        if not (_strings(ids, n) and _strings(vocab, v)):
            raise ValueError("its memory ids or terms are malformed")
        at = size

        def take(dtype: np.dtype[Any], count: int) -> np.ndarray:
            nonlocal at
            start, at = at, at + dtype.itemsize * count
            return np.frombuffer(body, dtype=dtype, count=count, offset=start)

        lengths, kinds, obsolete = take(_I32, n), take(_I8, n), take(_I8, n)
        post_offsets, post_rows, post_counts = (
            take(_I64, v + 1),
            take(_I32, p),
            take(_I32, p),
        )
        row_offsets, row_ids = take(_I64, n + 1), take(_I32, p)
        if not (
            _ranges(post_offsets, p, empty=False)
            and _ranges(row_offsets, p, empty=True)
            and _within(post_rows, n)
            and _within(row_ids, v)
            and _within(kinds, len(KIND_CODES))
            and _within(obsolete, 2)
            and (p == 0 or int(post_counts.min()) >= 1)
            and int(lengths.astype(np.int64).sum()) == int(post_counts.astype(np.int64).sum())
        ):
            raise ValueError("its arrays are inconsistent")
        table = cls()
        table.ids = ids
        table.rows = {memory_id: row for row, memory_id in enumerate(ids)}
        table.terms = [None] * n
        table.stored = (vocab, row_offsets, row_ids)
        table.lengths = array("i", lengths.astype(np.intc).tobytes())
        table.kinds = array("b", kinds.tobytes())
        table.obsolete = array("b", obsolete.tobytes())
        table.alive = array("b", bytes([1]) * n)
        bounds = post_offsets.tolist()
        rows_i, counts_i = post_rows.astype(np.intc), post_counts.astype(np.intc)
        for i, term in enumerate(vocab):
            lo, hi = bounds[i], bounds[i + 1]
            table.postings[term] = (
                array("i", rows_i[lo:hi].tobytes()),
                array("i", counts_i[lo:hi].tobytes()),
            )
        table.df = Counter(dict(zip(vocab, np.diff(post_offsets).tolist(), strict=True)))
        table.total_length = int(lengths.astype(np.int64).sum())
        table.changed = False
        return table


class TextIndex:
    """Per-namespace BM25 inverted indexes of memories' text, in memory (see the module doc).

    Only namespaces that were :meth:`build`-t are indexed; :meth:`put` and :meth:`remove` keep
    those in step and ignore the others (``everything``: :meth:`put` indexes every namespace,
    as ``store check`` does to follow a replay). Not thread-safe by itself: the store's lock
    guards it.
    """

    def __init__(self, *, everything: bool = False) -> None:
        self._tables: dict[str, _Table] = {}
        self._everything = everything

    def has(self, namespace: str) -> bool:
        return namespace in self._tables

    def namespaces(self) -> list[str]:
        return sorted(self._tables)

    def build(self, namespace: str, memories: Iterable[AnyMemory | None]) -> None:
        """Index ``memories`` (of ``namespace``) from scratch, replacing what it held."""
        table = self._tables[namespace] = _Table()
        for memory in memories:
            if memory is not None:
                table.insert(memory)

    def drop(self, namespace: str) -> None:
        self._tables.pop(namespace, None)

    def put(self, memory: AnyMemory) -> None:
        """Index a new or changed memory (of a namespace that is indexed)."""
        table = self._tables.get(memory.namespace)
        if table is None:
            if not self._everything:
                return
            table = self._tables[memory.namespace] = _Table()
        table.delete(memory.id)
        table.insert(memory)

    def remove(self, namespace: str, memory_id: str) -> None:
        table = self._tables.get(namespace)
        if table is not None:
            table.delete(memory_id)

    def search(
        self,
        namespace: str,
        terms: Sequence[str],
        k: int,
        *,
        kinds: Sequence[str] | None = None,
        include_obsolete: bool = False,
    ) -> list[tuple[str, float]]:
        """The top-k (memory id, BM25 score) of the namespace holding any of ``terms``, best
        first, ties by id; of the kinds asked, obsolete ones only if asked for."""
        table = self._tables.get(namespace)
        if table is None or k <= 0 or not terms or kinds == []:
            return []
        return table.search(terms, k, kinds, include_obsolete)

    def entries(self, namespace: str) -> dict[str, tuple[str, bool, tuple[str, ...]]]:
        """What the namespace's index holds: memory id -> (kind, obsolete, its terms)."""
        table = self._tables.get(namespace)
        if table is None:
            return {}
        return {
            memory_id: (
                KIND_CODES[table.kinds[row]],
                bool(table.obsolete[row]),
                table.row_terms(row),
            )
            for memory_id, row in table.rows.items()
        }

    def changed(self, namespace: str) -> bool:
        """Whether the namespace's index changed since it was last saved or loaded."""
        table = self._tables.get(namespace)
        return table is not None and table.changed

    def dump(self, namespace: str) -> tuple[dict[str, int], bytes]:
        """The namespace's index as a layout and bytes for :meth:`load` (it counts as saved)."""
        return self._tables[namespace].dump()

    def load(self, namespace: str, layout: dict[str, int], body: bytes) -> None:
        """Take the namespace's index from :meth:`dump`'s output; ValueError (or KeyError,
        TypeError) if it is malformed, leaving what the index held."""
        self._tables[namespace] = _Table.load(layout, body)

    def drop_except(self, namespaces: Iterable[str]) -> None:
        """Forget every namespace but these."""
        keep = set(namespaces)
        self._tables = {ns: t for ns, t in self._tables.items() if ns in keep}

    def adopt(self, other: TextIndex) -> None:
        """Take every namespace ``other`` holds, replacing these namespaces' indexes."""
        self._tables.update(other._tables)
        other._tables = {}

    def integrity_problems(self, namespace: str) -> list[str]:
        """Where the namespace's index disagrees with itself (an empty list when sound)."""
        table = self._tables.get(namespace)
        return [] if table is None else table.problems()

    def close(self) -> None:
        self._tables.clear()


def entry_of(memory: AnyMemory) -> tuple[str, bool, tuple[str, ...]]:
    """What :meth:`TextIndex.entries` holds for ``memory``."""
    return str(memory.kind), bool(memory.obsolete), tuple(Counter(tokens(memory_text(memory))))


def rank_text(
    memories: Iterable[AnyMemory],
    namespace: str,
    query: str,
    k: int,
    *,
    kinds: Sequence[str] | None = None,
    include_obsolete: bool = False,
) -> list[tuple[AnyMemory, float]]:
    """Keyword search by a scan: ``memories`` indexed in a throw-away :class:`TextIndex` and
    searched (what :meth:`MemoryStore.recall_text` does for a store without an index)."""
    by_id = {m.id: m for m in memories if m.namespace == namespace}
    index = TextIndex()
    try:
        index.build(namespace, by_id.values())
        found = index.search(
            namespace, query_terms(query), k, kinds=kinds, include_obsolete=include_obsolete
        )
    finally:
        index.close()
    return [(by_id[i], score) for i, score in found]
