"""The systems and data of ``bench.speed``: a clustered synthetic corpus, and each store under
test behind one small interface (``add`` memories, then ``cases`` to time)."""

from __future__ import annotations

import logging
import random
import time
import uuid
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench import common
from bench.common import DIM, Neo4jSettings

log = logging.getLogger("bench.speed")

BATCH = 1000


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


VERBS = _words("heat cool clean slice wash put take open close find move turn fill empty")
OBJECTS = _words(
    "mug apple plate bread cup egg lettuce bowl knife pan kettle book lamp key phone towel "
    "bottle glass fork spoon pot box chair door drawer window sponge soap vase pillow"
)
PLACES = _words(
    "kitchen fridge shelf counter cabinet stove sink table desk drawer sofa bed garage garden "
    "microwave oven dishwasher closet bathroom hall"
)


# ---- data -----------------------------------------------------------------------------------


@dataclass
class Dataset:
    """The corpus and queries every system sees."""

    vectors: np.ndarray  # (n, DIM) float32, unit rows
    texts: list[str]
    q: np.ndarray  # utilities in [0, 1)
    queries: np.ndarray  # (n_queries, DIM) float32, unit rows
    query_texts: list[str]

    def lookup(self, key: str) -> np.ndarray:
        """The precomputed vector behind a lookup key (``m:<row>`` or ``q:<row>``)."""
        kind, _, row = key.partition(":")
        vector: np.ndarray = self.vectors[int(row)] if kind == "m" else self.queries[int(row)]
        return vector


def task_text(rng: random.Random) -> str:
    return (
        f"{rng.choice(VERBS)} the {rng.choice(OBJECTS)} and put it in the {rng.choice(PLACES)} "
        f"then {rng.choice(VERBS)} the {rng.choice(OBJECTS)}"
    )


