"""Two-phase retrieval with learned utility (MemRL, docs/design.md §2.2).

Why and how, in full: docs/design.md, "Module notes", ``graphmem.ops.retrieve``.

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
import sys
from collections.abc import Collection, Iterable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple
from weakref import WeakKeyDictionary

from pydantic import BaseModel, Field, PrivateAttr

from graphmem.config import RetrievalConfig, RetrievePolicy
from graphmem.errors import ConfigError, InvalidInput
from graphmem.models import (
    CORRECTION_SOURCE,
    MAX_TEXT_CHARS,
    AnyMemory,
    Hit,
    Namespace,
    Procedure,
    check_id,
    check_unicode,
    construct,
)
from graphmem.ops.abstention import Baseline, baseline, task_cluster, withhold
from graphmem.ops.episodes import get_open_episode, record_retrieval
from graphmem.ops.expansion import expand_candidates
from graphmem.ops.fact_updates import newer_first
from graphmem.ops.fusion import FusedPool, hybrid_candidates
from graphmem.ops.similarity import cosine
from graphmem.stores.base import MemoryStore

if TYPE_CHECKING:
    from graphmem.ops.context import MemoryContext

log = logging.getLogger(__name__)

_MAX_REFILLS = 8

SCORE_DECIMALS = 9
"""Scores are compared at this precision so float noise never decides a tie (sim does)."""

_RNGS: WeakKeyDictionary[MemoryContext, dict[int, random.Random]] = WeakKeyDictionary()
"""One seeded random stream per (GraphMemory, seed): a seeded run of many retrievals is
reproducible, yet successive retrievals do not all make the same random choice."""


class Retrieval(BaseModel):
    """What one retrieval returned, and why (each hit carries its score parts)."""

    namespace: Namespace
    query: str
    config: RetrievalConfig
    hits: list[Hit] = Field(default_factory=list)
    episode_id: str | None = Field(
        default=None, description="The episode recording this retrieval, if one was opened."
    )
    explored: bool = Field(
        default=False, description="True when ε-greedy replaced the selection at random."
    )
    withheld: list[Hit] = Field(
        default_factory=list,
        description="Abstention: candidates not handed over, each with its reason, best first.",
    )
    baseline: float | None = Field(
        default=None,
        description="Abstention: the reward expected with no memory in the query's task "
        "cluster (None: abstention off).",
    )
    baseline_episodes: int = Field(
        default=0, description="Abstention: no-memory episodes the baseline rests on."
    )
    _store: MemoryStore | None = PrivateAttr(default=None)

    @property
    def memories(self) -> list[AnyMemory]:
        """The retrieved memories, best first."""
        return [h.memory for h in self.hits]

    def as_prompt(self, *, header: str | None = None, max_steps: int = 50) -> str:
        """The hits as text for an agent prompt (procedures as numbered steps or script)."""
        from graphmem.ops.prompting import format_hits

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
        # Only the fields set: a default that yields to another setting (hybrid to expand)
        # is derived again from the new ones.
        config = RetrievalConfig(**{**config.model_dump(exclude_unset=True), **overrides})
    if not config.kinds:
        raise InvalidInput("kinds must name at least one kind of memory")
    return config


def zscores(values: Sequence[float]) -> list[float]:
    """z-scores over ``values`` (population std); a pool with (near) zero spread gives zeros.

    Never overflows and never returns NaN, whatever the values: they are divided by their
    largest magnitude before squaring (z-scores do not change under scaling), +inf counts as
    the largest float and -inf or NaN as the most negative one. An imported or hand-edited
    graph can hold any Q.
    """
    if not values:
        return []
    xs = _ordinals(values)
    scale = max(map(abs, xs))
    if scale == 0.0:
        return [0.0] * len(xs)
    ys = [x / scale for x in xs]
    spread = max(ys) - min(ys)
    # The spread in the values' own units is spread·scale; "near zero" is 1e-12 of the larger
    # of 1 and the largest magnitude, as before scaling.
    if spread * scale <= 1e-12 * max(1.0, scale):
        return [0.0] * len(xs)
    mean = math.fsum(ys) / len(ys)
    std = math.sqrt(math.fsum((y - mean) ** 2 for y in ys) / len(ys))
    if not std > 0.0:
        return [0.0] * len(xs)
    return [(y - mean) / std for y in ys]


def _ordinals(values: Iterable[float]) -> list[float]:
    """:func:`_ordinal` of each value (one sum says whether any needs it)."""
    xs = [float(v) for v in values]
    if not math.isfinite(sum(xs)):  # a NaN or an infinity among them (or a sum past range)
        xs = [_ordinal(x) for x in xs]
    return xs


def _ordinal(value: float) -> float:
    """``value`` as a finite float that keeps its order: ±inf clipped, NaN lowest."""
    x = float(value)
    if math.isnan(x):
        return -sys.float_info.max
    return min(max(x, -sys.float_info.max), sys.float_info.max)


def _q_scores(qs: Sequence[float], reward_scale: tuple[float, float] | None) -> list[float]:
    if reward_scale is None:
        return zscores(qs)
    center, half = reward_scale
    half = half if half > 0 else 1.0
    return [max(-1e6, min(1e6, (q - center) / half)) for q in qs]


class QPrior(NamedTuple):
    """What phase B takes a memory's Q to be, beyond the stored value (``RetrievalConfig.q_prior``).

    ``source``: a procedure's source episode (the reward of the trajectory it was built from)
    counts as its first use. ``pool``: the weight a Q still has on the neutral Q0 goes to the
    mean reward the pool's tried memories earned instead."""

    q0: float
    alpha: float
    source: bool
    pool: bool


