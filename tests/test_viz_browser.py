"""The HTML pages really render: headless Chromium opens them from disk, offline.

The page writes what vis-network drew into ``#gm-status`` (``data-state``,
``data-rendered-nodes``, ``data-rendered-edges``); ``chromium --dump-dom`` reads it back.
Skipped without a Chromium (Debian: ``apt-get install chromium``; or set GRAPHMEM_CHROMIUM).
"""

from __future__ import annotations

import html
import itertools
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from graphmem import viz
from graphmem.models import Edge, MemoryKind, Procedure, Step, Task, Tip
from graphmem.settings import Settings
from graphmem.stores.base import MemoryStore
from graphmem.stores.embedded import EmbeddedStore
from graphmem.testing import unique_namespace
from graphmem.viz.subgraph import LINKED_MARK
from showcase.sample import load_sample

pytestmark = pytest.mark.browser


def chromium_binary() -> str | None:
    configured = os.environ.get("GRAPHMEM_CHROMIUM")
    if configured:
        return configured
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


CHROMIUM = chromium_binary()
requires_chromium = pytest.mark.skipif(CHROMIUM is None, reason="no headless Chromium installed")


def chromium(tmp_path: Path, page: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """Run headless Chromium on a local page with no network, a fresh profile each time."""
    assert CHROMIUM is not None
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    return subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            f"--user-data-dir={profile}",
            "--window-size=1400,900",
            "--virtual-time-budget=5000",
            *extra,
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def rendered_status(tmp_path: Path, page: Path) -> dict[str, str]:
    done = chromium(tmp_path, page, "--dump-dom")
    assert done.returncode == 0, done.stderr[-2000:]
    match = re.search(r'<div id="gm-status"([^>]*)>', done.stdout)
    assert match, "the dumped DOM has the status element"
    return {k: html.unescape(v) for k, v in re.findall(r'data-([\w-]+)="([^"]*)"', match.group(1))}


@pytest.fixture
def sample_store() -> EmbeddedStore:
    store = EmbeddedStore.in_memory()
    load_sample(store, "demo")
    return store


@requires_chromium
@pytest.mark.parametrize(
    ("view", "memory_id"),
    [("task", "task-soup"), ("episode", "ep-soup-2"), ("memory", "note-stove")],
)
def test_page_renders_every_node_offline(
    tmp_path: Path, sample_store: EmbeddedStore, view: str, memory_id: str
) -> None:
    if view == "task":
        sub = viz.task_subgraph(sample_store, "demo", memory_id)
    elif view == "episode":
        sub = viz.episode_subgraph(sample_store, "demo", memory_id)
    else:
        sub = viz.memory_subgraph(sample_store, "demo", memory_id, depth=2)
    page = viz.write(sub, tmp_path / f"{view}.html")
    status = rendered_status(tmp_path, page)
    assert status["state"] == "rendered", status
    assert int(status["rendered-nodes"]) == int(status["expected-nodes"]) == len(sub.nodes)
    assert int(status["rendered-edges"]) == int(status["expected-edges"]) == len(sub.edges)
    assert len(sub.nodes) >= 5


@requires_chromium
def test_hostile_memory_text_is_shown_not_run(tmp_path: Path) -> None:
    store = EmbeddedStore.in_memory()
    evil = '</script><script>document.title="pwned"</script><img src=x onerror="alert(1)">'
    task = Task(namespace="demo", text=evil, key=evil)
    tip = Tip(namespace="demo", text=evil)
    store.upsert([task, tip], [Edge(namespace="demo", kind="ABOUT", src=tip.id, dst=task.id)])
    page = viz.write(viz.task_subgraph(store, "demo", task.id), tmp_path / "evil.html")
    done = chromium(tmp_path, page, "--dump-dom")
    assert done.returncode == 0
    dom = done.stdout
    assert "<title>pwned</title>" not in dom and '<img src="x"' not in dom
    status = re.search(
        r'<div id="gm-status"[^>]*data-state="(\w+)"[^>]*data-rendered-nodes="(\d+)"', dom
    )
    assert status and status.groups() == ("rendered", "2")
    # The text is shown, escaped, in the details panel (the root task is pinned there).
    assert "&lt;/script&gt;&lt;script&gt;document.title" in dom


def visible_labels(status: dict[str, str]) -> list[dict[str, object]]:
    """The captions the page reports wholly inside the graph's frame at the first view."""
    labels = json.loads(status["visible-labels"])
    assert isinstance(labels, list)
    return labels


def readable_text(labels: list[dict[str, object]], min_px: float = 10.5) -> str:
    """All visible caption text drawn at least ``min_px`` high on screen, flattened."""
    return " ".join(
        " ".join(str(v["label"]).split())
        for v in labels
        if isinstance(v["px"], int | float) and v["px"] >= min_px
    )


def first_steps(page: str, n: int) -> list[str]:
    """Captions of the first ``n`` steps of the first chain the page draws (the one the layout
    puts first: the first Procedure, in node order, with a FIRST_STEP edge)."""
    found = re.search(r'<script type="application/json" id="gm-data">(.*?)</script>', page, re.S)
    assert found
    data = json.loads(found.group(1))
    first = {e["from"]: e["to"] for e in data["edges"] if e["kind"].startswith("FIRST_STEP")}
    nxt = {e["from"]: e["to"] for e in data["edges"] if e["kind"].startswith("NEXT")}
    labels = {n["id"]: n["label"] for n in data["nodes"]}
    procs = [n["id"] for n in data["nodes"] if n["kind"] == "Procedure" and n["id"] in first]
    out: list[str] = []
    step = first[procs[0]] if procs else None
    while step is not None and len(out) < n:
        out.append(labels[step])
        step = nxt.get(step)
    return out


def long_chain(store: EmbeddedStore, steps: int = 30) -> tuple[Task, list[Step]]:
    actions = [f"open door {i} then take item {i}" for i in range(steps)]
    task = Task(namespace="demo", text="Cook the long recipe", key="long recipe")
    proc = Procedure(
        namespace="demo", task_text=task.text, key=task.key, granularity="trajectory", q=0.8
    )
    chain = [
        Step(namespace="demo", procedure_id=proc.id, index=i, action=a)
        for i, a in enumerate(actions)
    ]
    twin = Procedure(namespace="demo", task_text=task.text, key=task.key, granularity="script")
    twin_chain = [
        Step(namespace="demo", procedure_id=twin.id, index=i, action=a)
        for i, a in enumerate(actions)
    ]
    edges = [Edge(namespace="demo", kind="SOLVED_BY", src=task.id, dst=p.id) for p in (proc, twin)]
    for p, c in ((proc, chain), (twin, twin_chain)):
        edges.append(Edge(namespace="demo", kind="FIRST_STEP", src=p.id, dst=c[0].id))
        edges += [
            Edge(namespace="demo", kind="NEXT", src=a.id, dst=b.id)
            for a, b in itertools.pairwise(c)
        ]
    store.upsert([task, proc, twin, *chain, *twin_chain], edges, keep_utility=False)
    return task, chain


@requires_chromium
def test_a_long_chain_opens_readable_on_its_first_steps(tmp_path: Path) -> None:
    """30 steps, twice (two procedures with the same steps): the first view is zoomed so the
    captions are readable, shows the task and the first steps, and draws the twin's steps once."""
    store = EmbeddedStore.in_memory()
    task, chain = long_chain(store)
    sub = viz.task_subgraph(store, "demo", task.id)
    assert sum(1 for n in sub.nodes.values() if n.kind == MemoryKind.STEP) == len(chain)
    page = viz.write(sub, tmp_path / "long.html")
    status = rendered_status(tmp_path, page)
    assert status["state"] == "rendered", status
    assert float(status["scale"]) >= 0.75
    text = readable_text(visible_labels(status))
    assert "Cook the long recipe" in text
    for step in chain[:3]:
        assert f"{step.index}. {step.action}" in text, text
    assert "+1 with the same steps" in text


@requires_chromium
@pytest.mark.java
@pytest.mark.slow
def test_the_demo_chain_page_is_legible(tmp_path: Path) -> None:
    """The demo's own chain.html, opened as a reader would: a screenshot, and the captions
    readable in the first view hold the text of the chain's first steps."""
    from graphmem.settings import Settings
    from showcase.demo import run_demo
    from showcase.envs.jvm import has_java17

    if not has_java17():
        pytest.skip("the demo plays text games: needs Java 17")
    settings = Settings(store_path=tmp_path / "store", embedder="hashing")
    run_demo(settings, episodes=5, out=tmp_path / "out", namespace="demo-viz")
    page = tmp_path / "out" / "chain.html"
    steps = first_steps(page.read_text(encoding="utf-8"), 3)
    assert steps, "the demo's picture holds a procedural chain"
    status = rendered_status(tmp_path, page)
    assert status["state"] == "rendered", status
    text = readable_text(visible_labels(status))
    for caption in steps:
        assert " ".join(caption.split()) in text, (caption, text)
    shot = tmp_path / "demo-chain.png"
    done = chromium(tmp_path, page, f"--screenshot={shot}")
    assert done.returncode == 0, done.stderr[-2000:]
    assert shot.read_bytes().startswith(b"\x89PNG") and shot.stat().st_size > 40_000
    keep = os.environ.get("GRAPHMEM_VIZ_SCREENSHOT_DIR")
    if keep:
        shutil.copy(shot, Path(keep) / "demo-chain.png")


@requires_chromium
def test_screenshot_of_a_chain(tmp_path: Path, sample_store: EmbeddedStore) -> None:
    page = viz.write(viz.task_subgraph(sample_store, "demo", "task-soup"), tmp_path / "c.html")
    shot = tmp_path / "chain.png"
    done = chromium(tmp_path, page, f"--screenshot={shot}")
    assert done.returncode == 0, done.stderr[-2000:]
    data = shot.read_bytes()
    assert data.startswith(b"\x89PNG") and len(data) > 20_000  # a blank page is far smaller
    keep = os.environ.get("GRAPHMEM_VIZ_SCREENSHOT_DIR")
    if keep:  # for people who want to look at it
        shutil.copy(shot, Path(keep) / "chain.png")


MERMAID_JS = os.environ.get("GRAPHMEM_MERMAID_JS")


@requires_chromium
@pytest.mark.skipif(not MERMAID_JS, reason="set GRAPHMEM_MERMAID_JS to a local mermaid.min.js")
def test_mermaid_output_parses_in_mermaid(tmp_path: Path, sample_store: EmbeddedStore) -> None:
    """Mermaid itself accepts the flowcharts, hostile labels included."""
    assert MERMAID_JS is not None
    store = sample_store
    evil = 'a "quote"; #hash | pipe [b] {c} (d) <e> `f` &g'
    store.upsert([Task(namespace="demo", id="evil", text=evil, key=evil)])
    charts = [
        viz.to_mermaid(viz.task_subgraph(store, "demo", "task-soup")),
        viz.to_mermaid(viz.episode_subgraph(store, "demo", "ep-soup-2")),
        viz.to_mermaid(viz.task_subgraph(store, "demo", "evil")),
    ]
    blocks = "".join(f'<pre class="mermaid">{html.escape(c)}</pre>' for c in charts)
    page = tmp_path / "mermaid.html"
    page.write_text(
        "<!doctype html><html><body>"
        f"{blocks}<div id='out'>pending</div>"
        f"<script>{Path(MERMAID_JS).read_text(encoding='utf-8')}</script>"
        "<script>mermaid.initialize({startOnLoad:false});"
        "mermaid.run().then(function(){document.getElementById('out').textContent="
        "'ok '+document.querySelectorAll('pre.mermaid svg').length;})"
        ".catch(function(e){document.getElementById('out').textContent='error '+e;});"
        "</script></body></html>",
        encoding="utf-8",
    )
    done = chromium(tmp_path, page, "--dump-dom")
    out = re.search(r"<div id=\"out\">([^<]*)</div>", done.stdout)
    assert out and out.group(1) == f"ok {len(charts)}", out.group(1) if out else done.stdout[-500:]


def play_cooking_demo(out: Path, settings: Settings, namespace: str) -> Path:
    """The demo played on cookingworld (every game's task text reads the same): its pictures."""
    from showcase.demo import run_demo
    from showcase.envs.jvm import has_java17

    if CHROMIUM is None:
        pytest.skip("no headless Chromium installed")
    if not has_java17():
        pytest.skip("the demo plays text games: needs Java 17")
    run_demo(settings, game="cookingworld", episodes=20, out=out, namespace=namespace)
    return out


@pytest.fixture(scope="module")
def cooking_demo_embedded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cooking-demo")
    settings = Settings(store_path=root / "store", embedder="hashing")
    return play_cooking_demo(root / "out", settings, "demo-33")


@pytest.fixture(scope="module")
def cooking_demo_neo4j(
    tmp_path_factory: pytest.TempPathFactory, neo4j_store: MemoryStore
) -> Iterator[Path]:
    """The same demo with its memories in the configured Neo4j (GRAPHMEM_NEO4J_URI)."""
    root = tmp_path_factory.mktemp("cooking-demo-neo4j")
    settings = Settings(
        embedder="hashing",
        neo4j_uri=os.environ["GRAPHMEM_NEO4J_URI"],
        neo4j_user=os.environ.get("GRAPHMEM_NEO4J_USER", "neo4j"),
        neo4j_password=os.environ.get("GRAPHMEM_NEO4J_PASSWORD") or None,
        neo4j_database=os.environ.get("GRAPHMEM_NEO4J_DATABASE") or "neo4j",
    )
    namespace = unique_namespace("demo-33")
    try:
        yield play_cooking_demo(root / "out", settings, namespace)
    finally:
        ids = [m.id for m in neo4j_store.iter_nodes(namespace)]
        for start in range(0, len(ids), 500):
            neo4j_store.delete(namespace, ids[start : start + 500])


@pytest.fixture(scope="module", params=["embedded", pytest.param("neo4j", marks=pytest.mark.neo4j)])
def cooking_demo(request: pytest.FixtureRequest) -> Path:
    """The cookingworld demo's pictures, its memories in the embedded store or in Neo4j."""
    out: Path = request.getfixturevalue(f"cooking_demo_{request.param}")
    return out


def with_probe(page: Path, script: str) -> Path:
    """A copy of ``page`` whose extra script writes what it measured into #gm-probe."""
    probed = page.with_name("probe-" + page.name)
    body = f'<div id="gm-probe">pending</div><script>{script}</script></body>'
    probed.write_text(page.read_text(encoding="utf-8").replace("</body>", body), encoding="utf-8")
    return probed


def probe(tmp_path: Path, page: Path) -> str:
    done = chromium(tmp_path, page, "--dump-dom")
    assert done.returncode == 0, done.stderr[-2000:]
    found = re.search(r'<div id="gm-probe">([^<]*)</div>', done.stdout)
    assert found, done.stdout[-500:]
    return html.unescape(found.group(1))


@requires_chromium
@pytest.mark.java
@pytest.mark.slow
def test_the_demo_tells_its_procedures_apart_at_first_view(
    tmp_path: Path, cooking_demo: Path
) -> None:
    """At the first view, at least three procedures of the task show different distinctive
    text (the line under their head) in captions at least 10.5 px high."""
    page = cooking_demo / "chain.html"
    status = rendered_status(tmp_path, page)
    assert status["state"] == "rendered", status
    shown = [
        str(v["label"]).split("\n")
        for v in visible_labels(status)
        # a linked procedure (another task's) opens with its mark, then PROCEDURE
        if str(v["label"]).removeprefix(LINKED_MARK).startswith("PROCEDURE")
        and float(str(v["px"])) >= 10.5
    ]
    distinct = {" ".join(lines[1:-1]) for lines in shown}
    assert len(shown) >= 3 and len(distinct) >= 3, shown
    shot = tmp_path / "demo-procedures.png"
    assert chromium(tmp_path, page, f"--screenshot={shot}").returncode == 0
    keep = os.environ.get("GRAPHMEM_VIZ_SCREENSHOT_DIR")
    if keep:
        shutil.copy(shot, Path(keep) / "demo-procedures.png")


_TEXT_PROBE = """
(function () {
  var out = {}, small = [];
  ["gm-compare", "gm-versions", "gm-episodes"].forEach(function (id) {
    var el = document.getElementById(id);
    out[id] = el ? el.innerText.length : 0;
  });
  var walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    var node = walker.currentNode, el = node.parentElement;
    if (!node.textContent.trim() || !el || el.closest("script,style,[hidden]")) { continue; }
    if (el.offsetParent === null && el !== document.body) { continue; }
    var px = parseFloat(getComputedStyle(el).fontSize);
    if (px < 10.5) { small.push(el.tagName + " " + px + " " + node.textContent.slice(0, 30)); }
  }
  var ep = document.querySelector(".gm-episode");
  out.episodeRows = ep ? ep.querySelectorAll("tbody tr").length : 0;
  out.usedRows = ep ? ep.querySelectorAll("tbody tr.gm-used").length : 0;
  out.episodeText = ep ? ep.innerText : "";
  out.episodeLinks = document.querySelectorAll('#gm-compare a[href^="#episode-"]').length;
  var scroll = document.querySelector("#gm-compare .gm-scroll");
  out.compareColumns = document.querySelectorAll("#gm-compare thead th").length - 2;
  out.compareOverflow = scroll ? scroll.scrollWidth - scroll.clientWidth : -1;
  out.small = small.slice(0, 10);
  document.getElementById("gm-probe").textContent = JSON.stringify(out);
})();
"""


@requires_chromium
@pytest.mark.java
@pytest.mark.slow
def test_the_demo_page_explains_episodes_and_all_its_text_is_legible(
    tmp_path: Path, cooking_demo: Path
) -> None:
    """The chain page holds the comparison table, the versions and the episodes that used its
    procedures, each listing what it was offered and used with sim, Q and score; linked from
    the table. No text on the page is under 10.5 px. The comparison table of the task's best
    procedure, 21 steps, fits a 1400-px window: no scrolling sideways."""
    found = json.loads(probe(tmp_path, with_probe(cooking_demo / "chain.html", _TEXT_PROBE)))
    assert found["small"] == [], found["small"]
    assert found["compareColumns"] >= 15 and found["compareOverflow"] == 0, found
    assert found["gm-compare"] > 0 and found["gm-episodes"] > 0, found
    assert found["episodeRows"] >= 2 and found["usedRows"] >= 1, found
    assert found["episodeLinks"] >= 1, found
    text = found["episodeText"]
    for heading in ("sim", "Q at retrieval", "score", "used", "Q before → after", "offered"):
        assert heading in text, text[:500]
    assert re.search(r"\d\.\d{3} → \d\.\d{3}", text), text[:800]  # a credited Q moved


@requires_chromium
@pytest.mark.java
@pytest.mark.slow
@pytest.mark.skipif(not MERMAID_JS, reason="set GRAPHMEM_MERMAID_JS to a local mermaid.min.js")
def test_the_demo_mermaid_chain_fits_a_1400_px_page(tmp_path: Path, cooking_demo: Path) -> None:
    """mermaid.js (from npm, offline) draws the demo's chain.mmd at its natural size (no
    shrinking to the page) no wider than a 1400-px window: no horizontal scrolling."""
    assert MERMAID_JS is not None
    chart = (cooking_demo / "chain.mmd").read_text(encoding="utf-8")
    page = tmp_path / "chain-mermaid.html"
    page.write_text(
        "<!doctype html><html><body style='margin:0'>"
        f'<pre class="mermaid">{html.escape(chart)}</pre><div id="gm-probe">pending</div>'
        f"<script>{Path(MERMAID_JS).read_text(encoding='utf-8')}</script>"
        "<script>mermaid.initialize({startOnLoad:false, flowchart:{useMaxWidth:false}});"
        "mermaid.run().then(function(){var svg=document.querySelector('pre.mermaid svg');"
        "document.getElementById('gm-probe').textContent=JSON.stringify({"
        "svg: svg.getBoundingClientRect().width, page: document.documentElement.scrollWidth,"
        "view: window.innerWidth, rows: svg.querySelectorAll('g.cluster').length});})"
        ".catch(function(e){document.getElementById('gm-probe').textContent='error '+e;});"
        "</script></body></html>",
        encoding="utf-8",
    )
    found = json.loads(probe(tmp_path, page))
    assert found["rows"] >= 3, found  # wrapped into row subgraphs
    assert found["svg"] <= 1400 and found["page"] <= found["view"], found
    shot = tmp_path / "chain-mermaid.png"
    assert chromium(tmp_path, page, f"--screenshot={shot}").returncode == 0
    keep = os.environ.get("GRAPHMEM_VIZ_SCREENSHOT_DIR")
    if keep:
        shutil.copy(shot, Path(keep) / "demo-mermaid.png")


_IDS = re.compile(r"\b[0-9a-f]{32}\b|\b[0-9a-f]{8}\b")


def drawn(page: Path) -> tuple[list[str], list[str]]:
    """What a chain page shows, ids left out: its captions, and the lines of its comparison
    table, versions and episodes, sorted (rows of equal Q may come in either order)."""
    text = page.read_text(encoding="utf-8")
    found = re.search(r'<script type="application/json" id="gm-data">(.*?)</script>', text, re.S)
    assert found
    captions = sorted(n["label"] for n in json.loads(found.group(1))["nodes"])
    start, end = text.index('<section class="gm-section"'), text.index('<div id="gm-status"')
    shown = _IDS.sub("ID", re.sub(r"graphmem episode \S+", "graphmem episode NS", text[start:end]))
    sections = re.split(r"(?=<tr|<li|<h3|</tbody|</ul)", shown)
    return captions, sorted(sections)


@requires_chromium
@pytest.mark.java
@pytest.mark.slow
@pytest.mark.neo4j
def test_a_neo4j_backed_demo_draws_the_same_pictures(
    cooking_demo_embedded: Path, cooking_demo_neo4j: Path
) -> None:
    """Played with its memories in Neo4j, the demo's chain.html shows the same captions,
    comparison table, versions and episodes as with the embedded store, and chain.mmd the
    same nodes in the same rows (the browser checks above run on both, parametrized)."""
    assert drawn(cooking_demo_neo4j / "chain.html") == drawn(cooking_demo_embedded / "chain.html")

    def chart(out: Path) -> list[str]:
        text = (out / "chain.mmd").read_text(encoding="utf-8")
        return sorted(re.sub(r"\bn\d+\b", "n", line) for line in text.splitlines())

    assert chart(cooking_demo_neo4j) == chart(cooking_demo_embedded)
