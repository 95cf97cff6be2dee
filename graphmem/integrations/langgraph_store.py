"""A LangGraph :class:`~langgraph.store.base.BaseStore` backed by the memory graph.

Why and how, in full: docs/design.md, "Module notes", ``graphmem.integrations.langgraph_store``.

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
import functools
import hashlib
import inspect
import json
import logging
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping, Sequence
from contextlib import aclosing
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar, cast

from graphmem.extras import needs_extra

with needs_extra("langgraph", "the LangGraph store"):
    from langchain_core.embeddings import Embeddings
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        IndexConfig,
        InvalidNamespaceError,
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

    from graphmem.coroutines import drive
    from graphmem.errors import ConfigError, InvalidInput, InvalidNamespace
    from graphmem.integrations.langgraph_filters import matches_namespace, passes
    from graphmem.memory import GraphMemory
    from graphmem.models import (
        NAMESPACE_RE,
        AnyMemory,
        MemoryKind,
        Namespace,
        Note,
        check_vector,
        utcnow,
    )
    from graphmem.ops.retrieve import rank_candidates
    from graphmem.stores.base import MemoryStore, Recall

if TYPE_CHECKING:
    from graphmem.stores.neo4j.async_store import AsyncNeo4jStore

log = logging.getLogger(__name__)

T = TypeVar("T")

SOURCE = "langgraph"
"""``Note.source`` of every item this store writes; other notes are never shown as items."""

VECTOR_SOURCE = "langgraph-vector"
"""``Note.source`` of an item's second and further vectors (one per indexed text)."""

LONG = ".long"
"""The namespace segment under which namespaces too long to spell out live, hashed. ``.lo`` is
never an escape :func:`escape_label` writes, so no label can collide with it."""

MAX_NAMESPACE = 128
"""graphmem's namespace length limit (:data:`graphmem.models.NAMESPACE_RE`)."""

_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_:@-")


class LangGraphInvalidNamespace(InvalidNamespace, InvalidNamespaceError):
    """LangGraph's namespace error (an empty namespace or label, a ``.`` in a label, the root
    ``langgraph``) as graphmem's :class:`~graphmem.errors.InvalidNamespace`: caught by either
    name, so LangGraph code and graphmem code both see what they expect."""


def _as_graphmem(e: InvalidNamespaceError) -> InvalidNamespace:
    return e if isinstance(e, InvalidNamespace) else LangGraphInvalidNamespace(str(e))


