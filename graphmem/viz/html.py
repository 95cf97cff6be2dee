"""A self-contained, interactive HTML page for a :class:`~graphmem.viz.graph.Subgraph`.

The page inlines vis-network (the standalone build shipped inside the PyPI package ``pyvis``),
so it opens from disk with no network. Nodes are coloured and sized by Q, bordered and shaped by
kind, dashed when obsolete; edges are labelled by kind and score; chains are laid out left to
right. Hovering shows a memory's fields, clicking pins them in the side panel.

When vis-network has drawn the graph, the page writes what it drew into
``<div id="gm-status" data-state="rendered" data-rendered-nodes=N data-rendered-edges=M>``, so a
headless browser (``chromium --dump-dom``) can check the page really rendered.
"""

from __future__ import annotations

import html
import json
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Any

from graphmem.viz.graph import KIND_STYLES, Subgraph, VizError, q_colour, shorten
from graphmem.viz.layout import font_px, layout

if TYPE_CHECKING:
    from graphmem.ops.explain import Offer

VIS_PACKAGE = "pyvis"
VIS_PATH = ("lib", "vis-9.1.2", "vis-network.min.js")

# The first view zooms out to show everything only while captions stay this large (x 14 px);
# a bigger graph opens at this zoom on its top-left corner: the task and its first steps.
READABLE_SCALE = 0.8
EDGE_LABEL_PX = 11.5
"""Least on-screen size of an edge label in the first view (the canvas font grows to it)."""


@lru_cache(maxsize=1)
def vis_network_js() -> str:
    """The vis-network standalone bundle (JS with its CSS built in), from pyvis's package data."""
    try:
        resource = resources.files(VIS_PACKAGE).joinpath(*VIS_PATH)
        text = resource.read_text(encoding="utf-8")
    except (ModuleNotFoundError, FileNotFoundError, OSError) as e:
        raise VizError(
            "the HTML view inlines vis-network from the pyvis package, which is not installed: "
            "pip install 'graphmem[viz]' (or use --format mermaid / dot / png)"
        ) from e
    # A literal "</script" would end the inline <script> element early.
    return text.replace("</script", "<\\/script")