def prior_q(
    qs: Sequence[float],
    uses: Sequence[int],
    sources: Sequence[float | None],
    prior: QPrior,
) -> list[float]:
    """Each Q as if its history began with its source outcome (``prior.source``), and with the
    prior moved from Q0 to the pool's mean reward (``prior.pool``).

    ``Q ← Q + α(R − Q)`` from Q0 leaves weight (1 − α)^n on Q0 after n credited uses. A source
    outcome R₀ is one more use at the start: Q + (1 − α)^n·α·(R₀ − Q0). With ``pool``, the weight
    still on Q0 goes to μ, the mean reward of the candidates with any use (each one's rewards
    as its Q implies them, weighted by uses): an untried memory is expected to do as well as
    the tried ones beside it, not as well as Q0 says.

    >>> [round(q, 3) for q in prior_q([0.5, 0.5, 0.45], [0, 0, 1], [1.0, 0.0, None],
    ...                                QPrior(0.5, 0.1, source=True, pool=False))]
    [0.55, 0.45, 0.45]
    """
    eff: list[float] = []
    keep: list[float] = []
    count: list[int] = []
    for q, n, r in zip(qs, uses, sources, strict=True):
        k = (1.0 - prior.alpha) ** n
        if prior.source and r is not None:
            q, k, n = q + k * prior.alpha * (r - prior.q0), k * (1.0 - prior.alpha), n + 1
        eff.append(q)
        keep.append(k)
        count.append(n)
    tried = [i for i, n in enumerate(count) if n > 0 and keep[i] < 1.0]
    if not prior.pool or not tried:
        return eff
    total = sum(count[i] for i in tried)
    mu = math.fsum(count[i] * (eff[i] - keep[i] * prior.q0) / (1.0 - keep[i]) for i in tried)
    mu /= total
    return [q + k * (mu - prior.q0) for q, k in zip(eff, keep, strict=True)]


