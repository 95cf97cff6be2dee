"""History: the versions, links and episodes that shaped a memory, as data and as text.

Why and how, in full: docs/design.md, "Module notes", ``graphmem.ops.history``.

>>> from graphmem import GraphMemory, HashingEmbedder
>>> from graphmem.stores.embedded import EmbeddedStore
>>> mem = GraphMemory(EmbeddedStore.in_memory(), embedder=HashingEmbedder(64))
>>> note = mem.add_note("demo", "Parcels go to the back door.")
>>> h = history(mem, "demo", note.id)
>>> [v.id for v in h.versions] == [note.id], h.episodes
(True, [])
>>> print(h.render().splitlines()[0])  # doctest: +ELLIPSIS
Note ... (v1, live): Parcels go to the back door.
"""

from __future__ import annotations

from collections import deque
from datetime import datetime
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field

from graphmem.models import (
    AnyMemory,
    EdgeKind,
    Namespace,
    Note,
    Procedure,
    PropValue,
    Step,
    Task,
    Tip,
    check_id,
)
from graphmem.ops.episodes import q_history

if TYPE_CHECKING:
    from graphmem.ops.context import MemoryContext

MAX_VERSIONS = 1000
"""Versions walked at most (a lineage longer than this is cut, oldest and newest kept first)."""

_LINK_KINDS = (
    EdgeKind.LINKS_TO,
    EdgeKind.SUPERSEDES,
    EdgeKind.DISTILLED_FROM,
    EdgeKind.SOLVED_BY,
    EdgeKind.ABOUT,
    EdgeKind.UPDATES,
)


class Version(BaseModel):
    """One version of the memory."""

    id: str
    version: int
    created_at: datetime
    obsolete: bool
    obsolete_reason: str | None
    source: str
    created_by: str
    q: float
    uses: int
    evolved_from: list[str] = Field(
        default_factory=list, description="The versions this one EVOLVED_FROM."
    )
    change: str | None = Field(default=None, description="The EVOLVED_FROM edge's change.")
    at: str | None = Field(default=None, description="When it evolved (the edge's ``at``).")
    summary: str = ""


class Link(BaseModel):
    """An edge of the memory, with a summary of the memory at its other end."""

    kind: EdgeKind
    direction: Literal["out", "in"]
    other_id: str
    other_kind: str
    other_summary: str
    other_obsolete: bool
    props: dict[str, PropValue] = Field(default_factory=dict)


class EpisodeRecord(BaseModel):
    """A finished episode that retrieved a version of the memory, and how it moved its Q."""

    memory_id: str = Field(description="The version it retrieved.")
    episode_id: str
    task_text: str
    finished_at: datetime
    reward: float
    success: bool | None
    rank: int | None
    q_before: float | None
    q_after: float | None


class History(BaseModel):
    """The versions, links and episodes that shaped a memory."""

    memory: AnyMemory
    versions: list[Version] = Field(description="Its lineage, oldest first (itself included).")
    links: list[Link]
    tips: list[Tip] = Field(description="Tips ABOUT this memory.")
    episodes: list[EpisodeRecord] = Field(description="Over all versions, oldest first.")

    @property
    def latest(self) -> Version:
        """The newest live version (the newest version if all are obsolete)."""
        live = [v for v in self.versions if not v.obsolete]
        return (live or self.versions)[-1]

    def render(self) -> str:
        """A readable text rendering."""
        m = self.memory
        state = f"obsolete: {m.obsolete_reason or 'no reason'}" if m.obsolete else "live"
        if isinstance(m, Note) and m.updated_by:
            state += f"; updated by {m.updated_by}, which ranks above it"
        lines = [f"{m.kind} {m.id} (v{m.version}, {state}): {summarize(m)}"]
        lines.append(
            f"  q {m.q:.3f} | uses {m.uses} | successes {m.successes} | source {m.source} | "
            f"by {m.created_by} | created {m.created_at:%Y-%m-%d %H:%M:%S}"
        )
        lines.append("Versions (oldest first):")
        for v in self.versions:
            here = "  <- this" if v.id == m.id else ""
            status = f"obsolete ({v.obsolete_reason})" if v.obsolete else "live"
            lines.append(f"  v{v.version} {v.id} {status}, q {v.q:.3f}, {v.uses} uses{here}")
            if v.evolved_from:
                change = f": {v.change}" if v.change else ""
                lines.append(f"      evolved from {', '.join(v.evolved_from)}{change}")
        lines.append("Links:" if self.links else "Links: none")
        for link in self.links:
            arrow = "->" if link.direction == "out" else "<-"
            extra = ", ".join(f"{k}={_short(v)}" for k, v in sorted(link.props.items()))
            gone = " [obsolete]" if link.other_obsolete else ""
            lines.append(
                f"  {arrow} {link.kind.value} {link.other_kind} {link.other_id}{gone}: "
                f"{link.other_summary}" + (f" ({extra})" if extra else "")
            )
        lines.append("Episodes:" if self.episodes else "Episodes: none")
        for ep in self.episodes:
            outcome = {True: "success", False: "failure", None: "?"}[ep.success]
            move = ""
            if ep.q_before is not None and ep.q_after is not None:
                move = f", q {ep.q_before:.3f} -> {ep.q_after:.3f}"
            rank = f", rank {ep.rank}" if ep.rank is not None else ""
            version = f" [{ep.memory_id}]" if ep.memory_id != m.id else ""
            lines.append(
                f"  {ep.finished_at:%Y-%m-%d %H:%M:%S} {ep.episode_id} reward {ep.reward:g} "
                f"({outcome}){rank}{move}{version}"
            )
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.render()