def _json_for_script(value: Any) -> str:
    """JSON that is safe inside a <script> element whatever the memories' text holds."""
    text = json.dumps(value, ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def page_data(sub: Subgraph) -> dict[str, Any]:
    """The JSON the page's script draws from (also handy for other front ends)."""
    pos = layout(sub)
    nodes = [
        {
            "id": n.id,
            "kind": n.kind,
            "label": n.caption,
            "level": n.level,
            "x": round(pos[n.id][0], 1),
            "y": round(pos[n.id][1], 1),
            "font": round(font_px(n), 1),
            "fill": n.fill,
            "border": n.border,
            "shape": n.shape,
            "radius": n.radius,
            "size": round(n.size, 4),
            "obsolete": n.obsolete,
            "root": n.root,
            "fields": n.fields,
        }
        for n in sub.nodes.values()
    ]
    edges = [
        {
            "from": e.src,
            "to": e.dst,
            "kind": " + ".join(e.kinds),
            "label": e.label,
            "colour": e.colour,
            "dashed": e.dashed,
            "props": {k: v for k, v in e.props.items() if v is not None},
        }
        for e in sub.edges
    ]
    lo, hi = sub.q_range
    return {
        "view": sub.view,
        "minScale": READABLE_SCALE,  # captions of 14 canvas px stay >= 11 px on screen
        "edgeLabelPx": EDGE_LABEL_PX,
        "root": sub.root_id,
        "nodes": nodes,
        "edges": edges,
        "qRange": [lo, hi],
    }


def _legend(sub: Subgraph) -> str:
    kinds = list(dict.fromkeys(n.kind for n in sub.nodes.values()))
    items = "".join(
        f'<span class="gm-kind" style="border-color:{KIND_STYLES[k].border}">'
        f"{html.escape(k)}</span>"
        for k in kinds
        if k in KIND_STYLES
    )
    lo, hi = sub.q_range
    stops = ", ".join(q_colour(i / 4) for i in range(5))
    return (
        f'<div class="gm-legend">{items}'
        f'<span class="gm-scale"><span>Q {lo:g}</span>'
        f'<span class="gm-bar" style="background:linear-gradient(to right, {stops})"></span>'
        f"<span>{hi:g}</span></span>"
        '<span class="gm-note">dashed border: obsolete · dashed edge: evolution / link</span>'
        "</div>"
    )


_TABLE_COLUMNS = (
    ("rank", "#"),
    ("kind", "kind"),
    ("memory", "memory"),
    ("sim", "sim"),
    ("q", "Q at retrieval"),
    ("score", "score"),
    ("used", "used"),
    ("q_after", "Q after reward"),
    ("q_now", "Q now"),
)


def _table(sub: Subgraph) -> str:
    if not sub.table:
        return ""
    head = "".join(f"<th>{html.escape(title)}</th>" for _, title in _TABLE_COLUMNS)
    rows = "".join(
        f'<tr class="{"gm-used" if row.get("used") else ""}">'
        + "".join(f"<td>{html.escape(row.get(key, ''))}</td>" for key, _ in _TABLE_COLUMNS)
        + "</tr>"
        for row in sub.table
    )
    return (
        '<section class="gm-table"><h2>Retrieved, best first</h2>'
        f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table></section>"
    )


_STATES = {"best": "best", "same": "same", "changed": "chg", "missing": "miss", "added": "add"}


def _esc(value: object) -> str:
    return html.escape(str(value))


def _episode_link(sub: Subgraph, episode_id: str) -> str:
    if any(r.id == episode_id for r in sub.episodes):
        return f'<a href="#episode-{_esc(episode_id)}">{_esc(episode_id[:8])}</a>'
    return _esc(episode_id[:8])


def _compare(sub: Subgraph) -> str:
    """Every procedure of the page, best Q first, on the best one's steps: one narrow column a
    step (its number; short labels in the cells, the full step on hover), differences marked."""
    if not sub.compare:
        return ""
    head = "".join(f'<th title="{_esc(a)}">{k}</th>' for k, a in enumerate(sub.columns))
    width = max([len(sub.columns), *(len(r.cells) for r in sub.compare)])
    head += '<th title="steps after the best one\'s last">+</th>' * (width - len(sub.columns))
    rows = []
    for r in sub.compare:
        cells = "".join(
            f'<td class="gm-{_STATES.get(state, "same")}" title="{_esc(text)}">'
            f"<div>{_esc(label)}</div></td>"
            for text, state, label in r.cells
        )
        cells += "<td></td>" * (width - len(r.cells))
        told = {ep.id for ep in sub.episodes}
        eps = sorted(r.episodes, key=lambda e: e not in told)  # one told below comes first
        users = " ".join(_episode_link(sub, e) for e in eps[:1])
        if len(r.episodes) > 1:
            users += f" +{len(r.episodes) - 1}"
        kind = "" if r.granularity == "proceduralized" else f" · {_esc(r.granularity)}"
        state = " · obsolete" if r.obsolete else ""
        uses = f"{r.uses} use{'' if r.uses == 1 else 's'}"
        title = f"{r.id} · {r.granularity} v{r.version} · {r.distinct}"
        mark = '<span class="gm-linked">↗ linked · another task\'s</span> ' if r.linked else ""
        if r.twins:
            title += " · the same row for " + ", ".join(r.twins)
            state += f' · <span class="gm-twins">×{len(r.twins) + 1} procedures</span>'
        rows.append(
            f'<tr id="proc-{_esc(r.id)}"{" class=gm-linked-row" if r.linked else ""}>'
            f'<th class="gm-proc" title="{_esc(title)}">{mark}'
            f"<b>Q {r.q:.2f}</b> · {_esc(r.outcome)} · {uses} · v{r.version}{kind}{state}"
            f'<div class="gm-distinct">{_esc(r.distinct)}</div></th>{cells}'
            f'<td class="gm-users">{users}</td></tr>'
        )
    return (
        '<section class="gm-section" id="gm-compare"><h2>Procedures compared, best Q first</h2>'
        '<p class="gm-hint">Columns are the best procedure\'s steps (hover a cell for the whole '
        'step); in the other rows <span class="gm-same">·</span> is the same step, '
        '<span class="gm-chg">yellow</span> another step, <span class="gm-miss">—</span> a step '
        'it lacks, <span class="gm-add">+N green</span> steps it adds.</p>'
        '<div class="gm-scroll"><table class="gm-cmp"><thead><tr><th class="gm-proc">procedure'
        f'</th>{head}<th class="gm-users">used in</th></tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div></section>"
    )


def _versions(sub: Subgraph) -> str:
    """Each EVOLVED_FROM step: old → new version, its recorded change, steps added / dropped."""
    if not sub.versions:
        return ""
    items = []
    for v in sub.versions:
        added = ", ".join(v.added[:8]) + (" …" if len(v.added) > 8 else "")
        removed = ", ".join(v.removed[:8]) + (" …" if len(v.removed) > 8 else "")
        items.append(
            f'<li><a href="#proc-{_esc(v.old_id)}">v{v.old_version} {_esc(v.old_id[:8])}</a> '
            f"(Q {v.old_q:.2f}) → "
            f'<a href="#proc-{_esc(v.new_id)}">v{v.new_version} {_esc(v.new_id[:8])}</a> '
            f"(Q {v.new_q:.2f})"
            + (f": {_esc(v.change)}" if v.change else "")
            + (f'<br><span class="gm-add">+ {_esc(added)}</span>' if added else "")
            + (f'<br><span class="gm-miss">− {_esc(removed)}</span>' if removed else "")
            + "</li>"
        )
    return (
        '<section class="gm-section" id="gm-versions"><h2>Versions (EVOLVED_FROM)</h2>'
        f"<ul>{''.join(items)}</ul></section>"
    )


def _num(value: float | None, fmt: str = ".3f") -> str:
    return "" if value is None else format(value, fmt)


def _offer_text(sub: Subgraph, offer: Offer) -> str:
    """A procedure of the comparison table is named by what is its own, linked to its row;
    any other memory by its summary."""
    row = next((r for r in sub.compare if offer.id == r.id or offer.id in r.twins), None)
    if row is None:
        return (
            f'<td title="{_esc(offer.id)}">{_esc(shorten(offer.summary, width=90, lines=1))}</td>'
        )
    return (
        f'<td title="{_esc(offer.summary)}"><a href="#proc-{_esc(row.id)}">procedure '
        f"{_esc(row.id[:8])}</a>: {_esc(shorten(row.distinct, width=80, lines=1))}</td>"
    )


def _episodes(sub: Subgraph) -> str:
    """What each episode that used these procedures was offered and used, and how Q moved."""
    if not sub.episodes:
        return ""
    parts = []
    for ep in sub.episodes:
        if ep.reward is None:
            outcome = ep.status.value
        else:
            outcome = f"reward {ep.reward:g} ({'success' if ep.success else 'failure'})"
        credit = f" · credit: {ep.credit.value}" if ep.credit else ""
        used = sum(o.used for o in ep.offered)
        # Best score first, as the episode's own view ranks them (each recall ranks from 0).
        offers = sorted(ep.offered, key=lambda o: -(o.score if o.score is not None else -1e9))
        rows = "".join(
            f'<tr class="{"gm-used" if o.used else ""}">'
            f'<td title="rank in its recall: {_esc(o.rank)}">{k}</td><td>{_esc(o.kind)}</td>'
            f"{_offer_text(sub, o)}"
            f"<td>{_num(o.sim, '.2f')}</td><td>{_num(o.q_at_retrieval)}</td>"
            f"<td>{_num(o.score, '+.2f')}</td><td>{'used' if o.used else ''}</td>"
            f"<td>{_num(o.q_before)}{' → ' if o.credited else ''}{_num(o.q_after)}</td></tr>"
            for k, o in enumerate(offers, start=1)
        )
        parts.append(
            f'<section class="gm-episode" id="episode-{_esc(ep.id)}">'
            f"<h3>Episode {_esc(ep.id[:8])} · {_esc(outcome)}{_esc(credit)} · "
            f"offered {len(ep.offered)}, used {used}</h3>"
            f'<p class="gm-hint">{_esc(shorten(ep.task_text, width=160, lines=1))} — '
            f"in a terminal: <code>graphmem episode {_esc(sub.namespace)} {_esc(ep.id)}</code>"
            "</p><table><thead><tr><th>#</th><th>kind</th><th>memory</th><th>sim</th>"
            "<th>Q at retrieval</th><th>score</th><th>used</th><th>Q before → after</th>"
            f"</tr></thead><tbody>{rows}</tbody></table></section>"
        )
    return (
        '<section class="gm-section" id="gm-episodes"><h2>Episodes that used these '
        "procedures: what each was offered (best score first) and used, and how Q moved</h2>"
        f"{''.join(parts)}</section>"
    )


def _nav(sub: Subgraph) -> str:
    links = [
        (sub.compare, "gm-compare", f"compare {len(sub.compare)} procedures"),
        (sub.versions, "gm-versions", f"{len(sub.versions)} version steps"),
        (sub.episodes, "gm-episodes", f"{len(sub.episodes)} episodes"),
    ]
    shown = " · ".join(
        f'<a href="#{anchor}">{text} ↓</a>' for items, anchor, text in links if items
    )
    return (
        '<div class="gm-nav"><label><input type="checkbox" id="gm-links"> show all link lines'
        "</label> (hover or click a memory to see its own)"
        + (f" · {shown}" if shown else "")
        + "</div>"
    )


def to_html(sub: Subgraph) -> str:
    """The whole page as one string; write it to a ``.html`` file and open it anywhere."""
    data = page_data(sub)
    return _PAGE.format(
        title=html.escape(sub.title),
        subtitle=html.escape(sub.subtitle),
        view=html.escape(sub.view),
        expected=len(sub.nodes),
        expected_edges=len(sub.edges),
        legend=_legend(sub),
        nav=_nav(sub),
        table=_table(sub) + _compare(sub) + _versions(sub) + _episodes(sub),
        css=_CSS,
        vis=vis_network_js(),
        data=_json_for_script(data),
        app=_APP_JS,
    )


_CSS = """
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
  color: #212529; background: #f8f9fa; }
header { padding: 12px 20px 4px; }
h1 { font-size: 19px; margin: 0 0 2px; }
h2 { font-size: 15px; margin: 0 0 8px; }
.gm-sub { color: #495057; margin: 0; }
.gm-legend { display: flex; flex-wrap: wrap; gap: 8px; align-items: center; padding: 6px 20px;
  font-size: 12px; color: #495057; }
.gm-kind { border: 2px solid; border-radius: 4px; padding: 1px 6px; background: #fff; }
.gm-scale { display: inline-flex; align-items: center; gap: 4px; margin-left: 8px; }
.gm-bar { display: inline-block; width: 120px; height: 10px; border-radius: 3px; }
.gm-note { margin-left: 8px; }
main { display: flex; gap: 12px; padding: 0 20px 12px; height: 72vh; min-height: 420px; }
#graph { flex: 1; background: #fff; border: 1px solid #dee2e6; border-radius: 6px; }
#details { width: 300px; overflow: auto; background: #fff; border: 1px solid #dee2e6;
  border-radius: 6px; padding: 10px 12px; }
#details table, .gm-tip table { border-collapse: collapse; width: 100%; }
#details td, .gm-tip td { vertical-align: top; padding: 2px 4px; border-bottom: 1px solid #f1f3f5;
  white-space: pre-wrap; word-break: break-word; }
#details td:first-child, .gm-tip td:first-child { color: #868e96; white-space: nowrap; }
div.vis-tooltip { white-space: normal; max-width: 420px; font: 12px/1.35 system-ui, sans-serif;
  padding: 6px 8px; }
.gm-tip strong { display: block; margin-bottom: 4px; }
.gm-table { padding: 0 20px 20px; }
.gm-table table { border-collapse: collapse; background: #fff; width: 100%; }
.gm-table th, .gm-table td { border: 1px solid #dee2e6; padding: 4px 8px; text-align: left; }
.gm-table th { background: #f1f3f5; }
.gm-table tr.gm-used td { background: #e7f5ff; font-weight: 600; }
#gm-error { color: #c92a2a; padding: 0 20px; }
.gm-nav { padding: 0 20px 6px; font-size: 13px; color: #495057; }
.gm-section { padding: 0 20px 20px; font-size: 13px; }
.gm-section ul { margin: 0; padding-left: 20px; }
.gm-section li { margin-bottom: 6px; }
.gm-hint { color: #495057; margin: 0 0 6px; font-size: 12px; }
.gm-scroll { overflow-x: auto; background: #fff; border: 1px solid #dee2e6; border-radius: 6px; }
.gm-cmp { border-collapse: collapse; font-size: 11px; line-height: 1.25; }
.gm-cmp th, .gm-cmp td { border: 1px solid #e9ecef; padding: 2px; vertical-align: top;
  text-align: left; font-weight: normal; }
.gm-cmp td { width: 52px; }
.gm-cmp td.gm-same, .gm-cmp td.gm-miss { text-align: center; }
.gm-cmp td > div, .gm-proc .gm-distinct { display: -webkit-box; -webkit-box-orient: vertical;
  -webkit-line-clamp: 3; overflow: hidden; }
.gm-proc .gm-distinct { -webkit-line-clamp: 2; }
.gm-cmp thead th { background: #f1f3f5; text-align: center; }
.gm-cmp th.gm-proc { min-width: 200px; max-width: 220px; background: #fff; position: sticky;
  left: 0; z-index: 1; font-size: 12px; text-align: left; }
.gm-cmp .gm-users { min-width: 72px; max-width: 90px; }
.gm-distinct { color: #212529; font-weight: 600; }
.gm-linked { color: #8c6d31; font-weight: 700; }
.gm-twins { color: #6a3d9a; font-weight: 700; }
tr.gm-linked-row th.gm-proc { background: #f8f3e8; }
.gm-id { color: #868e96; }
.gm-best { background: #ebfbee; }
.gm-same { color: #adb5bd; text-align: center; }
.gm-chg { background: #fff3bf; }
.gm-miss { background: #ffe3e3; color: #c92a2a; }
.gm-add { background: #d3f9d8; color: #2b8a3e; }
.gm-episode { margin-bottom: 14px; }
.gm-episode h3 { font-size: 14px; margin: 8px 0 2px; }
.gm-episode table { border-collapse: collapse; background: #fff; width: 100%; font-size: 12px; }
.gm-episode th, .gm-episode td { border: 1px solid #dee2e6; padding: 3px 6px; text-align: left; }
.gm-episode th { background: #f1f3f5; }
.gm-episode tr.gm-used td { background: #e7f5ff; font-weight: 600; }
:target { outline: 3px solid #4dabf7; }
"""

_APP_JS = r"""
(function () {
  "use strict";
  var status = document.getElementById("gm-status");
  function fail(message) {
    status.setAttribute("data-state", "error");
    status.setAttribute("data-error", String(message));
    document.getElementById("gm-error").textContent = "Could not draw the graph: " + message;
  }
  window.addEventListener("error", function (ev) { fail(ev.message); });
  if (typeof vis === "undefined") { fail("vis-network did not load"); return; }
  var data = JSON.parse(document.getElementById("gm-data").textContent);

  function fieldTable(fields) {
    var table = document.createElement("table");
    Object.keys(fields).forEach(function (key) {
      var tr = table.insertRow();
      tr.insertCell().textContent = key;
      tr.insertCell().textContent = String(fields[key]);
    });
    return table;
  }
  function card(heading, fields) {
    var div = document.createElement("div");
    div.className = "gm-tip";
    var strong = document.createElement("strong");
    strong.textContent = heading;
    div.appendChild(strong);
    div.appendChild(fieldTable(fields));
    return div;
  }
  function edgeFields(e) {
    var f = { kind: e.kind, from: e.from, to: e.to };
    Object.keys(e.props).forEach(function (k) { f[k] = e.props[k]; });
    return f;
  }
  var nodes = new vis.DataSet(data.nodes.map(function (n) {
    return {
      id: n.id, x: n.x, y: n.y, label: n.label, shape: n.shape, title: card(n.kind, n.fields),
      color: { background: n.fill, border: n.border,
               highlight: { background: n.fill, border: "#212529" },
               hover: { background: n.fill, border: "#212529" } },
      borderWidth: n.root ? 5 : 2, borderWidthSelected: 5,
      margin: Math.round(6 + 10 * n.size),
      font: { size: n.font, face: "system-ui, sans-serif",
              color: n.obsolete ? "#868e96" : "#212529" },
      shapeProperties: { borderDashes: n.obsolete ? [6, 4] : false, borderRadius: n.radius }
    };
  }));
  var posOf = {};
  data.nodes.forEach(function (n) { posOf[n.id] = n; });
  // Chain edges speak for themselves (their order is the layout); links are many: both are
  // drawn without a label, which their tooltip still gives.
  var links = data.edges.filter(function (e) { return e.kind === "LINKS_TO"; }).length;
  // An edge between blocks far apart (a tip to a procedure further down) would cross every
  // caption in between: it is drawn faint and unlabelled, dark once either end is selected.
  function far(e) {
    var a = posOf[e.from], b = posOf[e.to];
    return data.view === "task" && a && b && Math.abs(a.y - b.y) > 320;
  }
  function faintEdge(e) {
    return (e.kind === "LINKS_TO" && (links > 12 || data.view === "task")) ||
      // The task's edges to its own procedures stay drawn, however far down they sit.
      (far(e) && e.kind !== "NEXT" && e.kind !== "SOLVED_BY");
  }
  function quiet(e) {
    return e.kind === "NEXT" || e.kind === "FIRST_STEP" || faintEdge(e) ||
      (e.kind === "LINKS_TO" && data.view === "episode");  // beside the scores, it is noise
  }
  // Links and edges between blocks far apart are drawn only on demand: for the memory under
  // the pointer or selected, or all of them with the "show all link lines" box.
  var demand = [];
  var edges = new vis.DataSet(data.edges.map(function (e, i) {
    var a = posOf[e.from], b = posOf[e.to];
    if (faintEdge(e)) { demand.push("e" + i); }
    var sameColumn = a && b && Math.abs(a.x - b.x) < 1;
    // A snake's turn is one step straight down; inside an episode's or a neighbourhood's
    // column an edge would run through the boxes between its ends: it bends out instead.
    // (A task's SOLVED_BY edge may pass procedures stacked under the task: it arcs instead.)
    var sameRow = a && b && (Math.abs(a.y - b.y) < 1 ||
      (sameColumn && data.view === "task" && e.kind !== "SOLVED_BY"));
    var faint = faintEdge(e);
    return {
      id: "e" + i, from: e.from, to: e.to, label: quiet(e) ? undefined : e.label, arrows: "to",
      title: card(e.kind, edgeFields(e)), dashes: e.dashed, hidden: faint,
      color: { color: e.colour, highlight: "#212529", hover: "#212529" },
      width: e.kind === "NEXT" || e.kind === "FIRST_STEP" ? 2 : 1.5,
      font: { align: "horizontal", strokeWidth: 4, strokeColor: "#ffffff",
              color: e.colour, multi: false },
      // Along a row an edge is straight; to another row it bends, so it passes beside the
      // boxes in between instead of through their captions.
      // (A task's SOLVED_BY down its column arcs right, between the procedures and their
      // steps, where nothing is drawn.)
      smooth: sameRow ? false : { type: "curvedCW", roundness: sameColumn ? 0.9 : 0.18 }
    };
  }));
  var options = {
    autoResize: false,
    interaction: { hover: true, tooltipDelay: 120, navigationButtons: false, keyboard: true },
    physics: false,
    layout: { hierarchical: { enabled: false } },
    edges: { font: { size: 12 } }
  };
  var container = document.getElementById("graph");
  var network = new vis.Network(container, { nodes: nodes, edges: edges }, options);
  window.gmNetwork = network;

  var toggle = document.getElementById("gm-links");
  function showLinks(focus) {
    var near = {};
    focus.forEach(function (id) {
      network.getConnectedEdges(id).forEach(function (eid) { near[eid] = true; });
    });
    edges.update(demand.map(function (eid) {
      return { id: eid, hidden: !(toggle.checked || near[eid]) };
    }));
  }
  network.on("hoverNode", function (p) { showLinks([p.node].concat(network.getSelectedNodes())); });
  network.on("blurNode", function () { showLinks(network.getSelectedNodes()); });
  network.on("select", function () { showLinks(network.getSelectedNodes()); });
  toggle.addEventListener("change", function () { showLinks(network.getSelectedNodes()); });

  var details = document.getElementById("details");
  function show(heading, fields) {
    details.textContent = "";
    var h = document.createElement("h2");
    h.textContent = heading;
    details.appendChild(h);
    details.appendChild(fieldTable(fields));
  }
  var byId = {};
  data.nodes.forEach(function (n) { byId[n.id] = n; });
  network.on("click", function (params) {
    if (params.nodes.length) {
      var n = byId[params.nodes[0]];
      show(n.kind, n.fields);
    } else if (params.edges.length) {
      var e = data.edges[Number(String(params.edges[0]).slice(1))];
      show(e.kind, edgeFields(e));
    }
  });
  // Keep the whole graph in view when the page resizes, until the reader zooms or pans.
  var readerMoved = false;
  network.on("zoom", function () { readerMoved = true; });
  network.on("dragEnd", function (p) { if (!p.nodes.length) { readerMoved = true; } });
  window.addEventListener("resize", function () {
    network.setSize("100%", "100%");
    if (!readerMoved) { initialView(); }
    network.redraw();
  });
  // The first view: everything, if that keeps captions readable; else the top-left corner
  // (task, first procedure, its first steps) at a readable zoom — the rest is a drag away.
  function initialView() {
    network.fit({ animation: false });
    if (network.getScale() >= data.minScale) { return; }
    var left = Infinity, top = Infinity;
    network.body.nodeIndices.forEach(function (id) {
      var box = network.getBoundingBox(id);
      left = Math.min(left, box.left);
      top = Math.min(top, box.top);
    });
    var scale = data.minScale, pad = 24;
    var y = top - pad / scale + container.clientHeight / 2 / scale;
    if (data.view !== "task" && byId[data.root]) {  // columns: keep the root mid-height
      y = network.getPositions([data.root])[data.root].y;
    }
    network.moveTo({ scale: scale, animation: false, position: {
      x: left - pad / scale + container.clientWidth / 2 / scale, y: y } });
  }
  // What a reader sees now: the captions wholly inside the frame, at their on-screen size.
  function visibleLabels() {
    var scale = network.getScale(), out = [];
    var w = container.clientWidth, h = container.clientHeight;
    network.body.nodeIndices.forEach(function (id) {
      var box = network.getBoundingBox(id);
      var a = network.canvasToDOM({ x: box.left, y: box.top });
      var b = network.canvasToDOM({ x: box.right, y: box.bottom });
      if (a.x >= 0 && a.y >= 0 && b.x <= w && b.y <= h) {
        var px = Math.round(byId[id].font * scale * 10) / 10;
        out.push({ id: id, label: byId[id].label, px: px });
      }
    });
    return out;
  }
  network.once("afterDrawing", function () {
    // Node sizes are known only once drawn: place the view by them, and draw again right away.
    initialView();
    // Edge labels at least EDGE_LABEL_PX on screen at the zoom the first view keeps (an
    // episode's view is zoomed out to show all it retrieved: 12 canvas px read as 7).
    var edgePx = Math.max(12, Math.ceil(data.edgeLabelPx / network.getScale()));
    network.setOptions({ edges: { font: { size: edgePx } } });
    network.redraw();
    status.setAttribute("data-edge-label-px",
      String(Math.round(edgePx * network.getScale() * 10) / 10));
    status.setAttribute("data-rendered-nodes", String(Object.keys(network.getPositions()).length));
    // Every edge drawn or ready to draw on demand (hidden edges are not in edgeIndices).
    status.setAttribute("data-rendered-edges", String(Object.keys(network.body.edges).length));
    status.setAttribute("data-on-demand-edges", String(demand.length));
    status.setAttribute("data-scale", String(Math.round(network.getScale() * 1000) / 1000));
    status.setAttribute("data-visible-labels", JSON.stringify(visibleLabels()));
    status.setAttribute("data-state", "rendered");
  });
  if (data.root && byId[data.root]) { show(byId[data.root].kind, byId[data.root].fields); }
})();
"""

_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="graphmem viz">
<title>{title}</title>
<style>{css}</style>
<script>{vis}</script>
</head>
<body data-graphmem-view="{view}">
<header><h1>{title}</h1><p class="gm-sub">{subtitle}</p></header>
{legend}
{nav}
<p id="gm-error"></p>
<main><div id="graph"></div>
<aside id="details"><h2>Details</h2><p>Hover a node or an edge; click to pin it here.</p></aside>
</main>
{table}
<div id="gm-status" hidden data-state="loading" data-expected-nodes="{expected}"
 data-expected-edges="{expected_edges}"></div>
<script type="application/json" id="gm-data">{data}</script>
<script>{app}</script>
</body>
</html>
"""