def _source_reward(memory: AnyMemory) -> float | None:
    """The reward of the episode a procedure was built from; None for other kinds, and for
    ``update``'s corrections (``source="adjustment"``): their steps were never played as they
    stand, and the reward they carry is another episode's (a reference's, the failed one's) or
    none at all (0.0 for a model-written one), not an outcome of these steps."""
    if not isinstance(memory, Procedure) or memory.source == CORRECTION_SOURCE:
        return None
    return memory.reward


def rank_candidates(
    candidates: Sequence[tuple[AnyMemory, float]],
    lam: float,
    k2: int,
    *,
    use_sim: bool = True,
    utility_kinds: Collection[str] | None = None,
    q_reward_scale: tuple[float, float] | None = None,
    q_prior: QPrior | None = None,
    relevance: Sequence[float] | None = None,
) -> list[Hit]:
    """Phase B: score a candidate pool of (memory, sim), best first, keep ``k2``.

    Ties (at :data:`SCORE_DECIMALS`) go to the higher sim, then the higher q, then the earlier
    candidate. ``use_sim=False`` (the random policy) reports sim but does not rank by it.
    Any stored q ranks without error (:func:`zscores`). ``utility_kinds``: the kinds whose Q
    counts (z-scored among the candidates of those kinds); a memory of another kind gets
    ẑ(Q) = 0, so it ranks by similarity alone. None: every kind. ``q_reward_scale``
    (center, half-width): Q is measured as (Q − center) / half-width instead of z-scored over
    the pool (the ``reward`` setting of ``RetrievalConfig.q_scale``). ``q_prior``: Q as
    :func:`prior_q` values it (``RetrievalConfig.q_prior``); hits still report the stored Q.
    """
    sims = _ordinals([sim for _, sim in candidates])
    qs = _ordinals([m.q for m, _ in candidates])
    # Hybrid recall ranks by the fused score where it would by similarity (ops.fusion).
    z_sim = zscores(sims if relevance is None else relevance) if use_sim else [0.0] * len(sims)
    kinds = None if utility_kinds is None else {str(k) for k in utility_kinds}
    valued = [i for i, (m, _) in enumerate(candidates) if kinds is None or str(m.kind) in kinds]
    valued_qs = [qs[i] for i in valued]
    if q_prior is not None:
        valued_qs = prior_q(
            valued_qs,
            [max(0, candidates[i][0].uses) for i in valued],
            [_source_reward(candidates[i][0]) for i in valued],
            q_prior,
        )
    z_q = [0.0] * len(qs)
    for i, z in zip(valued, _q_scores(valued_qs, q_reward_scale), strict=True):
        z_q[i] = z
    scored = []
    for i, ((memory, sim), s, q, zs, zq) in enumerate(
        zip(candidates, sims, qs, z_sim, z_q, strict=True)
    ):
        score = (1.0 - lam) * zs + lam * zq
        tie_sim = s if use_sim else 0.0
        key = (-round(score, SCORE_DECIMALS), -tie_sim, -q, i)
        scored.append((key, memory, sim, zs, zq, score))
    scored.sort(key=lambda row: row[0])
    # Built without validation: the memories are the store's (validated), the rest our floats.
    return [
        construct(
            Hit,
            {
                "memory": memory,
                "rank": rank,
                "sim": float(sim),
                "q": memory.q,
                "z_sim": zs,
                "z_q": zq,
                "score": score,
                "vector_rank": None,
                "text_rank": None,
                "fused": None,
                "expected": None,
                "withheld": None,
                "newer_than": None,
            },
        )
        for rank, (_, memory, sim, zs, zq, score) in enumerate(scored[:k2])
    ]


def _q_prior(mem: MemoryContext, cfg: RetrievalConfig) -> QPrior | None:
    """The :class:`QPrior` of ``cfg.q_prior``; None for 'q0' (the stored Q as it is)."""
    if cfg.q_prior == "q0":
        return None
    c = mem.config
    return QPrior(c.q0, c.alpha, source="source" in cfg.q_prior, pool="pool" in cfg.q_prior)