def history(mem: MemoryContext, namespace: Namespace, memory_id: str) -> History:
    """The history of ``memory_id`` (MemoryNotFound if it does not exist)."""
    check_id(memory_id)
    store = mem.store
    memory = store.get(namespace, memory_id)

    # Lineage: EVOLVED_FROM out = older versions, in = newer ones. Breadth-first, cycle-safe.
    seen: dict[str, AnyMemory] = {memory.id: memory}
    origins: dict[str, list[tuple[str, dict[str, PropValue]]]] = {}
    queue: deque[str] = deque([memory.id])
    while queue and len(seen) < MAX_VERSIONS:
        current = queue.popleft()
        edges = store.edges(namespace, current, kinds=[EdgeKind.EVOLVED_FROM], direction="both")
        for edge in edges:
            if edge.src == current:
                origins.setdefault(current, []).append((edge.dst, edge.props))
            other_id = edge.dst if edge.src == current else edge.src
            if other_id not in seen:
                found = store.get_many(namespace, [other_id])
                if found:
                    seen[other_id] = found[0]
                    queue.append(other_id)
    versions = sorted(
        (_version(m, origins.get(m.id, [])) for m in seen.values()),
        key=lambda v: (v.version, v.created_at, v.id),
    )

    links: list[Link] = []
    tips: list[Tip] = []
    neighbours = store.neighbours(namespace, memory.id, kinds=list(_LINK_KINDS), direction="both")
    for edge, other in neighbours:
        direction: Literal["out", "in"] = "out" if edge.src == memory.id else "in"
        links.append(
            Link(
                kind=edge.kind,
                direction=direction,
                other_id=other.id,
                other_kind=other.kind,
                other_summary=summarize(other),
                other_obsolete=other.obsolete,
                props=dict(edge.props),
            )
        )
        if edge.kind is EdgeKind.ABOUT and direction == "in" and isinstance(other, Tip):
            tips.append(other)

    episodes: list[EpisodeRecord] = []
    for version in versions:
        for change in q_history(mem, namespace, version.id):
            episodes.append(
                EpisodeRecord(
                    memory_id=version.id,
                    episode_id=change.episode_id,
                    task_text=change.task_text,
                    finished_at=change.finished_at,
                    reward=change.reward,
                    success=change.success,
                    rank=change.rank,
                    q_before=change.q_at_retrieval,
                    q_after=change.q_after,
                )
            )
    episodes.sort(key=lambda e: (e.finished_at, e.episode_id, e.memory_id))
    return History(memory=memory, versions=versions, links=links, tips=tips, episodes=episodes)


class Chain(BaseModel):
    """A version chain: a newest version and the EVOLVED_FROM path back to its first one."""

    ids: list[str] = Field(description="Newest first, along the longest EVOLVED_FROM path.")
    kind: str
    version: int = Field(description="The newest version's number.")
    obsolete: bool = Field(description="Whether the newest version is obsolete too.")
    summary: str
    changes: list[str] = Field(description="The change each version made, oldest first.")

    @property
    def length(self) -> int:
        """How many versions the chain has."""
        return len(self.ids)


