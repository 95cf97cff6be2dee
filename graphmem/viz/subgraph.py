"""Collect the part of the memory graph a picture shows, through the store interface only.

Why and how, in full: docs/design.md, "Module notes", ``graphmem.viz.subgraph``.

>>> from graphmem.stores.embedded import EmbeddedStore
>>> from graphmem.models import Edge, Procedure, Step, Task
>>> store = EmbeddedStore.in_memory()
>>> task = Task(namespace="demo", text="Boil an egg", key="boil egg")
>>> proc = Procedure(namespace="demo", task_text=task.text, key=task.key, granularity="trajectory")
>>> step = Step(namespace="demo", procedure_id=proc.id, index=0, action="fill the pot")
>>> store.upsert([task, proc, step], [
...     Edge(namespace="demo", kind="SOLVED_BY", src=task.id, dst=proc.id),
...     Edge(namespace="demo", kind="FIRST_STEP", src=proc.id, dst=step.id)])
>>> sub = task_subgraph(store, "demo", task.id)
>>> [n.kind for n in sub.nodes.values()], [e.kind for e in sub.edges]
(['Task', 'Procedure', 'Step'], ['SOLVED_BY', 'FIRST_STEP'])
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Sequence

from graphmem.errors import InvalidInput
from graphmem.models import (
    AnyMemory,
    Edge,
    EdgeKind,
    Episode,
    MemoryKind,
    Procedure,
    Task,
    check_id,
    check_namespace,
)
from graphmem.stores.base import MemoryStore
from graphmem.viz.compare import describe_procedures, name_retrieved
from graphmem.viz.graph import Subgraph, node_for, shorten
from graphmem.viz.layout import group_identical_chains

log = logging.getLogger(__name__)

DEFAULT_MAX_NODES = 400

_VERSION_KINDS = (EdgeKind.EVOLVED_FROM, EdgeKind.SUPERSEDES)


class _Collector:
    """Adds memories to a subgraph with a node budget, caching each memory's edges."""

    def __init__(self, store: MemoryStore, sub: Subgraph, max_nodes: int) -> None:
        if max_nodes < 1:
            raise InvalidInput(f"max_nodes must be at least 1, got {max_nodes}")
        self.store = store
        self.sub = sub
        self.max_nodes = max_nodes
        self._edges: dict[str, list[Edge]] = {}

    @property
    def full(self) -> bool:
        return len(self.sub.nodes) >= self.max_nodes

    def edges(self, memory_id: str) -> list[Edge]:
        if memory_id not in self._edges:
            self._edges[memory_id] = self.store.edges(
                self.sub.namespace, memory_id, direction="both"
            )
        return self._edges[memory_id]

    def add(self, memory: AnyMemory, level: int, *, root: bool = False) -> bool:
        """Add a memory unless present or over budget; True if it is in the picture now."""
        if memory.id in self.sub.nodes:
            return True
        if self.full:
            self.sub.truncated = True
            return False
        self.sub.nodes[memory.id] = node_for(memory, level=level, root=root)
        return True

    def fetch(self, ids: Sequence[str]) -> dict[str, AnyMemory]:
        wanted = [i for i in dict.fromkeys(ids)]
        return {m.id: m for m in self.store.get_many(self.sub.namespace, wanted)} if wanted else {}

    def link_all(self) -> None:
        """Add every store edge between two memories in the picture."""
        for memory_id in list(self.sub.nodes):
            for edge in self.edges(memory_id):
                self.sub.add_edge(edge)


def _other(edge: Edge, memory_id: str) -> str:
    return edge.dst if edge.src == memory_id else edge.src


def _start(store: MemoryStore, namespace: str, memory_id: str) -> AnyMemory:
    check_namespace(namespace)
    check_id(memory_id)
    return store.get(namespace, memory_id)