def _reward_scale(mem: MemoryContext, cfg: RetrievalConfig) -> tuple[float, float] | None:
    """(Q0, half the success−failure reward gap) for ``q_scale='reward'``; None for 'pool'."""
    if cfg.q_scale != "reward":
        return None
    c = mem.config
    return c.q0, abs(c.success_reward - c.failure_reward) / 2


def retrieve(
    mem: MemoryContext,
    namespace: Namespace,
    query: str,
    config: RetrievalConfig | None = None,
    *,
    open_episode: bool = False,
    episode_id: str | None = None,
    **overrides: Any,
) -> Retrieval:
    """Two-phase retrieval; ``open_episode=True`` records it as a new Episode.

    ``episode_id`` adds this retrieval's hits to an open episode (see
    :func:`graphmem.ops.episodes.start_episode`) instead. ``overrides`` replace fields of ``config``
    (default ``mem.config.retrieval``), e.g. ``lam=0`` or ``kinds=("Note",)``.
    """
    _check_query(query)
    cfg = resolve_config(config, mem.config.retrieval, overrides)
    if open_episode and episode_id is not None:
        raise InvalidInput("pass open_episode=True or episode_id, not both")
    if episode_id is not None:
        get_open_episode(mem.store, namespace, check_id(episode_id))

    # A random stream only where something draws from it (os.urandom costs ~8 µs a retrieve).
    draws = cfg.policy is RetrievePolicy.RANDOM or cfg.epsilon > 0
    rng = _rng(mem, cfg.seed) if draws else None
    vector = mem.embed(_query_text(query, cfg.policy), namespace=namespace)
    pool: FusedPool | None = None  # hybrid phase A's (ops.fusion)
    if rng is not None and cfg.policy is RetrievePolicy.RANDOM:
        candidates = _random_candidates(mem.store, namespace, vector, cfg, rng)
    elif cfg.hybrid:
        pool = hybrid_candidates(mem.store, namespace, query, vector, cfg, _similar_candidates)
        candidates = pool.candidates
    else:
        candidates = _similar_candidates(mem.store, namespace, vector, cfg)

    # Abstention judges the whole ranked pool: a withheld hit's place goes to the next one.
    judge = (
        (cfg.abstain or cfg.choose_kinds)
        and cfg.policy is not RetrievePolicy.RANDOM
        and bool(candidates)
    )
    # The graph extends the similarity pool (not a random sample, not a fused hybrid pool).
    expand = cfg.expand != "off" and pool is None and cfg.policy is not RetrievePolicy.RANDOM
    # The query's task cluster, recalled once for abstention's baseline and graph expansion's
    # 'tasks' (expand='links' alone does not read it).
    by_task = expand and cfg.expand in ("tasks", "links+tasks")
    cluster = task_cluster(mem.store, namespace, vector, cfg) if judge or by_task else []
    if expand:
        candidates = expand_candidates(mem.store, namespace, vector, candidates, cfg, cluster)

    scale, prior = _reward_scale(mem, cfg), _q_prior(mem, cfg)
    hits = rank_candidates(
        candidates,
        cfg.lam,
        len(candidates) if judge or cfg.max_tokens is not None else cfg.k2,
        use_sim=cfg.policy is not RetrievePolicy.RANDOM,
        utility_kinds=cfg.utility_kinds,
        q_reward_scale=scale,
        q_prior=prior,
        relevance=None if pool is None else pool.fused,
    )
    if pool is not None:
        hits = pool.annotate(hits)
    updates = mem.config.fact_updates
    if updates.enabled and cfg.policy is not RetrievePolicy.RANDOM:
        hits = newer_first(mem.store, namespace, hits, vector, cfg.k2, updates.rank_margin)
    withheld: list[Hit] = []
    base: Baseline | None = None
    if judge:
        base = baseline(mem, cluster)
        # A probe hands nothing over so that the episode's finish teaches the baseline: only a
        # retrieval that is part of an episode can teach it.
        teaches = open_episode or episode_id is not None
        hits, withheld = withhold(mem, hits, base, cfg, teaches=teaches)
    if cfg.max_tokens is not None:
        hits, over = within_tokens(hits, mem.store, namespace, cfg.max_tokens, cfg.k2)
        withheld += over
    hits = hits[: cfg.k2]
    explored = False
    if rng is not None and cfg.epsilon > 0 and len(candidates) > 1 and rng.random() < cfg.epsilon:
        hits = _explore(candidates, cfg, rng, scale, prior)
        explored = True
    log.debug(
        "retrieve ns=%s query=%.60r: %d candidates, %d hits%s",
        namespace,
        query,
        len(candidates),
        len(hits),
        " (explored)" if explored else "",
    )

    # Built without validation: namespace, query and config were checked above.
    result = construct(
        Retrieval,
        {
            "namespace": namespace,
            "query": query,
            "config": cfg,
            "hits": hits,
            "episode_id": None,
            "explored": explored,
            "withheld": withheld,
            "baseline": None if base is None else base.value,
            "baseline_episodes": 0 if base is None else base.episodes,
        },
        ("namespace", "query", "config", "hits", "explored", "withheld", "baseline"),
        private={"_store": mem.store},
    )
    if open_episode or episode_id is not None:
        result.episode_id = record_retrieval(mem.store, result, episode_id=episode_id)
    return result


