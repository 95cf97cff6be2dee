"""Mermaid flowchart text for a :class:`~graphmem.viz.graph.Subgraph` (paste into Markdown).

Node ids are replaced by short stable names (``n0``, ``n1``…), labels are quoted with every
character Mermaid treats specially written as an entity, so memory text cannot break the chart.

>>> from graphmem.viz.graph import Subgraph
>>> to_mermaid(Subgraph(title="empty", namespace="demo", root_id="x", view="task")).splitlines()
['flowchart TB', '%% empty']
"""

from __future__ import annotations

import itertools

from graphmem.viz.graph import Subgraph, VizEdge, VizNode
from graphmem.viz.layout import chains

LONG_CHAIN = 8
"""With ``direction="auto"``, an episode or memory view whose longest procedure has more steps
than this reads top to bottom, since a long left-to-right chain shrinks to unreadable. (A task
view is wrapped into rows instead, :func:`_task_rows`.)"""

# Characters that end or reshape a quoted Mermaid label; written as #code; entities.
_SPECIAL = {c: f"#{ord(c)};" for c in '"#;<>&|`[]{}()\\'}


def mermaid_text(text: str) -> str:
    """Escape ``text`` for a quoted Mermaid label; newlines become line breaks."""
    lines = text.split("\n")
    return "<br/>".join("".join(_SPECIAL.get(c, c) for c in line) for line in lines)


def _shape(node: VizNode, name: str, label: str) -> str:
    if node.kind == "Procedure":
        # A subroutine box: a stadium's round ends cut into a caption of several lines.
        return f'{name}[["{label}"]]'
    if node.kind == "Tip":
        return f'{name}{{{{"{label}"}}}}'
    if node.kind == "Episode":
        return f'{name}[/"{label}"/]'
    if node.kind == "Note":
        return f'{name}("{label}")'
    return f'{name}["{label}"]'


def to_mermaid(sub: Subgraph, *, direction: str = "auto") -> str:
    """The subgraph as a Mermaid ``flowchart``. A task view is wrapped into rows like the HTML
    page (:func:`_task_rows`); other views read left to right, or top to bottom (``auto``) once
    a procedure has more than :data:`LONG_CHAIN` steps."""
    if direction not in ("auto", "LR", "TB", "RL", "BT"):
        from graphmem.errors import InvalidInput

        raise InvalidInput(f"direction must be auto, LR, TB, RL or BT, not {direction!r}")
    if sub.view == "task" and direction == "auto":
        return _task_rows(sub)
    if direction == "auto":
        longest = max((len(steps) for steps in chains(sub).values()), default=0)
        direction = "TB" if longest > LONG_CHAIN else "LR"
    names = {node_id: f"n{i}" for i, node_id in enumerate(sub.nodes)}
    title = " ".join(sub.title.split())
    lines = [f"flowchart {direction}", f"%% {title}"]
    for node_id, node in sub.nodes.items():
        lines.append("  " + _shape(node, names[node_id], mermaid_text(node.caption)))
    for edge in sub.edges:
        lines.append(_edge(edge, names[edge.src], names[edge.dst]))
    lines += _styles(sub, names)
    for i, edge in enumerate(sub.edges):
        lines.append(f"  linkStyle {i} stroke:{edge.colour},color:{edge.colour}")
    return "\n".join(lines) + "\n"


PAGE_WIDTH = 1250
"""Pixels a wrapped chart's rows may take (Mermaid's default 16-px font), so the chart fits a
1400-px-wide page."""
_CHAR_PX, _NODE_PAD, _NODE_GAP = 8.6, 34, 60


def _width(node: VizNode) -> float:
    longest = max(len(line) for line in node.caption.split("\n"))
    extra = 30 if node.shape == "ellipse" else 0  # a round shape's (or subroutine's) ends
    return longest * _CHAR_PX + _NODE_PAD + extra + _NODE_GAP


