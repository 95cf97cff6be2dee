"""Keyword search over memories' text: the full-text channel of hybrid recall (docs/design.md).

Both stores search the same text: the fields in :data:`TEXT_FIELDS`, which are the properties
Neo4j's ``memory_text`` full-text index covers (``schemas/002_indexes.cypher``). A query is cut
into terms by :func:`query_terms` (words, lower-cased, as Lucene's standard analyzer cuts them;
at most :data:`MAX_QUERY_TERMS`), and a memory matches when it holds any of them; matches rank
by BM25. Neo4j asks Lucene (:func:`lucene_query` escapes the terms, so user text is never query
syntax); the embedded store asks SQLite FTS5 through :class:`TextIndex`.

:class:`TextIndex` is derived data, like the embedded store's approximate vector index: one
in-memory FTS5 table per namespace, built from the namespace's memories on its first keyword
search and kept in step from then on by the one path every change takes (``GraphState.apply``:
writes, patches, deletes, re-embeds, a replayed log, another process's writes, a reloaded
snapshot). Nothing of it is written to disk, so there is nothing on disk to go stale or be
damaged; ``graphmem store check`` rebuilds it from scratch and compares it with the one the
log replay kept in step.

>>> from graphmem.models import Note
>>> index = TextIndex()
>>> index.build("demo", [Note(id="a", namespace="demo", content="Invoice INV-4471 paid"),
...                      Note(id="b", namespace="demo", content="The blue pot")])
>>> [i for i, _ in index.search("demo", query_terms("where is inv-4471?"), 5)]
['a']
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from graphmem.models import AnyMemory

TEXT_FIELDS: tuple[str, ...] = (
    "content",
    "text",
    "key",
    "context",
    "task_text",
    "script",
    "action",
)
"""The memory fields keyword search reads, in the order Neo4j's ``memory_text`` index lists
them (every kind has some of them; a Note's keywords and tags are lists, which Neo4j's
full-text index does not read, so neither store does)."""

MAX_QUERY_TERMS = 64
"""A query's distinct terms beyond this many are ignored (Lucene refuses more than 1,024
clauses; a long query's first 64 words say what it is about)."""

MAX_POSTINGS_SHARE = 0.2
"""A term held by more than this share of a namespace's memories (and by more than
:data:`MIN_PRUNED_POSTINGS` of them) is left out of the embedded store's search: its BM25
weight is near zero, and scoring every memory that holds it cost 1 µs a memory (115 ms at
100k for "what did I …")."""
MIN_PRUNED_POSTINGS = 2000
"""Terms held by at most this many memories are always searched (small namespaces are never
pruned, so the benchmarks' 80 sessions and 612 turns rank on every term)."""

_TOKEN = re.compile(r"\w+(?:[.'’]\w+)*")
# Lucene query syntax: every character with a meaning there is escaped.
_LUCENE_SPECIAL = re.compile(r'([+\-&|!(){}\[\]^"~*?:\\/])')
_TOKENIZE = "unicode61 remove_diacritics 0 tokenchars '_'"


def tokens(text: str) -> list[str]:
    """``text`` cut into lower-cased words (``3.14`` and ``don't`` stay whole, ``e-mail`` is
    two), close to Lucene's standard tokenizer."""
    return [t.casefold() for t in _TOKEN.findall(text)]


def query_terms(query: str) -> list[str]:
    """The distinct terms of a query, in order, at most :data:`MAX_QUERY_TERMS`."""
    return list(dict.fromkeys(tokens(query)))[:MAX_QUERY_TERMS]


def memory_text(memory: AnyMemory) -> str:
    """What keyword search reads of a memory: its :data:`TEXT_FIELDS` that hold text."""
    values = (getattr(memory, name, None) for name in TEXT_FIELDS)
    return "\n".join(v for v in values if isinstance(v, str) and v)


def lucene_query(terms: Sequence[str]) -> str:
    """A Lucene query matching any of ``terms`` (each escaped, so none is query syntax; the
    terms are lower-case, so none is an AND/OR/NOT operator either)."""
    return " ".join(_LUCENE_SPECIAL.sub(r"\\\1", t) for t in terms if t)


def _fts_query(terms: Sequence[str]) -> str:
    """An FTS5 MATCH expression for any of ``terms``, each a quoted string (never syntax)."""
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


@dataclass
class _Table:
    name: str
    rows: dict[str, int] = field(default_factory=dict)  # memory id -> rowid


