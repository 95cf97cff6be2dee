"""Episodes: the unit of credit assignment (MemRL, docs/design.md §2.3).

Why and how, in full: docs/design.md, "Module notes", ``graphmem.ops.episodes``.

>>> from graphmem import GraphMemory, HashingEmbedder
>>> from graphmem.stores.embedded import EmbeddedStore
>>> mem = GraphMemory(EmbeddedStore.in_memory(), embedder=HashingEmbedder())
>>> note = mem.add_note("demo", "Water the basil every second day.")
>>> r = mem.retrieve("demo", "how often to water basil?", kinds=("Note",), open_episode=True)
>>> outcome = mem.finish_episode("demo", r.episode_id, reward=1.0)
>>> round(outcome.q[note.id], 3)  # 0.5 + 0.1 * (1.0 - 0.5)
0.55

>>> other = mem.add_note("demo", "Basil likes sun.")
>>> r = mem.retrieve("demo", "basil care", kinds=("Note",), open_episode=True)
>>> sorted(h.memory.id for h in r.hits) == sorted([note.id, other.id])
True
>>> outcome = mem.finish_episode("demo", r.episode_id, reward=1.0, used=[other.id])
>>> list(outcome.q) == [other.id]
True
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from pydantic import BaseModel, Field

from graphmem.errors import EpisodeFinished as EpisodeFinished  # re-exported
from graphmem.errors import InvalidInput, MemoryNotFound, StoreError
from graphmem.models import (
    AnyMemory,
    CreditPolicy,
    Edge,
    EdgeKind,
    Episode,
    EpisodeStatus,
    Namespace,
    Reward,
    check_id,
    utcnow,
)
from graphmem.stores.base import (
    MemoryStore,
    check_credit,
    check_used,
    credited_order,
    marked_order,
)

if TYPE_CHECKING:
    from graphmem.config import RetrievalConfig
    from graphmem.models import Hit
    from graphmem.ops.context import MemoryContext

log = logging.getLogger(__name__)


class RetrievalRecord(Protocol):
    """What an episode records of a retrieval; :class:`graphmem.ops.retrieve.Retrieval` is one."""

    @property
    def namespace(self) -> Namespace: ...

    @property
    def query(self) -> str: ...

    @property
    def config(self) -> RetrievalConfig: ...

    @property
    def hits(self) -> Sequence[Hit]: ...

    @property
    def explored(self) -> bool: ...


class EpisodeOutcome(BaseModel):
    """A finished episode and the memories whose Q its reward moved.

    ``replayed`` is True when the call found the episode finished already with the same reward
    (a retry): it credited nothing and reports what the one real finish did.
    """

    episode: Episode
    updated: list[AnyMemory] = Field(
        default_factory=list, description="The credited memories, as they are now."
    )
    q_after: dict[str, float] = Field(
        default_factory=dict, description="Each credited memory's q right after the finish."
    )
    replayed: bool = Field(default=False, description="True when this call credited nothing.")

    @property
    def q(self) -> dict[str, float]:
        """New q per credited memory id (as the finish left it)."""
        return dict(self.q_after)


class QChange(BaseModel):
    """One finished episode that moved a memory's Q."""

    episode_id: str
    task_text: str
    finished_at: datetime
    reward: float
    success: bool | None
    rank: int | None = Field(default=None, description="The memory's rank in that retrieval.")
    q_at_retrieval: float | None = Field(default=None, description="Its q when retrieved.")
    q_after: float | None = Field(
        default=None, description="Its q right after this episode's update."
    )
    alpha: float | None = None


# ---- opening and recording ---------------------------------------------------------------


def start_episode(
    mem: MemoryContext,
    namespace: Namespace,
    task_text: str,
    *,
    config: RetrievalConfig | None = None,
) -> Episode:
    """Open an episode before retrieving, for agents that retrieve several times in one run.

    Pass its id as ``retrieve(..., episode_id=...)``; every retrieval adds RETRIEVED edges.
    """
    episode = Episode(
        namespace=namespace,
        task_text=task_text,
        source="episode",
        retrieval_config=config.model_dump_json() if config is not None else "",
    )
    mem.store.upsert([episode])
    return episode


def get_open_episode(store: MemoryStore, namespace: Namespace, episode_id: str) -> Episode:
    """The episode, if it exists and is still open; else MemoryNotFound / EpisodeFinished."""
    found = store.get(namespace, episode_id)
    if not isinstance(found, Episode):
        raise InvalidInput(f"memory {episode_id!r} is a {found.kind}, not an Episode")
    if found.status is EpisodeStatus.FINISHED:
        raise EpisodeFinished(episode_id, namespace)
    return found


