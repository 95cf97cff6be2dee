"""What every renderer draws: a small, store-free picture of part of the memory graph.

A :class:`Subgraph` holds :class:`VizNode` and :class:`VizEdge` records whose captions, tooltip
fields, colours and layout levels are decided here once, so the HTML, Mermaid, DOT and PNG
renderers agree. Colour encodes learned utility Q (red low, amber middle, green high); the border
colour and shape encode the memory's kind; obsolete memories are drawn dashed.

>>> from graphmem.models import Task
>>> node = node_for(Task(namespace="demo", text="Boil an egg", key="boil egg", q=0.9), level=0)
>>> node.caption.splitlines()[0], node.border
('TASK', '#1f4e79')
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal

from graphmem.errors import GraphmemError
from graphmem.models import (
    UTILITY_FIELDS,
    AnyMemory,
    Edge,
    EdgeKind,
    Episode,
    MemoryKind,
    Note,
    Procedure,
    PropValue,
    Step,
    Task,
    Tip,
)

if TYPE_CHECKING:
    from graphmem.ops.explain import EpisodeReport

View = Literal["task", "episode", "memory"]

CAPTION_WIDTH = 30
CAPTION_LINES = 3
STEP_WIDTH = 24  # steps sit three to a row: narrower captions
FIELD_CHARS = 600


class VizError(GraphmemError):
    """A picture could not be drawn (a renderer or tool is missing or failed)."""


@dataclass(frozen=True)
class KindStyle:
    border: str
    shape: str  # vis-network shape; the other renderers map it to theirs
    radius: int = 0


KIND_STYLES: dict[str, KindStyle] = {
    MemoryKind.TASK: KindStyle("#1f4e79", "box", 2),
    MemoryKind.PROCEDURE: KindStyle("#6a3d9a", "ellipse"),
    MemoryKind.STEP: KindStyle("#495057", "box", 6),
    MemoryKind.TIP: KindStyle("#d9480f", "box", 16),
    MemoryKind.EPISODE: KindStyle("#0b7285", "box", 0),
    MemoryKind.NOTE: KindStyle("#8c6d31", "ellipse"),
}

EDGE_COLOURS: dict[str, str] = {
    EdgeKind.SOLVED_BY: "#1f4e79",
    EdgeKind.FIRST_STEP: "#495057",
    EdgeKind.NEXT: "#495057",
    EdgeKind.DISTILLED_FROM: "#6a3d9a",
    EdgeKind.ABOUT: "#d9480f",
    EdgeKind.LINKS_TO: "#8c6d31",
    EdgeKind.EVOLVED_FROM: "#c2255c",
    EdgeKind.SUPERSEDES: "#c2255c",
    EdgeKind.RETRIEVED: "#0b7285",
    EdgeKind.UPDATES: "#e8590c",
}

DASHED_EDGES = frozenset({EdgeKind.EVOLVED_FROM, EdgeKind.SUPERSEDES, EdgeKind.LINKS_TO})

# Control characters (NUL, ESC…) mean nothing on a picture and upset Graphviz: shown as �.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")

# Light tints so black captions stay readable on every fill.
_Q_LOW, _Q_MID, _Q_HIGH = (244, 166, 160), (251, 227, 150), (150, 214, 164)
OBSOLETE_FILL = "#e9ecef"
EPISODE_FILL = "#d0ebef"


@dataclass
class VizNode:
    id: str
    kind: str
    caption: str
    q: float
    q_updates: int
    obsolete: bool
    level: int
    fields: dict[str, str]
    root: bool = False
    fill: str = ""
    border: str = ""
    shape: str = "box"
    radius: int = 0
    size: float = 0.5  # 0..1: how large to draw it (its Q on the page's scale)
    linked: bool = False  # a task view's procedure of another task, there by a link


@dataclass
class VizEdge:
    src: str
    dst: str
    kind: str
    label: str
    props: dict[str, PropValue] = field(default_factory=dict)
    also: list[str] = field(default_factory=list)  # kinds of parallel edges merged into this

    @property
    def kinds(self) -> list[str]:
        return [self.kind, *self.also]

    @property
    def colour(self) -> str:
        return EDGE_COLOURS.get(self.kind, "#868e96")

    @property
    def dashed(self) -> bool:
        return self.kind in DASHED_EDGES


@dataclass
class CompareRow:
    """One procedure in a task's comparison table: its numbers, what is its own, and its steps
    aligned on the best procedure's (``(text, state, short label)``; state best, same, changed,
    missing or added)."""

    id: str
    granularity: str
    version: int
    q: float
    uses: int
    successes: int
    outcome: str
    obsolete: bool
    distinct: str
    cells: list[tuple[str, str, str]]
    episodes: list[str] = field(default_factory=list)  # episodes that marked it used
    linked: bool = False  # another task's procedure, on the page by a link
    twins: list[str] = field(default_factory=list)  # ids of procedures with this same row


@dataclass
class VersionLink:
    """One EVOLVED_FROM step of a procedure: old → new, the change it records, and the steps
    the new version added and dropped."""

    old_id: str
    new_id: str
    old_version: int
    new_version: int
    old_q: float
    new_q: float
    change: str
    added: list[str]
    removed: list[str]


@dataclass
class Subgraph:
    """Nodes (in insertion order) and edges of one picture, with its title.

    Every view is laid out in columns by ``VizNode.level`` (left to right).
    """

    title: str
    namespace: str
    root_id: str
    view: View
    nodes: dict[str, VizNode] = field(default_factory=dict)
    edges: list[VizEdge] = field(default_factory=list)
    subtitle: str = ""
    table: list[dict[str, str]] = field(default_factory=list)
    truncated: bool = False
    q_range: tuple[float, float] = (0.0, 1.0)
    # Task views: the procedures compared (best Q first) on the best one's steps (columns),
    # their versions, and the stories of the episodes that used them.
    compare: list[CompareRow] = field(default_factory=list)
    columns: list[str] = field(default_factory=list)
    versions: list[VersionLink] = field(default_factory=list)
    episodes: list[EpisodeReport] = field(default_factory=list)

    def add_edge(self, edge: Edge) -> bool:
        """Add a store edge between two nodes already present, once; True if added.

        Edges of several kinds between the same two memories (EVOLVED_FROM and SUPERSEDES, say)
        are drawn as one edge whose label names them all, so they do not overlap.
        """
        if edge.src not in self.nodes or edge.dst not in self.nodes:
            return False
        for drawn in self.edges:
            if drawn.src == edge.src and drawn.dst == edge.dst:
                if edge.kind.value in drawn.kinds:
                    return False
                drawn.also.append(edge.kind.value)
                drawn.label += "\n" + edge_label(edge)
                drawn.props.update({k: v for k, v in edge.props.items() if k not in drawn.props})
                return True
        label = edge_label(edge)
        self.edges.append(VizEdge(edge.src, edge.dst, edge.kind.value, label, dict(edge.props)))
        return True

    def finish(self) -> Subgraph:
        """Colour and size every node on this picture's Q scale; returns self."""
        # An episode's own q is never learned; it would only stretch the scale.
        qs = [n.q for n in self.nodes.values() if n.kind != MemoryKind.EPISODE]
        lo = min([0.0, *qs])
        hi = max([1.0, *qs])
        self.q_range = (lo, hi)
        for node in self.nodes.values():
            t = (node.q - lo) / (hi - lo) if hi > lo else 0.5
            node.size = t
            if node.kind == MemoryKind.EPISODE:
                node.fill, node.size = EPISODE_FILL, 0.5
            else:
                node.fill = OBSOLETE_FILL if node.obsolete else q_colour(t)
        return self


