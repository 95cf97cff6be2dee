"""Abstention: a memory reaches the agent only when it is expected to beat acting without one.

``RetrievalConfig.k2`` is a maximum. After phase B ranks the candidates, each candidate whose
learned utility is valued (``utility_kinds``) is compared with the *baseline* of the query's
task cluster: how episodes like this one end when no memory is credited. Candidates expected to
do worse are withheld and reported (``Retrieval.withheld``, each with its reason). The why and
the measured effect are in docs/design.md ("Abstention").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

from graphmem.models import (
    CORRECTION_SOURCE,
    AnyMemory,
    Hit,
    KeyMode,
    MemoryKind,
    Namespace,
    Procedure,
    Task,
    content_hash,
)

if TYPE_CHECKING:
    from graphmem.config import RetrievalConfig
    from graphmem.ops.context import MemoryContext
    from graphmem.stores.base import MemoryStore, Recall


_TIE = 1e-9
"""Expectations within this of the baseline tie with it (Q's rounding must not decide)."""


class Baseline(NamedTuple):
    """What acting without memory is expected to earn in a task cluster."""

    value: float
    """Mean reward of the cluster's episodes that no memory was credited for, shrunk towards
    Q0 with the weight of one episode (Q0 when there are none)."""
    episodes: int
    """How many such episodes the estimate rests on."""
    tasks: int
    """How many Task nodes (the cluster) were pooled."""


class Expectation(NamedTuple):
    """A candidate's expected reward when it is used, and the evidence behind it."""

    value: float
    evidence: float
    """Credited uses behind it, plus the pooled prior's weight."""


def task_for(mem: MemoryContext, namespace: Namespace, task_text: str) -> Task:
    """The Task node of ``task_text`` (the one ``build`` made or would make), created if none."""
    store = mem.store
    for mode in (KeyMode.QUERY, KeyMode.KEYWORDS):
        found = store.find_by_hash(
            namespace, MemoryKind.TASK, content_hash("task", mode.value, task_text)
        )
        if isinstance(found, Task):
            return found
    task = Task(
        namespace=namespace,
        text=task_text,
        key=task_text,
        key_mode=KeyMode.QUERY,
        source="baseline",
        q=mem.config.q0,
        content_hash=content_hash("task", KeyMode.QUERY.value, task_text),
        embedding=mem.embed(task_text, namespace=namespace),
    )
    store.upsert([task])
    return task


def record_baseline(
    mem: MemoryContext, namespace: Namespace, task_text: str, reward: float, *, success: bool
) -> Task:
    """Count one episode of ``task_text`` that no memory was credited for: its Task's Q, uses
    and successes are the no-memory arm of the task (``Q ← Q + α(R − Q)``, as for memories).

    ``finish_episode`` calls it when an episode credits nothing; an agent that knows how it
    does without memory may report such episodes itself (``GraphMemory.report_baseline``).
    """
    task = task_for(mem, namespace, task_text)
    mem.store.update_utility(namespace, [task.id], reward, mem.config.alpha, success=success)
    return task


def implied_mean(q: float, updates: int, q0: float, alpha: float) -> float | None:
    """The mean reward that moved Q from Q0 to ``q`` over ``updates`` rewards (each weighted as
    ``Q ← Q + α(R − Q)`` weighs it); None when no reward moved it.

    >>> round(implied_mean(0.55, 1, 0.5, 0.1), 6)
    1.0
    """
    keep = (1.0 - alpha) ** max(0, updates)
    if updates <= 0 or keep >= 1.0:
        return None
    return (q - keep * q0) / (1.0 - keep)


def task_cluster(
    store: MemoryStore, namespace: str, vector: Sequence[float], cfg: RetrievalConfig
) -> list[Recall]:
    """The query's task cluster: the ``cluster_k`` Task nodes nearest ``vector`` with
    similarity at least ``cluster_sim`` (abstention's baseline and graph expansion share it)."""
    return store.recall(
        namespace, list(vector), cfg.cluster_k, kinds=[MemoryKind.TASK], min_sim=cfg.cluster_sim
    )


def baseline(mem: MemoryContext, recalled: Sequence[Recall]) -> Baseline:
    """The baseline of a task cluster (:func:`task_cluster`): its Task nodes' no-memory
    episodes pooled."""
    c = mem.config
    total = weight = 0.0
    episodes = 0
    for r in recalled:
        task = r.memory
        mean = implied_mean(task.q, task.q_updates, c.q0, c.alpha)
        if mean is None or not math.isfinite(mean):
            continue
        total += task.q_updates * mean
        weight += task.q_updates
        episodes += task.uses
    # Shrunk towards Q0 with the weight of one episode, as an untried memory is: one lucky
    # game without memory does not make the baseline a certainty.
    value = (total + c.q0) / (weight + 1.0)
    return Baseline(value, episodes, len(recalled))


def expectations(
    mem: MemoryContext, candidates: Sequence[AnyMemory], *, source: bool, prior_weight: float
) -> list[Expectation]:
    """Each candidate's expected reward when used: its own credited rewards (and, with
    ``source``, a procedure's source outcome as one more), shrunk towards the mean of the
    other candidates' evidence with weight ``min(prior_weight, their uses)`` (the candidates
    are the query's neighbours, so an untried one is expected to do as its tried look-alikes
    did); towards Q0 with weight 1 when the others have none.

    >>> from types import SimpleNamespace as S
    >>> from graphmem.config import MemoryConfig
    >>> ctx = S(config=MemoryConfig())
    >>> tried = S(q=0.55, q_updates=1, reward=0.0)  # one success
    >>> untried = S(q=0.5, q_updates=0, reward=0.0)
    >>> [round(e.value, 3) for e in expectations(ctx, [tried, untried], source=False,
    ...                                          prior_weight=10)]
    [0.75, 1.0]
    """
    c = mem.config
    own = [_credited(mem, m, source=source) for m in candidates]
    pooled_t, pooled_n = sum(t for t, _ in own), sum(n for _, n in own)
    out: list[Expectation] = []
    for t, n in own:
        others_n = pooled_n - n  # leave-one-out: the prior is the neighbours' evidence
        if others_n > 1e-9:
            mu, strength = (pooled_t - t) / others_n, min(prior_weight, others_n)
        else:
            mu, strength = c.q0, 1.0
        out.append(Expectation((t + strength * mu) / (n + strength), n + strength))
    return out


def _credited(mem: MemoryContext, m: AnyMemory, *, source: bool) -> tuple[float, float]:
    """A memory's credited rewards as (sum, count): the mean its Q implies over its updates,
    and with ``source`` a procedure's source outcome as one more (not a correction's)."""
    c = mem.config
    mean = implied_mean(m.q, m.q_updates, c.q0, c.alpha)
    total, n = (0.0, 0.0) if mean is None else (mean * m.q_updates, float(m.q_updates))
    if source and isinstance(m, Procedure) and m.source != CORRECTION_SOURCE:
        total, n = total + m.reward, n + 1.0
    return total, n


def kind_expectations(
    mem: MemoryContext, candidates: Sequence[AnyMemory], *, source: bool, top: int
) -> list[Expectation]:
    """Each candidate's kind judged as a whole (``RetrievalConfig.choose_kinds``): the
    credited rewards of the kind's first ``top`` candidates (best ranked first: what the kind
    would hand over) pooled — the candidates are the query's neighbours, so this is what that
    kind of memory earned on tasks like this one — shrunk towards Q0 with the weight of one use.
    Every candidate of a kind gets its kind's value. The kind's lower-ranked candidates do not
    count: a kind whose best memories win is not withheld for the losers ranked below them.

    >>> from types import SimpleNamespace as S
    >>> from graphmem.config import MemoryConfig
    >>> ctx = S(config=MemoryConfig())
    >>> won = S(kind="Note", q=0.55, q_updates=1, reward=0.0)
    >>> lost = S(kind="Procedure", q=0.45, q_updates=1, reward=0.0)
    >>> [round(e.value, 3) for e in kind_expectations(ctx, [won, lost, won], source=False, top=5)]
    [0.833, 0.25, 0.833]
    >>> [round(e.value, 3) for e in kind_expectations(ctx, [won, lost], source=False, top=1)]
    [0.75, 0.25]
    """
    c = mem.config
    pooled: dict[str, tuple[float, float]] = {}
    taken: dict[str, int] = {}
    for m in candidates:
        if taken.get(str(m.kind), 0) >= top:
            continue
        taken[str(m.kind)] = taken.get(str(m.kind), 0) + 1
        total, n = _credited(mem, m, source=source)
        t0, n0 = pooled.get(str(m.kind), (0.0, 0.0))
        pooled[str(m.kind)] = (t0 + total, n0 + n)
    out: list[Expectation] = []
    for m in candidates:
        t, n = pooled[str(m.kind)]
        out.append(Expectation((t + c.q0) / (n + 1.0), n + 1.0))
    return out


def _below(
    mem: MemoryContext, e: Expectation, base: Baseline, base_se: float, cfg: RetrievalConfig
) -> bool:
    """Whether ``e`` plus ``abstain_z`` standard errors stays below the baseline by more than
    ``abstain_margin`` (and float noise: a tie is handed over)."""
    se = math.hypot(spread(mem, e.value) / math.sqrt(e.evidence + 1), base_se)
    return e.value + cfg.abstain_z * se < base.value - cfg.abstain_margin - _TIE


def spread(mem: MemoryContext, value: float) -> float:
    """The standard deviation of one reward whose mean is ``value``, on the success/failure
    scale (a Bernoulli bound, at least 0.1 of the scale)."""
    c = mem.config
    lo, hi = sorted((c.failure_reward, c.success_reward))
    width = hi - lo if hi > lo else 1.0
    p = min(1.0, max(0.0, (value - lo) / width))
    return width * math.sqrt(max(p * (1.0 - p), 0.01))


def withhold(
    mem: MemoryContext,
    hits: Sequence[Hit],
    base: Baseline,
    cfg: RetrievalConfig,
    *,
    teaches: bool = True,
) -> tuple[list[Hit], list[Hit]]:
    """Split ranked ``hits`` into those handed over (ranks renumbered) and those withheld
    (``withheld`` set to the reason), each with its ``expected`` set; the hits are changed in
    place. Only kinds in ``cfg.utility_kinds`` can be withheld.

    Nothing is withheld while the cluster has no no-memory episode (nothing to compare with;
    an agent that never reports outcomes gets plain two-phase retrieval). Once the candidates
    hold ``cfg.probe_after`` credited uses (memory is being learned here) but the cluster fewer
    than ``cfg.baseline_probes`` no-memory episodes, every valued hit is withheld: the episode
    is a probe that teaches the baseline — only where it can (``teaches``: the retrieval is
    part of an episode, whose finish counts; a look outside one never probes). Otherwise a hit
    is withheld when its
    expectation plus ``cfg.abstain_z`` standard errors (its own and the baseline's) stays
    below the baseline by more than ``cfg.abstain_margin``.
    """
    kinds = {str(k) for k in cfg.utility_kinds}
    valued = [i for i, h in enumerate(hits) if str(h.memory.kind) in kinds]
    if not valued:
        return list(hits), []
    memories = [hits[i].memory for i in valued]
    source = "source" in cfg.q_prior
    if cfg.abstain:
        exp = expectations(mem, memories, source=source, prior_weight=cfg.abstain_prior)
    else:  # choose_kinds alone: each kind judged as a whole
        exp = kind_expectations(mem, memories, source=source, top=cfg.k2)
    # Memory is being learned here once the candidates hold enough credited uses; then a
    # cluster with too few no-memory episodes is probed. Without a no-memory episode nothing
    # is judged: there is nothing to compare with.
    credited = sum(hits[i].memory.q_updates for i in valued)
    probing = teaches and credited >= cfg.probe_after and base.episodes < cfg.baseline_probes
    judged = base.episodes > 0
    base_se = spread(mem, base.value) / math.sqrt(base.episodes + 1)
    reasons: dict[int, str] = {}
    expected: dict[int, float] = {}
    for i, e in zip(valued, exp, strict=True):
        expected[i] = e.value
        if probing:
            reasons[i] = (
                f"probe: the baseline rests on {base.episodes} no-memory episodes "
                f"(fewer than {cfg.baseline_probes})"
            )
            continue
        if not judged or not cfg.abstain:  # choose_kinds alone judges kinds, below
            continue
        if _below(mem, e, base, base_se, cfg):
            reasons[i] = (
                f"expected {e.value:.3f} (evidence {e.evidence:.1f}) is below the baseline "
                f"{base.value:.3f} ({base.episodes} no-memory episodes)"
            )
    # Per-memory abstention, when on, is the finer judgement: it replaces the kind's.
    if cfg.choose_kinds and not cfg.abstain and judged and not probing:
        by_kind = kind_expectations(mem, memories, source=source, top=cfg.k2)
        for i, e in zip(valued, by_kind, strict=True):
            if i not in reasons and _below(mem, e, base, base_se, cfg):
                reasons[i] = (
                    f"kind {hits[i].memory.kind}: its candidates here are expected to earn "
                    f"{e.value:.3f} (evidence {e.evidence:.1f}), below the baseline "
                    f"{base.value:.3f} ({base.episodes} no-memory episodes)"
                )
    kept: list[Hit] = []
    held: list[Hit] = []
    for i, hit in enumerate(hits):  # the hits are this retrieval's own: set in place
        hit.expected = expected.get(i)
        if i in reasons:
            hit.withheld = reasons[i]
            held.append(hit)
        else:
            hit.rank = len(kept)
            kept.append(hit)
    return kept, held


__all__ = [
    "Baseline",
    "Expectation",
    "baseline",
    "expectations",
    "implied_mean",
    "kind_expectations",
    "record_baseline",
    "task_for",
    "withhold",
]
