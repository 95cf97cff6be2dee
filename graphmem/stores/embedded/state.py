"""The embedded store's in-memory graph, and the change records that move it.

Every write becomes one :class:`Change` holding its *effects* (final node values, merged edges,
deleted ids, new utility values), so applying it is deterministic: a process replaying the
write-ahead log reaches exactly the state of the process that wrote it. A change is encoded as
one JSON line (embeddings as base64 little-endian float32) and the live path applies the decoded
line, not the caller's objects, so the two can never differ.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from graphmem.embedding import EmbedderRecord
from graphmem.errors import GraphmemError, StoreError
from graphmem.models import AnyMemory, Edge, EdgeKind, MemoryKind, Namespace, memory_from_dict
from graphmem.stores.base import ABOUT_KINDS, OWNED_BY, Direction
from graphmem.stores.embedded.ann import AnnGraph
from graphmem.stores.embedded.graph import PackedGraph
from graphmem.stores.embedded.packed import pack, pack_edge, packed_kind, unpack, unpack_edge
from graphmem.stores.embedded.recent_floats import RecentFloats
from graphmem.stores.embedded.vectors import Vector, VectorIndex, row_floats
from graphmem.stores.text_index import TextIndex


@dataclass(frozen=True)
class UtilityChange:
    namespace: str
    memory_id: str
    q: float
    q_updates: int
    uses: int
    successes: int
    updated_at: datetime


@dataclass
class Change:
    """The effects of one committed call, applied in field order."""

    dimension: int | None = None
    deletes: list[tuple[str, str]] = field(default_factory=list)
    nodes: list[tuple[AnyMemory, Vector | None]] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)
    utility: list[UtilityChange] = field(default_factory=list)
    embedders: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    """Namespace → its embedder record (JSON form), or None to remove the record."""


# ---- codec ------------------------------------------------------------------------------


def encode_vector(vector: Vector | None) -> str | None:
    if vector is None:
        return None
    return base64.b64encode(vector.astype("<f4").tobytes()).decode("ascii")


def node_record(memory: AnyMemory, vector: Vector | None) -> dict[str, Any]:
    """A memory as a change-record entry: its JSON fields, the embedding under ``vec``."""
    record = memory.model_dump(mode="json", exclude={"embedding"})
    record["vec"] = encode_vector(vector)
    return record


def encode_change(
    *,
    dimension: int | None = None,
    deletes: Sequence[tuple[str, str]] = (),
    nodes: Sequence[dict[str, Any]] = (),
    edges: Sequence[Edge] = (),
    utility: Sequence[UtilityChange] = (),
    embedders: dict[str, dict[str, Any] | None] | None = None,
) -> bytes:
    """One change as one newline-terminated ASCII JSON line."""
    record: dict[str, Any] = {}
    if dimension is not None:
        record["dim"] = dimension
    if deletes:
        record["del"] = [list(d) for d in deletes]
    if nodes:
        record["put"] = list(nodes)
    if edges:
        record["edges"] = [e.model_dump(mode="json") for e in edges]
    if utility:
        record["util"] = [
            [
                u.namespace,
                u.memory_id,
                u.q,
                u.q_updates,
                u.uses,
                u.successes,
                u.updated_at.isoformat(),
            ]
            for u in utility
        ]
    if embedders:
        record["emb"] = embedders
    return (json.dumps(record, separators=(",", ":"), allow_nan=False) + "\n").encode("ascii")


def decode_change(record: dict[str, Any], matrix: Vector | None = None) -> Change:
    """Parse a change record (a WAL line or a snapshot); ``vec`` may index ``matrix``.

    A log is input too: what it holds is checked as the models check it, each namespace once
    a record (its memories and edges share one :class:`Namespace`)."""
    spaces: dict[str, Namespace] = {}

    def checked(data: dict[str, Any]) -> dict[str, Any]:
        raw = data.get("namespace")
        if isinstance(raw, str):  # anything else: the model refuses it
            namespace = spaces.get(raw)
            data["namespace"] = spaces[raw] = Namespace(raw) if namespace is None else namespace
        return data

    change = Change(dimension=record.get("dim"))
    change.deletes = [(str(ns), str(i)) for ns, i in record.get("del", ())]
    for raw in record.get("put", ()):
        data = checked(dict(raw))
        vec = data.pop("vec", None)
        vector: Vector | None
        if vec is None:
            vector = None
        elif isinstance(vec, int):
            if matrix is None:
                raise StoreError("snapshot node refers to a missing vector matrix")
            vector = np.array(matrix[vec], dtype=np.float32)
        else:
            vector = np.frombuffer(base64.b64decode(vec), dtype="<f4").astype(np.float32)
        change.nodes.append((memory_from_dict(data), vector))
    change.edges = [Edge(**checked(dict(e))) for e in record.get("edges", ())]
    change.utility = [
        UtilityChange(ns, i, float(q), int(n), int(u), int(s), datetime.fromisoformat(t))
        for ns, i, q, n, u, s, t in record.get("util", ())
    ]
    for ns, data in dict(record.get("emb") or {}).items():
        # Validated on the way in, so a replay can never hold a record the live path refused.
        change.embedders[str(ns)] = (
            None if data is None else EmbedderRecord.from_json(data).to_json()
        )
    return change


def decode_line(line: bytes) -> Change:
    """Decode one WAL line; any defect raises ValueError (a torn or corrupt record)."""
    try:
        record = json.loads(line)
        if not isinstance(record, dict):
            raise ValueError("a change record must be a JSON object")
        return decode_change(record)
    except (GraphmemError, KeyError, TypeError, ValueError) as e:
        raise ValueError(f"bad change record: {e}") from e


# ---- state ------------------------------------------------------------------------------


class _Space:
    """One namespace: its graph, its vectors, its content-hash index."""

    __slots__ = ("graph", "hashes", "vectors")

    def __init__(self) -> None:
        # Memories and edges packed (embeddings left out: they live in the vectors), in
        # containers CPython's collector does not walk: see _packed and _graph.
        self.graph = PackedGraph()
        self.vectors: VectorIndex | None = None
        # (kind, content hash) → the ids holding it, oldest first
        self.hashes: dict[tuple[str, str], tuple[str, ...]] = {}


class GraphState:
    """All namespaces of one store, in memory."""

    def __init__(self) -> None:
        self.dimension: int | None = None
        self.spaces: dict[str, _Space] = {}
        # Namespace → the record of the embedder that made its vectors (kept when the
        # namespace is emptied, like Neo4j's meta node).
        self.embedders: dict[str, dict[str, Any]] = {}
        self.ann_threshold: int | None = None  # set by the store once the state is loaded
        self.floats = RecentFloats()  # the embeddings handed out last (see _recent_floats)
        # Keyword search: built per namespace on its first search, in step from then on.
        self.text = TextIndex()

    def set_ann_threshold(
        self, threshold: int | None, graphs: dict[str, AnnGraph] | None = None
    ) -> None:
        """Rows per namespace from which searches use the approximate index (None: never).
        A namespace that big gets its graph from ``graphs`` (loaded from its file, in step
        with the state as it is now) or a new one, built in the background."""
        self.ann_threshold = threshold
        for ns, space in self.spaces.items():
            vectors = space.vectors
            if vectors is None:
                continue
            vectors.ann_threshold = threshold
            if threshold is None:
                vectors.stop_ann()
            elif len(vectors) >= threshold and not vectors.ann_active:
                vectors.start_ann((graphs or {}).get(ns))

    def ann_ready(self) -> bool:
        """Whether every namespace's approximate index is in step (or absent)."""
        spaces = list(self.spaces.values())
        return all(s.vectors is None or s.vectors.ann_ready() for s in spaces)

    def retire(self) -> None:
        """This state is no longer used: stop building its approximate indexes."""
        for space in self.spaces.values():
            if space.vectors is not None:
                space.vectors.retire()
        self.text.close()

    # ---- applying changes ---------------------------------------------------------------

    def apply(self, change: Change) -> None:
        if change.dimension is not None:
            if self.dimension is None:
                self.dimension = change.dimension
            elif self.dimension != change.dimension:
                raise StoreError("change record sets a second embedding dimension")
        for ns, memory_id in change.deletes:
            self._remove(ns, memory_id)
        for memory, vector in change.nodes:
            self._put(memory, vector)
        for edge in change.edges:
            self._put_edge(edge)
        for u in change.utility:
            self._set_utility(u)
        for ns, data in change.embedders.items():
            if data is None:
                self.embedders.pop(ns, None)
            else:
                self.embedders[ns] = data

    def _space(self, namespace: str) -> _Space:
        space = self.spaces.get(namespace)
        if space is None:
            space = self.spaces[namespace] = _Space()
        return space

    def _put(self, memory: AnyMemory, vector: Vector | None) -> None:
        space = self._space(memory.namespace)
        old = self.memory(memory.namespace, memory.id)
        if old is not None:
            self._unhash(space, old)
        space.graph.set_node(memory.id, pack(memory))
        self.text.put(memory)
        if memory.content_hash is not None:
            key = (memory.kind, memory.content_hash)
            held = space.hashes.get(key, ())
            if memory.id not in held:
                space.hashes[key] = (*held, memory.id)
        if vector is None:
            if space.vectors is not None:
                space.vectors.remove(memory.id)
            return
        if self.dimension is None:
            raise StoreError("a vector was stored before the store's dimension was fixed")
        if space.vectors is None:
            space.vectors = VectorIndex(self.dimension, ann_threshold=self.ann_threshold)
        space.vectors.put(memory.id, vector, memory.kind, memory.obsolete)

    def _remove(self, namespace: str, memory_id: str) -> None:
        space = self.spaces.get(namespace)
        old = self.memory(namespace, memory_id)
        if space is None or old is None:
            return
        self._unhash(space, old)
        space.graph.remove_node(memory_id)
        self.text.remove(namespace, memory_id)
        if space.vectors is not None:
            space.vectors.remove(memory_id)
        if not space.graph:
            self.text.drop(namespace)
            if space.vectors is not None:
                space.vectors.retire()
            del self.spaces[namespace]

    @staticmethod
    def _unhash(space: _Space, memory: AnyMemory) -> None:
        if memory.content_hash is not None:
            key = (memory.kind, memory.content_hash)
            rest = tuple(i for i in space.hashes.get(key, ()) if i != memory.id)
            if rest:
                space.hashes[key] = rest
            else:
                space.hashes.pop(key, None)

    def _put_edge(self, edge: Edge) -> None:
        space = self.spaces.get(edge.namespace)
        if space is None or edge.src not in space.graph or edge.dst not in space.graph:
            raise StoreError(f"change record has an edge to a missing memory: {edge.key}")
        space.graph.set_edge(edge.src, edge.dst, edge.kind.value, pack_edge(edge))

    def _set_utility(self, u: UtilityChange) -> None:
        old = self.memory(u.namespace, u.memory_id)
        if old is None:
            raise StoreError(f"change record updates a missing memory {u.memory_id!r}")
        new = old.model_copy(
            update={
                "q": u.q,
                "q_updates": u.q_updates,
                "uses": u.uses,
                "successes": u.successes,
                "updated_at": u.updated_at,
            }
        )
        self.spaces[u.namespace].graph.set_node(u.memory_id, pack(new))

    # ---- reading ------------------------------------------------------------------------

    def memory(self, namespace: str, memory_id: str) -> AnyMemory | None:
        """The memory (a new model each call, without its embedding)."""
        space = self.spaces.get(namespace)
        if space is None or memory_id not in space.graph:
            return None
        return unpack(space.graph.node(memory_id))

    def vector(self, namespace: str, memory_id: str) -> Vector | None:
        space = self.spaces.get(namespace)
        if space is None or space.vectors is None:
            return None
        return space.vectors.get(memory_id)

    def copy_out(self, namespace: str, memory_id: str, *, keep: bool = True) -> AnyMemory | None:
        """A private copy of a memory, embedding attached, safe to hand to callers.
        ``keep``: the embedding through the recent floats (see _recent_floats); False for a
        walk over many memories, which would only push the recent ones out."""
        space = self.spaces.get(namespace)
        if space is None or memory_id not in space.graph:
            return None
        vector = None if space.vectors is None else space.vectors.row(memory_id)
        packed = space.graph.node(memory_id)
        if vector is None:
            return unpack(packed, None)
        if keep:
            return unpack(packed, self.floats.floats((namespace, memory_id), vector))
        return unpack(packed, row_floats(vector))

    def edge(self, namespace: str, kind: EdgeKind, src: str, dst: str) -> Edge | None:
        space = self.spaces.get(namespace)
        if space is None:
            return None
        packed = space.graph.edge(src, dst, kind.value)
        return None if packed is None else unpack_edge(packed)

    def edges_of(
        self,
        namespace: str,
        memory_id: str,
        kinds: Sequence[EdgeKind] | None,
        direction: Direction,
    ) -> list[Edge]:
        space = self.spaces.get(namespace)
        if space is None or memory_id not in space.graph:
            return []
        graph = space.graph
        found: dict[tuple[str, str, str, str], Edge] = {}
        if direction in ("out", "both"):
            for packed in graph.out_edges(memory_id):
                edge = unpack_edge(packed)
                found[edge.key] = edge
        if direction in ("in", "both"):
            for packed in graph.in_edges(memory_id):
                edge = unpack_edge(packed)
                found[edge.key] = edge
        wanted = None if kinds is None else {EdgeKind(k) for k in kinds}
        edges = [e for e in found.values() if wanted is None or e.kind in wanted]
        return sorted(edges, key=edge_order)

    def text_search(
        self,
        namespace: str,
        terms: Sequence[str],
        k: int,
        kinds: Sequence[str] | None,
        include_obsolete: bool,
    ) -> list[tuple[str, float]]:
        """Keyword search of a namespace (see ``fulltext``), its index built on first use."""
        space = self.spaces.get(namespace)
        if space is None:
            return []
        if not self.text.has(namespace):
            self.text.build(namespace, (unpack(p) for _, p in space.graph.nodes()))
        return self.text.search(namespace, terms, k, kinds=kinds, include_obsolete=include_obsolete)

    def recallable(self, namespace: str, memory_id: str) -> bool:
        """Whether the memory holds an embedding (what vector recall searches)."""
        space = self.spaces.get(namespace)
        return space is not None and space.vectors is not None and memory_id in space.vectors

    def is_superseded(self, namespace: str, memory_id: str) -> bool:
        """Whether another memory SUPERSEDES this one (straight from the adjacency)."""
        space = self.spaces.get(namespace)
        if space is None:
            return False
        return space.graph.has_in_edge(memory_id, EdgeKind.SUPERSEDES.value)

    def ids(self, namespace: str, kinds: set[str] | None = None) -> list[str]:
        """The namespace's memory ids, sorted; given ``kinds`` (values), only those kinds'."""
        space = self.spaces.get(namespace)
        if space is None:
            return []
        if kinds is None:
            return sorted(space.graph.ids())
        node = space.graph.node
        return sorted(i for i in space.graph.ids() if packed_kind(node(i)) in kinds)

    def namespaces(self) -> list[str]:
        return sorted(ns for ns, space in self.spaces.items() if space.graph)

    def iter_edges(self, namespace: str) -> list[Edge]:
        space = self.spaces.get(namespace)
        if space is None:
            return []
        return sorted(map(unpack_edge, space.graph.edges()), key=edge_order)

    def find_hash(self, namespace: str, kind: MemoryKind, content_hash: str) -> str | None:
        space = self.spaces.get(namespace)
        ids = None if space is None else space.hashes.get((kind.value, content_hash))
        if not ids:
            return None
        # Prefer a live memory: deduplicating into an obsolete one would hide the new one.
        for memory_id in ids:
            memory = self.memory(namespace, memory_id)
            if memory is not None and not memory.obsolete:
                return memory_id
        return next(iter(ids))

    def cascade(self, namespace: str, memory_ids: Sequence[str]) -> list[str]:
        """``memory_ids`` plus the orphans deleting them would leave (see base.OWNED_BY)."""
        graph = self.spaces[namespace].graph
        gone: dict[str, None] = dict.fromkeys(memory_ids)
        frontier = list(memory_ids)
        while frontier:
            found: list[str] = []
            for memory_id in frontier:
                near = {dst for dst, _ in graph.successors(memory_id)}
                near |= {src for src, _ in graph.predecessors(memory_id)}
                for other in sorted(near - gone.keys()):
                    if other not in gone and self._orphaned(graph, other, gone):
                        gone[other] = None
                        found.append(other)
            frontier = found
        return list(gone)

    @staticmethod
    def _orphaned(graph: PackedGraph, memory_id: str, gone: dict[str, None]) -> bool:
        kind = MemoryKind(packed_kind(graph.node(memory_id)))
        if kind in OWNED_BY:
            owners = {k.value for k in OWNED_BY[kind]}
            ends = [u for u, k in graph.predecessors(memory_id) if k in owners]
            if ends and all(u in gone for u in ends):
                return True
        if kind in ABOUT_KINDS:
            ends = [v for v, k in graph.successors(memory_id) if k == "ABOUT"]
            if ends and all(v in gone for v in ends):
                return True
        return False

    # ---- snapshots ----------------------------------------------------------------------

    def snapshot(self) -> tuple[dict[str, Any], Vector]:
        """The whole state as a change record plus the matrix its ``vec`` entries index."""
        nodes: list[dict[str, Any]] = []
        edges: list[dict[str, Any]] = []
        rows: list[Vector] = []
        for ns in sorted(self.spaces):
            space = self.spaces[ns]
            for memory_id, packed in space.graph.nodes():
                record = unpack(packed).model_dump(mode="json", exclude={"embedding"})
                vector = None if space.vectors is None else space.vectors.get(memory_id)
                record["vec"] = None if vector is None else len(rows)
                if vector is not None:
                    rows.append(vector)
                nodes.append(record)
            edges.extend(unpack_edge(e).model_dump(mode="json") for e in space.graph.edges())
        dim = self.dimension or 0
        matrix = np.stack(rows) if rows else np.zeros((0, dim), dtype=np.float32)
        state: dict[str, Any] = {"dim": self.dimension, "put": nodes, "edges": edges}
        if self.embedders:
            state["emb"] = dict(sorted(self.embedders.items()))
        return state, matrix

    def iter_all_ids(self) -> Iterator[tuple[str, str]]:
        for ns in sorted(self.spaces):
            for memory_id in self.ids(ns):
                yield ns, memory_id


def edge_order(edge: Edge) -> tuple[str, str, str, str]:
    """Edges sort by (namespace, kind, src, dst), the order the Neo4j store uses too."""
    return (edge.namespace, edge.kind.value, edge.src, edge.dst)