class TextIndex:
    """Per-namespace SQLite FTS5 tables of memories' text, in memory (see the module doc).

    Only namespaces that were :meth:`build`-t are indexed; :meth:`put` and :meth:`remove` keep
    those in step and ignore the others (``everything``: :meth:`put` indexes every namespace,
    as ``store check`` does to follow a replay). Not thread-safe by itself: the store's lock
    guards it.
    """

    def __init__(self, *, everything: bool = False) -> None:
        self._db: sqlite3.Connection | None = None
        self._tables: dict[str, _Table] = {}
        self._serial = 0
        self._everything = everything

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            self._db = sqlite3.connect(":memory:", check_same_thread=False)
        return self._db

    def has(self, namespace: str) -> bool:
        return namespace in self._tables

    def namespaces(self) -> list[str]:
        return sorted(self._tables)

    def build(self, namespace: str, memories: Iterable[AnyMemory | None]) -> None:
        """Index ``memories`` (of ``namespace``) from scratch, replacing what it held."""
        table = self._create(namespace)
        for memory in memories:
            if memory is not None:
                self._insert(table, memory)

    def _create(self, namespace: str) -> _Table:
        self.drop(namespace)
        db = self._conn()
        self._serial += 1
        table = _Table(f"fts{self._serial}")  # a counter: nothing of the namespace interpolated
        db.execute(
            f"CREATE VIRTUAL TABLE {table.name} USING fts5("
            f"mid UNINDEXED, kind UNINDEXED, obsolete UNINDEXED, body, tokenize = {_TOKENIZE!r})"
        )
        db.execute(f"CREATE VIRTUAL TABLE {table.name}_vocab USING fts5vocab({table.name}, 'row')")
        self._tables[namespace] = table
        return table

    def drop(self, namespace: str) -> None:
        table = self._tables.pop(namespace, None)
        if table is not None and self._db is not None:
            self._db.execute(f"DROP TABLE {table.name}_vocab")
            self._db.execute(f"DROP TABLE {table.name}")

    def put(self, memory: AnyMemory) -> None:
        """Index a new or changed memory (of a namespace that is indexed)."""
        table = self._tables.get(memory.namespace)
        if table is None:
            if not self._everything:
                return
            table = self._create(memory.namespace)
        self._delete(table, memory.id)
        self._insert(table, memory)

    def remove(self, namespace: str, memory_id: str) -> None:
        table = self._tables.get(namespace)
        if table is not None:
            self._delete(table, memory_id)

    def _insert(self, table: _Table, memory: AnyMemory) -> None:
        cursor = self._conn().execute(
            f"INSERT INTO {table.name}(mid, kind, obsolete, body) VALUES (?, ?, ?, ?)",  # noqa: S608
            (memory.id, str(memory.kind), int(memory.obsolete), memory_text(memory)),
        )
        assert cursor.lastrowid is not None
        table.rows[memory.id] = cursor.lastrowid

    def _delete(self, table: _Table, memory_id: str) -> None:
        rowid = table.rows.pop(memory_id, None)
        if rowid is not None:
            sql = f"DELETE FROM {table.name} WHERE rowid = ?"  # noqa: S608 (names: see build)
            self._conn().execute(sql, (rowid,))

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
        db = self._conn()
        terms = self._searched(db, table, terms)
        if not terms:
            return []
        where = ["{t} MATCH ?"]
        args: list[Any] = [_fts_query(terms)]
        if kinds is not None:
            where.append(f"kind IN ({', '.join('?' * len(kinds))})")
            args.extend(str(x) for x in kinds)
        if not include_obsolete:
            where.append("obsolete = 0")
        sql = (
            "SELECT mid, bm25({t}) AS s FROM {t} WHERE "  # noqa: S608 (names: see build)
            + " AND ".join(where)
            + " "
            "ORDER BY s, mid LIMIT ?"
        ).format(t=table.name)
        rows = db.execute(sql, [*args, k]).fetchall()
        # FTS5's bm25() is negative, lower is better: report it the usual way round.
        return [(str(mid), -float(s)) for mid, s in rows]

    def _searched(self, db: sqlite3.Connection, table: _Table, terms: Sequence[str]) -> list[str]:
        """``terms`` without those too common to weigh anything (:data:`MAX_POSTINGS_SHARE`)."""
        total = len(table.rows)
        cap = max(MIN_PRUNED_POSTINGS, int(total * MAX_POSTINGS_SHARE))
        if total <= cap:
            return list(terms)
        # FTS5 cuts a term into tokens as it cuts the text; a term that is one token is looked
        # up, any other ("3.14") is always searched.
        held = dict(
            db.execute(
                f"SELECT term, doc FROM {table.name}_vocab WHERE term IN "  # noqa: S608
                f"({', '.join('?' * len(terms))})",
                list(terms),
            ).fetchall()
        )
        return [t for t in terms if held.get(t, 0) <= cap]

    def entries(self, namespace: str) -> dict[str, tuple[str, bool, str]]:
        """What the namespace's table holds: memory id -> (kind, obsolete, text)."""
        table = self._tables.get(namespace)
        if table is None:
            return {}
        sql = f"SELECT mid, kind, obsolete, body FROM {table.name}"  # noqa: S608
        rows = self._conn().execute(sql)
        return {str(m): (str(k), bool(o), str(b)) for m, k, o, b in rows}

    def integrity_problems(self, namespace: str) -> list[str]:
        """SQLite's own check of the namespace's FTS5 table (an empty list when sound)."""
        table = self._tables.get(namespace)
        if table is None:
            return []
        try:
            self._conn().execute(
                f"INSERT INTO {table.name}({table.name}) VALUES ('integrity-check')"  # noqa: S608
            )
        except sqlite3.DatabaseError as e:
            return [str(e)]
        if len(table.rows) != self._count(table):
            return [f"it holds {self._count(table)} rows for {len(table.rows)} memories"]
        return []

    def _count(self, table: _Table) -> int:
        sql = f"SELECT count(*) FROM {table.name}"  # noqa: S608
        row = self._conn().execute(sql).fetchone()
        return int(row[0])

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
        self._tables.clear()


def entry_of(memory: AnyMemory) -> tuple[str, bool, str]:
    """What :meth:`TextIndex.entries` holds for ``memory``."""
    return str(memory.kind), bool(memory.obsolete), memory_text(memory)


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
