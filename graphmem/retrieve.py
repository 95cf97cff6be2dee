"""Two-phase retrieval with learned utility (MemRL, DESIGN.md §2 "Retrieve").

Phase A recalls the ``k1`` memories most similar to the query (within the namespace, above the
similarity floor, skipping obsolete and superseded memories). Phase B ranks that candidate pool by
``score = (1-λ)·ẑ(sim) + λ·ẑ(Q)``, where ẑ is the z-score over the pool (population std; a pool
with zero spread contributes 0), and keeps the top ``k2``. Every :class:`Hit` reports its parts.

Policies: ``similarity`` embeds the query, ``keywords`` its extracted keywords (Mem^p's
AveFact key), ``random`` samples k1 live memories (seeded): their sim is reported but does not
rank them, so with λ=0 the selection is uniformly random. ε-greedy (``epsilon``) replaces the
selection, with that probability, by a random choice among the candidates (``explored=True``).
A given ``seed`` gives one random stream per GraphMemory: the same calls give the same picks.

Superseded memories: the update engineer marks a memory ``obsolete`` when something SUPERSEDES
it, and the stores' ``recall`` skips obsolete memories. Retrieval relies on that and *also* drops
candidates that have an incoming SUPERSEDES edge (one store read for the pool), so a graph
edited by hand or imported from elsewhere is still read correctly.

>>> from graphmem import GraphMemory, HashingEmbedder
>>> from graphmem.stores.embedded import EmbeddedStore
>>> mem = GraphMemory(EmbeddedStore.in_memory(), embedder=HashingEmbedder())
>>> note = mem.add_note("demo", "The spare key is under the blue flower pot.")
>>> r = retrieve(mem, "demo", "where is the spare key?", kinds=("Note",))
>>> [h.memory.id for h in r.hits] == [note.id]
True
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from weakref import WeakKeyDictionary

import numpy as np
from pydantic import BaseModel, Field, PrivateAttr

from graphmem.config import RetrievalConfig, RetrievePolicy
from graphmem.errors import ConfigError, InvalidInput
from graphmem.models import (
    MAX_TEXT_CHARS,
    AnyMemory,
    Hit,
    check_id,
    check_namespace,
    check_unicode,
)
from graphmem.stores.base import MemoryStore

if TYPE_CHECKING:
    from graphmem.memory import GraphMemory

log = logging.getLogger(__name__)

_MAX_REFILLS = 8

SCORE_DECIMALS = 9
"""Scores are compared at this precision so float noise never decides a tie (sim does)."""

_RNGS: WeakKeyDictionary[GraphMemory, dict[int, random.Random]] = WeakKeyDictionary()
"""One seeded random stream per (GraphMemory, seed): a seeded run of many retrievals is
reproducible, yet successive retrievals do not all make the same random choice."""


class Retrieval(BaseModel):
    """What one retrieval returned, and why (each hit carries its score parts)."""

    namespace: str
    query: str
    config: RetrievalConfig
    hits: list[Hit] = Field(default_factory=list)
    episode_id: str | None = Field(
        default=None, description="The episode recording this retrieval, if one was opened."
    )
    explored: bool = Field(
        default=False, description="True when ε-greedy replaced the selection at random."
    )
    _store: MemoryStore | None = PrivateAttr(default=None)

    @property
    def memories(self) -> list[AnyMemory]:
        """The retrieved memories, best first."""
        return [h.memory for h in self.hits]

    def as_prompt(self, *, header: str | None = None, max_steps: int = 50) -> str:
        """The hits as text for an agent prompt (procedures as numbered steps or script)."""
        from graphmem.prompting import format_hits

        return format_hits(
            self.hits, self._store, self.namespace, header=header, max_steps=max_steps
        )


def resolve_config(
    base: RetrievalConfig | None, default: RetrievalConfig, overrides: dict[str, Any]
) -> RetrievalConfig:
    """``base`` (or ``default``) with ``overrides`` applied and validated."""
    config = base if base is not None else default
    if not isinstance(config, RetrievalConfig):
        raise ConfigError(f"config must be a RetrievalConfig, got {type(config).__name__}")
    unknown = sorted(set(overrides) - set(RetrievalConfig.model_fields))
    if unknown:
        raise ConfigError(
            f"unknown retrieval option {unknown[0]!r}; "
            f"options are {', '.join(RetrievalConfig.model_fields)}"
        )
    if overrides:
        if isinstance(overrides.get("kinds"), str):
            overrides = {**overrides, "kinds": (overrides["kinds"],)}
        config = RetrievalConfig(**{**config.model_dump(), **overrides})
    if not config.kinds:
        raise InvalidInput("kinds must name at least one kind of memory")
    return config


def zscores(values: Sequence[float]) -> list[float]:
    """z-scores over ``values`` (population std); a pool with (near) zero spread gives zeros."""
    if not values:
        return []
    lo, hi = min(values), max(values)
    if hi - lo <= 1e-12 * max(1.0, abs(hi), abs(lo)):
        return [0.0] * len(values)
    mean = math.fsum(values) / len(values)
    std = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / len(values))
    return [(v - mean) / std for v in values]


def rank_candidates(
    candidates: Sequence[tuple[AnyMemory, float]], lam: float, k2: int, *, use_sim: bool = True
) -> list[Hit]:
    """Phase B: score a candidate pool of (memory, sim), best first, keep ``k2``.

    Ties (at :data:`SCORE_DECIMALS`) go to the higher sim, then the higher q, then the earlier
    candidate. ``use_sim=False`` (the random policy) reports sim but does not rank by it.
    """
    sims = [sim for _, sim in candidates]
    qs = [float(m.q) for m, _ in candidates]
    z_sim = zscores(sims) if use_sim else [0.0] * len(sims)
    z_q = zscores(qs)
    scored = []
    for i, ((memory, sim), zs, zq) in enumerate(zip(candidates, z_sim, z_q, strict=True)):
        score = (1.0 - lam) * zs + lam * zq
        tie_sim = sim if use_sim else 0.0
        key = (-round(score, SCORE_DECIMALS), -tie_sim, -memory.q, i)
        scored.append((key, memory, sim, zs, zq, score))
    scored.sort(key=lambda row: row[0])
    return [
        Hit(memory=memory, rank=rank, sim=sim, q=memory.q, z_sim=zs, z_q=zq, score=score)
        for rank, (_, memory, sim, zs, zq, score) in enumerate(scored[:k2])
    ]


def retrieve(
    mem: GraphMemory,
    namespace: str,
    query: str,
    config: RetrievalConfig | None = None,
    *,
    open_episode: bool = False,
    episode_id: str | None = None,
    **overrides: Any,
) -> Retrieval:
    """Two-phase retrieval; ``open_episode=True`` records it as a new Episode.

    ``episode_id`` adds this retrieval's hits to an open episode (see
    :func:`graphmem.episodes.start_episode`) instead. ``overrides`` replace fields of ``config``
    (default ``mem.config.retrieval``), e.g. ``lam=0`` or ``kinds=("Note",)``.
    """
    check_namespace(namespace)
    _check_query(query)
    cfg = resolve_config(config, mem.config.retrieval, overrides)
    if open_episode and episode_id is not None:
        raise InvalidInput("pass open_episode=True or episode_id, not both")
    if episode_id is not None:
        from graphmem.episodes import get_open_episode

        get_open_episode(mem.store, namespace, check_id(episode_id))

    rng = _rng(mem, cfg.seed)
    vector = mem.embed(_query_text(query, cfg.policy))
    if cfg.policy is RetrievePolicy.RANDOM:
        candidates = _random_candidates(mem.store, namespace, vector, cfg, rng)
    else:
        candidates = _similar_candidates(mem.store, namespace, vector, cfg)

    hits = rank_candidates(
        candidates, cfg.lam, cfg.k2, use_sim=cfg.policy is not RetrievePolicy.RANDOM
    )
    explored = False
    if cfg.epsilon > 0 and len(candidates) > 1 and rng.random() < cfg.epsilon:
        hits = _explore(candidates, cfg, rng)
        explored = True
    log.debug(
        "retrieve ns=%s query=%.60r: %d candidates, %d hits%s",
        namespace,
        query,
        len(candidates),
        len(hits),
        " (explored)" if explored else "",
    )

    result = Retrieval(namespace=namespace, query=query, config=cfg, hits=hits, explored=explored)
    result._store = mem.store
    if open_episode or episode_id is not None:
        from graphmem.episodes import record_retrieval

        result.episode_id = record_retrieval(mem.store, result, episode_id=episode_id)
    return result


# ---- phase A ---------------------------------------------------------------------------


def _check_query(query: str) -> None:
    if not isinstance(query, str):
        raise InvalidInput(f"the query must be a string, got {type(query).__name__}")
    if not query.strip():
        raise InvalidInput("the query must not be empty")
    if len(query) > MAX_TEXT_CHARS:
        raise InvalidInput(f"the query is {len(query)} characters; the limit is {MAX_TEXT_CHARS}")
    check_unicode(query, "the query")


def _query_text(query: str, policy: RetrievePolicy) -> str:
    if policy is RetrievePolicy.KEYWORDS:
        from graphmem.keywords import keywords_key_for

        return keywords_key_for(query)
    return query


def _rng(mem: GraphMemory, seed: int | None) -> random.Random:
    if seed is None:
        return random.Random()
    streams = _RNGS.setdefault(mem, {})
    if seed not in streams:
        streams[seed] = random.Random(seed)
    return streams[seed]


def _superseded(store: MemoryStore, namespace: str, memories: Sequence[AnyMemory]) -> set[str]:
    """Ids among ``memories`` that another memory SUPERSEDES (one store read for all)."""
    if not memories:
        return set()
    return store.superseded(namespace, [m.id for m in memories])


def _similar_candidates(
    store: MemoryStore, namespace: str, vector: list[float], cfg: RetrievalConfig
) -> list[tuple[AnyMemory, float]]:
    """The top-k1 live memories by similarity, best first (ties by id, for both stores)."""
    kinds = list(cfg.kinds)
    k = cfg.k1
    for _ in range(_MAX_REFILLS):
        recalled = store.recall(namespace, vector, k, kinds=kinds, min_sim=cfg.floor)
        dropped = _superseded(store, namespace, [r.memory for r in recalled])
        live = [r for r in recalled if r.memory.id not in dropped]
        # Superseded memories took places in the top k: ask for more until k1 live ones are in
        # hand or the namespace has no more.
        if len(live) >= cfg.k1 or len(recalled) < k:
            break
        k += len(dropped)
    live.sort(key=lambda r: (-r.sim, r.memory.id))
    return [(r.memory, float(r.sim)) for r in live[: cfg.k1]]


def _random_candidates(
    store: MemoryStore,
    namespace: str,
    vector: list[float],
    cfg: RetrievalConfig,
    rng: random.Random,
) -> list[tuple[AnyMemory, float]]:
    """A seeded random sample of k1 live memories of the kinds, in sampled order (Mem^p)."""
    pool = [m for m in store.iter_nodes(namespace, kinds=list(cfg.kinds)) if not m.obsolete]
    rng.shuffle(pool)
    chosen: list[AnyMemory] = []
    for memory in pool:
        if len(chosen) == cfg.k1:
            break
        if not _superseded(store, namespace, [memory]):
            chosen.append(memory)
    return [(m, _cosine(vector, m.embedding)) for m in chosen]


def _cosine(a: Sequence[float], b: Sequence[float] | None) -> float:
    if b is None or len(a) != len(b):
        return 0.0
    va, vb = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    denom = float(np.linalg.norm(va) * np.linalg.norm(vb))
    return float(va @ vb) / denom if denom > 0 else 0.0


# ---- exploration -----------------------------------------------------------------------


def _explore(
    candidates: Sequence[tuple[AnyMemory, float]],
    cfg: RetrievalConfig,
    rng: random.Random,
) -> list[Hit]:
    """ε-greedy: a random choice of k2 among the candidates, keeping their real score parts."""
    scored = {
        h.memory.id: h
        for h in rank_candidates(
            candidates,
            cfg.lam,
            len(candidates),
            use_sim=cfg.policy is not RetrievePolicy.RANDOM,
        )
    }
    picks = rng.sample([m.id for m, _ in candidates], min(cfg.k2, len(candidates)))
    return [scored[mid].model_copy(update={"rank": rank}) for rank, mid in enumerate(picks)]


__all__ = ["Retrieval", "rank_candidates", "retrieve", "zscores"]
