"""A LangGraph :class:`~langgraph.store.base.BaseStore` backed by the memory graph.

``compile(store=GraphMemoryStore(mem))`` gives LangGraph nodes (and LangMem-style tools) a
long-term store whose items are graphmem :class:`~graphmem.models.Note` memories, on either
backend, with semantic ``search`` through graphmem's two-phase retrieval.

Mapping:

- namespace tuple → graphmem namespace ``<root>/<label>/<label>…``; each label keeps letters,
  digits and ``_ : @ -`` and writes any other character as ``.xx`` per UTF-8 byte (LangGraph labels
  never contain ``.``, so the mapping is one-to-one). The whole name must fit graphmem's 128
  characters; a longer one raises :class:`~graphmem.errors.InvalidNamespace`.
- key → memory id ``lg-<sha256(key)[:40]>``; the original key is kept in the note's ``data``.
- value → ``Note.data`` (JSON, verbatim); ``Note.content`` holds the indexed text.

Search with a ``query`` recalls ``(offset + limit) · recall_factor`` candidates by cosine
similarity, keeps those that pass the filter, and ranks them by ``(1-λ)·ẑ(sim) + λ·ẑ(Q)``
(:func:`graphmem.retrieve.rank_candidates`); each result is a :class:`GraphSearchItem` whose
``score`` is that two-phase score (or the cosine similarity with ``score="similarity"``) and whose
``parts`` hold sim, q, z_sim, z_q, score, rank and the memory id (with ``score="similarity"``
the ranking still uses λ: pass ``lam=0`` to rank by similarity alone). Without a query, results are
ordered by ``updated_at`` (newest first), then key. Items put with ``index=False`` have no vector:
a query search lists them after the ranked ones when the page has room (as InMemoryStore does).

Differences from LangGraph's InMemoryStore, on purpose: an item whose value has several indexed
fields gets ONE vector (the fields' texts joined), because graphmem keeps one vector per memory,
so search ranks whole items rather than max-pooling fields; semantic search works without an
``index`` config (the memory's embedder embeds the whole value); ops in one ``batch`` run in
order (reads see earlier puts); the writes of a run of consecutive puts are one atomic upsert
(its deletes follow, per namespace); TTL is not supported (``supports_ttl = False``: a ``ttl``
raises NotImplementedError).

>>> from graphmem import GraphMemory, HashingEmbedder
>>> from graphmem.stores.embedded import EmbeddedStore
>>> store = GraphMemoryStore(GraphMemory(EmbeddedStore.in_memory(), embedder=HashingEmbedder()))
>>> store.put(("users", "u1"), "pref", {"text": "likes green tea"})
>>> store.get(("users", "u1"), "pref").value
{'text': 'likes green tea'}
>>> [i.key for i in store.search(("users",), query="tea")]
['pref']
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, Literal, cast

from langchain_core.embeddings import Embeddings
from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    ensure_embeddings,
    get_text_at_path,
    tokenize_path,
    validate_op_namespace,
)

from graphmem.errors import ConfigError, InvalidInput, InvalidNamespace
from graphmem.langgraph_filters import matches_namespace, passes
from graphmem.memory import GraphMemory
from graphmem.models import NAMESPACE_RE, AnyMemory, MemoryKind, Note, check_vector, utcnow
from graphmem.retrieve import rank_candidates

log = logging.getLogger(__name__)

SOURCE = "langgraph"
"""``Note.source`` of every item this store writes; other notes are never shown as items."""

_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_:@-")


# ---- the mapping ---------------------------------------------------------------------------


def escape_label(label: str) -> str:
    """One namespace label in graphmem's namespace alphabet (``.xx`` per unsafe UTF-8 byte)."""
    out: list[str] = []
    for ch in label:
        if ch in _SAFE:
            out.append(ch)
        else:
            out.extend(f".{b:02x}" for b in _utf8(ch, "a namespace label"))
    return "".join(out)