def static_view(sub: Subgraph) -> Subgraph:
    """What the static pictures (DOT, PNG, Mermaid) draw of ``sub``, which cannot show link
    lines on demand as the HTML page does: a task view without the procedures of other tasks
    that are there by a link (their count in the subtitle), an episode view without the
    LINKS_TO lines between the memories it retrieved (beside the scores they are a tangle).
    The HTML page draws everything."""
    if sub.view == "task":
        linked = {i for i, n in sub.nodes.items() if n.linked}
        if not linked:
            return sub
        nodes = {i: n for i, n in sub.nodes.items() if i not in linked}
        edges = [e for e in sub.edges if e.src not in linked and e.dst not in linked]
        told = f"{len(linked)} linked from other tasks (marked ↗)"
        note = f"{len(linked)} linked from other tasks, not drawn (the HTML page has them)"
        subtitle = sub.subtitle.replace(told, note) if told in sub.subtitle else note
        return replace(sub, nodes=nodes, edges=edges, subtitle=subtitle)
    if sub.view == "episode":
        links = [e for e in sub.edges if e.kinds == ["LINKS_TO"]]
        if not links:
            return sub
        edges = [e for e in sub.edges if e.kinds != ["LINKS_TO"]]
        subtitle = f"{sub.subtitle} · {len(links)} links between them not drawn"
        return replace(sub, edges=edges, subtitle=subtitle)
    return sub


def q_colour(t: float) -> str:
    """Fill colour for a position ``t`` in [0, 1] on the Q scale (red → amber → green)."""
    t = min(1.0, max(0.0, t))
    a, b, u = (_Q_LOW, _Q_MID, t * 2) if t < 0.5 else (_Q_MID, _Q_HIGH, (t - 0.5) * 2)
    r, g, bl = (round(x + (y - x) * u) for x, y in zip(a, b, strict=True))
    return f"#{r:02x}{g:02x}{bl:02x}"


def shorten(text: str, width: int = CAPTION_WIDTH, lines: int = CAPTION_LINES) -> str:
    """Wrap ``text`` to at most ``lines`` lines of ``width`` characters, with an ellipsis."""
    flat = " ".join(_CONTROL.sub("\ufffd", text).split())
    wrapped = textwrap.wrap(flat, width=width, break_long_words=True) or [""]
    if len(wrapped) > lines:
        wrapped = wrapped[:lines]
        wrapped[-1] = wrapped[-1][: width - 1].rstrip() + "…"
    return "\n".join(wrapped)


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.3f}".rstrip("0").rstrip(".") if value == value else "nan"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    text = "" if value is None else _CONTROL.sub("\ufffd", str(value))
    return text if len(text) <= FIELD_CHARS else text[: FIELD_CHARS - 1] + "…"


