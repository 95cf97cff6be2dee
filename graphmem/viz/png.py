"""PNG pictures: Graphviz ``dot`` when installed, else a matplotlib drawing of the same layout.

The matplotlib fallback places nodes by layout level (columns, left to right) in insertion
order, draws each as a coloured box with its caption and each edge as a labelled arrow. It is
plainer than Graphviz but needs nothing beyond matplotlib.
"""

from __future__ import annotations

import io
import logging
from typing import Literal

from graphmem.viz.dot import dot_binary, dot_png
from graphmem.viz.graph import Subgraph, VizError

log = logging.getLogger(__name__)

Engine = Literal["auto", "dot", "matplotlib"]


def to_png(sub: Subgraph, *, engine: Engine = "auto") -> bytes:
    """PNG bytes of the subgraph; ``engine="auto"`` uses dot when present."""
    if engine == "dot" or (engine == "auto" and dot_binary() is not None):
        return dot_png(sub)
    if engine not in ("auto", "matplotlib"):
        from graphmem.errors import InvalidInput

        raise InvalidInput(f"engine must be auto, dot or matplotlib, not {engine!r}")
    log.info("Graphviz dot not found; drawing the PNG with matplotlib")
    return matplotlib_png(sub)


def _positions(sub: Subgraph) -> dict[str, tuple[float, float]]:
    columns: dict[int, list[str]] = {}
    for node_id, node in sub.nodes.items():
        columns.setdefault(node.level, []).append(node_id)
    pos: dict[str, tuple[float, float]] = {}
    for x, level in enumerate(sorted(columns)):
        members = columns[level]
        for y, node_id in enumerate(members):
            pos[node_id] = (x * 3.2, -(y - (len(members) - 1) / 2) * 1.6)
    return pos


def matplotlib_png(sub: Subgraph, *, dpi: int = 110) -> bytes:
    """Draw the subgraph with matplotlib (Agg backend); raises VizError without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise VizError(
            "PNG output needs Graphviz 'dot' or matplotlib; install either "
            "(apt-get install graphviz, or pip install matplotlib)"
        ) from e
    pos = _positions(sub)
    xs = [p[0] for p in pos.values()] or [0.0]
    ys = [p[1] for p in pos.values()] or [0.0]
    width = min(40.0, 3.0 + (max(xs) - min(xs)) * 1.0)
    height = min(40.0, 2.5 + (max(ys) - min(ys)) * 0.9)
    fig, ax = plt.subplots(figsize=(width, height))
    try:
        ax.set_axis_off()
        ax.set_title(f"{sub.title}\n{sub.subtitle}", fontsize=12)
        for edge in sub.edges:
            (x1, y1), (x2, y2) = pos[edge.src], pos[edge.dst]
            ax.annotate(
                "",
                xy=(x2, y2),
                xytext=(x1, y1),
                arrowprops={
                    "arrowstyle": "-|>",
                    "color": edge.colour,
                    "linestyle": "--" if edge.dashed else "-",
                    "shrinkA": 28,
                    "shrinkB": 28,
                    "connectionstyle": "arc3,rad=0.08",
                },
            )
            ax.text(
                (x1 + x2) / 2,
                (y1 + y2) / 2 + 0.12,
                edge.label,
                fontsize=7,
                color=edge.colour,
                ha="center",
                va="center",
                bbox={"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.8},
            )
        for node_id, node in sub.nodes.items():
            x, y = pos[node_id]
            ax.text(
                x,
                y,
                node.caption,
                fontsize=8 + 2 * node.size,
                ha="center",
                va="center",
                color="#868e96" if node.obsolete else "#212529",
                bbox={
                    "boxstyle": "round,pad=0.5"
                    if node.radius or node.shape == "ellipse"
                    else "square,pad=0.5",
                    "fc": node.fill,
                    "ec": node.border,
                    "lw": 3 if node.root else 1.5,
                    "ls": "--" if node.obsolete else "-",
                },
            )
        ax.set_xlim(min(xs) - 1.8, max(xs) + 1.8)
        ax.set_ylim(min(ys) - 1.0, max(ys) + 1.0)
        out = io.BytesIO()
        fig.savefig(out, format="png", dpi=dpi, bbox_inches="tight")
        return out.getvalue()
    finally:
        plt.close(fig)
