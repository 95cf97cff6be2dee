"""Retention: a capacity per namespace, and what is evicted when it is full.

:class:`~graphmem.config.RetentionConfig` caps the live memories a namespace holds (in all, and
per kind). When a write leaves more, :func:`enforce_capacity` evicts the surplus, lowest ranked
first by the configured policy, and archives it (``obsolete`` with an ``obsolete_reason`` that
starts ``"evicted: capacity"``: kept in the graph with its edges and Q, out of recall,
:func:`~graphmem.ops.obsolescence.restore` brings it back) or, only when configured, deletes it.

What counts: live (not obsolete) memories of ``RetentionConfig.kinds`` that recall can return,
that is, that carry an embedding. A proceduralized build is one such memory (its script
procedure) with parts: the trajectory procedure it was DISTILLED_FROM and that one's steps.
The parts go with it (archived too, or deleted, the steps as the orphans they become).
Episodes, steps and tasks are never counted; a Task is deleted only in ``delete`` mode, once
no procedure SOLVED_BY it is left. In ``delete`` mode a memory an open episode was offered stays
until that episode finishes (the next in the order goes instead): its credit is still to come,
and an episode that lost every memory it was offered would count as one played without memory.

Policies (docs/design.md, Retention, says why utility ranks the way it does):

- ``utility``: the lowest expected reward: Q, with a procedure's source game counted as its
  first use (as retrieval's default ``q_prior`` does); ``Q ← Q + α(R − Q)`` from Q0 keeps it
  near Q0 while uses are few, so little evidence moves it little. ``confidence`` > 0 ranks by
  a lower confidence bound instead (Q less that many reward half-ranges over sqrt(1 + uses):
  of two memories with the same Q the less tried goes first); the default 0 was chosen on the
  dev range. Memories written fewer than ``grace_episodes`` episodes ago go only when nothing
  older is left.
- ``recency``: a forgetting curve: the largest time since last use (``updated_at``, which every
  credited use moves) over 1 + uses goes first: old and seldom used.
- ``lru``: the oldest ``updated_at`` (last credited use or change) first.
- ``fifo``: the oldest ``created_at`` first.
- ``random``: a pseudo-random order fixed by ``seed`` and the id (two processes agree on it).

Ties go to the older memory, then the smaller id. The order never depends on which process
computes it, so two processes enforcing at once choose the same victims and a victim archived
twice is archived once; each evicts at most what it saw above capacity. Written only on the
:class:`~graphmem.stores.base.MemoryStore` primitives (iter_nodes, edges, patch, delete), so
every store has the same semantics.

>>> from graphmem import GraphMemory, HashingEmbedder
>>> from graphmem.config import MemoryConfig, RetentionConfig
>>> from graphmem.stores.embedded import EmbeddedStore
>>> mem = GraphMemory(EmbeddedStore.in_memory(), embedder=HashingEmbedder(64),
...                   config=MemoryConfig(retention=RetentionConfig(max_memories=2)))
>>> for text in ("first note", "second note", "third note"):
...     _ = mem.add_note("demo", text)
>>> sorted(m.content for m in mem.store.iter_nodes("demo") if not m.obsolete)
['second note', 'third note']
"""

from __future__ import annotations

import hashlib
import logging
import math
from bisect import bisect_right
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from graphmem.config import MemoryConfig, RetentionConfig
from graphmem.errors import MemoryNotFound
from graphmem.models import (
    CORRECTION_SOURCE,
    AnyMemory,
    EdgeKind,
    Episode,
    EpisodeStatus,
    MemoryKind,
    Namespace,
    Procedure,
    utcnow,
)

if TYPE_CHECKING:
    from graphmem.ops.context import MemoryContext
    from graphmem.stores.base import MemoryStore

log = logging.getLogger(__name__)

EVICTED = "evicted: capacity"
"""Prefix of ``obsolete_reason`` for a memory retention archived."""


class Eviction(BaseModel):
    """One memory evicted for capacity."""

    memory_id: str
    kind: str
    q: float
    uses: int
    score: float = Field(description="Its rank under the policy (lower went first).")
    reason: str = Field(description="The obsolete_reason written (archive), or why deleted.")
    parts: list[str] = Field(default_factory=list, description="Parts that went with it.")
    deleted: list[str] = Field(default_factory=list, description="Ids deleted (delete mode).")


class RetentionResult(BaseModel):
    """What one enforcement did in a namespace."""

    namespace: str
    live_before: int = Field(description="Live memories counted before.")
    live_after: int = Field(description="Live memories counted after.")
    evicted: list[Eviction] = Field(default_factory=list)


