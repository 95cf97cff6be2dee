"""Where each node of a :class:`~graphmem.viz.graph.Subgraph` goes, decided once for every renderer.

Canvas units are pixels at zoom 1. A task view puts the Task (and its tips) on the first row,
then one block per procedural chain: the Procedure on the left, its steps in rows as long as
fit :data:`ROW_WIDTH` (:func:`steps_per_row`) that alternate direction (the chain snakes down,
each turn one short edge), so a 30-step chain stays a few rows tall instead of one line too long
to read. Procedures with identical steps are stacked under the one whose steps are drawn, then
procedures without a drawn chain (linked, older versions) beside the first chain while there is
room, and in a grid as wide as :data:`ROW_WIDTH` below. Episode and memory views are columns by
level, each column stacked by the nodes' sizes so nothing overlaps.

>>> from graphmem.viz.graph import Subgraph
>>> layout(Subgraph(title="empty", namespace="demo", root_id="x", view="task"))
{}
"""

from __future__ import annotations

from collections.abc import Iterable

from graphmem.models import EdgeKind, MemoryKind
from graphmem.viz.graph import Subgraph, VizNode

Point = tuple[float, float]

ROW_WIDTH = 1300.0
"""Canvas pixels a task view's rows may fill: the graph's frame in a 1400-px-wide window, at
the zoom the first view keeps (``graphmem.viz.html.READABLE_SCALE``)."""
MIN_PER_ROW, MAX_PER_ROW = 2, 10
FONT_PX = 14.0
CHAR_PX = 0.57  # of the font size: an average glyph of the sans-serif face Chromium draws
LINE_PX = 1.3
COLUMN_GAP = 55.0
ROW_GAP = 34.0
BLOCK_GAP = 70.0


def font_px(node: VizNode) -> float:
    """The caption's font size in canvas pixels (larger for a higher Q)."""
    return FONT_PX + 3.0 * node.size


def node_box(node: VizNode) -> Point:
    """Estimated width and height of the node's drawn box, caption and margins included."""
    lines = node.caption.split("\n")
    font = font_px(node)
    margin = 6.0 + 10.0 * node.size
    width = max(len(line) for line in lines) * font * CHAR_PX + 2 * margin
    height = len(lines) * font * LINE_PX + 2 * margin
    if node.shape == "ellipse":  # an ellipse needs room around its inscribed caption
        width, height = width * 1.05, height * 1.15
    return width, height


def chains(sub: Subgraph) -> dict[str, list[str]]:
    """Each drawn Procedure's steps in order (FIRST_STEP, NEXT…), as far as the picture goes."""
    first: dict[str, str] = {}
    nxt: dict[str, str] = {}
    for edge in sub.edges:
        if EdgeKind.FIRST_STEP.value in edge.kinds:
            first.setdefault(edge.src, edge.dst)
        elif EdgeKind.NEXT.value in edge.kinds:
            nxt.setdefault(edge.src, edge.dst)
    out: dict[str, list[str]] = {}
    for proc_id, node in sub.nodes.items():
        if node.kind != MemoryKind.PROCEDURE or proc_id not in first:
            continue
        seen: list[str] = []
        step: str | None = first[proc_id]
        while step is not None and step in sub.nodes and step not in seen:
            seen.append(step)
            step = nxt.get(step)
        out[proc_id] = seen
    return out


def layout(sub: Subgraph) -> dict[str, Point]:
    """Centre of every node; the task view wraps chains, other views stack columns."""
    if not sub.nodes:
        return {}
    if sub.view == "task":
        return _task_layout(sub)
    if sub.view == "episode":
        order = _episode_order(sub)
        return _columns(sub, key=lambda i: order.get(i, len(order)))
    return _columns(sub, key=lambda i: 0)


class _Rows:
    """Places rows of nodes top to bottom, each row as tall as its tallest node."""

    def __init__(self, sub: Subgraph) -> None:
        self.sub = sub
        self.pos: dict[str, Point] = {}
        self.y = 0.0

    def row(self, items: Iterable[tuple[str, float]]) -> None:
        placed = [(i, x) for i, x in items if i not in self.pos]
        if not placed:
            return
        height = max(node_box(self.sub.nodes[i])[1] for i, _ in placed)
        for node_id, x in placed:
            self.pos[node_id] = (x, self.y + height / 2)
        self.y += height + ROW_GAP

    def gap(self, extra: float = BLOCK_GAP - ROW_GAP) -> None:
        self.y += extra