def within_tokens(
    hits: Sequence[Hit], store: MemoryStore, namespace: Namespace, budget: int, k: int
) -> tuple[list[Hit], list[Hit]]:
    """At most ``k`` of the ranked ``hits`` whose prompt text fits a token budget, best first
    (about four characters a token, as :func:`graphmem.ops.prompting.format_memory` writes
    it; ranks renumbered), and those passed over for it (withheld, with the reason)."""
    from graphmem.ops.prompting import format_memory

    kept: list[Hit] = []
    over: list[Hit] = []
    used = 0
    for hit in hits:
        if len(kept) == k:
            break
        text = "\n".join(format_memory(hit.memory, store, namespace))
        cost = 1 + len(text) // 4
        if used + cost <= budget:
            used += cost
            kept.append(hit.model_copy(update={"rank": len(kept)}))
        else:
            over.append(
                hit.model_copy(
                    update={"withheld": f"token budget: {cost} tokens, {budget - used} left"}
                )
            )
    return kept, over


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


def _rng(mem: MemoryContext, seed: int | None) -> random.Random:
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
        # Stores that flag superseded memories in recall (Neo4j) spare the second round trip.
        dropped = {r.memory.id for r in recalled if r.superseded}
        dropped |= _superseded(
            store, namespace, [r.memory for r in recalled if r.superseded is None]
        )
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
    return [(m, cosine(vector, m.embedding)) for m in chosen]


# ---- exploration -----------------------------------------------------------------------


def _explore(
    candidates: Sequence[tuple[AnyMemory, float]],
    cfg: RetrievalConfig,
    rng: random.Random,
    scale: tuple[float, float] | None = None,
    prior: QPrior | None = None,
) -> list[Hit]:
    """ε-greedy: a random choice of k2 among the candidates, keeping their real score parts."""
    scored = {
        h.memory.id: h
        for h in rank_candidates(
            candidates,
            cfg.lam,
            len(candidates),
            use_sim=cfg.policy is not RetrievePolicy.RANDOM,
            utility_kinds=cfg.utility_kinds,
            q_reward_scale=scale,
            q_prior=prior,
        )
    }
    picks = rng.sample([m.id for m, _ in candidates], min(cfg.k2, len(candidates)))
    return [scored[mid].model_copy(update={"rank": rank}) for rank, mid in enumerate(picks)]


__all__ = ["QPrior", "Retrieval", "prior_q", "rank_candidates", "retrieve", "zscores"]
