"""Mermaid flowchart text for a :class:`~graphmem.viz.graph.Subgraph` (paste into Markdown).

Node ids are replaced by short stable names (``n0``, ``n1``…), labels are quoted with every
character Mermaid treats specially written as an entity, so memory text cannot break the chart.

>>> from graphmem.viz.graph import Subgraph
>>> to_mermaid(Subgraph(title="empty", namespace="demo", root_id="x", view="task")).splitlines()
['flowchart LR', '%% empty']
"""

from __future__ import annotations

from graphmem.viz.graph import Subgraph, VizNode
from graphmem.viz.layout import chains

LONG_CHAIN = 8
"""With ``direction="auto"``, a chart whose longest procedure has more steps than this reads top
to bottom: Mermaid cannot wrap a row, and a long left-to-right chain shrinks to unreadable."""

# Characters that end or reshape a quoted Mermaid label; written as #code; entities.
_SPECIAL = {c: f"#{ord(c)};" for c in '"#;<>&|`[]{}()\\'}


def mermaid_text(text: str) -> str:
    """Escape ``text`` for a quoted Mermaid label; newlines become line breaks."""
    lines = text.split("\n")
    return "<br/>".join("".join(_SPECIAL.get(c, c) for c in line) for line in lines)


def _shape(node: VizNode, name: str, label: str) -> str:
    if node.kind == "Procedure":
        return f'{name}(["{label}"])'
    if node.kind == "Tip":
        return f'{name}{{{{"{label}"}}}}'
    if node.kind == "Episode":
        return f'{name}[/"{label}"/]'
    if node.kind == "Note":
        return f'{name}("{label}")'
    return f'{name}["{label}"]'


def to_mermaid(sub: Subgraph, *, direction: str = "auto") -> str:
    """The subgraph as a Mermaid ``flowchart``: chains read left to right, or top to bottom
    (``auto``) once a procedure has more than :data:`LONG_CHAIN` steps."""
    if direction not in ("auto", "LR", "TB", "RL", "BT"):
        from graphmem.errors import InvalidInput

        raise InvalidInput(f"direction must be auto, LR, TB, RL or BT, not {direction!r}")
    if direction == "auto":
        longest = max((len(steps) for steps in chains(sub).values()), default=0)
        direction = "TB" if longest > LONG_CHAIN else "LR"
    names = {node_id: f"n{i}" for i, node_id in enumerate(sub.nodes)}
    title = " ".join(sub.title.split())
    lines = [f"flowchart {direction}", f"%% {title}"]
    for node_id, node in sub.nodes.items():
        lines.append("  " + _shape(node, names[node_id], mermaid_text(node.caption)))
    for edge in sub.edges:
        arrow = "-.->" if edge.dashed else "-->"
        label = mermaid_text(edge.label)
        lines.append(f'  {names[edge.src]} {arrow}|"{label}"| {names[edge.dst]}')
    for node_id, node in sub.nodes.items():
        width = "4px" if node.root else "2px"
        dash = ",stroke-dasharray:5 4" if node.obsolete else ""
        lines.append(
            f"  style {names[node_id]} fill:{node.fill},stroke:{node.border},"
            f"stroke-width:{width},color:#212529{dash}"
        )
    for i, edge in enumerate(sub.edges):
        lines.append(f"  linkStyle {i} stroke:{edge.colour},color:{edge.colour}")
    return "\n".join(lines) + "\n"