def task_subgraph(
    store: MemoryStore,
    namespace: str,
    task_id: str,
    *,
    max_nodes: int = DEFAULT_MAX_NODES,
    siblings: bool = True,
) -> Subgraph:
    """A task's procedural chains, tips and evolution edges.

    ``task_id`` may also name a Procedure: the picture then starts from the task(s) it solved
    (or from the procedure alone if no task points at it); with ``siblings=False`` the task's
    other procedures are left out, so one chain is drawn. Raises MemoryNotFound for an unknown
    id and InvalidInput for a memory of another kind.
    """
    start = _start(store, namespace, task_id)
    if not isinstance(start, Task | Procedure):
        raise InvalidInput(
            f"memory {task_id!r} is a {start.kind}, not a Task or Procedure; "
            "draw it with the memory view (graphmem viz memory) instead"
        )
    roots: list[AnyMemory] = [start]
    if isinstance(start, Procedure):
        solved = store.edges(namespace, start.id, kinds=[EdgeKind.SOLVED_BY], direction="in")
        tasks = [m for m in store.get_many(namespace, [e.src for e in solved]) if m.kind == "Task"]
        roots = list(tasks) or roots
    first = roots[0]
    title_text = first.text if isinstance(first, Task) else _gist(start)
    sub = Subgraph(
        title=f"Procedural memory for: {shorten(title_text, width=90, lines=1)}",
        namespace=namespace,
        root_id=start.id,
        view="task",
    )
    col = _Collector(store, sub, max_nodes)
    procedures: deque[AnyMemory] = deque()
    focus = isinstance(start, Procedure) and not siblings
    for root in roots:
        col.add(root, level=0 if isinstance(root, Task) else 1, root=root.id == start.id)
        if isinstance(root, Task) and not focus:
            _expand_task(col, root, procedures)
        elif not isinstance(root, Task):
            procedures.append(root)
    if focus:
        col.add(start, level=1, root=True)
        procedures.append(start)
    expanded: set[str] = set()
    while procedures and not col.full:
        proc = procedures.popleft()
        if proc.id in expanded:
            continue
        expanded.add(proc.id)
        _expand_procedure(col, proc, procedures)
    if procedures:
        sub.truncated = True
    if start.id in sub.nodes:
        sub.nodes[start.id].root = True
    col.link_all()
    group_identical_chains(sub)
    procs = [i for i, n in sub.nodes.items() if n.kind == MemoryKind.PROCEDURE]
    task_ids = [r.id for r in roots if isinstance(r, Task)]
    _mark_linked(col, task_ids or [start.id], procs)
    found = [m for m in col.fetch(procs).values() if isinstance(m, Procedure)]
    describe_procedures(sub, store, found, col.edges)
    for node in sub.nodes.values():
        if node.linked:
            node.caption = LINKED_MARK + node.caption
    _describe_task(sub)
    return sub.finish()


LINKED_MARK = "↗ LINKED "
"""What the caption of a procedure that is on a task's page by a link (LINKS_TO), not because
it solves the task, opens with ("↗ LINKED PROCEDURE · 12 steps"); the page's subtitle says
what the mark means."""


def _mark_linked(col: _Collector, roots: Sequence[str], procs: Sequence[str]) -> None:
    """Mark the picture's procedures that are not the task's own. Its own: those the task is
    SOLVED_BY (or the procedure drawn, when no task solved it), and the versions and scripts
    reached from them (EVOLVED_FROM, SUPERSEDES, DISTILLED_FROM); the rest came by links."""
    shown = set(procs)
    own = {r for r in roots if r in shown}
    for root in roots:
        own |= {
            e.dst
            for e in col.edges(root)
            if e.kind is EdgeKind.SOLVED_BY and e.src == root and e.dst in shown
        }
    frontier = list(own)
    while frontier:
        proc = frontier.pop()
        for e in col.edges(proc):
            other = _other(e, proc)
            kept = e.kind in (EdgeKind.DISTILLED_FROM, *_VERSION_KINDS)
            if kept and other in shown and other not in own:
                own.add(other)
                frontier.append(other)
    for proc in shown - own:
        col.sub.nodes[proc].linked = True