def record_retrieval(
    store: MemoryStore, retrieval: RetrievalRecord, *, episode_id: str | None = None
) -> str:
    """Write RETRIEVED edges for ``retrieval.hits`` (and a new Episode unless given).

    A memory the episode was offered before keeps the edge of that first offer (its rank and
    scores, and any used mark): an episode records each memory it was handed once. A hit that
    another process deleted since it was recalled (retention's delete mode) gets no edge, so
    it earns no credit, and the retrieval does not fail; an episode deleted meanwhile still
    raises MemoryNotFound.
    """
    nodes: list[AnyMemory] = []
    offered: set[str] = set()
    if episode_id is not None:
        offered = set(retrieved_ids(store, retrieval.namespace, episode_id))
    else:
        episode = Episode(
            namespace=retrieval.namespace,
            task_text=retrieval.query,
            source="retrieve",
            retrieval_config=retrieval.config.model_dump_json(),
        )
        nodes.append(episode)
        episode_id = episode.id
    edges = [
        Edge(
            namespace=retrieval.namespace,
            kind=EdgeKind.RETRIEVED,
            src=episode_id,
            dst=hit.memory.id,
            props={
                "rank": hit.rank,
                "sim": hit.sim,
                "q": hit.q,
                "z_sim": hit.z_sim,
                "z_q": hit.z_q,
                "score": hit.score,
                "explored": retrieval.explored,
                **({"newer_than": hit.newer_than} if hit.newer_than else {}),
            },
        )
        for hit in retrieval.hits
        if hit.memory.id not in offered
    ]
    for _ in range(_VANISHED_ATTEMPTS):
        if not nodes and not edges:
            break
        try:
            store.upsert(nodes, edges)
            break
        except MemoryNotFound as e:
            if e.memory_id == episode_id or not any(x.dst == e.memory_id for x in edges):
                raise
            there = {m.id for m in store.get_many(retrieval.namespace, [x.dst for x in edges])}
            edges = [x for x in edges if x.dst in there]
            log.info("retrieval in ns=%s: a recalled memory was deleted since", retrieval.namespace)
    else:
        raise StoreError(f"recalled memories in namespace {retrieval.namespace!r} kept vanishing")
    return episode_id


_VANISHED_ATTEMPTS = 3
"""How often recording a retrieval drops the hits deleted since recall and writes again."""


def retrieved_ids(store: MemoryStore, namespace: Namespace, episode_id: str) -> list[str]:
    """Ids of the memories an episode RETRIEVED (was offered), in rank order."""
    edges = store.edges(namespace, episode_id, kinds=[EdgeKind.RETRIEVED], direction="out")
    return credited_order(edges)


def credited_memory_ids(store: MemoryStore, episode: Episode) -> list[str]:
    """The memories an episode's reward credits, in rank order: those it was offered, or,
    when it finished crediting by use, those marked used."""
    edges = store.edges(episode.namespace, episode.id, kinds=[EdgeKind.RETRIEVED], direction="out")
    if episode.credit is CreditPolicy.USED:
        return marked_order(edges)
    return credited_order(edges)


def mark_used(
    mem: MemoryContext, namespace: Namespace, episode_id: str, memory_ids: Sequence[str]
) -> list[str]:
    """Mark memories an open episode was offered as used (``used: true`` on their RETRIEVED
    edges); returns every memory the episode has marked used, in rank order.

    With the ``used`` credit policy only marked memories are credited. An id the episode was
    not offered is refused (InvalidInput) and nothing is marked; marking again is a no-op.
    """
    check_id(episode_id)
    return mem.store.mark_used(namespace, episode_id, check_used(memory_ids))


def resolve_credit(
    mem: MemoryContext, credit: CreditPolicy | str | None, used: Sequence[str] | None
) -> CreditPolicy:
    """The credit policy of a finish: ``credit`` when given, else ``used`` when the call names
    used memories, else the config's."""
    if credit is not None:
        return check_credit(credit)
    if used is not None:
        return CreditPolicy.USED
    return mem.config.credit


# ---- finishing ---------------------------------------------------------------------------