def make_dataset(n: int, n_queries: int, seed: int = 0) -> Dataset:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((max(8, n // 100), DIM), dtype=np.float32)

    def around(count: int) -> np.ndarray:
        topic = rng.integers(0, len(centres), count)
        x = centres[topic] + 0.8 * rng.standard_normal((count, DIM), dtype=np.float32)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        return x

    words = random.Random(seed)
    return Dataset(
        vectors=around(n),
        texts=[task_text(words) for _ in range(n)],
        q=rng.random(n),
        queries=around(n_queries),
        query_texts=[f"how do I {task_text(words)}?" for _ in range(n_queries)],
    )


def procedures(
    data: Dataset, namespace: str, lo: int, hi: int, vectors: Sequence[list[float]] | None = None
) -> list[Any]:
    """Memories [lo, hi) as Procedures, with the corpus vectors unless ``vectors`` are given."""
    from graphmem.models import Granularity, Procedure

    return [
        Procedure(
            namespace=namespace,
            id=f"m{i}",
            task_text=data.texts[i],
            key=data.texts[i],
            granularity=Granularity.SCRIPT,
            script=f"1. {data.texts[i]}",
            embedding=data.vectors[i].tolist() if vectors is None else vectors[i - lo],
            q=float(data.q[i]),
        )
        for i in range(lo, hi)
    ]


class LookupEmbedder:
    """Hands out precomputed vectors by key, so query embedding is not what gets timed."""

    name = "precomputed"
    dimension = DIM

    def __init__(self, data: Dataset) -> None:
        self._data = data

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([self._vector(t) for t in texts])

    def _vector(self, text: str) -> np.ndarray:
        kind, _, row = text.partition(":")
        if kind in ("m", "q") and row.isdigit():
            return self._data.lookup(text)
        # Any other text (the store's embedder-identity probe): a fixed unit vector of its own.
        rng = np.random.default_rng(zlib.crc32(text.encode("utf-8")))
        v = rng.standard_normal(DIM).astype(np.float32)
        return v / np.linalg.norm(v)


class IncludedEmbedder:
    """MiniLM's cost on every text, under the corpus's identity (a :class:`LookupEmbedder`):
    the corpus vectors are synthetic, so the "included" cases measure the time of embedding a
    query with the real model, not what it finds. The store records the embedder that wrote a
    namespace and refuses another (``EmbedderMismatch``), so this one must look like the
    lookup embedder to it: the identity probe gets the lookup's vector, every text the
    model's."""

    name = LookupEmbedder.name
    dimension = DIM

    def __init__(self, data: Dataset, model: Any) -> None:
        self._lookup = LookupEmbedder(data)
        self._model = model

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        from graphmem.embedding import PROBE_TEXT

        vectors = np.asarray(self._model.embed(list(texts)), dtype=np.float32)
        for i, text in enumerate(texts):
            if text == PROBE_TEXT:
                vectors[i] = self._lookup.embed([text])[0]
        return vectors


# ---- systems --------------------------------------------------------------------------------


@dataclass
class Settings:
    k1: int = 5
    k2: int = 3
    lam: float = 0.5
    budget_s: float = 20.0


class System:
    """A store under test: ``add`` memories [lo, hi), then time its cases."""

    label = ""
    ingest_label: str | None = None  # None: ingest not comparable (numpy)
    group = "in-process"  # systems of a group are timed together, query by query

    def add(self, data: Dataset, lo: int, hi: int) -> float:
        raise NotImplementedError

    def cases(self, data: Dataset, s: Settings) -> list[tuple[str, Callable[[int], object]]]:
        raise NotImplementedError

    def included(self, data: Dataset, s: Settings) -> list[tuple[str, Callable[[int], object]]]:
        return []

    def close(self) -> None:
        pass


class NumpyBrute(System):
    label = "numpy brute-force top-k"

    def __init__(self) -> None:
        self.matrix = np.zeros((0, DIM), dtype=np.float32)

    def add(self, data: Dataset, lo: int, hi: int) -> float:
        self.matrix = np.concatenate([self.matrix, data.vectors[lo:hi]])
        return 0.0

    def top_k(self, query: np.ndarray, k: int) -> np.ndarray:
        # Rows are unit length, so the dot product is the cosine.
        sims = self.matrix @ query
        k = min(k, len(sims))
        idx = np.argpartition(-sims, k - 1)[:k]
        return idx[np.argsort(-sims[idx])]

    def cases(self, data: Dataset, s: Settings) -> list[tuple[str, Callable[[int], object]]]:
        return [(self.label, lambda i: self.top_k(data.queries[i], s.k1))]

    def included(self, data: Dataset, s: Settings) -> list[tuple[str, Callable[[int], object]]]:
        model = common.minilm()
        return [(self.label, lambda i: self.top_k(model.embed([data.query_texts[i]])[0], s.k1))]


class GraphmemSystem(System):
    """Either graphmem store: phase-A recall and two-phase retrieval."""

    namespace = "bench"

    def __init__(self, store: Any, label: str, data: Dataset) -> None:
        from graphmem import GraphMemory

        self.store = store
        self.label = label
        self.ingest_label = label
        self.memory = GraphMemory(store, embedder=LookupEmbedder(data))
        self._text_memory: Any = None

    def add(self, data: Dataset, lo: int, hi: int) -> float:
        spent = 0.0
        for start in range(lo, hi, BATCH):
            batch = procedures(data, self.namespace, start, min(hi, start + BATCH))
            t0 = time.perf_counter()
            self.store.upsert(batch)
            spent += time.perf_counter() - t0
        return spent

    def _config(self, s: Settings) -> Any:
        from graphmem.config import RetrievalConfig

        return RetrievalConfig(k1=s.k1, k2=s.k2, lam=s.lam)

    def cases(self, data: Dataset, s: Settings) -> list[tuple[str, Callable[[int], object]]]:
        from graphmem.models import MemoryKind

        cfg = self._config(s)
        kinds = [MemoryKind.PROCEDURE]
        return [
            (
                f"{self.label}: recall (phase A)",
                lambda i: self.store.recall(
                    self.namespace, data.queries[i].tolist(), s.k1, kinds=kinds, min_sim=0.0
                ),
            ),
            (
                f"{self.label}: two-phase λ={s.lam}",
                lambda i: self.memory.retrieve(self.namespace, f"q:{i}", cfg),
            ),
        ]

    def included(self, data: Dataset, s: Settings) -> list[tuple[str, Callable[[int], object]]]:
        from graphmem import GraphMemory

        if self._text_memory is None:
            embedder = IncludedEmbedder(data, common.minilm())
            self._text_memory = GraphMemory(self.store, embedder=embedder)
        cfg = self._config(s)
        mem = self._text_memory
        return [
            (
                f"{self.label}: two-phase λ={s.lam}",
                lambda i: mem.retrieve(self.namespace, data.query_texts[i], cfg),
            )
        ]


class EmbeddedSystem(GraphmemSystem):
    def __init__(self, directory: Path, data: Dataset) -> None:
        from graphmem.stores.embedded import EmbeddedStore

        super().__init__(EmbeddedStore.open(directory), "graphmem embedded", data)

    def close(self) -> None:
        self.store.close()


class Neo4jSystem(GraphmemSystem):
    group = "neo4j"

    def __init__(self, settings: Neo4jSettings, data: Dataset) -> None:
        from graphmem.stores.neo4j import Neo4jStore, cypher

        store = Neo4jStore.from_uri(
            settings.uri, settings.user, settings.password, database=settings.database
        )
        store.setup(DIM)
        store.check_dimension(DIM)
        super().__init__(store, "graphmem neo4j", data)
        self.namespace = f"bench-{uuid.uuid4().hex[:10]}"
        self.extra_namespaces: list[str] = []
        self.database = settings.database
        self.index = cypher.VECTOR_INDEX
        others = self._count("MATCH (m:Memory) RETURN count(m) AS n")
        if others:
            log.warning(
                "the Neo4j database already holds %d memories: neo4j-graphrag searches the whole "
                "index, graphmem only the bench namespace, so their results may differ",
                others,
            )
        self.foreign_memories = others

    def _count(self, query: str, **params: Any) -> int:
        records, _, _ = self.store.driver.execute_query(query, params, database_=self.database)
        return int(records[0]["n"])

    def add(self, data: Dataset, lo: int, hi: int) -> float:
        spent = super().add(data, lo, hi)
        t0 = time.perf_counter()
        self.store.driver.execute_query("CALL db.awaitIndexes(600)", database_=self.database)
        return spent + time.perf_counter() - t0

    def cases(self, data: Dataset, s: Settings) -> list[tuple[str, Callable[[int], object]]]:
        from graphmem.stores.neo4j.recall import index_candidates

        retriever = self._retriever(None)
        if self.store._index_mode(DIM) in ("search", "search-fields"):
            # In-index search's beam, sized by the database's count of memories, which the
            # store learns from its first search.
            self.store.recall(self.namespace, data.queries[0].tolist(), s.k1)
            pool = self.store.search_beam(s.k1)
        else:
            pool = index_candidates(s.k1)  # what the procedure path over-fetches
        ratio = -(-pool // s.k1)
        return [
            *super().cases(data, s),
            (
                "neo4j-graphrag VectorRetriever",
                lambda i: retriever.get_search_results(
                    query_vector=data.queries[i].tolist(), top_k=s.k1
                ),
            ),
            (
                # graphmem asks the index for more candidates than k1 (its search width on
                # 2026.01+, max(4·k1, 32) to post-filter on older servers); this is graphrag
                # with a candidate pool at least as large.
                f"neo4j-graphrag VectorRetriever, pool ≥ {pool}",
                lambda i: retriever.get_search_results(
                    query_vector=data.queries[i].tolist(), top_k=s.k1, effective_search_ratio=ratio
                ),
            ),
        ]

    def included(self, data: Dataset, s: Settings) -> list[tuple[str, Callable[[int], object]]]:
        retriever = self._retriever(graphrag_minilm())
        return [
            *super().included(data, s),
            (
                "neo4j-graphrag VectorRetriever",
                lambda i: retriever.get_search_results(query_text=data.query_texts[i], top_k=s.k1),
            ),
        ]

    def _retriever(self, embedder: Any) -> Any:
        from neo4j_graphrag.retrievers import VectorRetriever

        return VectorRetriever(
            self.store.driver, self.index, embedder=embedder, neo4j_database=self.database
        )

    def drop(self, namespace: str) -> None:
        """Delete a namespace's memories in batches (cheaper than the store's orphan search)."""
        with self.store.driver.session(database=self.database) as session:
            session.run(
                "MATCH (m:Memory {namespace: $ns}) "
                "CALL (m) { DETACH DELETE m } IN TRANSACTIONS OF 5000 ROWS",
                ns=namespace,
            ).consume()

    def close(self) -> None:
        try:
            for namespace in (self.namespace, *self.extra_namespaces):
                self.drop(namespace)
        finally:
            self.store.close()


def graphrag_minilm() -> Any:
    """MiniLM behind neo4j-graphrag's Embedder interface (imported lazily: optional)."""
    from neo4j_graphrag.embeddings.base import Embedder

    class MiniLM(Embedder):
        def embed_query(self, text: str) -> list[float]:
            return [float(x) for x in common.minilm().embed([text])[0]]

    return MiniLM()


class LangGraphSystem(System):
    label = "langgraph InMemoryStore"
    ingest_label = label
    group = "langgraph"

    def __init__(self, data: Dataset) -> None:
        from langgraph.store.memory import InMemoryStore

        def embed(texts: Sequence[str]) -> list[list[float]]:
            # Corpus texts and timed queries are lookup keys; anything else goes to MiniLM.
            out = []
            for text in texts:
                if text[:2] in ("m:", "q:"):
                    out.append(data.lookup(text).tolist())
                else:
                    out.append([float(x) for x in common.minilm().embed([text])[0]])
            return out

        self.store = InMemoryStore(index={"dims": DIM, "embed": embed, "fields": ["key"]})

    def add(self, data: Dataset, lo: int, hi: int) -> float:
        from langgraph.store.base import PutOp

        spent = 0.0
        for start in range(lo, hi, BATCH):
            ops = [
                PutOp(("bench",), f"m{i}", {"key": f"m:{i}", "task": data.texts[i]})
                for i in range(start, min(hi, start + BATCH))
            ]
            t0 = time.perf_counter()
            self.store.batch(ops)
            spent += time.perf_counter() - t0
        return spent

    def cases(self, data: Dataset, s: Settings) -> list[tuple[str, Callable[[int], object]]]:
        return [(self.label, lambda i: self.store.search(("bench",), query=f"q:{i}", limit=s.k1))]

    def included(self, data: Dataset, s: Settings) -> list[tuple[str, Callable[[int], object]]]:
        return [
            (
                self.label,
                lambda i: self.store.search(("bench",), query=data.query_texts[i], limit=s.k1),
            )
        ]