def _per_row(nodes: list[VizNode]) -> int:
    widest = max((_width(n) for n in nodes), default=PAGE_WIDTH)
    return max(1, int(PAGE_WIDTH // widest))


def _edge(edge: VizEdge, src: str, dst: str) -> str:
    arrow = "-.->" if edge.dashed else "-->"
    return f'  {src} {arrow}|"{mermaid_text(edge.label)}"| {dst}'


def _styles(sub: Subgraph, names: dict[str, str], skip: frozenset[str] = frozenset()) -> list[str]:
    lines = []
    for node_id, node in sub.nodes.items():
        if node_id in skip:
            continue  # a style line would draw the node
        width = "4px" if node.root else "2px"
        dash = ",stroke-dasharray:5 4" if node.obsolete else ""
        lines.append(
            f"  style {names[node_id]} fill:{node.fill},stroke:{node.border},"
            f"stroke-width:{width},color:#212529{dash}"
        )
    return lines


def _task_rows(sub: Subgraph) -> str:
    """A task view top to bottom in rows (subgraphs) no wider than :data:`PAGE_WIDTH`: the
    task and its tips; the other procedures and memories; then the first drawn procedure above
    its steps, wrapped into rows that read left to right (the HTML page draws every chain).
    Mermaid ignores a subgraph's direction once an edge joins one of its nodes to the outside,
    so a chain passes from row to row by an edge between the rows; edges to the other memories'
    rows (and LINKS_TO) are left out, since dagre would spread those rows side by side: the
    HTML page has them."""
    names = {node_id: f"n{i}" for i, node_id in enumerate(sub.nodes)}
    title = " ".join(sub.title.split())
    lines = ["flowchart TB", f"%% {title}"]
    links: list[str] = []  # colour of each link, in the order Mermaid numbers them
    # One chain wrapped into rows: Mermaid puts a second one beside the first, not below it.
    found = chains(sub)
    drawn = dict(list(found.items())[:1])
    hidden = {s for steps in list(found.values())[1:] for s in steps if s not in drawn}
    row_of: dict[str, str] = {}
    blocks: list[str] = []  # top to bottom: row subgraph ids and lone node names
    rows = 0

    def grid(ids: list[str]) -> None:
        nonlocal rows
        per_row = _per_row([sub.nodes[i] for i in ids])
        for start in range(0, len(ids), per_row):
            name = f"row{rows}"
            rows += 1
            lines.append(f'  subgraph {name} [" "]')
            lines.append("    direction TB")  # unlinked nodes of one rank: a row
            for node_id in ids[start : start + per_row]:
                node = sub.nodes[node_id]
                lines.append("    " + _shape(node, names[node_id], mermaid_text(node.caption)))
            lines.append("  end")
            blocks.append(name)

    in_chains = {s for steps in drawn.values() for s in steps} | hidden
    head = [i for i, n in sub.nodes.items() if n.level <= 0 and i not in in_chains]
    if head:
        grid(head)
    # The task's own procedures hang from it, each with its SOLVED_BY edge (in the grid below
    # the edge would be left out, and the best procedure would not be joined to its task).
    heads = set(head)
    solved = [
        e.dst
        for e in sub.edges
        if "SOLVED_BY" in e.kinds and e.src in heads and e.dst not in in_chains | drawn.keys()
    ]
    solved = list(dict.fromkeys(solved))
    for proc_id in solved:
        proc = sub.nodes[proc_id]
        lines.append("  " + _shape(proc, names[proc_id], mermaid_text(proc.caption)))
        blocks.append(names[proc_id])
    rest = [
        i
        for i in sub.nodes
        if i not in in_chains and i not in drawn and i not in heads and i not in solved
    ]
    if rest:
        grid(rest)
    in_rest = set(rest)
    chain_edges: list[str] = []
    chain_rows: set[str] = set()
    for proc_id, steps in drawn.items():
        proc = sub.nodes[proc_id]
        lines.append("  " + _shape(proc, names[proc_id], mermaid_text(proc.caption)))
        blocks.append(names[proc_id])
        if not steps:
            continue
        per_row = _per_row([sub.nodes[s] for s in steps])
        previous = names[proc_id]
        for start in range(0, len(steps), per_row):
            name = f"row{rows}"
            rows += 1
            part = steps[start : start + per_row]
            lines.append(f'  subgraph {name} [" "]')
            lines.append("    direction LR")
            for step_id in part:
                node = sub.nodes[step_id]
                lines.append("    " + _shape(node, names[step_id], mermaid_text(node.caption)))
                row_of[step_id] = name
            if len(part) > 1:
                lines.append("    " + " --> ".join(names[s] for s in part))
                links.extend(["#495057"] * (len(part) - 1))
            lines.append("  end")
            chain_rows.add(name)
            chain_edges.append(f"  {previous} --> {name}")
            links.append("#495057")
            previous = name
        blocks.append(previous)
    lines += chain_edges
    left_out = 0
    # In an order every store gives alike (by kind and the captions the edge joins), so the
    # linkStyle numbers colour the same edges whichever store the graph was read from.
    ordered = sorted(
        sub.edges,
        key=lambda e: (
            sorted(e.kinds),
            sub.nodes[e.src].caption if e.src in sub.nodes else e.src,
            sub.nodes[e.dst].caption if e.dst in sub.nodes else e.dst,
        ),
    )
    for edge in ordered:
        if {edge.src, edge.dst} & (row_of.keys() | hidden):
            continue  # a chain's steps: drawn in their rows above, or left out
        if "LINKS_TO" in edge.kinds or {edge.src, edge.dst} & in_rest:
            left_out += 1  # an edge to a row of the grid would pull the rows apart
            continue
        lines.append(_edge(edge, names[edge.src], names[edge.dst]))
        links.append(edge.colour)
    # Keep the rows in reading order, top to bottom, whatever the other edges say; the chain
    # hangs from its procedure.
    for upper, lower in itertools.pairwise(blocks):
        grid_row = {b for b in (upper, lower) if b.startswith("row") and b not in chain_rows}
        if grid_row:  # a grid row below a lone procedure too: else dagre sets them side by side
            lines.append(f"  {upper} ~~~ {lower}")
            links.append("")
    if left_out:
        lines.append(
            f"  %% {left_out} edges to the other procedures and memories left out: the HTML "
            "page draws them"
        )
    if hidden:
        lines.append(
            f"  %% the steps of {len(found) - 1} more procedures are left out: the HTML page "
            "draws them"
        )
    lines += _styles(sub, names, frozenset(hidden))
    for i, colour in enumerate(links):
        if colour:
            lines.append(f"  linkStyle {i} stroke:{colour},color:{colour}")
    return "\n".join(lines) + "\n"