def _slot(sub: Subgraph, ids: Iterable[str]) -> float:
    widths = [node_box(sub.nodes[i])[0] for i in ids]
    return (max(widths) if widths else 0.0) + COLUMN_GAP


def _left_width(sub: Subgraph) -> float:
    kinds = (MemoryKind.PROCEDURE, MemoryKind.TASK)
    return _slot(sub, [i for i, n in sub.nodes.items() if n.kind in kinds])


def _column_widths(sub: Subgraph, drawn: dict[str, list[str]], per_row: int) -> list[float]:
    """Step columns as wide as their widest step, so short actions sit close together."""
    widths = [0.0] * per_row
    for chain in drawn.values():
        for k, step_id in enumerate(chain):
            col = k % per_row
            widths[col] = max(widths[col], node_box(sub.nodes[step_id])[0])
    return widths


def steps_per_row(sub: Subgraph, width: float = ROW_WIDTH) -> int:
    """How many steps a row holds so that the procedure column and the row fit ``width``
    (between :data:`MIN_PER_ROW` and :data:`MAX_PER_ROW`)."""
    drawn = chains(sub)
    longest = max((len(c) for c in drawn.values()), default=0)
    left = _left_width(sub)
    for n in range(min(MAX_PER_ROW, max(longest, MIN_PER_ROW)), MIN_PER_ROW, -1):
        if left + sum(_column_widths(sub, drawn, n)) + n * COLUMN_GAP <= width:
            return n
    return MIN_PER_ROW


