"""PNG pictures: Graphviz ``dot`` when installed, else a matplotlib drawing of the same layout.

The matplotlib fallback draws the layout the HTML page uses (:mod:`graphmem.viz.layout`: long
chains wrap into rows, nothing overlaps): each node a coloured box with its caption, each edge
an arrow clipped at the boxes. It is plainer than Graphviz but needs nothing beyond matplotlib.
"""

from __future__ import annotations

import io
import logging
from typing import Literal

from graphmem.viz.dot import dot_binary, dot_png
from graphmem.viz.graph import Subgraph, VizError
from graphmem.viz.layout import font_px, layout, node_box

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


# Layout units are canvas pixels; the drawing maps one to a point, and writes captions a little
# smaller than the layout assumed (DejaVu Sans is wider than the browser's face), so boxes the
# layout kept apart stay apart.
FONT_SCALE = 0.8
MAX_INCHES = 120.0


def _border(
    centre: tuple[float, float], toward: tuple[float, float], box: tuple[float, float]
) -> tuple[float, float]:
    """Where the line from ``centre`` to ``toward`` leaves the drawn box (a little outside)."""
    (x, y), (tx, ty) = centre, toward
    dx, dy = tx - x, ty - y
    half_w, half_h = box[0] * FONT_SCALE / 2 + 6, box[1] * FONT_SCALE / 2 + 6
    scales = [half_w / abs(dx) if dx else float("inf"), half_h / abs(dy) if dy else float("inf")]
    t = min(1.0, *scales)
    return x + dx * t, y + dy * t


def matplotlib_png(sub: Subgraph, *, dpi: int = 110) -> bytes:
    """Draw the subgraph with matplotlib (Agg backend); raises VizError without matplotlib.

    Nodes sit where :func:`graphmem.viz.layout.layout` puts them (a long chain wraps into rows),
    edges are clipped at the boxes, and chain edges go unlabelled as on the HTML page.
    """
    try:
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise VizError(
            "PNG output needs Graphviz 'dot' or matplotlib; install either "
            "(apt-get install graphviz, or pip install 'graphmem[viz]')"
        ) from e
    pos = layout(sub)
    boxes = {i: node_box(n) for i, n in sub.nodes.items()}
    margin = 40.0
    left = min([pos[i][0] - boxes[i][0] / 2 for i in pos] or [0.0]) - margin
    right = max([pos[i][0] + boxes[i][0] / 2 for i in pos] or [0.0]) + margin
    top = min([pos[i][1] - boxes[i][1] / 2 for i in pos] or [0.0]) - margin
    bottom = max([pos[i][1] + boxes[i][1] / 2 for i in pos] or [0.0]) + margin
    width_in, height_in = (right - left) / 72, (bottom - top) / 72
    shrink = min(1.0, MAX_INCHES / max(width_in, height_in, 1e-9))
    fig = plt.figure(figsize=(max(3.0, width_in * shrink), max(2.0, height_in * shrink)))
    ax = fig.add_axes((0.0, 0.0, 1.0, 1.0))
    try:
        ax.set_axis_off()
        ax.set_xlim(left, right)
        ax.set_ylim(bottom, top)  # canvas y grows downwards
        if width_in * shrink < 3.0 or height_in * shrink < 2.0:
            ax.set_aspect("equal", adjustable="datalim")
        fig.suptitle(
            f"{sub.title}\n{sub.subtitle}", fontsize=12 * max(shrink, 0.5), y=1.0, va="bottom"
        )
        for node_id, node in sub.nodes.items():
            x, y = pos[node_id]
            ax.text(
                x,
                y,
                node.caption,
                fontsize=font_px(node) * FONT_SCALE * shrink,
                ha="center",
                va="center",
                color="#868e96" if node.obsolete else "#212529",
                zorder=3,
                bbox={
                    "boxstyle": "round,pad=0.45"
                    if node.radius or node.shape == "ellipse"
                    else "square,pad=0.45",
                    "fc": node.fill,
                    "ec": node.border,
                    "lw": 3 if node.root else 1.5,
                    "ls": "--" if node.obsolete else "-",
                },
            )
        for edge in sub.edges:
            (x1, y1), (x2, y2) = pos[edge.src], pos[edge.dst]
            chain = edge.kind in ("NEXT", "FIRST_STEP")
            same_row = abs(y1 - y2) < 1 or abs(x1 - x2) < 1
            # From border to border, under the boxes: an edge never hides a caption it passes.
            start = _border((x1, y1), (x2, y2), boxes[edge.src])
            end = _border((x2, y2), (x1, y1), boxes[edge.dst])
            ax.annotate(
                "",
                xy=end,
                xytext=start,
                zorder=2,
                arrowprops={
                    "arrowstyle": "-|>",
                    "color": edge.colour,
                    "alpha": 1.0 if chain or abs(y1 - y2) <= 320 else 0.3,
                    "linestyle": "--" if edge.dashed else "-",
                    "shrinkA": 0,
                    "shrinkB": 0,
                    "connectionstyle": "arc3,rad=0" if same_row else "arc3,rad=-0.12",
                },
            )
            if chain or abs(y1 - y2) > 320:
                continue
            ax.text(
                (x1 + x2) / 2,
                (y1 + y2) / 2,
                edge.label,
                fontsize=7 * shrink,
                color=edge.colour,
                ha="center",
                va="center",
                zorder=4,
                bbox={"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.8},
            )
        out = io.BytesIO()
        fig.savefig(out, format="png", dpi=dpi, bbox_inches="tight")
        return out.getvalue()
    finally:
        plt.close(fig)