class CapacityProblem(BaseModel):
    """A namespace over its capacity, or an eviction left half done."""

    namespace: str
    problem: str


def is_evicted(memory: AnyMemory) -> bool:
    """Whether ``memory`` was archived by retention (its reason says so)."""
    return (memory.obsolete_reason or "").startswith(EVICTED)


def live_units(
    store: MemoryStore, namespace: Namespace, kinds: Sequence[MemoryKind]
) -> list[AnyMemory]:
    """The memories that count against a capacity: live, of ``kinds``, recallable (embedded)."""
    return [
        m
        for m in store.iter_nodes(namespace, kinds=list(kinds))
        if not m.obsolete and m.embedding is not None
    ]


def _source_reward(memory: AnyMemory) -> float | None:
    """The reward of the game a procedure was built from (None for corrections and others)."""
    if not isinstance(memory, Procedure) or memory.source == CORRECTION_SOURCE:
        return None
    return memory.reward


def utility_bound(memory: AnyMemory, config: MemoryConfig, confidence: float) -> float:
    """What ``memory`` is expected to earn when handed over, less ``confidence`` times its
    uncertainty (a lower confidence bound; ``confidence=0``: the expectation).

    Q is ``Q ← Q + α(R − Q)`` from Q0; a procedure's source game counts as one more use at the
    start (its Q as retrieval's ``q_prior='source'`` reads it). The bound subtracts
    ``confidence`` reward half-ranges over sqrt(1 + n), n the uses counted.

    >>> from graphmem.models import Note
    >>> cfg = MemoryConfig()
    >>> tried = Note(namespace="n", content="x", q=0.5, uses=8)
    >>> new = Note(namespace="n", content="y", q=0.5, uses=0)
    >>> utility_bound(tried, cfg, 1.0) > utility_bound(new, cfg, 1.0)
    True
    """
    q, n = memory.q, memory.uses
    if not math.isfinite(q):
        return -math.inf
    source = _source_reward(memory)
    if source is not None:
        q += (1.0 - config.alpha) ** n * config.alpha * (source - config.q0)
        n += 1
    half = abs(config.success_reward - config.failure_reward) / 2 or 1.0
    return q - confidence * half / math.sqrt(1 + n)


