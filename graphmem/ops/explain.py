"""An episode explains itself: what it was offered, what it used, and how each Q moved.

An Episode's RETRIEVED edges record every memory it was handed (rank and score parts at the
time), which of them the agent marked used, and, once finished, the Q each credited memory
had right after the update (``q_after``) with the learning rate (``alpha``). From those this
module tells the episode's story: the offers in rank order, used or not, credited or not, and
each credited memory's Q before → after. The Q before is the update undone,
``(q_after − α·R) / (1 − α)``, so it is exact even when other episodes moved the memory between
this one's retrieval and its finish.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from graphmem.errors import InvalidInput
from graphmem.models import (
    AnyMemory,
    CreditPolicy,
    EdgeKind,
    Episode,
    EpisodeStatus,
    MemoryKind,
    Namespace,
    Note,
    check_id,
)
from graphmem.ops.context import MemoryContext
from graphmem.ops.episodes import _opt_float, _opt_int
from graphmem.ops.history import summarize
from graphmem.stores.base import MemoryStore


class Offer(BaseModel):
    """One memory an episode was handed."""

    id: str
    kind: str
    summary: str = Field(description="One short line saying what the memory holds.")
    rank: int | None = None
    sim: float | None = None
    q_at_retrieval: float | None = None
    score: float | None = None
    used: bool = Field(default=False, description="Marked used by the caller.")
    credited: bool = Field(default=False, description="The episode's reward moved its Q.")
    q_before: float | None = Field(default=None, description="Its Q just before the credit.")
    q_after: float | None = Field(default=None, description="Its Q right after the credit.")
    newer_than: str | None = Field(
        default=None,
        description="Fact updates: the older note this one was ranked above, as its newer "
        "statement.",
    )
    updated_by: str | None = Field(
        default=None, description="Fact updates: the newer note that updates this one, if any."
    )


class EpisodeReport(BaseModel):
    """What an episode was offered and used, its reward, and each credited memory's Q."""

    id: str
    namespace: str
    task_text: str
    status: EpisodeStatus
    reward: float | None = None
    success: bool | None = None
    credit: CreditPolicy | None = None
    offered: list[Offer] = Field(default_factory=list)

    def render(self) -> str:
        """A few lines for a terminal."""
        head = f"Episode {self.id} ({self.status.value}): {self.task_text[:100]!r}"
        if self.status is EpisodeStatus.FINISHED:
            outcome = "success" if self.success else "failure"
            credit = self.credit.value if self.credit else "offered"
            head += f"\n  reward {self.reward} ({outcome}); credit: {credit}"
        used = sum(o.used for o in self.offered)
        lines = [head, f"  offered {len(self.offered)}, used {used}:"]
        for o in self.offered:
            parts = [f"#{o.rank}" if o.rank is not None else "#?"]
            if o.sim is not None:
                parts.append(f"sim {o.sim:.2f}")
            if o.q_at_retrieval is not None:
                parts.append(f"Q {o.q_at_retrieval:.3f}")
            if o.score is not None:
                parts.append(f"score {o.score:+.2f}")
            mark = "used" if o.used else "not used"
            if o.credited and o.q_before is not None and o.q_after is not None:
                mark += f", Q {o.q_before:.3f} → {o.q_after:.3f}"
            elif self.status is EpisodeStatus.FINISHED:
                mark += ", not credited"
            if o.newer_than:
                mark += f", newer than {o.newer_than}"
            if o.updated_by:
                mark += f", updated by {o.updated_by}"
            lines.append(f"    {' '.join(parts)}  {o.kind} {o.id}: {o.summary}  [{mark}]")
        return "\n".join(lines)


def explain_episode(mem: MemoryContext, namespace: Namespace, episode_id: str) -> EpisodeReport:
    """The story of one episode (:class:`EpisodeReport`); ``InvalidInput`` if the id is no
    Episode's, ``MemoryNotFound`` if there is none."""
    return episode_report(mem.store, namespace, episode_id)


def episode_report(store: MemoryStore, namespace: Namespace, episode_id: str) -> EpisodeReport:
    """:func:`explain_episode` on a bare store (the pictures hold no memory object)."""
    check_id(episode_id)
    episode = store.get(namespace, episode_id)
    if not isinstance(episode, Episode):
        raise InvalidInput(f"{episode_id} is a {episode.kind}, not an Episode")
    edges = store.edges(namespace, episode_id, kinds=[EdgeKind.RETRIEVED], direction="out")
    found: dict[str, AnyMemory] = {
        m.id: m for m in store.get_many(namespace, [e.dst for e in edges])
    }
    finished = episode.status is EpisodeStatus.FINISHED and episode.reward is not None
    offers: list[Offer] = []
    for edge in edges:
        memory = found.get(edge.dst)
        props = edge.props
        used = props.get("used") is True
        q_after = _opt_float(props.get("q_after"))
        alpha = _opt_float(props.get("alpha"))
        credited = finished and q_after is not None
        if credited and episode.credit is CreditPolicy.USED and not used:
            credited = False
        q_before = None
        if credited and q_after is not None and alpha is not None and alpha < 1.0:
            q_before = (q_after - alpha * float(episode.reward or 0.0)) / (1.0 - alpha)
        offers.append(
            Offer(
                id=edge.dst,
                kind=str(memory.kind) if memory is not None else "(deleted)",
                summary=summarize(memory) if memory is not None else "",
                rank=_opt_int(props.get("rank")),
                sim=_opt_float(props.get("sim")),
                q_at_retrieval=_opt_float(props.get("q")),
                score=_opt_float(props.get("score")),
                used=used,
                credited=credited,
                q_before=q_before,
                q_after=q_after if credited else None,
                newer_than=newer if isinstance(newer := props.get("newer_than"), str) else None,
                updated_by=memory.updated_by if isinstance(memory, Note) else None,
            )
        )
    offers.sort(key=lambda o: (o.rank if o.rank is not None else 1 << 30, o.id))
    return EpisodeReport(
        id=episode.id,
        namespace=namespace,
        task_text=episode.task_text,
        status=episode.status,
        reward=episode.reward,
        success=episode.success,
        credit=episode.credit,
        offered=offers,
    )


def latest_episode_id(mem: MemoryContext, namespace: Namespace) -> str | None:
    """The most recently finished episode of ``namespace`` (else the newest open one)."""
    episodes = [
        m for m in mem.store.iter_nodes(namespace, [MemoryKind.EPISODE]) if isinstance(m, Episode)
    ]
    if not episodes:
        return None
    finished = [e for e in episodes if e.finished_at is not None]
    if finished:
        return max(finished, key=lambda e: (e.finished_at, e.id)).id
    return max(episodes, key=lambda e: (e.created_at, e.id)).id


__all__ = ["EpisodeReport", "Offer", "episode_report", "explain_episode", "latest_episode_id"]
