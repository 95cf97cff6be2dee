"""The one store interface: a handful of primitives every backend implements.

The memory operations (build, retrieve, update, evolve) are written once on top of these
primitives, so the embedded store and Neo4j behave the same; ``graphmem.testing`` holds the
conformance suite both must pass.

Contract, for every primitive:

- ``namespace`` is required and validated; nothing ever crosses namespaces.
- A call that raises changed nothing (writes are all-or-nothing per call).
- A call that returned has been made durable (acknowledged writes survive a crash).
"""

from __future__ import annotations

import inspect
import json
from abc import ABC, abstractmethod
from collections.abc import (
    AsyncIterator,
    Callable,
    Coroutine,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from dataclasses import dataclass, field
from datetime import datetime
from typing import IO, Any, Concatenate, Literal, ParamSpec, Self, TypeAlias, TypeVar

from pydantic import Field

from graphmem.embedding import EmbedderRecord, check_embedder
from graphmem.errors import (
    DimensionMismatch,
    EpisodeFinished,
    ImportFormatError,
    InvalidInput,
    MemoryNotFound,
)
from graphmem.models import (
    IMMUTABLE_FIELDS,
    UTILITY_FIELDS,
    AnyMemory,
    CreditPolicy,
    Edge,
    EdgeKind,
    Episode,
    EpisodeStatus,
    GraphmemModel,
    Memory,
    MemoryKind,
    check_id,
    check_namespace,
    check_vector,
    memory_from_dict,
)

Direction = Literal["out", "in", "both"]

P = ParamSpec("P")
T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

MemoryId: TypeAlias = str
"""A memory's id: 1-128 characters of letters, digits and ``_ . : -`` (:func:`check_id`)."""

EXPORT_FORMAT = "graphmem.jsonl/1"

OWNED_BY: dict[MemoryKind, tuple[EdgeKind, ...]] = {
    MemoryKind.STEP: (EdgeKind.FIRST_STEP, EdgeKind.NEXT),
}
"""Kinds that only exist as part of another memory: a Step with no incoming FIRST_STEP/NEXT
edge left is an orphan and is deleted with what owned it."""

ABOUT_KINDS: tuple[MemoryKind, ...] = (MemoryKind.TIP,)
"""Kinds that only make sense attached (ABOUT) to something: orphaned when their last ABOUT
target is deleted."""


class Recall(GraphmemModel):
    """A vector-recall candidate: the memory and its cosine similarity to the query."""

    memory: AnyMemory
    sim: float
    superseded: bool | None = Field(
        default=None,
        description="Whether another memory SUPERSEDES this one, when the store read it in the "
        "same query; None when it did not (retrieval then asks superseded()).",
    )


class TextRecall(GraphmemModel):
    """A keyword-recall candidate: the memory and its BM25 score for the query's words."""

    memory: AnyMemory
    score: float = Field(
        description="BM25 relevance of the memory's text to the query (higher is better; "
        "Lucene's on Neo4j, graphmem's own on the embedded store: compare ranks, not scores)."
    )
    superseded: bool | None = Field(
        default=None,
        description="Whether another memory SUPERSEDES this one, when the store read it in the "
        "same query; None when it did not.",
    )


class EpisodeCredit(GraphmemModel):
    """What finishing an episode did: the closed episode and the Q it moved.

    ``replayed`` is True when the episode had been finished already with the same reward (a
    retried or concurrent finish): nothing was credited again, and ``q_after`` is what the one
    real finish recorded.
    """

    episode: Episode
    updated: list[AnyMemory] = Field(
        default_factory=list, description="The credited memories, as they are now."
    )
    q_after: dict[str, float] = Field(
        default_factory=dict, description="Each credited memory's q right after the finish."
    )
    replayed: bool = False


class MemoryStore(ABC):
    """Abstract store of the memory graph. See the module docstring for the contract."""

    # ---- schema -------------------------------------------------------------------------

    @property
    @abstractmethod
    def dimension(self) -> int | None:
        """The embedding dimension the store holds, or None before the first vector."""

    @abstractmethod
    def check_dimension(self, dimension: int) -> None:
        """Fix the store's dimension on first use; raise DimensionMismatch if it differs."""

    # ---- which embedder made each namespace's vectors (docs/design.md §3) ----------------

    @abstractmethod
    def embedder_record(self, namespace: str) -> EmbedderRecord | None:
        """The embedder recorded for the namespace, or None (nothing recorded yet)."""

    @abstractmethod
    def record_embedder(
        self, namespace: str, record: EmbedderRecord | None, *, replace: bool = False
    ) -> EmbedderRecord | None:
        """Record the namespace's embedder, durably, if none is recorded; ``replace`` writes it
        whatever is recorded (None then removes the record). Returns the record in effect
        afterwards, so of two first writers racing, the loser sees the winner's."""

    @abstractmethod
    def set_embeddings(self, namespace: str, vectors: Mapping[str, Sequence[float]]) -> None:
        """Replace the embeddings of existing memories in one atomic write; nothing else about
        them changes. An unknown id raises MemoryNotFound, a bad vector InvalidVector, and then
        nothing was written."""

    def use_embedder(self, namespace: str, current: EmbedderRecord) -> EmbedderRecord:
        """Check that ``current`` is the namespace's embedder, recording it if none is yet
        (a store written before embedders were recorded adopts the first one used).

        Raises :class:`~graphmem.errors.EmbedderMismatch`, having changed nothing, when
        another embedder is recorded or a re-embed is unfinished.
        """
        recorded = self.embedder_record(namespace)
        if recorded is None:
            recorded = self.record_embedder(namespace, current)
        assert recorded is not None
        check_embedder(namespace, recorded, current)
        return recorded

    # ---- writes -------------------------------------------------------------------------

    @abstractmethod
    def upsert(
        self,
        nodes: Sequence[AnyMemory] = (),
        edges: Sequence[Edge] = (),
        *,
        keep_utility: bool = True,
        expect_live: Sequence[AnyMemory] = (),
    ) -> None:
        """Insert or replace nodes and edges in one atomic, durable write.

        ``expect_live`` makes it a compare-and-set: the memories as the caller read them; the
        write happens only if each is still live (there, not obsolete, not superseded) with
        the ``q_updates`` read, checked in the write's own transaction; else
        :class:`~graphmem.errors.WriteConflict` and nothing is written
        (:mod:`graphmem.stores.conditional`; consolidation retires what it read this way).

        Replacing a node keeps its utility statistics (q, q_updates, uses, successes) unless
        ``keep_utility`` is False (import); only :meth:`update_utility` moves them. Edges must
        join nodes of the edge's namespace that exist or are in this call; an edge that exists
        already has its props merged. A node id that exists in the namespace with another kind is
        rejected.
        """

    @abstractmethod
    def patch(self, namespace: str, memory_id: MemoryId, changes: dict[str, Any]) -> AnyMemory:
        """Set fields of one memory (not id/namespace/kind/utility); returns the new value."""

    @abstractmethod
    def update_utility(
        self,
        namespace: str,
        memory_ids: Sequence[MemoryId],
        reward: float,
        alpha: float,
        *,
        success: bool | None = None,
    ) -> list[AnyMemory]:
        """Atomically apply ``q ← q + α(r − q)`` and count a use (and a success) per memory.

        Concurrent calls lose no update. Missing ids raise MemoryNotFound and change nothing.
        """

    @abstractmethod
    def finish_episode(
        self,
        namespace: str,
        episode_id: MemoryId,
        reward: float,
        alpha: float,
        *,
        success: bool,
        finished_at: datetime,
        used: Sequence[MemoryId] | None = None,
        credit: CreditPolicy = CreditPolicy.OFFERED,
    ) -> EpisodeCredit:
        """Close an open episode and credit ``reward`` to the memories it RETRIEVED, atomically.

        ``used`` marks memories the episode was offered as used (``used: true`` on their
        RETRIEVED edges; an id it was not offered raises InvalidInput). ``credit`` picks what the
        reward credits: every RETRIEVED memory (``offered``) or the ones marked used, now or
        before by :meth:`mark_used` (``used``).

        One unit: the marks, the episode's status/reward/success/finished_at/credit,
        ``q ← q + α(r − q)`` (and a use, and a success) on each credited memory, and each credited
        edge's ``q_after``/``alpha``. Either all of it is durable or none of it is.
        Idempotent by episode id: a finished episode with the same reward, credit policy and
        used ids among those marked returns the recorded outcome (``replayed=True``) and changes
        nothing; another reward, policy or used set raises
        :class:`~graphmem.errors.EpisodeFinished`. Concurrent calls credit exactly once.
        An unknown id raises MemoryNotFound; a memory that is not an Episode, InvalidInput.
        """

    def mark_used(
        self, namespace: str, episode_id: MemoryId, memory_ids: Sequence[MemoryId]
    ) -> list[str]:
        """Mark memories an open episode was offered (RETRIEVED) as used; return every id the
        episode has marked used, in rank order.

        An id the episode was not offered raises InvalidInput and marks nothing. On a finished
        episode, marking ids that are marked already is a no-op (a retry); any other id raises
        :class:`~graphmem.errors.EpisodeFinished`. This default checks, then writes the marks
        with one :meth:`upsert`; the built-in stores do both in one atomic unit, so a mark never
        lands on an episode a concurrent finish has closed.
        """
        check_id(episode_id)
        ids = check_used(memory_ids)
        episode = self.get(namespace, episode_id)
        if not isinstance(episode, Episode):
            raise InvalidInput(f"memory {episode_id!r} is a {episode.kind}, not an Episode")
        edges = self.edges(namespace, episode_id, kinds=[EdgeKind.RETRIEVED], direction="out")
        marks = plan_marks(namespace, episode, edges, ids)
        if marks:
            self.upsert([], marks)
        return marked_order(edges, ids)

    @abstractmethod
    def delete(self, namespace: str, memory_ids: Sequence[MemoryId]) -> list[str]:
        """Delete memories, their edges and the orphans they leave; return all deleted ids."""

    # ---- reads --------------------------------------------------------------------------

    @abstractmethod
    def get_many(self, namespace: str, memory_ids: Sequence[MemoryId]) -> list[AnyMemory]:
        """The memories that exist among ``memory_ids``, in the order asked."""

    @abstractmethod
    def edges(
        self,
        namespace: str,
        memory_id: MemoryId,
        *,
        kinds: Sequence[EdgeKind] | None = None,
        direction: Direction = "out",
    ) -> list[Edge]:
        """Edges touching one memory, optionally of some kinds, in a stable order."""

    @abstractmethod
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
        """Top-k memories of the namespace by cosine similarity to ``vector``, best first.

        Returns k results whenever the namespace holds k matching memories, however many
        other namespaces hold. Obsolete memories are skipped unless asked for.
        """

    def recall_text(
        self,
        namespace: str,
        query: str,
        k: int,
        *,
        kinds: Sequence[MemoryKind] | None = None,
        include_obsolete: bool = False,
    ) -> list[TextRecall]:
        """Top-k memories of the namespace by keyword relevance (BM25) to ``query``, best
        first, ties by id: the full-text channel of hybrid recall.

        A memory matches when its text (``graphmem.stores.words.TEXT_FIELDS``) holds any
        of the query's words; the query is plain text, never query syntax. Obsolete memories
        are skipped unless asked for. Written here as a scan of the namespace; the built-in
        stores answer it from a full-text index (Neo4j's ``memory_text``, the embedded store's
        in-memory inverted index, ``graphmem.stores.text_index``).
        """
        from graphmem.stores.text_index import rank_text

        check_text_query(query, k)
        wanted = None if kinds is None else [MemoryKind(x).value for x in kinds]
        found = rank_text(
            self.iter_nodes(namespace),
            namespace,
            query,
            k,
            kinds=wanted,
            include_obsolete=include_obsolete,
        )
        return [TextRecall(memory=m, score=score) for m, score in found]

    @abstractmethod
    def find_by_hash(self, namespace: str, kind: MemoryKind, content_hash: str) -> AnyMemory | None:
        """A memory of this kind with this content hash, live ones first (for deduplication)."""

    @abstractmethod
    def iter_nodes(
        self, namespace: str | None = None, kinds: Sequence[MemoryKind] | None = None
    ) -> Iterator[AnyMemory]:
        """All memories (of a namespace, of some kinds), in a stable order."""

    @abstractmethod
    def iter_edges(self, namespace: str | None = None) -> Iterator[Edge]:
        """All edges (of a namespace), in a stable order."""

    @abstractmethod
    def namespaces(self, *prefixes: str) -> list[str]:
        """Namespaces that hold at least one memory, sorted; given prefixes, only those that
        start with one of them.

        A prefix is plain text, not a namespace: ``"users/u1"`` lists ``users/u1`` and
        ``users/u1/notes`` but also ``users/u10``. The LangGraph store, which searches under a
        namespace prefix, asks for just the namespaces there this way (on Neo4j an index seek,
        where listing them all reads every memory).
        """

    @abstractmethod
    def close(self) -> None:
        """Release files, locks and connections. Idempotent."""

    # ---- conveniences written once on the primitives -----------------------------------

    def get(self, namespace: str, memory_id: MemoryId) -> AnyMemory:
        """One memory, or MemoryNotFound."""
        check_id(memory_id)
        found = self.get_many(namespace, [memory_id])
        if not found:
            raise MemoryNotFound(memory_id, namespace)
        return found[0]

    def neighbours(
        self,
        namespace: str,
        memory_id: MemoryId,
        *,
        kinds: Sequence[EdgeKind] | None = None,
        direction: Direction = "out",
    ) -> list[tuple[Edge, AnyMemory]]:
        """Edges touching a memory with the memory at their other end."""
        found = self.edges(namespace, memory_id, kinds=kinds, direction=direction)
        other_ids = [e.dst if e.src == memory_id else e.src for e in found]
        by_id = {m.id: m for m in self.get_many(namespace, list(dict.fromkeys(other_ids)))}
        return [(e, by_id[o]) for e, o in zip(found, other_ids, strict=True) if o in by_id]

    def superseded(self, namespace: str, memory_ids: Sequence[MemoryId]) -> set[str]:
        """The ids among ``memory_ids`` that another memory SUPERSEDES (retrieval skips them).

        Written here as one edge read per id; the stores answer it in one read.
        """
        return {
            i
            for i in dict.fromkeys(memory_ids)
            if self.edges(namespace, i, kinds=[EdgeKind.SUPERSEDES], direction="in")
        }

    def counts(self, namespace: str | None = None) -> dict[str, int]:
        """Number of memories per kind, and of edges, for ``graphmem stats``."""
        out: dict[str, int] = {kind.value: 0 for kind in MemoryKind}
        for memory in self.iter_nodes(namespace):
            out[memory.kind] += 1
        out["edges"] = sum(1 for _ in self.iter_edges(namespace))
        return out

    def export_jsonl(self, out: IO[str], namespace: str | None = None) -> int:
        """Write the graph (or one namespace) as JSON Lines; returns the number of lines."""
        header: dict[str, Any] = {
            "type": "header",
            "format": EXPORT_FORMAT,
            "dimension": self.dimension,
        }
        spaces = [namespace] if namespace is not None else self.namespaces()
        embedders = {ns: rec.to_json() for ns in spaces if (rec := self.embedder_record(ns))}
        if embedders:
            header["embedders"] = embedders
        out.write(json.dumps(header) + "\n")
        n = 1
        for memory in self.iter_nodes(namespace):
            out.write(json.dumps({"type": "node", **memory.model_dump(mode="json")}) + "\n")
            n += 1
        for edge in self.iter_edges(namespace):
            out.write(json.dumps({"type": "edge", **edge.model_dump(mode="json")}) + "\n")
            n += 1
        return n

    def import_jsonl(
        self, lines: Iterable[str], *, namespace: str | None = None
    ) -> tuple[int, int]:
        """Import an export as one unit: a failed import leaves the store exactly as it was.

        Every line is parsed and validated first (format, dimension, records, edge ends); only
        then is anything written, in one atomic ``upsert`` (one journal record on the embedded
        store, one transaction on Neo4j; Neo4j reads are read-committed, so a read running
        while that transaction commits can see part of it, never more than has begun, and all
        of it once this returns). The whole file is held in memory meanwhile, so an
        import is bounded by memory (and, on Neo4j, by the server's transaction memory).
        ``namespace`` moves every record into that namespace (e.g. to copy memories between
        tenants). Returns (nodes, edges) imported.

        The header's embedder records travel too: a namespace whose recorded embedder differs
        from the file's is refused with :class:`~graphmem.errors.EmbedderMismatch` before
        anything is written (import into a new namespace, then ``graphmem reembed`` it); a
        namespace with no record adopts the file's. A file without records (an export made
        before embedders were recorded) is imported unchecked.
        """
        plan = _parse_import(lines, namespace, self.dimension)
        self._check_import_edges(plan)
        for ns, file_record in plan.embedders.items():
            recorded = self.embedder_record(ns)
            if recorded is not None and not recorded.matches(file_record):
                check_embedder(ns, recorded, file_record)
        nodes = [m for _, m in plan.nodes]
        edges = [e for _, e in plan.edges]
        if nodes or edges:
            # The first vector written fixes an empty store's dimension in this same write.
            self.upsert(nodes, edges, keep_utility=False)
        if plan.dimension is not None and not plan.has_vectors:
            # Only after the data is in: a failed write must not leave the dimension fixed.
            self.check_dimension(plan.dimension)
        for ns, file_record in plan.embedders.items():
            self.record_embedder(ns, file_record)
        return len(nodes), len(edges)

    def _check_import_edges(self, plan: _ImportPlan) -> None:
        """Reject an import whose edges point at nodes neither imported nor present."""
        known = {(m.namespace, m.id) for _, m in plan.nodes}
        missing: dict[str, dict[str, int]] = {}  # namespace -> unknown id -> first edge line
        for line_no, edge in plan.edges:
            for end in (edge.src, edge.dst):
                if (edge.namespace, end) not in known:
                    missing.setdefault(edge.namespace, {}).setdefault(end, line_no)
        for ns, ids in missing.items():
            found = {m.id for m in self.get_many(ns, list(ids))}
            lost = [(line_no, i) for i, line_no in ids.items() if i not in found]
            if lost:
                line_no, memory_id = min(lost)
                raise ImportFormatError(line_no, f"edge points at unknown memory {memory_id!r}")


def _async_twin(
    method: Callable[Concatenate[MemoryStore, P], T],
) -> Callable[Concatenate[AsyncMemoryStore, P], Coroutine[Any, Any, T]]:
    """The abstract asynchronous twin of a :class:`MemoryStore` primitive: the same name,
    parameters and docstring, awaited. Each primitive's signature is written once, there."""

    async def twin(self: AsyncMemoryStore, /, *args: P.args, **kwargs: P.kwargs) -> T:
        raise NotImplementedError(method.__name__)

    return _as_twin(twin, method)


def _async_twin_iter(
    method: Callable[Concatenate[MemoryStore, P], Iterator[T]],
) -> Callable[Concatenate[AsyncMemoryStore, P], AsyncIterator[T]]:
    """:func:`_async_twin` for a primitive that returns an iterator: an async iterator."""

    def twin(self: AsyncMemoryStore, /, *args: P.args, **kwargs: P.kwargs) -> AsyncIterator[T]:
        raise NotImplementedError(method.__name__)

    return _as_twin(twin, method)


def _as_twin(twin: F, method: Callable[..., Any]) -> F:
    twin.__name__ = method.__name__
    twin.__qualname__ = f"AsyncMemoryStore.{method.__name__}"
    twin.__doc__ = method.__doc__
    twin.__signature__ = inspect.signature(method)  # type: ignore[attr-defined]
    twin.__isabstractmethod__ = True  # type: ignore[attr-defined]
    return twin


class AsyncMemoryStore(ABC):
    """The store contract for asyncio: :class:`MemoryStore`'s primitives, awaited.

    Each primitive is declared once, in :class:`MemoryStore`, and is here as its abstract
    async twin: same name, parameters and meaning. ``dimension()`` is a method, and
    ``iter_nodes`` / ``iter_edges`` return async iterators. A subclass implements every
    primitive (Python refuses to make one that leaves any out; mypy checks each one's
    signature). The blocking face of an asynchronous store is derived from this one by
    :class:`~graphmem.stores.faces.BlockingStore`, and this face of a blocking store by
    :class:`~graphmem.stores.faces.ThreadedStore`: neither is written again by hand.
    """

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @abstractmethod
    async def dimension(self) -> int | None:
        """As :attr:`MemoryStore.dimension`, awaited."""

    check_dimension = _async_twin(MemoryStore.check_dimension)
    embedder_record = _async_twin(MemoryStore.embedder_record)
    record_embedder = _async_twin(MemoryStore.record_embedder)
    set_embeddings = _async_twin(MemoryStore.set_embeddings)
    upsert = _async_twin(MemoryStore.upsert)
    patch = _async_twin(MemoryStore.patch)
    update_utility = _async_twin(MemoryStore.update_utility)
    finish_episode = _async_twin(MemoryStore.finish_episode)
    mark_used = _async_twin(MemoryStore.mark_used)
    delete = _async_twin(MemoryStore.delete)
    get_many = _async_twin(MemoryStore.get_many)
    edges = _async_twin(MemoryStore.edges)
    superseded = _async_twin(MemoryStore.superseded)
    recall = _async_twin(MemoryStore.recall)
    recall_text = _async_twin(MemoryStore.recall_text)
    find_by_hash = _async_twin(MemoryStore.find_by_hash)
    iter_nodes = _async_twin_iter(MemoryStore.iter_nodes)
    iter_edges = _async_twin_iter(MemoryStore.iter_edges)
    namespaces = _async_twin(MemoryStore.namespaces)

    async def get(self, namespace: str, memory_id: MemoryId) -> AnyMemory:
        """One memory, or MemoryNotFound."""
        check_id(memory_id)
        found = await self.get_many(namespace, [memory_id])
        if not found:
            raise MemoryNotFound(memory_id, namespace)
        return found[0]

    @abstractmethod
    async def close(self) -> None:
        """As :meth:`MemoryStore.close`, awaited."""


def _numbered(lines: Iterable[str]) -> Iterator[tuple[int, str]]:
    """Number the lines of an import, turning undecodable bytes into an ImportFormatError."""
    it = iter(lines)
    line_no = 0
    while True:
        line_no += 1
        try:
            raw = next(it)
        except StopIteration:
            return
        except UnicodeDecodeError as e:
            raise ImportFormatError(line_no, "not valid UTF-8 text") from e
        yield line_no, raw


MAX_IMPORT_DIMENSION = 65536
"""The largest embedding dimension an import header may declare."""


@dataclass
class _ImportPlan:
    """A validated import: its records with their line numbers, and the dimension it implies."""

    dimension: int | None  # the store's, else the file's (header or first vector)
    where: str = "store"  # what fixed ``dimension``, for error messages
    nodes: list[tuple[int, AnyMemory]] = field(default_factory=list)
    edges: list[tuple[int, Edge]] = field(default_factory=list)
    has_vectors: bool = False
    kinds: dict[tuple[str, str], str] = field(default_factory=dict)
    embedders: dict[str, EmbedderRecord] = field(default_factory=dict)

    def expect_embedders(self, raw: Any, namespace: str | None) -> None:
        """The header's embedder records, by the namespace they are imported into."""
        if not isinstance(raw, dict):
            raise InvalidInput("the header's embedders must map namespaces to embedder records")
        for source, data in raw.items():
            record = EmbedderRecord.from_json(data)
            target = check_namespace(namespace if namespace is not None else source)
            earlier = self.embedders.setdefault(target, record)
            if not earlier.matches(record):
                raise InvalidInput(
                    f"the file's namespaces were embedded with {earlier.describe()} and "
                    f"{record.describe()}; import them into namespace {target!r} one at a time"
                )

    def expect_dimension(self, dimension: int) -> None:
        if self.dimension is None:
            self.dimension, self.where = dimension, "file"
        elif dimension != self.dimension:
            raise DimensionMismatch(self.dimension, dimension, where=self.where)


def _parse_import(
    lines: Iterable[str], namespace: str | None, store_dimension: int | None
) -> _ImportPlan:
    """Parse and validate every line of an import (nothing is written here); raise an
    ImportFormatError naming the first bad line."""
    plan = _ImportPlan(dimension=store_dimension)
    for line_no, raw in _numbered(lines):
        if not raw.strip():
            continue
        try:
            _parse_record(plan, line_no, _load_line(line_no, raw), namespace)
        except ImportFormatError:
            raise
        except InvalidInput as e:
            raise ImportFormatError(line_no, str(e)) from e
        except RecursionError as e:
            raise ImportFormatError(line_no, "the record is nested too deeply") from e
    return plan


def _load_line(line_no: int, raw: str) -> dict[str, Any]:
    """One line as a JSON object; every way it can fail is an ImportFormatError."""
    try:
        record = json.loads(raw)
    except RecursionError as e:
        raise ImportFormatError(line_no, "not JSON (nested too deeply)") from e
    except json.JSONDecodeError as e:
        raise ImportFormatError(line_no, f"not JSON ({e.msg})") from e
    except ValueError as e:  # e.g. an integer of more than 4300 digits
        raise ImportFormatError(line_no, f"not usable JSON ({str(e)[:100]})") from e
    if not isinstance(record, dict):
        raise ImportFormatError(line_no, "each line must be a JSON object")
    return record


def _parse_record(plan: _ImportPlan, line_no: int, record: dict[str, Any], ns: str | None) -> None:
    """Validate one record into ``plan``."""
    kind = record.pop("type", None)
    if ns is not None and kind in ("node", "edge"):
        record["namespace"] = ns
    if kind == "header":
        if record.get("format") != EXPORT_FORMAT:
            raise ImportFormatError(line_no, f"unknown format {_short(record.get('format'))}")
        if record.get("dimension") is not None:
            plan.expect_dimension(_header_dimension(record["dimension"]))
        if record.get("embedders") is not None:
            plan.expect_embedders(record["embedders"], ns)
    elif kind == "node":
        memory = memory_from_dict(record)
        if memory.embedding is not None:
            plan.expect_dimension(len(check_vector(memory.embedding)))
            plan.has_vectors = True
        key = (memory.namespace, memory.id)
        if plan.kinds.setdefault(key, memory.kind) != memory.kind:
            raise ImportFormatError(
                line_no,
                f"memory {memory.id!r} is a {plan.kinds[key]} earlier in the file, "
                f"here a {memory.kind}",
            )
        plan.nodes.append((line_no, memory))
    elif kind == "edge":
        plan.edges.append((line_no, Edge(**record)))
    else:
        raise ImportFormatError(line_no, f"unknown record type {_short(kind)}")


def _header_dimension(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(f"the header's dimension must be an integer, got {_short(value)}")
    if not 1 <= value <= MAX_IMPORT_DIMENSION:
        raise InvalidInput(
            f"the header's dimension must be in 1..{MAX_IMPORT_DIMENSION}, got {_short(value)}"
        )
    return value


def _short(value: Any) -> str:
    """A value for an error message: its repr, cut to one short line."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


PARALLEL_READS = 8
"""Reads at once that :func:`read_each` asks of a store answering reads in parallel."""

R = TypeVar("R")


def read_each(store: object, read: Callable[[T], R], items: Sequence[T]) -> list[R]:
    """``read(item)`` for each item, in order: from up to :data:`PARALLEL_READS` threads on a
    store whose reads run in parallel (``parallel_reads``: a server, where one round trip a
    read dominates a batch), one after another on any other."""
    if len(items) < 2 or not getattr(store, "parallel_reads", False):
        return [read(item) for item in items]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(min(PARALLEL_READS, len(items))) as pool:
        return list(pool.map(read, items))


def upsert_batch(
    nodes: Sequence[AnyMemory], edges: Sequence[Edge]
) -> tuple[list[AnyMemory], list[Edge]]:
    """The arguments of ``upsert`` as lists, after checking they are memories and edges."""
    node_list, edge_list = list(nodes), list(edges)
    for node in node_list:
        if not isinstance(node, Memory):
            raise InvalidInput(f"upsert takes memories, got {type(node).__name__}")
    for edge in edge_list:
        if not isinstance(edge, Edge):
            raise InvalidInput(f"upsert takes Edge objects, got {type(edge).__name__}")
    return node_list, edge_list


def check_patch(changes: dict[str, Any]) -> None:
    """Reject patches of identity or utility fields (shared by the stores)."""
    bad = sorted(set(changes) & (IMMUTABLE_FIELDS | UTILITY_FIELDS | {"embedding"}))
    if bad:
        raise InvalidInput(
            f"cannot patch {', '.join(bad)}: identity is fixed, utility moves only through "
            "update_utility, and embeddings through upsert"
        )
    if not changes:
        raise InvalidInput("a patch needs at least one field")


def check_text_query(query: str, k: int) -> None:
    """The arguments of :meth:`MemoryStore.recall_text`: a string query and a count."""
    if not isinstance(query, str):
        raise InvalidInput(f"the query must be a string, got {type(query).__name__}")
    if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= MAX_RECALL_K:
        raise InvalidInput(f"k must be an integer from 0 to {MAX_RECALL_K:,}, got {k!r}")


MAX_RECALL_K = 2**31 - 1
"""The most results a recall may ask for (a count the stores' engines hold in 32 bits)."""


def check_prefixes(prefixes: Sequence[str]) -> tuple[str, ...]:
    """The namespace prefixes of :meth:`MemoryStore.namespaces`, checked to be strings."""
    for prefix in prefixes:
        if not isinstance(prefix, str):
            raise InvalidInput(f"a namespace prefix is a string, got {type(prefix).__name__}")
    return tuple(prefixes)


def credited_order(edges: Sequence[Edge]) -> list[str]:
    """Memory ids at the end of an episode's RETRIEVED edges: by rank, then id, once each."""

    def rank(edge: Edge) -> int:
        value = edge.props.get("rank")
        return value if isinstance(value, int) and not isinstance(value, bool) else 1 << 30

    ordered = sorted(edges, key=lambda e: (rank(e), e.dst))
    return list(dict.fromkeys(e.dst for e in ordered))


def closed_episode(
    episode: Episode,
    reward: float,
    success: bool,
    finished_at: datetime,
    credit: CreditPolicy = CreditPolicy.OFFERED,
) -> Episode:
    """``episode`` as ``finish_episode`` leaves it (both stores write exactly these fields)."""
    return episode.model_copy(
        update={
            "status": EpisodeStatus.FINISHED,
            "reward": reward,
            "success": success,
            "finished_at": finished_at,
            "updated_at": finished_at,
            "credit": credit,
        }
    )


CLOSED_FIELDS = ("status", "reward", "success", "finished_at", "updated_at", "credit")
"""The fields :func:`closed_episode` sets."""


def check_used(memory_ids: Sequence[str] | None) -> list[str]:
    """The ids of ``used`` / ``mark_used``, checked and without repeats (None is none)."""
    if memory_ids is None:
        return []
    if isinstance(memory_ids, str):
        raise InvalidInput("used takes a list of memory ids, not one string")
    return list(dict.fromkeys(check_id(i) for i in memory_ids))


def check_credit(credit: CreditPolicy | str) -> CreditPolicy:
    """A credit policy from its value; InvalidInput naming the choices otherwise."""
    try:
        return CreditPolicy(credit)
    except ValueError:
        choices = ", ".join(c.value for c in CreditPolicy)
        raise InvalidInput(f"credit must be one of {choices}, got {_short(credit)}") from None


def marked_used(edges: Sequence[Edge]) -> set[str]:
    """The memories an episode's RETRIEVED edges mark used."""
    return {e.dst for e in edges if e.props.get("used") is True}


def marked_order(edges: Sequence[Edge], also: Sequence[str] = ()) -> list[str]:
    """The memories marked used (and ``also``, being marked now), in rank order."""
    marked = marked_used(edges) | set(also)
    return [i for i in credited_order(edges) if i in marked]


def plan_marks(
    namespace: str, episode: Episode, edges: Sequence[Edge], used: Sequence[str]
) -> list[Edge]:
    """The RETRIEVED edges to rewrite with ``used: true`` for ``used`` (checked ids).

    An id the episode was not offered raises InvalidInput. On a finished episode nothing may
    change: ids marked already give no edges, any other raises EpisodeFinished.
    """
    offered = {e.dst: e for e in edges}
    missing = [i for i in used if i not in offered]
    if missing:
        raise InvalidInput(
            f"episode {episode.id!r} was not offered {', '.join(map(repr, missing[:10]))}: "
            "only memories it RETRIEVED can be marked used"
        )
    fresh = [i for i in used if offered[i].props.get("used") is not True]
    if fresh and episode.status is EpisodeStatus.FINISHED:
        raise EpisodeFinished(
            episode.id,
            namespace,
            detail=f"; marking {', '.join(map(repr, fresh[:10]))} used now is refused",
        )
    return [
        offered[i].model_copy(update={"props": {**offered[i].props, "used": True}}) for i in fresh
    ]


def credited_ids(edges: Sequence[Edge], used: Sequence[str], credit: CreditPolicy) -> list[str]:
    """What a finish credits, in rank order: every RETRIEVED memory, or those marked used
    (before, or by ``used`` now)."""
    if credit is CreditPolicy.OFFERED:
        return credited_order(edges)
    return marked_order(edges, used)


def replayed_q_after(
    namespace: str,
    episode: Episode,
    edges: Sequence[Edge],
    reward: float,
    used: Sequence[str] = (),
    credit: CreditPolicy = CreditPolicy.OFFERED,
) -> dict[str, float]:
    """What the one real finish of ``episode`` recorded, if this finish asks for the same: the
    reward it got, its credit policy and no memory it did not mark used; anything else raises
    :class:`~graphmem.errors.EpisodeFinished`."""
    if episode.reward != reward:
        raise EpisodeFinished(episode.id, namespace, episode.reward, reward)
    recorded = episode.credit or CreditPolicy.OFFERED
    if credit is not recorded:
        raise EpisodeFinished(
            episode.id,
            namespace,
            detail=f" crediting the {recorded.value} memories; "
            f"a finish crediting the {credit.value} ones is refused",
        )
    plan_marks(namespace, episode, edges, used)  # raises for a memory not marked then
    return recorded_q_after(edges)


def recorded_q_after(edges: Sequence[Edge]) -> dict[str, float]:
    """``q_after`` per memory, from the RETRIEVED edges of a finished episode."""
    out: dict[str, float] = {}
    for edge in edges:
        value = edge.props.get("q_after")
        if isinstance(value, int | float) and not isinstance(value, bool):
            out[edge.dst] = float(value)
    return {i: out[i] for i in credited_order(edges) if i in out}