def _expand_task(col: _Collector, task: AnyMemory, procedures: deque[AnyMemory]) -> None:
    edges = col.edges(task.id)
    others = col.fetch([_other(e, task.id) for e in edges])
    for edge in edges:
        other = others.get(_other(edge, task.id))
        if other is None:
            continue
        if edge.kind is EdgeKind.SOLVED_BY and edge.src == task.id:
            if col.add(other, level=1):
                procedures.append(other)
        elif edge.kind is EdgeKind.ABOUT and edge.dst == task.id:
            col.add(other, level=-1)
        elif edge.kind in (*_VERSION_KINDS, EdgeKind.LINKS_TO):
            col.add(other, level=0)


def _expand_procedure(col: _Collector, proc: AnyMemory, procedures: deque[AnyMemory]) -> None:
    level = col.sub.nodes[proc.id].level
    edges = col.edges(proc.id)
    others = col.fetch([_other(e, proc.id) for e in edges])
    for edge in edges:
        other = others.get(_other(edge, proc.id))
        if other is None:
            continue
        if edge.kind is EdgeKind.FIRST_STEP and edge.src == proc.id:
            _walk_steps(col, other, level + 1)
        elif edge.kind is EdgeKind.ABOUT and edge.dst == proc.id:
            if col.add(other, level=level - 1):
                _add_versions(col, other, level - 1)
        elif edge.kind is EdgeKind.SOLVED_BY and edge.dst == proc.id:
            col.add(other, level=level - 1)
        elif edge.kind in (EdgeKind.DISTILLED_FROM, *_VERSION_KINDS):
            if col.add(other, level=level) and isinstance(other, Procedure):
                procedures.append(other)
        elif edge.kind is EdgeKind.LINKS_TO:
            col.add(other, level=level)


def _walk_steps(col: _Collector, first: AnyMemory, level: int) -> None:
    """Follow a chain FIRST_STEP → NEXT → … breadth-first; a cycle or a branch stays finite."""
    queue: deque[tuple[AnyMemory, int]] = deque([(first, level)])
    seen: set[str] = set()
    while queue:
        step, lvl = queue.popleft()
        if step.id in seen or not col.add(step, level=lvl):
            continue
        seen.add(step.id)
        nxt = [e.dst for e in col.edges(step.id) if e.kind is EdgeKind.NEXT and e.src == step.id]
        found = col.fetch(nxt)
        queue.extend((found[i], lvl + 1) for i in nxt if i in found)


def _add_versions(col: _Collector, memory: AnyMemory, level: int) -> None:
    edges = [e for e in col.edges(memory.id) if e.kind in _VERSION_KINDS]
    others = col.fetch([_other(e, memory.id) for e in edges])
    for other in others.values():
        col.add(other, level=level)


def _describe_task(sub: Subgraph) -> None:
    counts: dict[str, int] = {}
    for node in sub.nodes.values():
        counts[node.kind] = counts.get(node.kind, 0) + 1
    order = [k.value for k in MemoryKind]
    parts = []
    for k in order:
        if k not in counts:
            continue
        n = counts[k]
        if k == MemoryKind.PROCEDURE and sub.view == "task":
            linked = sum(1 for node in sub.nodes.values() if node.linked)
            own = n - linked
            parts.append(f"{own} own Procedure{'s' if own != 1 else ''}")
            if linked:
                parts.append(f"{linked} linked from other tasks (marked ↗)")
            continue
        parts.append(f"{n} {k}{'s' if n != 1 else ''}")
    sub.subtitle = f"namespace {sub.namespace} · " + ", ".join(parts)
    if sub.truncated:
        sub.subtitle += " · truncated"