def _mapping_namespace_errors(method: Callable[..., Any]) -> Callable[..., Any]:
    """``method`` (one of BaseStore's, which check namespaces before any op is built) raising
    :class:`LangGraphInvalidNamespace` where it raised LangGraph's own error."""
    if inspect.iscoroutinefunction(method):

        @functools.wraps(method)
        async def amapped(*args: Any, **kwargs: Any) -> Any:
            try:
                return await method(*args, **kwargs)
            except InvalidNamespaceError as e:
                raise _as_graphmem(e) from e

        return amapped

    @functools.wraps(method)
    def mapped(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except InvalidNamespaceError as e:
            raise _as_graphmem(e) from e

    return mapped


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
                raise LangGraphInvalidNamespace(f"{text[:80]!r} is not an escaped LangGraph label")
            raw.append(int(pair, 16))
            i += 3
        else:
            raw.extend(text[i].encode("utf-8", "surrogatepass"))
            i += 1
    try:
        label = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise LangGraphInvalidNamespace(f"{text[:80]!r} is not an escaped LangGraph label") from e
    if escape_label(label) != text:
        raise LangGraphInvalidNamespace(f"{text[:80]!r} is not an escaped LangGraph label")
    return label


def item_id(key: str) -> str:
    """The memory id of an item key (any string): a stable hash, so gets are direct lookups."""
    return "lg-" + hashlib.sha256(_utf8(key, "an item key")).hexdigest()[:40]


def _utf8(text: str, what: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as e:
        error = LangGraphInvalidNamespace if what.startswith("a namespace") else InvalidInput
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
    memory's embedder) with ``dims``, which must match the memory store's dimension.
    ``score="similarity"`` (the default, LangGraph's convention) orders results by cosine
    similarity and reports it as ``item.score``; ``score="two_phase"`` orders them by
    ``(1-λ)·ẑ(sim) + λ·ẑ(Q)`` and reports that. ``lam`` is that λ (default: the memory's
    retrieval config); both figures are in every result's ``parts`` either way.
    ``async_store`` is the :class:`~graphmem.stores.neo4j.async_store.AsyncNeo4jStore` that
    :meth:`abatch` (``aget``, ``asearch``, ``aput``, …) awaits, on the same database as the
    memory's store (default: one opened per event loop; see :meth:`async_store`).
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
        score: Literal["similarity", "two_phase"] = "similarity",
        async_store: AsyncNeo4jStore | None = None,
    ) -> None:
        if not NAMESPACE_RE.match(root) or len(root) > 64:
            raise LangGraphInvalidNamespace(
                f"invalid root {root[:80]!r}: use up to 64 namespace characters"
            )
        if "/" in root:
            # a root "x/u" would live inside root "x": tenants must not nest
            raise LangGraphInvalidNamespace(
                f"invalid root {root[:80]!r}: a root must not contain '/'"
            )
        if lam is not None and not (isinstance(lam, int | float) and 0.0 <= lam <= 1.0):
            raise ConfigError(f"lam must be between 0 and 1, got {lam!r}")
        if recall_factor < 1:
            raise ConfigError(f"recall_factor must be at least 1, got {recall_factor}")
        if score not in ("similarity", "two_phase"):
            raise ConfigError(f"score must be 'similarity' or 'two_phase', got {score!r}")
        self.memory = memory
        self.root = root
        self.lam = float(lam) if lam is not None else memory.config.retrieval.lam
        self.recall_factor = recall_factor
        self.score_mode = score
        self.index_config: IndexConfig = dict(index or {})  # type: ignore[assignment]
        fields = self.index_config.get("fields") or ["$"]
        self._fields: list[str | list[str]] = [_path(f) for f in fields]
        embed = self.index_config.get("embed")
        self.embeddings: Embeddings | None = ensure_embeddings(embed) if embed else None
        dims = self.index_config.get("dims")
        if dims is not None:
            memory.store.check_dimension(int(dims))
        # Hashed namespace → its labels. The hash of a namespace never changes, so entries
        # never go stale; a plain dict is safe to share between threads.
        self._long: dict[str, tuple[str, ...]] = {}
        self._given_async = async_store
        # Async stores opened from the memory's Neo4jStore, one per event loop (an async
        # driver's connections belong to the loop that opened them), each with its closer.
        self._opened_async: dict[
            asyncio.AbstractEventLoop, tuple[AsyncNeo4jStore, AsyncGenerator[None, None]]
        ] = {}

    # ---- mapping helpers -----------------------------------------------------------------

    def graph_namespace(self, namespace: Sequence[str]) -> Namespace:
        """The graphmem namespace holding the items of a LangGraph namespace (where a
        LangGraph namespace enters graphmem: checked here, trusted below)."""
        if not namespace:
            raise LangGraphInvalidNamespace("a LangGraph namespace needs at least one label")
        name = "/".join([self.root, *(escape_label(label) for label in namespace)])
        if len(name) > MAX_NAMESPACE:
            labels = json.dumps(list(namespace), ensure_ascii=False).encode("utf-8")
            name = f"{self.root}/{LONG}/{hashlib.sha256(labels).hexdigest()[:40]}"
        return Namespace(name)

    async def _decode(self, io: _Backend, graph_ns: str) -> tuple[str, ...] | None:
        """The LangGraph namespace a graphmem namespace holds, or None if it holds none (not
        under the root, or written by something other than this store)."""
        head = self.root + "/"
        if not graph_ns.startswith(head):
            return None
        if graph_ns.startswith(head + LONG + "/"):
            return await self._decode_long(io, graph_ns)
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

    async def _decode_long(self, io: _Backend, graph_ns: str) -> tuple[str, ...] | None:
        """The labels of a hashed namespace, as its first item recorded them (and checked)."""
        known = self._long.get(graph_ns)
        if known is not None:
            return known
        async with aclosing(self._item_notes(io, graph_ns)) as notes:
            async for note in notes:
                labels = _record(note).get("namespace")
                if not (isinstance(labels, list) and labels and all(map(_label_ok, labels))):
                    return None
                try:
                    ours = self.graph_namespace(labels) == graph_ns
                except InvalidNamespace:
                    ours = False
                if not ours:
                    return None
                self._long[graph_ns] = tuple(labels)
                return tuple(labels)
        return None

    async def _graph_namespaces(
        self, io: _Backend, prefix: tuple[str, ...] = ()
    ) -> list[tuple[str, tuple[str, ...]]]:
        """The graphmem namespaces holding LangGraph namespaces that start with ``prefix``,
        with those namespaces. Only the graph namespaces under the prefix's text (and the
        hashed ones, which any prefix may hold) are listed, not every namespace there is."""
        heads = [f"{self.root}/"]
        if prefix and all(map(_label_ok, prefix)):
            text = "/".join([self.root, *(escape_label(label) for label in prefix)])
            long = f"{self.root}/{LONG}/"
            heads = [text, long] if len(text) <= MAX_NAMESPACE else [long]
        found = []
        for graph_ns in await io.namespaces(*heads):
            decoded = await self._decode(io, graph_ns)
            if decoded is not None and decoded[: len(prefix)] == prefix:
                found.append((graph_ns, decoded))
        return found

    # ---- BaseStore ------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ops in order; runs of consecutive puts are written in one atomic upsert."""
        return drive(self._batch(list(ops), _SyncBackend(self.memory.store)))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """The same as :meth:`batch`, for async code.

        On Neo4j the ops run on the async driver (see :meth:`async_store`): many coroutines on
        one event loop share the store without a thread each. On the embedded store (whose
        calls are in-process and blocking) they run in a worker thread.
        """
        ops = list(ops)
        store = await self.async_store()
        if store is None:
            return await asyncio.to_thread(self.batch, ops)
        return await self._batch(ops, _AsyncBackend(store))

    async def async_store(self) -> AsyncNeo4jStore | None:
        """The async Neo4j store :meth:`abatch` uses on the running event loop, or None when
        it runs :meth:`batch` in a worker thread instead.

        That is the ``async_store`` given to the constructor; else, when the memory's store is
        a :class:`~graphmem.stores.neo4j.Neo4jStore` made by ``from_uri``, one opened on first
        use in each event loop (:meth:`Neo4jStore.open_async`: same server and credentials),
        since an async driver's connections belong to one loop. It is closed by :meth:`aclose`,
        or when the loop shuts down (as ``asyncio.run`` does at its end).
        """
        if self._given_async is not None:
            return self._given_async
        store = self.memory.store
        if not getattr(store, "can_open_async", False):  # only a Neo4jStore can (the neo4j extra)
            return None
        from graphmem.stores.neo4j import Neo4jStore

        if not isinstance(store, Neo4jStore):
            return None
        loop = asyncio.get_running_loop()
        found = self._opened_async.get(loop)
        if found is not None:
            return found[0]
        for ended in [lp for lp in self._opened_async if lp.is_closed()]:
            del self._opened_async[ended]  # its store was closed with it, or died with it
        opened = store.open_async()
        closer = _closed_with_loop(opened)
        self._opened_async[loop] = (opened, closer)
        await anext(closer)
        return opened

    async def aclose(self) -> None:
        """Close the async Neo4j store opened for the running event loop, if any (an
        ``async_store`` given to the constructor stays open: it is the caller's)."""
        found = self._opened_async.pop(asyncio.get_running_loop(), None)
        if found is not None:
            await found[1].aclose()

    async def _batch(self, ops: list[Op], io: _Backend) -> list[Result]:
        for op in ops:
            try:
                validate_op_namespace(op)
            except InvalidNamespaceError as e:
                raise _as_graphmem(e) from e
        results: list[Result] = [None] * len(ops)
        pending: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for i, op in enumerate(ops):
            if isinstance(op, PutOp):
                if op.ttl is not None:
                    raise NotImplementedError("GraphMemoryStore does not support TTL")
                pending.pop((tuple(op.namespace), op.key), None)
                pending[(tuple(op.namespace), op.key)] = op
                continue
            await self._flush(io, pending)
            if isinstance(op, GetOp):
                results[i] = await self._get(io, op)
            elif isinstance(op, SearchOp):
                results[i] = await self._search(io, op)
            elif isinstance(op, ListNamespacesOp):
                results[i] = await self._list_namespaces(io, op)
            else:
                raise InvalidInput(f"unknown store operation {type(op).__name__}")
        await self._flush(io, pending)
        return results

    # ---- get ------------------------------------------------------------------------------

    async def _get(self, io: _Backend, op: GetOp) -> Item | None:
        graph_ns = self.graph_namespace(op.namespace)
        found = [m for m in await io.get_many(graph_ns, [item_id(op.key)]) if _is_item(m)]
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

    async def _flush(self, io: _Backend, pending: dict[tuple[tuple[str, ...], str], PutOp]) -> None:
        if not pending:
            return
        ops = list(pending.values())
        pending.clear()
        deletes: dict[Namespace, list[str]] = {}
        puts: list[tuple[Namespace, PutOp, str]] = []
        for op in ops:
            graph_ns = self.graph_namespace(op.namespace)
            if op.value is None:
                deletes.setdefault(graph_ns, []).append(item_id(op.key))
            else:
                puts.append((graph_ns, op, _dump_value(op.value)))
        notes, stale = await self._notes_for(io, puts)
        if notes:
            await io.upsert(notes)
        for space, ids in stale.items():
            await self._delete_existing(io, space, ids)
        for graph_ns, ids in deletes.items():
            items = [m for m in await io.get_many(graph_ns, ids) if _is_item(m)]
            await self._delete_existing(io, graph_ns, [i for m in items for i in _note_ids(m)])
        log.debug("flushed %d puts and %d deletes", len(puts), sum(map(len, deletes.values())))

    async def _delete_existing(self, io: _Backend, graph_ns: str, ids: list[str]) -> None:
        existing = [m.id for m in await io.get_many(graph_ns, ids)]
        if existing:
            await io.delete(graph_ns, existing)

    async def _notes_for(
        self, io: _Backend, puts: Sequence[tuple[str, PutOp, str]]
    ) -> tuple[list[AnyMemory], dict[str, list[str]]]:
        """The notes a run of puts writes, and the vector notes they leave unused."""
        texts = [self._index_texts(op) for _, op, _ in puts]
        flat = [t for ts in texts for t in ts]
        spaces = list(dict.fromkeys(graph_ns for graph_ns, _, _ in puts))
        embedded = await io.offload(lambda: self._embed_documents(flat, spaces)) if flat else []
        vectors = iter(embedded)
        wanted: dict[str, list[str]] = {}
        for graph_ns, op, _ in puts:
            wanted.setdefault(graph_ns, []).append(item_id(op.key))
        # A re-put keeps the item's creation time (and, through upsert, what it has learned).
        before: dict[tuple[str, str], AnyMemory] = {}
        for graph_ns, ids in wanted.items():
            before.update(((m.namespace, m.id), m) for m in await io.get_many(graph_ns, ids))
        now = utcnow()
        q0 = self.memory.config.q0
        notes: list[AnyMemory] = []
        stale: dict[str, list[str]] = {}
        for (graph_ns, op, dumped), item_texts in zip(puts, texts, strict=True):
            mid = item_id(op.key)
            item_vectors = [next(vectors) for _ in item_texts]
            record = {
                "key": op.key,
                "value": json.loads(dumped),
                "namespace": list(op.namespace),
                "vectors": len(item_vectors),
            }
            previous = before.get((graph_ns, mid))
            notes.append(
                Note(
                    id=mid,
                    namespace=graph_ns,
                    content="\n".join(item_texts) if item_texts else dumped,
                    data=json.dumps(record, ensure_ascii=False),
                    source=SOURCE,
                    created_at=previous.created_at if previous is not None else now,
                    updated_at=now,
                    q=q0,
                    embedding=item_vectors[0] if item_vectors else None,
                )
            )
            for i in range(1, len(item_vectors)):
                notes.append(
                    Note(
                        id=f"{mid}-v{i}",
                        namespace=graph_ns,
                        content=item_texts[i],
                        data=json.dumps({"item": mid, "i": i}),
                        source=VECTOR_SOURCE,
                        created_at=now,
                        updated_at=now,
                        q=q0,
                        embedding=item_vectors[i],
                    )
                )
            old = _vector_count(previous) if previous is not None and _is_item(previous) else 0
            unused = [f"{mid}-v{i}" for i in range(max(len(item_vectors), 1), old)]
            if unused:
                stale.setdefault(graph_ns, []).extend(unused)
        return notes, stale

    def _index_texts(self, op: PutOp) -> list[str]:
        """The texts to embed for a put, one vector each ([]: not indexed)."""
        if op.index is False:
            return []
        value = dict(op.value or {})
        paths = self._fields if op.index is None else [_path(f) for f in op.index]
        texts: list[str] = []
        for path in paths:
            texts.extend(t for t in get_text_at_path(value, path) if t.strip())
        return texts

    def _check_embedder(self, graph_namespaces: Sequence[str]) -> None:
        """The memory's embedder must be the one each namespace was embedded with (an
        ``index.embed`` of the caller's own is not checked)."""
        for graph_ns in graph_namespaces:
            self.memory.check_embedder(graph_ns)

    def _embed_documents(self, texts: list[str], spaces: Sequence[str]) -> list[list[float]]:
        if self.embeddings is None:
            self._check_embedder(spaces)
            return self.memory.embed_many(texts)
        vectors = self.embeddings.embed_documents(texts)
        self.memory.store.check_dimension(len(vectors[0]))
        return [check_vector(v, self.memory.store.dimension) for v in vectors]

    def _embed_query(self, text: str, spaces: Sequence[str]) -> list[float]:
        if self.embeddings is None:
            self._check_embedder(spaces)
            return self.memory.embed(text)
        vector = self.embeddings.embed_query(text)
        return check_vector(vector, self.memory.store.dimension)

    # ---- search ---------------------------------------------------------------------------

    async def _search(self, io: _Backend, op: SearchOp) -> list[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        scope = await self._graph_namespaces(io, prefix)
        if op.limit <= 0 or not scope:
            return []
        if op.query and op.query.strip():
            return await self._ranked(io, op, scope)
        items = [
            (note, ns)
            for graph_ns, ns in scope
            async for note in self._item_notes(io, graph_ns)
            if passes(_value_of(note), op.filter)
        ]
        items.sort(key=lambda pair: (-pair[0].updated_at.timestamp(), _key_of(pair[0]), pair[1]))
        return [_to_item(n, ns) for n, ns in items[op.offset : op.offset + op.limit]]

    async def _item_notes(self, io: _Backend, graph_ns: str) -> AsyncGenerator[Note, None]:
        async with aclosing(io.notes(graph_ns)) as notes:
            async for memory in notes:
                if isinstance(memory, Note) and _is_item(memory):
                    yield memory

    async def _recall_items(
        self, io: _Backend, graph_ns: str, vector: list[float], k: int
    ) -> tuple[dict[str, Note], dict[str, float], bool]:
        """Items of one namespace near ``vector``, each with its best similarity over its
        vectors; and whether the namespace had fewer than ``k`` vectors to give."""
        recalled = await io.recall(graph_ns, vector, k)
        items: dict[str, Note] = {}
        best: dict[str, float] = {}
        extra: list[tuple[str, int, float]] = []
        for r in recalled:
            memory = r.memory
            if _is_item(memory):
                items[memory.id] = cast(Note, memory)
                best[memory.id] = max(best.get(memory.id, -2.0), float(r.sim))
            elif _is_vector(memory):
                record = _record(cast(Note, memory))
                extra.append((str(record.get("item", "")), int(record.get("i", 0)), float(r.sim)))
        missing = sorted({mid for mid, _, _ in extra if mid not in items})
        if missing:
            for memory in await io.get_many(graph_ns, missing):
                if _is_item(memory):
                    items[memory.id] = cast(Note, memory)
        for mid, i, sim in extra:
            note = items.get(mid)
            # A vector note past the item's count is left over from an earlier, longer put.
            if note is not None and 1 <= i < _vector_count(note):
                best[mid] = max(best.get(mid, -2.0), sim)
        return items, best, len(recalled) < k

    async def _ranked(
        self, io: _Backend, op: SearchOp, scope: list[tuple[str, tuple[str, ...]]]
    ) -> list[SearchItem]:
        """Items by similarity (or two-phase score) over the filtered candidates in scope."""
        query = op.query
        assert query is not None
        spaces = [graph_ns for graph_ns, _ in scope]
        vector = await io.offload(lambda: self._embed_query(query, spaces))
        want = op.offset + op.limit
        k1 = want * self.recall_factor
        by_ns = dict(scope)
        k = k1
        while True:
            pool: list[tuple[AnyMemory, float]] = []
            exhausted = True
            for graph_ns, _ in scope:
                items, best, done = await self._recall_items(io, graph_ns, vector, k)
                exhausted = exhausted and done
                pool.extend(
                    (items[mid], sim)
                    for mid, sim in best.items()
                    if passes(_value_of(items[mid]), op.filter)
                )
            # A filter may drop recalled candidates: widen the recall until k1 pass or none remain.
            if len(pool) >= k1 or exhausted:
                break
            k *= 4
        pool.sort(key=lambda pair: (-pair[1], pair[0].namespace, pair[0].id))
        pool = pool[:k1]
        hits = rank_candidates(pool, self.lam, len(pool))
        if self.score_mode == "similarity":
            hits.sort(key=lambda h: (-h.sim, h.memory.namespace, h.memory.id))
        out: list[SearchItem] = []
        for hit in hits[op.offset : want]:
            note = cast(Note, hit.memory)
            parts = {
                "sim": hit.sim,
                "q": hit.q,
                "z_sim": hit.z_sim,
                "z_q": hit.z_q,
                "two_phase": hit.score,
                "two_phase_rank": hit.rank,
                "lam": self.lam,
                "memory_id": note.id,
                "graph_namespace": note.namespace,
            }
            score = hit.sim if self.score_mode == "similarity" else hit.score
            out.append(_to_item(note, by_ns[note.namespace], score=score, parts=parts))
        if len(out) < op.limit and len(hits) < want:
            out.extend(await self._unindexed(io, op, scope, op.limit - len(out)))
        return out

    async def _unindexed(
        self, io: _Backend, op: SearchOp, scope: list[tuple[str, tuple[str, ...]]], room: int
    ) -> list[SearchItem]:
        notes = [
            (note, ns)
            for graph_ns, ns in scope
            async for note in self._item_notes(io, graph_ns)
            if note.embedding is None and passes(_value_of(note), op.filter)
        ]
        notes.sort(key=lambda pair: (-pair[0].updated_at.timestamp(), _key_of(pair[0])))
        return [_to_item(n, ns) for n, ns in notes[:room]]

    # ---- list namespaces ------------------------------------------------------------------

    async def _list_namespaces(self, io: _Backend, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        # A literal prefix condition narrows the listing to the namespaces under it.
        literal = [
            tuple(c.path)
            for c in op.match_conditions or ()
            if c.match_type == "prefix" and "*" not in c.path
        ]
        prefix = max(literal, key=len, default=())
        found = [ns for _, ns in await self._graph_namespaces(io, prefix)]
        if op.match_conditions:
            found = [
                ns for ns in found if all(matches_namespace(c, ns) for c in op.match_conditions)
            ]
        if op.max_depth is not None:
            found = list({ns[: op.max_depth] for ns in found})
        return sorted(set(found))[op.offset : op.offset + op.limit]


# ---- the stores behind it --------------------------------------------------------------------


async def _closed_with_loop(store: AsyncNeo4jStore) -> AsyncGenerator[None, None]:
    """Waits at its ``yield`` until closed: by :meth:`GraphMemoryStore.aclose`, or by the event
    loop, which closes the async generators it started when it shuts down (``asyncio.run``
    does, before closing the loop), so ``store`` is closed on its own loop while that runs."""
    try:
        yield
    finally:
        await store.close()


class _Backend(Protocol):
    """What the ops need of a graphmem store, as coroutines: the memory's own store (for
    :meth:`GraphMemoryStore.batch`, driven to its end without an event loop) or an
    :class:`AsyncNeo4jStore` (for :meth:`GraphMemoryStore.abatch`)."""

    async def namespaces(self, *prefixes: str) -> list[str]: ...

    async def get_many(self, namespace: str, memory_ids: Sequence[str]) -> list[AnyMemory]: ...

    async def upsert(self, nodes: Sequence[AnyMemory]) -> None: ...

    async def delete(self, namespace: str, memory_ids: Sequence[str]) -> list[str]: ...

    async def recall(self, namespace: str, vector: list[float], k: int) -> list[Recall]:
        """Notes near ``vector``: items and their further vectors."""
        ...

    def notes(self, namespace: str) -> AsyncGenerator[AnyMemory, None]:
        """Every note of the namespace, in a stable order."""
        ...

    async def offload(self, work: Callable[[], T]) -> T:
        """Run CPU-bound work (embedding): inline, or off the event loop."""
        ...


class _SyncBackend:
    """A :class:`MemoryStore`; its calls block, so coroutines over it never suspend."""

    def __init__(self, store: MemoryStore) -> None:
        self._store = store

    async def namespaces(self, *prefixes: str) -> list[str]:
        return self._store.namespaces(*prefixes)

    async def get_many(self, namespace: str, memory_ids: Sequence[str]) -> list[AnyMemory]:
        return self._store.get_many(namespace, memory_ids)

    async def upsert(self, nodes: Sequence[AnyMemory]) -> None:
        self._store.upsert(nodes)

    async def delete(self, namespace: str, memory_ids: Sequence[str]) -> list[str]:
        return self._store.delete(namespace, memory_ids)

    async def recall(self, namespace: str, vector: list[float], k: int) -> list[Recall]:
        return self._store.recall(namespace, vector, k, kinds=[MemoryKind.NOTE])

    async def notes(self, namespace: str) -> AsyncGenerator[AnyMemory, None]:
        for memory in self._store.iter_nodes(namespace, kinds=[MemoryKind.NOTE]):
            yield memory

    async def offload(self, work: Callable[[], T]) -> T:
        return work()


class _AsyncBackend:
    """An :class:`AsyncNeo4jStore`, awaited on the running event loop."""

    def __init__(self, store: AsyncNeo4jStore) -> None:
        self._store = store

    async def namespaces(self, *prefixes: str) -> list[str]:
        return await self._store.namespaces(*prefixes)

    async def get_many(self, namespace: str, memory_ids: Sequence[str]) -> list[AnyMemory]:
        return await self._store.get_many(namespace, memory_ids)

    async def upsert(self, nodes: Sequence[AnyMemory]) -> None:
        await self._store.upsert(nodes)

    async def delete(self, namespace: str, memory_ids: Sequence[str]) -> list[str]:
        return await self._store.delete(namespace, memory_ids)

    async def recall(self, namespace: str, vector: list[float], k: int) -> list[Recall]:
        return await self._store.recall(namespace, vector, k, kinds=[MemoryKind.NOTE])

    def notes(self, namespace: str) -> AsyncGenerator[AnyMemory, None]:
        return self._store.iter_nodes(namespace, kinds=[MemoryKind.NOTE])

    async def offload(self, work: Callable[[], T]) -> T:
        # Embedding is CPU work (and its first call checks the dimension on the memory's
        # blocking store): a worker thread keeps the event loop serving other coroutines.
        return await asyncio.to_thread(work)


# ---- records ---------------------------------------------------------------------------------


def _path(field: str) -> str | list[str]:
    return field if field == "$" else tokenize_path(field)


def _label_ok(label: object) -> bool:
    return isinstance(label, str) and bool(label) and "." not in label and "\x00" not in label


def _is_item(memory: AnyMemory) -> bool:
    return isinstance(memory, Note) and memory.source == SOURCE and bool(memory.data)


def _is_vector(memory: AnyMemory) -> bool:
    return isinstance(memory, Note) and memory.source == VECTOR_SOURCE and bool(memory.data)


def _record(note: Note) -> dict[str, Any]:
    return cast(dict[str, Any], json.loads(note.data or "{}"))


def _vector_count(memory: AnyMemory) -> int:
    """How many vectors an item has (items written before per-text vectors have one at most)."""
    record = _record(cast(Note, memory))
    return int(record.get("vectors", 1 if memory.embedding is not None else 0))


def _note_ids(memory: AnyMemory) -> list[str]:
    """An item's note and its vector notes."""
    return [memory.id, *(f"{memory.id}-v{i}" for i in range(1, _vector_count(memory)))]


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


for _name in (
    "get", "search", "put", "delete", "list_namespaces",
    "aget", "asearch", "aput", "adelete", "alist_namespaces",
):  # fmt: skip
    setattr(GraphMemoryStore, _name, _mapping_namespace_errors(getattr(GraphMemoryStore, _name)))

__all__ = [
    "SOURCE",
    "VECTOR_SOURCE",
    "GraphMemoryStore",
    "GraphSearchItem",
    "LangGraphInvalidNamespace",
    "escape_label",
    "item_id",
]