def unescape_label(text: str) -> str:
    """Inverse of :func:`escape_label`; InvalidNamespace for text it never writes.

    Other graphmem namespaces may sit under a store's root (``<root>/.zz`` is a valid graphmem
    namespace), so decoding is strict: bad escapes, bytes that are not UTF-8 and non-canonical
    spellings (``.41`` for ``A``) are refused rather than guessed.
    """
    raw = bytearray()
    i = 0
    while i < len(text):
        if text[i] == ".":
            pair = text[i + 1 : i + 3]
            if len(pair) != 2 or not all(c in "0123456789abcdef" for c in pair):
                raise InvalidNamespace(f"{text[:80]!r} is not an escaped LangGraph label")
            raw.append(int(pair, 16))
            i += 3
        else:
            raw.extend(text[i].encode("utf-8", "surrogatepass"))
            i += 1
    try:
        label = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InvalidNamespace(f"{text[:80]!r} is not an escaped LangGraph label") from e
    if escape_label(label) != text:
        raise InvalidNamespace(f"{text[:80]!r} is not an escaped LangGraph label")
    return label


def item_id(key: str) -> str:
    """The memory id of an item key (any string): a stable hash, so gets are direct lookups."""
    return "lg-" + hashlib.sha256(_utf8(key, "an item key")).hexdigest()[:40]