def episode_subgraph(
    store: MemoryStore, namespace: str, episode_id: str, *, max_nodes: int = DEFAULT_MAX_NODES
) -> Subgraph:
    """What an episode retrieved and why (rank, sim, Q, score), and how Q moved.

    Retrieved procedures are shown with the task(s) they solved. ``sub.table`` lists one row per
    retrieved memory, best rank first.
    """
    episode = _start(store, namespace, episode_id)
    if not isinstance(episode, Episode):
        raise InvalidInput(f"memory {episode_id!r} is a {episode.kind}, not an Episode")
    outcome = (
        "open (no reward yet)"
        if episode.reward is None
        else f"reward {episode.reward:g}, {'success' if episode.success else 'failure'}"
    )
    sub = Subgraph(
        title=f"Episode: {shorten(episode.task_text, width=90, lines=1)}",
        namespace=namespace,
        root_id=episode.id,
        view="episode",
    )
    col = _Collector(store, sub, max_nodes)
    col.add(episode, level=0, root=True)
    retrieved = store.edges(namespace, episode.id, kinds=[EdgeKind.RETRIEVED], direction="out")
    # In-task recalls each rank their own hits from 1 (or 0): the episode's ranks are by score
    # over all of them, the recall's own rank kept as recall_rank.
    retrieved.sort(key=lambda e: (-_score(e), _rank(e), e.dst))
    memories = col.fetch([e.dst for e in retrieved])
    shown = 0
    for edge in retrieved:
        memory = memories.get(edge.dst)
        if memory is None or not col.add(memory, level=1):
            continue
        shown += 1
        props = {**edge.props, "rank": shown}
        if "rank" in edge.props:
            props["recall_rank"] = edge.props["rank"]
        ranked = edge.model_copy(update={"props": props})
        sub.add_edge(ranked)
        sub.table.append(_retrieved_row(ranked, memory))
        if isinstance(memory, Procedure):
            solved = [e for e in col.edges(memory.id) if e.kind is EdgeKind.SOLVED_BY]
            for task in col.fetch([e.src for e in solved if e.dst == memory.id]).values():
                col.add(task, level=2)
    col.link_all()
    procs = [m for m in memories.values() if isinstance(m, Procedure) and m.id in sub.nodes]
    name_retrieved(sub, store, procs, col.edges)
    sub.subtitle = f"namespace {namespace} · {outcome} · {len(sub.table)} memories retrieved"
    if sub.truncated:
        sub.subtitle += " · truncated"
    return sub.finish()


def _score(edge: Edge) -> float:
    score = edge.props.get("score")
    if isinstance(score, int | float) and not isinstance(score, bool) and score == score:
        return float(score)
    return float("-inf")


def _rank(edge: Edge) -> int:
    rank = edge.props.get("rank")
    return rank if isinstance(rank, int) and not isinstance(rank, bool) else 1 << 30


def _retrieved_row(edge: Edge, memory: AnyMemory) -> dict[str, str]:
    def num(key: str) -> str:
        value = edge.props.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return f"{value:.3f}"
        return ""

    rank = _rank(edge)
    return {
        "rank": "" if rank == 1 << 30 else str(rank),
        "kind": memory.kind,
        "memory": shorten(_gist(memory), width=70, lines=1),
        "sim": num("sim"),
        "q": num("q"),
        "score": num("score"),
        "used": "used" if edge.props.get("used") is True else "",
        "q_after": num("q_after"),
        "q_now": f"{memory.q:.3f}",
        "id": memory.id,
    }


def _gist(memory: AnyMemory) -> str:
    for attr in ("text", "task_text", "content", "action", "key"):
        value = getattr(memory, attr, None)
        if isinstance(value, str) and value:
            return value
    return memory.id


def memory_subgraph(
    store: MemoryStore,
    namespace: str,
    memory_id: str,
    *,
    depth: int = 1,
    max_nodes: int = DEFAULT_MAX_NODES,
) -> Subgraph:
    """A memory and everything within ``depth`` edges of it, in any direction."""
    if not 0 <= depth <= 5:
        raise InvalidInput(f"depth must be between 0 and 5, got {depth}")
    start = _start(store, namespace, memory_id)
    sub = Subgraph(
        title=f"{start.kind}: {shorten(_gist(start), width=90, lines=1)}",
        namespace=namespace,
        root_id=start.id,
        view="memory",
    )
    col = _Collector(store, sub, max_nodes)
    col.add(start, level=0, root=True)
    frontier = [start.id]
    for hop in range(1, depth + 1):
        edges = [(e, i) for i in frontier for e in col.edges(i)]
        found = col.fetch([_other(e, i) for e, i in edges])
        fresh = [m for m in found.values() if m.id not in sub.nodes]
        frontier = [m.id for m in fresh if col.add(m, level=hop)]
    col.link_all()
    _describe_task(sub)
    return sub.finish()