def _task_layout(sub: Subgraph) -> dict[str, Point]:
    drawn = chains(sub)
    per_row = steps_per_row(sub)
    procs = [i for i, n in sub.nodes.items() if n.kind == MemoryKind.PROCEDURE]
    steps = [i for i, n in sub.nodes.items() if n.kind == MemoryKind.STEP]
    left_w = _left_width(sub)
    step_w = _slot(sub, steps) if steps else left_w
    widths = _column_widths(sub, drawn, per_row)
    centres: list[float] = []
    edge = (left_w - COLUMN_GAP) / 2
    for w in widths:
        centres.append(edge + COLUMN_GAP + w / 2)
        edge += COLUMN_GAP + w
    rows = _Rows(sub)
    # Header: tasks, then what hangs off them (tips, other versions), wrapped.
    head = [i for i, n in sub.nodes.items() if n.level <= 0]
    tasks = [i for i in head if sub.nodes[i].kind == MemoryKind.TASK]
    others = [i for i in head if i not in tasks]
    header = max(2, int((ROW_WIDTH - left_w) // step_w) + 1)
    first_row = tasks[:1] + others[: header - len(tasks[:1])]
    offset = len(tasks[:1])
    rows.row(
        (i, left_w + (k - offset) * step_w if k >= offset else 0.0) for k, i in enumerate(first_row)
    )
    others = others[len(first_row) - offset :]
    rest = tasks[1:] + others
    for start in range(0, len(rest), header):
        rows.row((i, k * step_w) for k, i in enumerate(rest[start : start + header]))
    rows.gap()
    # One block per distinct chain; procedures with the same steps stacked under it, then (the
    # first block) procedures without a drawn chain, while the chain beside them is taller.
    same = {i: sub.nodes[i].fields.get("same steps as", "") for i in procs}
    undrawn = []
    for i in procs:  # each followed by the procedures stacked under it (same steps, no chain)
        if i not in drawn and not same[i]:
            undrawn += [i, *(t for t in procs if same[t] == i and t not in drawn)]
    for block, (proc_id, chain) in enumerate(drawn.items()):
        twins = [i for i in procs if same[i] == proc_id]
        top = rows.y
        for start in range(0, max(1, len(chain)), per_row):
            part = chain[start : start + per_row]
            # Rows alternate direction (a snake), so each turn is one short edge straight down
            # instead of a long one back across the row it just left.
            back = range(per_row - 1, per_row - 1 - len(part), -1)
            cols = range(len(part)) if (start // per_row) % 2 == 0 else back
            rows.row((s, centres[k]) for k, s in zip(cols, part, strict=True))
        chain_bottom = rows.y
        rows.y = top
        for member in [proc_id, *twins]:
            rows.row([(member, 0.0)])
        while block == 0 and undrawn:
            height = node_box(sub.nodes[undrawn[0]])[1]
            if rows.y + height > chain_bottom:
                break
            rows.row([(undrawn.pop(0), 0.0)])
        rows.y = max(rows.y, chain_bottom)
        rows.gap()
    # Everything else (procedures without a drawn chain, linked memories): a grid.
    # A procedure with the same steps as one in the grid goes under it, in its column.
    rest = [i for i in sub.nodes if i not in rows.pos]
    grid_w = _slot(sub, rest) if rest else left_w
    per_grid = max(1, int(ROW_WIDTH // grid_w))
    under = {i: [t for t in rest if same.get(t) == i] for i in rest}
    cells = [i for i in rest if same.get(i, "") not in under]
    for start in range(0, len(cells), per_grid):
        chunk = cells[start : start + per_grid]
        xs = {i: k * grid_w + (grid_w - left_w) / 2 for k, i in enumerate(chunk)}
        rows.row((i, xs[i]) for i in chunk)
        depth = 1
        while any(len(under[i]) >= depth for i in chunk):
            rows.row((under[i][depth - 1], xs[i]) for i in chunk if len(under[i]) >= depth)
            depth += 1
    return rows.pos


def _episode_order(sub: Subgraph) -> dict[str, int]:
    """Position of each retrieved memory in the episode's table (best score first)."""
    ids = [row.get("id", "") for row in sub.table]
    return {i: k for k, i in enumerate(ids) if i}


def _columns(sub: Subgraph, *, key: object) -> dict[str, Point]:
    """Columns by level, left to right, each stacked top to bottom by ``key`` then insertion."""
    assert callable(key)
    columns: dict[int, list[str]] = {}
    for node_id, node in sub.nodes.items():
        columns.setdefault(node.level, []).append(node_id)
    pos: dict[str, Point] = {}
    x = 0.0
    previous_w = 0.0
    for k, level in enumerate(sorted(columns)):
        members = sorted(columns[level], key=key)
        width = _slot(sub, members) - COLUMN_GAP
        x = 0.0 if k == 0 else x + previous_w / 2 + width / 2 + COLUMN_GAP * 3.5
        previous_w = width
        heights = [node_box(sub.nodes[i])[1] for i in members]
        total = sum(heights) + ROW_GAP * (len(members) - 1)
        y = -total / 2
        for node_id, h in zip(members, heights, strict=True):
            pos[node_id] = (x, y + h / 2)
            y += h + ROW_GAP
    return pos


def group_identical_chains(sub: Subgraph) -> int:
    """Draw each distinct chain once: a procedure whose steps repeat an earlier one's keeps its
    node (stacked under the first by :func:`layout`, field ``same steps as``) but not its copy
    of the steps. Returns how many step nodes were left out."""
    first_of: dict[tuple[str, ...], str] = {}
    dropped: set[str] = set()
    twins: dict[str, int] = {}
    found = chains(sub)
    # The one drawn is the root, else the most useful (highest Q).
    order = sorted(found, key=lambda i: (not sub.nodes[i].root, -sub.nodes[i].q))
    for proc_id in order:
        chain = found[proc_id]
        signature = tuple(sub.nodes[s].fields.get("action", sub.nodes[s].caption) for s in chain)
        rep = first_of.setdefault(signature, proc_id)
        if rep == proc_id or not chain:
            continue
        dropped.update(chain)
        sub.nodes[proc_id].fields["same steps as"] = rep
        twins[rep] = twins.get(rep, 0) + 1
    for rep, count in twins.items():
        sub.nodes[rep].caption += f"\n+{count} with the same steps"
    if dropped:
        for step_id in dropped:
            del sub.nodes[step_id]
        sub.edges = [e for e in sub.edges if e.src not in dropped and e.dst not in dropped]
    return len(dropped)