def _utf8(text: str, what: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as e:
        error = InvalidNamespace if what.startswith("a namespace") else InvalidInput
        raise error(f"{what} is not valid Unicode text (a lone surrogate?)") from e


class GraphSearchItem(SearchItem):
    """A search result with graphmem's score parts in ``parts`` (also in :meth:`dict`)."""

    __slots__ = ("parts",)

    def __init__(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: dict[str, Any],
        created_at: datetime,
        updated_at: datetime,
        score: float | None = None,
        parts: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(namespace, key, value, created_at, updated_at, score)
        self.parts: dict[str, Any] = parts or {}

    def dict(self) -> dict[str, Any]:
        out: dict[str, Any] = super().dict()
        out["parts"] = self.parts
        return out


class GraphMemoryStore(BaseStore):
    """LangGraph store over a :class:`GraphMemory` (embedded store or Neo4j).

    ``root`` prefixes every graphmem namespace this store uses (give each tenant or test its
    own). ``index`` follows LangGraph's ``IndexConfig``: ``fields`` (default ``["$"]``, the whole
    value) and optionally ``embed`` (LangChain ``Embeddings`` or a sync function; default: the
    memory's embedder) with ``dims``, which must match the memory store's dimension. ``lam`` is
    λ of the two-phase score (default: the memory's retrieval config).
    """

    supports_ttl = False

    def __init__(
        self,
        memory: GraphMemory,
        *,
        root: str = "lg",
        index: IndexConfig | None = None,
        lam: float | None = None,
        recall_factor: int = 2,
        score: Literal["two_phase", "similarity"] = "two_phase",
    ) -> None:
        if not NAMESPACE_RE.match(root) or len(root) > 64:
            raise InvalidNamespace(f"invalid root {root[:80]!r}: use up to 64 namespace characters")
        if "/" in root:
            # a root "x/u" would live inside root "x": tenants must not nest
            raise InvalidNamespace(f"invalid root {root[:80]!r}: a root must not contain '/'")
        if lam is not None and not (isinstance(lam, int | float) and 0.0 <= lam <= 1.0):
            raise ConfigError(f"lam must be between 0 and 1, got {lam!r}")
        if recall_factor < 1:
            raise ConfigError(f"recall_factor must be at least 1, got {recall_factor}")
        if score not in ("two_phase", "similarity"):
            raise ConfigError(f"score must be 'two_phase' or 'similarity', got {score!r}")
        self.memory = memory
        self.root = root
        self.lam = float(lam) if lam is not None else memory.config.retrieval.lam
        self.recall_factor = recall_factor
        self.score_mode = score
        self.index_config: IndexConfig = dict(index or {})  # type: ignore[assignment]
        fields = self.index_config.get("fields") or ["$"]
        self._fields: list[tuple[str, str | list[str]]] = [
            (f, f if f == "$" else tokenize_path(f)) for f in fields
        ]
        embed = self.index_config.get("embed")
        self.embeddings: Embeddings | None = ensure_embeddings(embed) if embed else None
        dims = self.index_config.get("dims")
        if dims is not None:
            memory.store.check_dimension(int(dims))
        self._lock = threading.RLock()

    # ---- mapping helpers -----------------------------------------------------------------

    def graph_namespace(self, namespace: Sequence[str]) -> str:
        """The graphmem namespace holding the items of a LangGraph namespace."""
        if not namespace:
            raise InvalidNamespace("a LangGraph namespace needs at least one label")
        name = "/".join([self.root, *(escape_label(label) for label in namespace)])
        if len(name) > 128:
            raise InvalidNamespace(
                f"namespace {tuple(namespace)!r} is too long for graphmem "
                f"({len(name)} characters once escaped; the limit is 128)"
            )
        return name

    def _decode(self, graph_ns: str) -> tuple[str, ...] | None:
        """The LangGraph namespace a graphmem namespace holds, or None if it holds none (not
        under the root, or written by something other than this store)."""
        head = self.root + "/"
        if not graph_ns.startswith(head):
            return None
        try:
            labels = tuple(unescape_label(p) for p in graph_ns[len(head) :].split("/"))
        except InvalidNamespace:
            log.debug(
                "namespace %r is under root %r but is not a LangGraph one", graph_ns, self.root
            )
            return None
        if any(not label or "." in label or "\x00" in label for label in labels):
            return None  # labels LangGraph itself refuses
        return labels

    def _graph_namespaces(self) -> Iterator[tuple[str, tuple[str, ...]]]:
        for graph_ns in self.memory.store.namespaces():
            decoded = self._decode(graph_ns)
            if decoded is not None:
                yield graph_ns, decoded

    # ---- BaseStore ------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ops in order; runs of consecutive puts are written in one atomic upsert."""
        ops = list(ops)
        for op in ops:
            validate_op_namespace(op)
        results: list[Result] = [None] * len(ops)
        pending: dict[tuple[tuple[str, ...], str], PutOp] = {}
        with self._lock:
            for i, op in enumerate(ops):
                if isinstance(op, PutOp):
                    if op.ttl is not None:
                        raise NotImplementedError("GraphMemoryStore does not support TTL")
                    pending.pop((tuple(op.namespace), op.key), None)
                    pending[(tuple(op.namespace), op.key)] = op
                    continue
                self._flush(pending)
                if isinstance(op, GetOp):
                    results[i] = self._get(op)
                elif isinstance(op, SearchOp):
                    results[i] = self._search(op)
                elif isinstance(op, ListNamespacesOp):
                    results[i] = self._list_namespaces(op)
                else:
                    raise InvalidInput(f"unknown store operation {type(op).__name__}")
            self._flush(pending)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """The same as :meth:`batch`, run in a worker thread (graphmem stores are sync)."""
        return await asyncio.to_thread(self.batch, list(ops))

    # ---- get ------------------------------------------------------------------------------

    def _get(self, op: GetOp) -> Item | None:
        graph_ns = self.graph_namespace(op.namespace)
        found = [m for m in self.memory.store.get_many(graph_ns, [item_id(op.key)]) if _is_item(m)]
        if not found:
            return None
        hit = _to_item(found[0], tuple(op.namespace))
        return Item(
            value=hit.value,
            key=hit.key,
            namespace=hit.namespace,
            created_at=hit.created_at,
            updated_at=hit.updated_at,
        )

    # ---- put / delete -----------------------------------------------------------------------

    def _flush(self, pending: dict[tuple[tuple[str, ...], str], PutOp]) -> None:
        if not pending:
            return
        ops = list(pending.values())
        pending.clear()
        deletes: dict[str, list[str]] = {}
        puts: list[tuple[str, PutOp, str]] = []
        for op in ops:
            graph_ns = self.graph_namespace(op.namespace)
            if op.value is None:
                deletes.setdefault(graph_ns, []).append(item_id(op.key))
            else:
                puts.append((graph_ns, op, _dump_value(op.value)))
        notes = self._notes_for(puts)
        if notes:
            self.memory.store.upsert(notes)
        for graph_ns, ids in deletes.items():
            existing = [m.id for m in self.memory.store.get_many(graph_ns, ids)]
            if existing:
                self.memory.store.delete(graph_ns, existing)
        log.debug("flushed %d puts and %d deletes", len(puts), sum(map(len, deletes.values())))

    def _notes_for(self, puts: Sequence[tuple[str, PutOp, str]]) -> list[AnyMemory]:
        texts: list[str | None] = [self._index_text(op) for _, op, _ in puts]
        to_embed = [t for t in texts if t is not None]
        vectors = iter(self._embed_documents(to_embed)) if to_embed else iter(())
        wanted: dict[str, list[str]] = {}
        for graph_ns, op, _ in puts:
            wanted.setdefault(graph_ns, []).append(item_id(op.key))
        # A re-put keeps the item's creation time (and, through upsert, what it has learned).
        created = {
            (m.namespace, m.id): m.created_at
            for graph_ns, ids in wanted.items()
            for m in self.memory.store.get_many(graph_ns, ids)
        }
        now = utcnow()
        notes: list[AnyMemory] = []
        for (graph_ns, op, dumped), text in zip(puts, texts, strict=True):
            mid = item_id(op.key)
            vector = next(vectors) if text is not None else None
            data = json.dumps({"key": op.key, "value": json.loads(dumped)}, ensure_ascii=False)
            notes.append(
                Note(
                    id=mid,
                    namespace=graph_ns,
                    content=text if text else dumped,
                    data=data,
                    source=SOURCE,
                    created_at=created.get((graph_ns, mid), now),
                    updated_at=now,
                    q=self.memory.config.q0,
                    embedding=vector,
                )
            )
        return notes

    def _index_text(self, op: PutOp) -> str | None:
        """The text to embed for a put (None: not indexed)."""
        if op.index is False:
            return None
        value = dict(op.value or {})
        fields = (
            self._fields
            if op.index is None
            else [(f, f if f == "$" else tokenize_path(f)) for f in op.index]
        )
        texts: list[str] = []
        for _, path in fields:
            texts.extend(t for t in get_text_at_path(value, path) if t.strip())
        return "\n".join(texts) if texts else None

    def _embed_documents(self, texts: list[str]) -> list[list[float]]:
        if self.embeddings is None:
            return self.memory.embed_many(texts)
        vectors = self.embeddings.embed_documents(texts)
        self.memory.store.check_dimension(len(vectors[0]))
        return [check_vector(v, self.memory.store.dimension) for v in vectors]

    def _embed_query(self, text: str) -> list[float]:
        if self.embeddings is None:
            return self.memory.embed(text)
        vector = self.embeddings.embed_query(text)
        return check_vector(vector, self.memory.store.dimension)

    # ---- search ---------------------------------------------------------------------------

    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        scope = [(g, ns) for g, ns in self._graph_namespaces() if ns[: len(prefix)] == prefix]
        if op.limit <= 0 or not scope:
            return []
        if op.query and op.query.strip():
            return self._ranked(op, scope)
        items = [
            (note, ns)
            for graph_ns, ns in scope
            for note in self._item_notes(graph_ns)
            if passes(_value_of(note), op.filter)
        ]
        items.sort(key=lambda pair: (-pair[0].updated_at.timestamp(), _key_of(pair[0]), pair[1]))
        return [_to_item(n, ns) for n, ns in items[op.offset : op.offset + op.limit]]

    def _item_notes(self, graph_ns: str) -> Iterator[Note]:
        for memory in self.memory.store.iter_nodes(graph_ns, kinds=[MemoryKind.NOTE]):
            if isinstance(memory, Note) and memory.source == SOURCE and memory.data:
                yield memory

    def _ranked(self, op: SearchOp, scope: list[tuple[str, tuple[str, ...]]]) -> list[SearchItem]:
        """Two-phase ranking over the filtered candidates of every namespace in scope."""
        assert op.query is not None
        vector = self._embed_query(op.query)
        want = op.offset + op.limit
        k1 = want * self.recall_factor
        by_ns = dict(scope)
        k = k1
        while True:
            pool: list[tuple[AnyMemory, float]] = []
            exhausted = True
            for graph_ns, _ in scope:
                recalled = self.memory.store.recall(graph_ns, vector, k, kinds=[MemoryKind.NOTE])
                exhausted = exhausted and len(recalled) < k
                pool.extend(
                    (r.memory, float(r.sim))
                    for r in recalled
                    if _is_item(r.memory) and passes(_value_of(r.memory), op.filter)
                )
            # A filter may drop recalled candidates: widen the recall until k1 pass or none remain.
            if len(pool) >= k1 or exhausted:
                break
            k *= 4
        pool.sort(key=lambda pair: (-pair[1], pair[0].namespace, pair[0].id))
        pool = pool[:k1]
        hits = rank_candidates(pool, self.lam, want)
        out: list[SearchItem] = []
        for hit in hits[op.offset :]:
            note = cast(Note, hit.memory)
            parts = {
                "sim": hit.sim,
                "q": hit.q,
                "z_sim": hit.z_sim,
                "z_q": hit.z_q,
                "score": hit.score,
                "rank": hit.rank,
                "lam": self.lam,
                "memory_id": note.id,
                "graph_namespace": note.namespace,
            }
            score = hit.score if self.score_mode == "two_phase" else hit.sim
            out.append(_to_item(note, by_ns[note.namespace], score=score, parts=parts))
        if len(out) < op.limit and len(hits) < want:
            out.extend(self._unindexed(op, scope, op.limit - len(out)))
        return out

    def _unindexed(
        self, op: SearchOp, scope: list[tuple[str, tuple[str, ...]]], room: int
    ) -> list[SearchItem]:
        notes = [
            (note, ns)
            for graph_ns, ns in scope
            for note in self._item_notes(graph_ns)
            if note.embedding is None and passes(_value_of(note), op.filter)
        ]
        notes.sort(key=lambda pair: (-pair[0].updated_at.timestamp(), _key_of(pair[0])))
        return [_to_item(n, ns) for n, ns in notes[:room]]

    # ---- list namespaces ------------------------------------------------------------------

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        found = [ns for _, ns in self._graph_namespaces()]
        if op.match_conditions:
            found = [
                ns for ns in found if all(matches_namespace(c, ns) for c in op.match_conditions)
            ]
        if op.max_depth is not None:
            found = list({ns[: op.max_depth] for ns in found})
        return sorted(set(found))[op.offset : op.offset + op.limit]


# ---- records ---------------------------------------------------------------------------------


def _is_item(memory: AnyMemory) -> bool:
    return isinstance(memory, Note) and memory.source == SOURCE and bool(memory.data)


def _record(note: Note) -> dict[str, Any]:
    return cast(dict[str, Any], json.loads(note.data or "{}"))


def _value_of(memory: AnyMemory) -> dict[str, Any]:
    return cast(dict[str, Any], _record(cast(Note, memory)).get("value", {}))


def _key_of(note: Note) -> str:
    return str(_record(note).get("key", ""))


def _to_item(
    memory: AnyMemory,
    namespace: tuple[str, ...],
    *,
    score: float | None = None,
    parts: dict[str, Any] | None = None,
) -> GraphSearchItem:
    note = cast(Note, memory)
    record = _record(note)
    return GraphSearchItem(
        namespace=namespace,
        key=str(record.get("key", "")),
        value=dict(record.get("value", {})),
        created_at=note.created_at,
        updated_at=note.updated_at,
        score=score,
        parts=parts,
    )


def _dump_value(value: Mapping[str, Any]) -> str:
    if not isinstance(value, Mapping):
        raise InvalidInput(f"a store value must be a mapping, got {type(value).__name__}")
    try:
        return json.dumps(dict(value), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise InvalidInput(f"a store value must be JSON-serialisable: {e}") from e


__all__ = ["SOURCE", "GraphMemoryStore", "GraphSearchItem", "escape_label", "item_id"]