def _random_key(seed: int, memory: AnyMemory) -> float:
    digest = hashlib.sha256(f"{seed}\x1f{memory.namespace}\x1f{memory.id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def _seconds(t: datetime) -> float:
    return t.timestamp()


def eviction_order(
    units: Sequence[AnyMemory],
    retention: RetentionConfig,
    config: MemoryConfig,
    *,
    episode_times: Sequence[datetime] = (),
    now: datetime | None = None,
) -> list[tuple[AnyMemory, float]]:
    """``units`` in the order they are evicted (first goes first), each with its score.

    ``episode_times``: when the namespace's episodes started (``utility``'s grace: a memory
    fewer than ``grace_episodes`` of them are younger than stays while anything older is left).
    """
    now = now if now is not None else utcnow()
    policy = retention.policy
    starts = sorted(_seconds(t) for t in episode_times)

    def score(m: AnyMemory) -> float:
        if policy == "utility":
            return utility_bound(m, config, retention.confidence)
        if policy == "recency":  # weakest memory trace first: long unused, seldom used
            return -max(0.0, _seconds(now) - _seconds(m.updated_at)) / (1 + m.uses)
        if policy == "lru":
            return _seconds(m.updated_at)
        if policy == "fifo":
            return _seconds(m.created_at)
        return _random_key(retention.seed, m)

    def young(m: AnyMemory) -> bool:
        if policy != "utility" or retention.grace_episodes == 0:
            return False
        since = len(starts) - bisect_right(starts, _seconds(m.created_at))
        return since < retention.grace_episodes

    scored = [(m, score(m)) for m in units]
    scored.sort(key=lambda ms: (young(ms[0]), ms[1], _seconds(ms[0].created_at), ms[0].id))
    return scored


def plan_evictions(
    units: Sequence[AnyMemory],
    retention: RetentionConfig,
    config: MemoryConfig,
    *,
    episode_times: Sequence[datetime] = (),
    now: datetime | None = None,
    spare: Callable[[AnyMemory], bool] | None = None,
) -> list[tuple[AnyMemory, float]]:
    """The memories to evict so that every cap holds: per kind first, then the total.

    ``spare``: a memory it says yes to is not evicted now (it still counts towards the caps);
    the next in the order goes in its place. Asked lazily, of the candidates only."""
    order = eviction_order(units, retention, config, episode_times=episode_times, now=now)
    spared: dict[str, bool] = {}

    def take(candidates: list[tuple[AnyMemory, float]], n: int) -> list[tuple[AnyMemory, float]]:
        out: list[tuple[AnyMemory, float]] = []
        for m, s in candidates:
            if len(out) >= n:
                break
            if spare is not None and spared.setdefault(m.id, spare(m)):
                continue
            out.append((m, s))
        return out

    gone: set[str] = set()
    out: list[tuple[AnyMemory, float]] = []
    for kind, cap in retention.max_per_kind.items():
        of_kind = [(m, s) for m, s in order if m.kind == kind]
        for m, s in take(of_kind, len(of_kind) - cap):
            gone.add(m.id)
            out.append((m, s))
    if retention.max_memories is not None:
        left = [(m, s) for m, s in order if m.id not in gone]
        out += take(left, len(left) - retention.max_memories)
    return out


def held_by_open_episode(store: MemoryStore, namespace: Namespace, memory: AnyMemory) -> bool:
    """Whether an episode still open was offered ``memory`` (its credit is still to come)."""
    offers = store.edges(namespace, memory.id, kinds=[EdgeKind.RETRIEVED], direction="in")
    if not offers:
        return False
    episodes = store.get_many(namespace, list(dict.fromkeys(e.src for e in offers)))
    return any(isinstance(e, Episode) and e.status is EpisodeStatus.OPEN for e in episodes)


def over_capacity(units: Sequence[AnyMemory], retention: RetentionConfig) -> bool:
    if retention.max_memories is not None and len(units) > retention.max_memories:
        return True
    return any(
        sum(1 for m in units if m.kind == kind) > cap
        for kind, cap in retention.max_per_kind.items()
    )


def _reason(retention: RetentionConfig, memory: AnyMemory, score: float) -> str:
    return (
        f"{EVICTED} (policy {retention.policy}, q {memory.q:.3f}, uses {memory.uses}, "
        f"score {score:.6g})"
    )


def _parts(store: MemoryStore, namespace: Namespace, memory: AnyMemory) -> list[str]:
    """What goes with a memory: the procedures it was DISTILLED_FROM (their steps go with them
    through the store's orphan rule on delete; archived, they stay under an obsolete owner)."""
    if not isinstance(memory, Procedure):
        return []
    edges = store.edges(namespace, memory.id, kinds=[EdgeKind.DISTILLED_FROM], direction="out")
    return list(dict.fromkeys(e.dst for e in edges if e.dst != memory.id))


def _archive(
    store: MemoryStore, namespace: Namespace, ids: Sequence[str], reason: str
) -> list[str]:
    done = []
    for memory in store.get_many(namespace, list(ids)):
        if memory.obsolete:  # archived by a concurrent enforcement, or demoted: leave it
            continue
        try:
            store.patch(namespace, memory.id, {"obsolete": True, "obsolete_reason": reason})
        except MemoryNotFound:  # deleted meanwhile
            continue
        done.append(memory.id)
    return done


def _delete(
    store: MemoryStore, namespace: Namespace, memory_id: str, parts: Sequence[str]
) -> list[str]:
    """Delete a memory, its parts and the Tasks they leave without a procedure, in ONE store
    delete: a process killed during an eviction leaves all of it or none (two deletes left an
    orphan Task behind a ``kill -9`` between them)."""
    ids = [memory_id, *parts]
    going = set(ids)
    tasks = [
        e.src
        for i in ids
        for e in store.edges(namespace, i, kinds=[EdgeKind.SOLVED_BY], direction="in")
    ]
    orphans = [
        t
        for t in dict.fromkeys(tasks)
        if all(
            e.dst in going
            for e in store.edges(namespace, t, kinds=[EdgeKind.SOLVED_BY], direction="out")
        )
    ]
    return store.delete(namespace, [*ids, *orphans])


def plan_namespace(
    store: MemoryStore, namespace: Namespace, retention: RetentionConfig, config: MemoryConfig
) -> tuple[list[AnyMemory], list[tuple[AnyMemory, float]]]:
    """The namespace's live memories, and those :func:`enforce_capacity` would evict now
    (with their scores), in order; changes nothing."""
    units = live_units(store, namespace, retention.kinds)
    if not over_capacity(units, retention):
        return units, []
    episode_times: list[datetime] = []
    if retention.policy == "utility" and retention.grace_episodes:
        episode_times = [e.created_at for e in store.iter_nodes(namespace, [MemoryKind.EPISODE])]

    def held(memory: AnyMemory) -> bool:
        return held_by_open_episode(store, namespace, memory)

    spare = held if retention.on_evict == "delete" else None  # credit to come: it waits
    return units, plan_evictions(units, retention, config, episode_times=episode_times, spare=spare)


def enforce_capacity(
    mem: MemoryContext, namespace: Namespace, config: RetentionConfig | None = None
) -> RetentionResult:
    """Evict what ``namespace`` holds beyond its capacity (``config`` defaults to
    ``mem.config.retention``; with no capacity set, nothing happens).

    Archives (or, with ``on_evict='delete'``, deletes) the surplus in the policy's order and
    returns what it did. Each eviction is one store write per memory (a patch) or one delete
    (the memory, its parts and the Tasks left without a procedure); a crash between them leaves
    fewer evicted, never a memory lost nor an orphan Task.
    """
    retention = config if config is not None else mem.config.retention
    if not retention.enabled:
        return RetentionResult(namespace=namespace, live_before=0, live_after=0)
    store = mem.store
    units, victims = plan_namespace(store, namespace, retention, mem.config)
    result = RetentionResult(namespace=namespace, live_before=len(units), live_after=len(units))
    for memory, score in victims:
        parts = _parts(store, namespace, memory)
        reason = _reason(retention, memory, score)
        if retention.on_evict == "delete":
            deleted = _delete(store, namespace, memory.id, parts)
            if not deleted:
                continue
            evicted = Eviction(
                memory_id=memory.id,
                kind=memory.kind,
                q=memory.q,
                uses=memory.uses,
                score=score,
                reason=reason.replace(EVICTED, "deleted: capacity", 1),
                parts=parts,
                deleted=deleted,
            )
        else:
            if memory.id not in _archive(store, namespace, [memory.id], reason):
                continue  # another process evicted it first
            _archive(store, namespace, parts, reason)
            evicted = Eviction(
                memory_id=memory.id,
                kind=memory.kind,
                q=memory.q,
                uses=memory.uses,
                score=score,
                reason=reason,
                parts=parts,
            )
        result.evicted.append(evicted)
        log.info("%s %s in ns=%s: %s", memory.kind, memory.id, namespace, evicted.reason)
    result.live_after = result.live_before - len(result.evicted)
    return result


def check_capacity(
    store: MemoryStore,
    retention: RetentionConfig,
    namespaces: Sequence[Namespace] | None = None,
) -> list[CapacityProblem]:
    """What breaks ``retention`` in ``namespaces`` (default: every namespace): a namespace
    holding more live memories than a cap allows, and a memory that retention archived whose
    parts are still live (an eviction a crash cut short). Empty when all is well."""
    problems: list[CapacityProblem] = []
    for ns in namespaces if namespaces is not None else map(Namespace, store.namespaces()):
        nodes = list(store.iter_nodes(ns, kinds=list(retention.kinds)))
        units = [m for m in nodes if not m.obsolete and m.embedding is not None]
        if retention.max_memories is not None and len(units) > retention.max_memories:
            problems.append(
                CapacityProblem(
                    namespace=ns,
                    problem=f"{len(units)} live memories, capacity {retention.max_memories}",
                )
            )
        for kind, cap in retention.max_per_kind.items():
            n = sum(1 for m in units if m.kind == kind)
            if n > cap:
                problems.append(
                    CapacityProblem(namespace=ns, problem=f"{n} live {kind} memories, cap {cap}")
                )
        for memory in nodes:
            if not is_evicted(memory):
                continue
            if not memory.obsolete:
                problems.append(
                    CapacityProblem(
                        namespace=ns,
                        problem=f"{memory.kind} {memory.id} says it was evicted but is live",
                    )
                )
                continue
            live = [
                p
                for p in store.get_many(ns, _parts(store, ns, memory))
                if not p.obsolete and p.kind in retention.kinds
            ]
            for part in live:
                problems.append(
                    CapacityProblem(
                        namespace=ns,
                        problem=f"{memory.kind} {memory.id} was evicted but its part "
                        f"{part.kind} {part.id} is live",
                    )
                )
    return problems


__all__ = [
    "EVICTED",
    "CapacityProblem",
    "Eviction",
    "RetentionResult",
    "check_capacity",
    "enforce_capacity",
    "eviction_order",
    "held_by_open_episode",
    "is_evicted",
    "live_units",
    "plan_evictions",
    "plan_namespace",
    "utility_bound",
]