def finish_episode(
    mem: MemoryContext,
    namespace: Namespace,
    episode_id: str,
    reward: Reward,
    *,
    success: bool | None = None,
    alpha: float | None = None,
    used: Sequence[str] | None = None,
    credit: CreditPolicy | str | None = None,
) -> EpisodeOutcome:
    """Credit ``reward`` to the memories the episode offered or used, and close it.

    ``used`` marks memories the episode was offered as used (as :func:`mark_used` does; an id it
    was not offered is refused). ``credit`` chooses what the reward credits: ``"offered"``
    (every memory the episode RETRIEVED) or ``"used"`` (only those marked used, by this call or
    before); left out, it is ``"used"`` when ``used`` is given, else ``mem.config.credit``
    (``"offered"`` by default).

    ``Q ← Q + α(R − Q)`` with ``α = alpha`` or ``mem.config.alpha``; ``success`` defaults to
    ``reward >= mem.config.success_reward``; ``reward`` was checked against the config's
    reward range where it entered (:meth:`~graphmem.config.MemoryConfig.check_reward`).
    One atomic store operation, idempotent by episode id: a retried, repeated or concurrent
    finish with the same reward (and credit policy, and used ids) returns the recorded outcome
    (``replayed=True``) and credits nothing; another reward, policy or used set raises
    :class:`EpisodeFinished`. An unknown episode raises MemoryNotFound. A call that raises
    changed nothing.
    """
    check_id(episode_id)
    a = mem.config.alpha if alpha is None else alpha
    if isinstance(a, bool) or not isinstance(a, int | float):
        raise InvalidInput(f"alpha must be a number, got {type(a).__name__}")
    if not (math.isfinite(a) and 0.0 < a <= 1.0):
        raise InvalidInput(f"alpha must be in (0, 1], got {a!r}")
    succeeded = reward >= mem.config.success_reward if success is None else bool(success)
    policy = resolve_credit(mem, credit, used)
    marks = check_used(used)

    credit_done = mem.store.finish_episode(
        namespace,
        episode_id,
        reward,
        float(a),
        success=succeeded,
        finished_at=utcnow(),
        used=marks,
        credit=policy,
    )
    if (
        not credit_done.replayed
        and not credit_done.q_after
        and learns_baseline(mem, credit_done.episode)
    ):
        # Nothing credited: the episode is what acting without memory earns in its task
        # cluster, the baseline abstention compares with (ops.abstention). Counted after the
        # atomic finish, so a retried finish (replayed) never counts it twice; a crash in
        # between loses this one count of a statistic, never a credit.
        from graphmem.ops.abstention import record_baseline

        record_baseline(mem, namespace, credit_done.episode.task_text, reward, success=succeeded)
    if credit_done.replayed:
        log.info("episode %s ns=%s was finished already: outcome replayed", episode_id, namespace)
    else:
        log.info(
            "finished episode %s ns=%s reward=%s credit=%s: %d memories credited",
            episode_id,
            namespace,
            reward,
            policy.value,
            len(credit_done.q_after),
        )
    return EpisodeOutcome(
        episode=credit_done.episode,
        updated=credit_done.updated,
        q_after=credit_done.q_after,
        replayed=credit_done.replayed,
    )


def learns_baseline(mem: MemoryContext, episode: Episode) -> bool:
    """Whether a finished episode that credited nothing counts towards abstention's baseline:
    when abstention (or ``choose_kinds``) is on in the memory's config or in the retrieval the
    episode recorded
    (off by default, so by default finishing an episode writes nothing beyond the credit)."""
    if mem.config.retrieval.abstain or mem.config.retrieval.choose_kinds:
        return True
    if not episode.retrieval_config:
        return False
    try:
        recorded = json.loads(episode.retrieval_config)
    except ValueError:
        return False
    return isinstance(recorded, dict) and (
        recorded.get("abstain") is True or recorded.get("choose_kinds") is True
    )


# ---- history -----------------------------------------------------------------------------


def q_history(mem: MemoryContext, namespace: Namespace, memory_id: str) -> list[QChange]:
    """The finished episodes that moved a memory's Q, oldest first."""
    check_id(memory_id)
    mem.store.get(namespace, memory_id)  # MemoryNotFound for an unknown id
    edges = mem.store.edges(namespace, memory_id, kinds=[EdgeKind.RETRIEVED], direction="in")
    by_episode = {e.src: e for e in edges}
    out: list[QChange] = []
    for episode in mem.store.get_many(namespace, list(by_episode)):
        if (
            not isinstance(episode, Episode)
            or episode.status is not EpisodeStatus.FINISHED
            or episode.reward is None
            or episode.finished_at is None
        ):
            continue
        props = by_episode[episode.id].props
        if episode.credit is CreditPolicy.USED and props.get("used") is not True:
            continue  # offered but not used: this episode's reward left its Q alone
        out.append(
            QChange(
                episode_id=episode.id,
                task_text=episode.task_text,
                finished_at=episode.finished_at,
                reward=episode.reward,
                success=episode.success,
                rank=_opt_int(props.get("rank")),
                q_at_retrieval=_opt_float(props.get("q")),
                q_after=_opt_float(props.get("q_after")),
                alpha=_opt_float(props.get("alpha")),
            )
        )
    out.sort(key=lambda c: (c.finished_at, c.episode_id))
    return out


def _opt_int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _opt_float(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None