_FIRST_FIELDS = ("kind", "id", "q", "q_updates", "uses", "successes")
_HIDDEN_FIELDS = frozenset({"embedding", "content_hash", "namespace"})


def memory_fields(memory: AnyMemory) -> dict[str, str]:
    """The memory's fields as display strings, most telling first; no embedding."""
    hidden = set(_HIDDEN_FIELDS)
    if isinstance(memory, Episode):
        hidden |= UTILITY_FIELDS  # an episode is credited, it is not itself retrieved
    data = memory.model_dump(mode="json", exclude=hidden)
    out = {k: _fmt(data[k]) for k in _FIRST_FIELDS if k in data}
    for key, value in data.items():
        if key not in out and value not in (None, "", []):
            out[key] = _fmt(value)
    return out


def caption_for(memory: AnyMemory) -> str:
    """A short multi-line caption: kind, the memory's gist, and its Q."""
    q_line = f"Q {memory.q:.2f}"
    if isinstance(memory, Task):
        return f"TASK\n{shorten(memory.text)}\n{q_line}"
    if isinstance(memory, Procedure):
        outcome = "✓" if memory.success else "✗"
        head = f"PROCEDURE · {memory.granularity.value}"
        return f"{head}\n{shorten(memory.key, lines=2)}\n{outcome} r={memory.reward:g} · {q_line}"
    if isinstance(memory, Step):
        text = f"{memory.index}. {shorten(memory.action, width=STEP_WIDTH, lines=2)}"
        return f"{text}\n{q_line}" if memory.q_updates else text
    if isinstance(memory, Tip):
        return f"TIP · {memory.polarity.value}\n{shorten(memory.text)}\n{q_line}"
    if isinstance(memory, Episode):
        if memory.reward is None:
            outcome = memory.status.value
        else:
            outcome = f"R={memory.reward:g} {'✓' if memory.success else '✗'}"
        return f"EPISODE\n{shorten(memory.task_text, lines=2)}\n{outcome}"
    if isinstance(memory, Note):
        head = "NOTE · updated later" if memory.updated_by else "NOTE"
        return f"{head}\n{shorten(memory.content)}\n{q_line}"
    return f"{memory.kind}\n{memory.id}"  # pragma: no cover - every kind is handled above


def node_for(memory: AnyMemory, *, level: int, root: bool = False) -> VizNode:
    style = KIND_STYLES.get(memory.kind, KindStyle("#868e96", "box"))
    caption = caption_for(memory)
    if memory.obsolete:
        caption += "\n(obsolete)"
    return VizNode(
        id=memory.id,
        kind=memory.kind,
        caption=caption,
        q=memory.q,
        q_updates=memory.q_updates,
        obsolete=memory.obsolete,
        level=level,
        fields=memory_fields(memory),
        root=root,
        border=style.border,
        shape=style.shape,
        radius=style.radius,
    )


def _num(value: PropValue) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def edge_label(edge: Edge) -> str:
    """The edge's kind, plus the one or two numbers that explain it."""
    p = edge.props
    if edge.kind is EdgeKind.RETRIEVED:
        rank, score, sim, q, q_after = (p.get(k) for k in ("rank", "score", "sim", "q", "q_after"))
        head = f"#{rank}" if isinstance(rank, int) and not isinstance(rank, bool) else "RETRIEVED"
        parts = [head]
        if (s := _num(score)) is not None:
            parts.append(f"score {s:.2f}")
        if p.get("used") is True:
            parts.append("used")
        second: list[str] = []
        if (v := _num(sim)) is not None:
            second.append(f"sim {v:.2f}")
        if (qv := _num(q)) is not None:
            qa = _num(q_after)
            second.append(f"Q {qv:.2f}→{qa:.2f}" if qa is not None else f"Q {qv:.2f}")
        return " ".join(parts) + ("\n" + " · ".join(second) if second else "")
    if edge.kind is EdgeKind.SOLVED_BY and (r := _num(p.get("reward"))) is not None:
        return f"SOLVED_BY r={r:g}"
    if edge.kind is EdgeKind.LINKS_TO and isinstance(p.get("reason"), str):
        return f"LINKS_TO\n{shorten(str(p['reason']), width=24, lines=1)}"
    if edge.kind is EdgeKind.UPDATES and isinstance(p.get("subject"), str):
        return f"UPDATES\n{shorten(str(p['subject']), width=24, lines=1)}"
    if edge.kind is EdgeKind.EVOLVED_FROM and isinstance(p.get("change"), str):
        return f"EVOLVED_FROM\n{shorten(str(p['change']), width=24, lines=1)}"
    return str(edge.kind.value)