def version_chains(mem: MemoryContext, namespace: Namespace, *, limit: int = 10) -> list[Chain]:
    """The longest EVOLVED_FROM chains of a namespace, longest first (at most ``limit``).

    Each starts at a newest version (nothing EVOLVED_FROM it) and follows the longest path
    back; a merge (a version EVOLVED_FROM several) counts its longest branch.
    """
    older: dict[str, list[tuple[str, str | None]]] = {}
    for edge in mem.store.iter_edges(namespace):
        if edge.kind is EdgeKind.EVOLVED_FROM:
            change = edge.props.get("change")
            why = None if change is None else str(change)
            older.setdefault(edge.src, []).append((edge.dst, why))
    newer = {dst for pairs in older.values() for dst, _ in pairs}
    depth = _depths(older)

    def path(memory_id: str) -> list[tuple[str, str | None]]:
        """[(id, the change that made it)] from ``memory_id`` back along the deepest branch."""
        out: list[tuple[str, str | None]] = []
        current: str | None = memory_id
        while current is not None and len(out) < MAX_VERSIONS:
            choices = sorted(older.get(current, []), key=lambda c: (-depth.get(c[0], 1), c[0]))
            out.append((current, choices[0][1] if choices else None))
            current = choices[0][0] if choices else None
            if current is not None and any(current == i for i, _ in out):
                break  # a cycle (an imported graph can hold anything)
        return out

    heads = sorted(i for i in older if i not in newer)
    found = {head: path(head) for head in heads}
    ranked = sorted(found.items(), key=lambda kv: (-len(kv[1]), kv[0]))[: max(0, limit)]
    nodes = {m.id: m for m in mem.store.get_many(namespace, [head for head, _ in ranked])}
    chains: list[Chain] = []
    for head, steps in ranked:
        memory = nodes.get(head)
        if memory is None:
            continue
        chains.append(
            Chain(
                ids=[i for i, _ in steps],
                kind=memory.kind,
                version=memory.version,
                obsolete=memory.obsolete,
                summary=summarize(memory),
                changes=[c for _, c in reversed(steps) if c is not None],
            )
        )
    return chains


def _depths(older: dict[str, list[tuple[str, str | None]]]) -> dict[str, int]:
    """Versions on the longest EVOLVED_FROM path from each id (itself included); cycle-safe."""
    depth: dict[str, int] = {}
    for start in older:
        stack = [start]
        on_path: set[str] = set()
        while stack:
            current = stack[-1]
            if current in depth:
                stack.pop()
                continue
            on_path.add(current)
            pending = [d for d, _ in older.get(current, []) if d not in depth and d not in on_path]
            if pending and len(on_path) < MAX_VERSIONS:
                stack.extend(pending)
                continue
            below = [depth.get(d, 1) for d, _ in older.get(current, []) if d not in on_path]
            depth[current] = 1 + max(below, default=0)
            on_path.discard(current)
            stack.pop()
    return depth


def summarize(memory: AnyMemory, limit: int = 80) -> str:
    """One short line saying what a memory holds."""
    if isinstance(memory, Note):
        text = memory.content
    elif isinstance(memory, Procedure):
        text = f"{memory.granularity.value} procedure for '{memory.task_text}'"
    elif isinstance(memory, Tip):
        text = f"{memory.polarity.value}: {memory.text}"
    elif isinstance(memory, Task):
        text = memory.text
    elif isinstance(memory, Step):
        text = f"step {memory.index}: {memory.action}"
    else:
        text = memory.task_text
    return _short(text, limit)


def _version(memory: AnyMemory, origins: list[tuple[str, dict[str, PropValue]]]) -> Version:
    change = next((str(p["change"]) for _, p in origins if p.get("change") is not None), None)
    at = next((str(p["at"]) for _, p in origins if p.get("at") is not None), None)
    return Version(
        id=memory.id,
        version=memory.version,
        created_at=memory.created_at,
        obsolete=memory.obsolete,
        obsolete_reason=memory.obsolete_reason,
        source=memory.source,
        created_by=memory.created_by,
        q=memory.q,
        uses=memory.uses,
        evolved_from=sorted(dst for dst, _ in origins),
        change=change,
        at=at,
        summary=summarize(memory),
    )


def _short(value: object, limit: int = 60) -> str:
    text = " ".join(str(value).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


__all__ = [
    "Chain",
    "EpisodeRecord",
    "History",
    "Link",
    "Version",
    "history",
    "summarize",
    "version_chains",
]
