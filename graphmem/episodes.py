"""Episodes: the unit of credit assignment (MemRL, DESIGN.md §2 "Update").

An :class:`~graphmem.models.Episode` records what a retrieval put in the agent's context, as
``(Episode)-[:RETRIEVED {rank, sim, q, score}]->(Memory)`` edges. When the episode ends with
reward R, :func:`finish_episode` applies ``Q ← Q + α(R − Q)`` to exactly those memories, through
the store's atomic ``update_utility``, and closes the episode; it refuses to finish one twice.

>>> from graphmem import GraphMemory, HashingEmbedder
>>> from graphmem.stores.embedded import EmbeddedStore
>>> mem = GraphMemory(EmbeddedStore.in_memory(), embedder=HashingEmbedder())
>>> note = mem.add_note("demo", "Water the basil every second day.")
>>> r = mem.retrieve("demo", "how often to water basil?", kinds=("Note",), open_episode=True)
>>> outcome = mem.finish_episode("demo", r.episode_id, reward=1.0)
>>> round(outcome.q[note.id], 3)  # 0.5 + 0.1 * (1.0 - 0.5)
0.55
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from graphmem.errors import GraphmemError, InvalidInput
from graphmem.models import (
    AnyMemory,
    Edge,
    EdgeKind,
    Episode,
    EpisodeStatus,
    check_id,
    check_namespace,
    utcnow,
)
from graphmem.stores.base import MemoryStore, check_alpha_reward

if TYPE_CHECKING:
    from graphmem.config import RetrievalConfig
    from graphmem.memory import GraphMemory
    from graphmem.retrieve import Retrieval

log = logging.getLogger(__name__)


class EpisodeFinished(GraphmemError):
    """The episode was finished already; a reward is credited once."""

    def __init__(self, episode_id: str, namespace: str) -> None:
        super().__init__(
            f"episode {episode_id!r} in namespace {namespace!r} is already finished; "
            "its reward was credited once and is not applied again"
        )
        self.episode_id = episode_id
        self.namespace = namespace


class EpisodeOutcome(BaseModel):
    """A finished episode and the memories whose Q its reward moved."""

    episode: Episode
    updated: list[AnyMemory] = Field(
        default_factory=list, description="The credited memories, with their new q values."
    )

    @property
    def q(self) -> dict[str, float]:
        """New q per credited memory id."""
        return {m.id: m.q for m in self.updated}


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
    mem: GraphMemory,
    namespace: str,
    task_text: str,
    *,
    config: RetrievalConfig | None = None,
) -> Episode:
    """Open an episode before retrieving, for agents that retrieve several times in one run.

    Pass its id as ``retrieve(..., episode_id=...)``; every retrieval adds RETRIEVED edges.
    """
    check_namespace(namespace)
    episode = Episode(
        namespace=namespace,
        task_text=task_text,
        source="episode",
        retrieval_config=config.model_dump_json() if config is not None else "",
    )
    mem.store.upsert([episode])
    return episode


def get_open_episode(store: MemoryStore, namespace: str, episode_id: str) -> Episode:
    """The episode, if it exists and is still open; else MemoryNotFound / EpisodeFinished."""
    found = store.get(namespace, episode_id)
    if not isinstance(found, Episode):
        raise InvalidInput(f"memory {episode_id!r} is a {found.kind}, not an Episode")
    if found.status is EpisodeStatus.FINISHED:
        raise EpisodeFinished(episode_id, namespace)
    return found


def record_retrieval(
    store: MemoryStore, retrieval: Retrieval, *, episode_id: str | None = None
) -> str:
    """Write RETRIEVED edges for exactly ``retrieval.hits`` (and a new Episode unless given)."""
    nodes: list[AnyMemory] = []
    if episode_id is None:
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
            },
        )
        for hit in retrieval.hits
    ]
    store.upsert(nodes, edges)
    return episode_id


def retrieved_ids(store: MemoryStore, namespace: str, episode_id: str) -> list[str]:
    """Ids of the memories an episode RETRIEVED, in rank order."""
    edges = store.edges(namespace, episode_id, kinds=[EdgeKind.RETRIEVED], direction="out")
    edges.sort(key=lambda e: (_as_int(e.props.get("rank")), e.dst))
    return list(dict.fromkeys(e.dst for e in edges))


# ---- finishing ---------------------------------------------------------------------------


def finish_episode(
    mem: GraphMemory,
    namespace: str,
    episode_id: str,
    reward: float,
    *,
    success: bool | None = None,
    alpha: float | None = None,
) -> EpisodeOutcome:
    """Credit ``reward`` to exactly the memories the episode retrieved, and close it.

    ``Q ← Q + α(R − Q)`` with ``α = alpha`` or ``mem.config.alpha``; ``success`` defaults to
    ``reward >= mem.config.success_reward``. Finishing twice raises :class:`EpisodeFinished`;
    an unknown episode raises MemoryNotFound. Either way nothing changes.
    """
    check_namespace(namespace)
    check_id(episode_id)
    a = mem.config.alpha if alpha is None else alpha
    if isinstance(reward, bool) or not isinstance(reward, int | float):
        raise InvalidInput(f"reward must be a number, got {type(reward).__name__}")
    check_alpha_reward(float(a), float(reward))
    r = float(reward)
    succeeded = r >= mem.config.success_reward if success is None else bool(success)

    get_open_episode(mem.store, namespace, episode_id)
    ids = retrieved_ids(mem.store, namespace, episode_id)

    # Close first so a second finish is refused while the utility update runs; if the update
    # fails, reopen, so the call changed nothing and can be retried.
    episode = mem.store.patch(
        namespace,
        episode_id,
        {
            "status": EpisodeStatus.FINISHED,
            "reward": r,
            "success": succeeded,
            "finished_at": utcnow(),
        },
    )
    updated: list[AnyMemory] = []
    if ids:
        try:
            updated = mem.store.update_utility(namespace, ids, r, float(a), success=succeeded)
        except BaseException:
            mem.store.patch(
                namespace,
                episode_id,
                {
                    "status": EpisodeStatus.OPEN,
                    "reward": None,
                    "success": None,
                    "finished_at": None,
                },
            )
            raise
        _annotate(mem.store, namespace, episode_id, updated, float(a))
    assert isinstance(episode, Episode)
    log.info(
        "finished episode %s ns=%s reward=%s: %d memories credited",
        episode_id,
        namespace,
        r,
        len(updated),
    )
    return EpisodeOutcome(episode=episode, updated=updated)


def _annotate(
    store: MemoryStore, namespace: str, episode_id: str, updated: list[AnyMemory], alpha: float
) -> None:
    """Record the q each credited memory reached on its RETRIEVED edge, for Q history.

    The learning has happened by now, so a failure here is logged, not raised: raising would
    invite a retry that the finished episode (rightly) refuses.
    """
    edges = [
        Edge(
            namespace=namespace,
            kind=EdgeKind.RETRIEVED,
            src=episode_id,
            dst=m.id,
            props={"q_after": m.q, "alpha": alpha},
        )
        for m in updated
    ]
    try:
        store.upsert((), edges)
    except GraphmemError:
        log.warning("episode %s: could not record q_after on its RETRIEVED edges", episode_id)


# ---- history -----------------------------------------------------------------------------


def q_history(mem: GraphMemory, namespace: str, memory_id: str) -> list[QChange]:
    """The finished episodes that moved a memory's Q, oldest first."""
    check_namespace(namespace)
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


def _as_int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 1 << 30


def _opt_int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _opt_float(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None
