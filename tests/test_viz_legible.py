"""Pictures that do not mislead (issue 47), on a graph shaped like a text-game namespace: one
task with two procedures of its own, and eleven procedures of other tasks (whose task texts
read the same) linked to them and to each other.

- the task page counts and marks the procedures that are not the task's own;
- no two rows of the comparison table read the same (identical ones are one row, counted);
- ``graphmem episode`` tells the offered procedures apart in the terminal;
- the static pictures (DOT/PNG, Mermaid) draw the task's own chains, no tangle of link lines,
  and join the task to its best procedure;
- in headless Chromium at 1400 px, the pages' captions and edge labels are at least 11 px.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from test_viz_browser import chromium, rendered_status, requires_chromium

from graphmem import viz
from graphmem.models import (
    Edge,
    EdgeKind,
    Episode,
    EpisodeStatus,
    Granularity,
    Procedure,
    Step,
    Task,
)
from graphmem.stores.embedded import EmbeddedStore
from graphmem.viz.dot import dot_binary
from graphmem.viz.graph import static_view
from graphmem.viz.subgraph import LINKED_MARK

NS = "games"
TEXT = "You are hungry! Let's cook a delicious meal. Check the cookbook in the kitchen."
OWN = 2
LINKED = 11
SAME_ROW = 3  # linked procedures that read exactly alike (same steps, numbers)


def _procedure(pid: str, actions: list[str], q: float, uses: int) -> tuple[list, list[Edge]]:  # type: ignore[type-arg]
    proc = Procedure(
        namespace=NS,
        id=pid,
        task_text=TEXT,
        key="cook meal",
        granularity=Granularity.TRAJECTORY,
        reward=1.0,
        success=True,
        n_steps=len(actions),
        q=q,
        uses=uses,
    )
    nodes: list = [proc]  # type: ignore[type-arg]
    edges: list[Edge] = []
    prev = pid
    for i, action in enumerate(actions):
        step = Step(namespace=NS, id=f"{pid}-s{i}", procedure_id=pid, index=i, action=action)
        kind = EdgeKind.FIRST_STEP if i == 0 else EdgeKind.NEXT
        edges.append(Edge(namespace=NS, kind=kind, src=prev, dst=step.id))
        nodes.append(step)
        prev = step.id
    return nodes, edges


INGREDIENTS = [
    "red apple", "carrot", "red onion", "yellow potato", "block of cheese", "olive oil",
    "red hot pepper", "parsley", "banana", "water", "black pepper", "chicken wing", "salt",
    "flour", "purple potato", "orange bell pepper",
]  # fmt: skip


def _actions(i: int) -> list[str]:
    food = INGREDIENTS[i % len(INGREDIENTS)]
    return ["read cookbook", "take knife", f"take {food}", f"slice {food}",
            f"cook {food} in stove", "prepare meal", "eat meal"]  # fmt: skip


@pytest.fixture
def store() -> EmbeddedStore:
    store = EmbeddedStore.in_memory()
    nodes: list = []  # type: ignore[type-arg]
    edges: list[Edge] = []
    task = Task(namespace=NS, id="task-0", text=TEXT, key="cook meal")
    nodes.append(task)
    own = [f"own-{i}" for i in range(OWN)]
    linked = [f"other-{i}" for i in range(LINKED)]
    for i, pid in enumerate(own):
        n, e = _procedure(pid, _actions(i), q=0.8 - 0.1 * i, uses=5 - i)
        nodes += n
        edges += e
        edges.append(Edge(namespace=NS, kind=EdgeKind.SOLVED_BY, src=task.id, dst=pid))
    for i, pid in enumerate(linked):
        same = i < SAME_ROW  # these three: one and the same row
        n, e = _procedure(pid, _actions(15 if same else i + 2), q=0.5, uses=0 if same else i)
        nodes += n
        edges += e
        other_task = Task(namespace=NS, id=f"task-{i + 1}", text=TEXT, key="cook meal")
        nodes.append(other_task)
        edges.append(Edge(namespace=NS, kind=EdgeKind.SOLVED_BY, src=other_task.id, dst=pid))
    # Every procedure linked to every other (what note evolution does to look-alikes).
    for a, b in itertools.combinations(own + linked, 2):
        edges.append(
            Edge(namespace=NS, kind=EdgeKind.LINKS_TO, src=a, dst=b, props={"reason": "similar"})
        )
    episode = Episode(
        namespace=NS, id="ep-1", task_text=TEXT, status=EpisodeStatus.FINISHED, reward=1.0,
        success=True,
    )  # fmt: skip
    nodes.append(episode)
    for rank, pid in enumerate([*own, *linked[SAME_ROW - 1 :]]):
        props = {"rank": rank, "sim": 0.99, "q": 0.5, "score": 1.0 - 0.1 * rank, "used": rank == 0}
        edges.append(Edge(namespace=NS, kind=EdgeKind.RETRIEVED, src="ep-1", dst=pid, props=props))
    store.upsert(nodes, edges)
    return store


def test_the_task_page_counts_and_marks_what_is_not_its_own(store: EmbeddedStore) -> None:
    sub = viz.task_subgraph(store, NS, "task-0")
    assert f"1 Task, {OWN} own Procedures, {LINKED} linked from other tasks" in sub.subtitle
    procs = {i: n for i, n in sub.nodes.items() if n.kind == "Procedure"}
    assert sorted(i for i, n in procs.items() if n.linked) == sorted(
        f"other-{i}" for i in range(LINKED)
    )
    for pid, node in procs.items():
        assert node.caption.startswith(LINKED_MARK) is node.linked, (pid, node.caption)
    page = viz.to_html(sub)
    assert f"{LINKED} linked from other tasks (marked ↗)" in page
    assert page.count('class="gm-linked"') == LINKED - SAME_ROW + 1  # one row for the three


def test_no_two_rows_of_the_comparison_read_the_same(store: EmbeddedStore) -> None:
    sub = viz.task_subgraph(store, NS, "task-0")
    assert sub.compare[0].id == "own-0" and not sub.compare[0].linked  # the best is its own
    seen = set()
    for row in sub.compare:
        key = (row.distinct, tuple(row.cells), round(row.q, 2), row.uses, row.outcome, row.linked)
        assert key not in seen, f"two rows read {row.distinct!r}"
        seen.add(key)
    grouped = [r for r in sub.compare if r.twins]
    assert len(grouped) == 1 and len(grouped[0].twins) == SAME_ROW - 1
    assert len(sub.compare) == OWN + LINKED - (SAME_ROW - 1)
    assert f"×{SAME_ROW} procedures" in viz.to_html(sub)


def test_static_pictures_draw_the_own_chains_without_a_tangle(store: EmbeddedStore) -> None:
    sub = viz.task_subgraph(store, NS, "task-0")
    assert sum(1 for e in sub.edges if e.kind == "LINKS_TO") >= 70  # the tangle that was drawn
    dot = viz.render(sub, "dot")
    assert isinstance(dot, str)
    assert "other-" not in dot and "LINKS_TO" not in dot.replace('tooltip="LINKS_TO', "")
    assert f"{LINKED} linked from other tasks, not drawn" in dot
    for pid in ("own-0", "own-1"):
        assert f'"task-0" -> "{pid}"' in dot
    mermaid = viz.render(sub, "mermaid")
    assert isinstance(mermaid, str)
    assert '(["PROCEDURE' not in mermaid and '[["PROCEDURE' in mermaid  # no stadium shapes
    drawn = list(static_view(sub).nodes)  # Mermaid names them n0, n1… in this order
    task, best = f"n{drawn.index('task-0')}", f"n{drawn.index('own-0')}"
    assert re.search(rf'^\s+{task} -->\|"SOLVED_BY[^\n]*\| {best}$', mermaid, re.M), mermaid
    assert "other-" not in mermaid and "LINKS_TO" not in mermaid


@pytest.mark.skipif(dot_binary() is None, reason="Graphviz dot is not installed")
def test_the_graphviz_png_is_legible(store: EmbeddedStore, tmp_path: Path) -> None:
    from PIL import Image

    sub = viz.task_subgraph(store, NS, "task-0")
    path = viz.write(sub, tmp_path / "task.png")
    width, height = Image.open(path).size
    # Two chains of seven steps: a picture a screen can show, not 13 procedures and 78 links.
    assert width <= 2600 and height <= 2000, (width, height)
    edges = viz.render(sub, "dot")
    assert isinstance(edges, str) and edges.count(" -> ") <= 20


def test_episode_in_the_terminal_tells_procedures_apart(
    store: EmbeddedStore, tmp_path: Path
) -> None:
    path = tmp_path / "store"
    with EmbeddedStore.open(path) as disk:
        disk.import_jsonl(_export(store))
    env = {**os.environ, "GRAPHMEM_STORE": str(path)}
    env.pop("GRAPHMEM_NEO4J_URI", None)
    out = subprocess.run(
        [sys.executable, "-m", "graphmem", "episode", NS, "ep-1"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    told = re.findall(r"Procedure (\S+): (.*?)  \[", out.stdout)
    assert len(told) >= 4, out.stdout
    summaries = [s for _, s in told]
    assert len(set(summaries)) == len(summaries), out.stdout  # every line its own
    assert all(TEXT[:20] not in s for s in summaries)
    assert any("red apple" in s or "carrot" in s for s in summaries)


def _export(store: EmbeddedStore) -> list[str]:
    import io

    buf = io.StringIO()
    store.export_jsonl(buf, NS)
    return buf.getvalue().splitlines(keepends=True)


@requires_chromium
@pytest.mark.browser
@pytest.mark.parametrize(("view", "memory_id"), [("task", "task-0"), ("episode", "ep-1")])
def test_pages_at_1400_px_are_legible(
    store: EmbeddedStore, tmp_path: Path, view: str, memory_id: str
) -> None:
    sub = (viz.task_subgraph if view == "task" else viz.episode_subgraph)(store, NS, memory_id)
    page = viz.write(sub, tmp_path / f"{view}.html")
    status = rendered_status(tmp_path, page)
    assert status["state"] == "rendered", status
    assert float(status["edge-label-px"]) >= 11.0, status
    labels = json.loads(status["visible-labels"])
    assert labels and min(label["px"] for label in labels) >= 11.0, labels
    shot = tmp_path / f"{view}.png"
    done = chromium(tmp_path, page, f"--screenshot={shot}")
    assert done.returncode == 0 and shot.stat().st_size > 20_000
    from PIL import Image

    assert Image.open(shot).size == (1400, 900)
