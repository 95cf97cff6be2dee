"""Graphviz DOT text for a :class:`~graphmem.viz.graph.Subgraph`, and PNG through ``dot``.

Chains are ranked left to right by their layout level (Task, then Procedures, then Steps in
order). :func:`dot_png` pins the nodes where :mod:`graphmem.viz.layout` puts them (long chains
wrap into rows, as on the HTML page) and draws them with ``neato -n2``; it needs Graphviz
(Debian: ``apt-get install graphviz``); :mod:`graphmem.viz.png` falls back to matplotlib.

>>> from graphmem.viz.graph import Subgraph
>>> to_dot(Subgraph(title="empty", namespace="demo", root_id="x", view="task")).splitlines()[0]
'digraph graphmem {'
"""

from __future__ import annotations

import shutil
import subprocess

from graphmem.viz.graph import Subgraph, VizError, VizNode
from graphmem.viz.layout import layout

DOT_TIMEOUT_S = 60.0

_DOT_SHAPES = {"box": "box", "ellipse": "ellipse"}


def dot_text(text: str) -> str:
    """Escape ``text`` for a double-quoted DOT string; newlines become centred line breaks."""
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _node_attrs(node: VizNode) -> str:
    style = ["filled"]
    if node.radius:
        style.append("rounded")
    if node.obsolete:
        style.append("dashed")
    tooltip = "\n".join(f"{k}: {v}" for k, v in node.fields.items())
    attrs = {
        "label": node.caption,
        "shape": _DOT_SHAPES.get(node.shape, "box"),
        "style": ",".join(style),
        "fillcolor": node.fill,
        "color": node.border,
        "penwidth": "4" if node.root else "2",
        "margin": f"{0.12 + 0.12 * node.size:.2f},{0.06 + 0.06 * node.size:.2f}",
        "fontsize": f"{11 + 3 * node.size:.1f}",
        "tooltip": tooltip,
    }
    return ", ".join(f'{k}="{dot_text(v)}"' for k, v in attrs.items())


def to_dot(sub: Subgraph, *, rankdir: str = "LR", positions: bool = False) -> str:
    """The subgraph as a DOT ``digraph``; layout levels become ranks.

    With ``positions`` every node is pinned where :func:`graphmem.viz.layout.layout` puts it
    (``pos="x,y!"``, points), for ``neato -n2``: long chains wrap into rows as on the HTML page.
    """
    if rankdir not in ("LR", "TB", "RL", "BT"):
        from graphmem.errors import InvalidInput

        raise InvalidInput(f"rankdir must be LR, TB, RL or BT, not {rankdir!r}")
    lines = [
        "digraph graphmem {",
        f'  graph [rankdir={rankdir}, label="{dot_text(sub.title)}\\n{dot_text(sub.subtitle)}", '
        'labelloc=t, fontname="Helvetica", fontsize=16, nodesep=0.35, ranksep=0.6, pad=0.4];',
        '  node [fontname="Helvetica"];',
        '  edge [fontname="Helvetica", fontsize=10];',
    ]
    pinned = layout(sub) if positions else {}
    for node_id, node in sub.nodes.items():
        pin = ""
        if node_id in pinned:
            x, y = pinned[node_id]
            pin = f', pos="{x:.1f},{-y:.1f}!"'  # Graphviz's y grows upwards
        lines.append(f'  "{dot_text(node_id)}" [{_node_attrs(node)}{pin}];')
    for edge in sub.edges:
        style = ', style="dashed"' if edge.dashed else ""
        # A link's label says only LINKS_TO (and a reason the tooltip keeps): the dashed line
        # in the link colour says it, and many labels tangle.
        label = "" if edge.kinds == ["LINKS_TO"] else edge.label
        lines.append(
            f'  "{dot_text(edge.src)}" -> "{dot_text(edge.dst)}" '
            f'[label="{dot_text(label)}", tooltip="{dot_text(edge.label)}", '
            f'color="{edge.colour}", fontcolor="{edge.colour}"{style}];'
        )
    levels: dict[int, list[str]] = {}
    for node_id, node in sub.nodes.items():
        levels.setdefault(node.level, []).append(node_id)
    for level in sorted(levels) if not positions else []:
        members = " ".join(f'"{dot_text(i)}";' for i in levels[level])
        lines.append(f"  {{ rank=same; {members} }}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def dot_binary() -> str | None:
    """Path of Graphviz ``dot``, or None when it is not installed."""
    return shutil.which("dot")


def dot_png(sub: Subgraph, *, dpi: int = 110) -> bytes:
    """Render with Graphviz ``dot -Tpng``; raises VizError if it is missing or fails."""
    binary = dot_binary()
    if binary is None:
        raise VizError("Graphviz 'dot' is not installed (Debian/Ubuntu: apt-get install graphviz)")
    try:
        done = subprocess.run(
            [binary, "-Kneato", "-n2", "-Gsplines=true", "-Tpng", f"-Gdpi={int(dpi)}"],
            input=to_dot(sub, positions=True).encode("utf-8"),
            capture_output=True,
            timeout=DOT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise VizError(f"Graphviz dot failed: {e}") from e
    if done.returncode != 0 or not done.stdout.startswith(b"\x89PNG"):
        reason = done.stderr.decode("utf-8", "replace").strip().splitlines()[:1]
        raise VizError(f"Graphviz dot failed: {reason[0] if reason else 'no PNG produced'}")
    return done.stdout
