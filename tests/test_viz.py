"""Pictures of the memory graph: what each view collects, and what each renderer writes.

Data is written straight into the store from the models (``showcase.sample``), so these
tests depend on no build / retrieve code. They run on every store of the ``store`` fixture.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from graphmem import viz
from graphmem.cli import main
from graphmem.errors import InvalidInput, InvalidNamespace, MemoryNotFound
from graphmem.models import AnyMemory, Edge, Episode, Note, Procedure, Step, Task, Tip
from graphmem.stores.base import MemoryStore
from graphmem.stores.embedded import EmbeddedStore
from graphmem.testing import HOSTILE_TEXTS
from graphmem.viz.compare import aligned, short_step
from graphmem.viz.graph import q_colour
from graphmem.viz.layout import layout, node_box, steps_per_row
from showcase.sample import SampleIds, load_sample

WEB_HOSTILE = (
    "</script><script>window.pwned=1</script>",
    '<img src=x onerror="window.pwned=1">',
    '"]) --> evil[("x',
    'a"; evil -> "b',
    "50% #1 | {curly} [square] (round) `tick` &amp;",
)


@pytest.fixture
def sample(store: MemoryStore, namespace: str) -> SampleIds:
    return load_sample(store, namespace)


def kinds_of(sub: viz.Subgraph) -> list[tuple[str, str, str]]:
    return sorted((k, e.src, e.dst) for e in sub.edges for k in e.kinds)


# ---- task view -----------------------------------------------------------------------------


def test_task_view_holds_the_chains_tips_and_evolution(
    store: MemoryStore, namespace: str, sample: SampleIds
) -> None:
    sub = viz.task_subgraph(store, namespace, sample.task)
    steps = [f"{p}-s{i}" for p, n in ((sample.failed, 2), (sample.fixed, 4)) for i in range(n)]
    assert set(sub.nodes) == {
        sample.task,
        sample.tip,
        sample.failed,
        sample.fixed,
        sample.script,
        sample.note,
        *steps,
    }
    # The other task, its procedure and the episodes belong to other pictures.
    assert sample.other_task not in sub.nodes and sample.episode not in sub.nodes
    edges = kinds_of(sub)
    for proc in (sample.failed, sample.fixed, sample.script):
        assert ("SOLVED_BY", sample.task, proc) in edges
    assert ("FIRST_STEP", sample.fixed, f"{sample.fixed}-s0") in edges
    assert [("NEXT", f"{sample.fixed}-s{i}", f"{sample.fixed}-s{i + 1}") for i in range(3)] == [
        e for e in edges if e[0] == "NEXT" and e[1].startswith(sample.fixed)
    ]
    assert ("DISTILLED_FROM", sample.script, sample.fixed) in edges
    assert ("ABOUT", sample.tip, sample.failed) in edges
    assert ("ABOUT", sample.tip, sample.task) in edges
    assert ("EVOLVED_FROM", sample.fixed, sample.failed) in edges
    assert ("SUPERSEDES", sample.fixed, sample.failed) in edges
    assert ("LINKS_TO", sample.fixed, sample.note) in edges
    assert all(e.src in sub.nodes and e.dst in sub.nodes for e in sub.edges)


def test_task_view_lays_chains_out_in_order(
    store: MemoryStore, namespace: str, sample: SampleIds
) -> None:
    sub = viz.task_subgraph(store, namespace, sample.task)
    level = {i: n.level for i, n in sub.nodes.items()}
    assert level[sample.task] == 0
    assert level[sample.fixed] == level[sample.failed] == level[sample.script] == 1
    assert [level[f"{sample.fixed}-s{i}"] for i in range(4)] == [2, 3, 4, 5]
    assert level[sample.tip] < level[sample.task]
    assert sub.nodes[sample.task].root
    assert sub.nodes[sample.failed].obsolete


def test_parallel_edges_are_drawn_once_with_both_kinds(
    store: MemoryStore, namespace: str, sample: SampleIds
) -> None:
    sub = viz.task_subgraph(store, namespace, sample.task)
    between = [e for e in sub.edges if (e.src, e.dst) == (sample.fixed, sample.failed)]
    assert len(between) == 1
    assert set(between[0].kinds) == {"EVOLVED_FROM", "SUPERSEDES"}
    assert "EVOLVED_FROM" in between[0].label and "SUPERSEDES" in between[0].label


def test_task_view_from_a_procedure_starts_at_its_task(
    store: MemoryStore, namespace: str, sample: SampleIds
) -> None:
    from_task = viz.task_subgraph(store, namespace, sample.task)
    from_proc = viz.task_subgraph(store, namespace, sample.fixed)
    assert set(from_proc.nodes) == set(from_task.nodes)
    assert from_proc.nodes[sample.fixed].root and not from_proc.nodes[sample.task].root


def test_task_view_of_a_lone_procedure(store: MemoryStore, namespace: str) -> None:
    proc = Procedure(namespace=namespace, task_text="Solo", key="solo", granularity="script")
    store.upsert([proc])
    sub = viz.task_subgraph(store, namespace, proc.id)
    assert list(sub.nodes) == [proc.id] and sub.edges == []


def test_task_view_refuses_other_kinds_and_unknown_ids(
    store: MemoryStore, namespace: str, sample: SampleIds
) -> None:
    with pytest.raises(InvalidInput, match="is a Note"):
        viz.task_subgraph(store, namespace, sample.note)
    with pytest.raises(MemoryNotFound):
        viz.task_subgraph(store, namespace, "no-such-task")
    with pytest.raises(InvalidNamespace):
        viz.task_subgraph(store, "bad namespace!", sample.task)
    with pytest.raises(InvalidInput):
        viz.task_subgraph(store, namespace, "bad id!")
    with pytest.raises(InvalidInput, match="max_nodes"):
        viz.task_subgraph(store, namespace, sample.task, max_nodes=0)


def test_cyclic_and_branching_chains_stay_finite(store: MemoryStore, namespace: str) -> None:
    task = Task(namespace=namespace, text="Loop", key="loop")
    proc = Procedure(namespace=namespace, task_text="Loop", key="loop", granularity="trajectory")
    steps = [
        Step(namespace=namespace, id=f"loop-{i}", procedure_id=proc.id, index=i, action=f"a{i}")
        for i in range(4)
    ]

    def e(kind: str, src: str, dst: str) -> Edge:
        return Edge(namespace=namespace, kind=kind, src=src, dst=dst)

    store.upsert(
        [task, proc, *steps],
        [
            e("SOLVED_BY", task.id, proc.id),
            e("FIRST_STEP", proc.id, "loop-0"),
            e("NEXT", "loop-0", "loop-1"),
            e("NEXT", "loop-0", "loop-2"),  # a branch
            e("NEXT", "loop-1", "loop-3"),
            e("NEXT", "loop-3", "loop-0"),  # a cycle back to the start
        ],
    )
    sub = viz.task_subgraph(store, namespace, task.id)
    assert set(sub.nodes) == {task.id, proc.id, "loop-0", "loop-1", "loop-2", "loop-3"}
    assert ("NEXT", "loop-3", "loop-0") in kinds_of(sub)
    assert sub.nodes["loop-1"].level == sub.nodes["loop-2"].level == 3


def test_max_nodes_truncates_and_says_so(
    store: MemoryStore, namespace: str, sample: SampleIds
) -> None:
    sub = viz.task_subgraph(store, namespace, sample.task, max_nodes=4)
    assert len(sub.nodes) == 4 and sub.truncated
    assert "truncated" in sub.subtitle
    assert not viz.task_subgraph(store, namespace, sample.task).truncated


def test_namespaces_do_not_mix(store: MemoryStore, namespace: str, sample: SampleIds) -> None:
    other = f"{namespace}-other"
    load_sample(store, other)
    store.upsert(
        [Tip(namespace=other, id="tip-only-there", text="elsewhere")],
        [Edge(namespace=other, kind="ABOUT", src="tip-only-there", dst=sample.task)],
    )
    sub = viz.task_subgraph(store, namespace, sample.task)
    assert "tip-only-there" not in sub.nodes
    assert viz.task_subgraph(store, other, sample.task).nodes.keys() >= {"tip-only-there"}


# ---- episode and memory views --------------------------------------------------------------


def test_episode_view_shows_what_was_retrieved_and_how_q_moved(
    store: MemoryStore, namespace: str, sample: SampleIds
) -> None:
    sub = viz.episode_subgraph(store, namespace, sample.episode)
    assert [row["id"] for row in sub.table] == [sample.fixed, sample.script, sample.tip]
    first = sub.table[0]
    assert (first["rank"], first["sim"], first["q"], first["score"]) == (
        "1",
        "0.900",
        "0.560",
        "1.000",
    )
    assert first["q_after"] == first["q_now"] == "0.692"
    assert [row["used"] for row in sub.table] == ["used", "", ""]  # offered vs used
    page = viz.to_html(sub)
    assert "<th>used</th>" in page and page.count('<tr class="gm-used">') == 1
    retrieved = [e for e in sub.edges if e.kind == "RETRIEVED"]
    assert len(retrieved) == 3 and all(e.src == sample.episode for e in retrieved)
    top = next(e for e in retrieved if e.dst == sample.fixed)
    assert top.label.startswith("#1 score 1.00 used") and "Q 0.56→0.69" in top.label
    # Retrieved procedures come with the task they solved.
    assert sample.task in sub.nodes and sub.nodes[sample.task].level == 2
    assert "reward 1, success" in sub.subtitle
    # An episode's own q is not learned, so it is not on the Q scale or in its fields.
    assert "q" not in sub.nodes[sample.episode].fields


def test_episode_view_refuses_other_kinds(
    store: MemoryStore, namespace: str, sample: SampleIds
) -> None:
    with pytest.raises(InvalidInput, match="not an Episode"):
        viz.episode_subgraph(store, namespace, sample.task)


def test_memory_view_walks_the_neighbourhood(
    store: MemoryStore, namespace: str, sample: SampleIds
) -> None:
    alone = viz.memory_subgraph(store, namespace, sample.note, depth=0)
    assert list(alone.nodes) == [sample.note]
    near = viz.memory_subgraph(store, namespace, sample.note)
    # Its LINKS_TO neighbours, the procedure that links to it, and the note that UPDATES it.
    assert set(near.nodes) == {sample.note, "note-pot", sample.fixed, "note-stove-2"}
    assert "updated later" in near.nodes[sample.note].caption
    far = viz.memory_subgraph(store, namespace, sample.note, depth=2)
    assert set(near.nodes) < set(far.nodes)
    assert {sample.failed, sample.task, sample.episode} <= set(far.nodes)
    assert all(far.nodes[i].level <= 2 for i in far.nodes)
    with pytest.raises(InvalidInput, match="depth"):
        viz.memory_subgraph(store, namespace, sample.note, depth=9)


# ---- styling -------------------------------------------------------------------------------


def test_q_sets_colour_and_size(store: MemoryStore, namespace: str, sample: SampleIds) -> None:
    sub = viz.task_subgraph(store, namespace, sample.task)
    fixed, task = sub.nodes[sample.fixed], sub.nodes[sample.task]
    assert fixed.size > task.size  # Q 0.692 vs 0.35
    assert fixed.fill == q_colour(fixed.size) != task.fill
    assert sub.nodes[sample.failed].fill == "#e9ecef"  # obsolete: greyed out
    assert "Q 0.69" in fixed.caption and "(obsolete)" in sub.nodes[sample.failed].caption
    assert q_colour(0.0) != q_colour(0.5) != q_colour(1.0)
    assert q_colour(-3) == q_colour(0.0) and q_colour(7) == q_colour(1.0)


# ---- renderers -----------------------------------------------------------------------------


def page_json(page: str) -> dict[str, object]:
    match = re.search(r'<script type="application/json" id="gm-data">(.*?)</script>', page, re.S)
    assert match, "the page embeds its data"
    data = json.loads(match.group(1))
    assert isinstance(data, dict)
    return data


def test_html_is_self_contained_and_carries_the_graph(
    store: MemoryStore, namespace: str, sample: SampleIds
) -> None:
    sub = viz.task_subgraph(store, namespace, sample.task)
    page = viz.to_html(sub)
    assert "vis-network" in page and "new vis.Network" in page
    # Nothing is fetched: no external scripts, styles, images or fonts.
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)=", page)
    assert "@import" not in page and "url(http" not in page
    data = page_json(page)
    nodes, edges = data["nodes"], data["edges"]
    assert isinstance(nodes, list) and isinstance(edges, list)
    assert {n["id"] for n in nodes} == set(sub.nodes)
    assert len(edges) == len(sub.edges)
    assert f'data-expected-nodes="{len(sub.nodes)}"' in page
    fixed = next(n for n in nodes if n["id"] == sample.fixed)
    assert fixed["fields"]["q"] == "0.692" and fixed["kind"] == "Procedure"


@pytest.mark.parametrize("text", HOSTILE_TEXTS[:-1] + WEB_HOSTILE)
def test_hostile_text_cannot_break_any_format(namespace: str, text: str) -> None:
    store = EmbeddedStore.in_memory()
    task = Task(namespace=namespace, text=text, key=text)
    tip = Tip(namespace=namespace, text=text)
    store.upsert([task, tip], [Edge(namespace=namespace, kind="ABOUT", src=tip.id, dst=task.id)])
    sub = viz.task_subgraph(store, namespace, task.id)

    page = viz.to_html(sub)
    assert "<script>window.pwned" not in page and "<img src=x" not in page
    assert len(page_json(page)["nodes"]) == 2  # type: ignore[arg-type]

    mermaid = viz.to_mermaid(sub, direction="LR")  # unwrapped: one line per node and edge
    body = mermaid.splitlines()[2:]
    assert len(body) == 2 + 1 + 2 + 1  # two nodes, one edge, two styles, one link style
    for line in body[:2]:
        label = re.search(r'"(.*)"', line)
        assert label
        bare = re.sub(r"#\d+;|<br/>", "", label.group(1))  # all but entities and breaks
        assert not set(bare) & set('"#;<>|[]{}()`')

    dot = viz.to_dot(sub)
    assert len(re.findall(r'^  "[^"]+" -> "[^"]+" \[', dot, re.M)) == 1
    if shutil.which("dot"):
        done = subprocess.run(["dot", "-Tcanon"], input=dot.encode(), capture_output=True)
        assert done.returncode == 0, done.stderr.decode()


def test_mermaid_output(store: MemoryStore, namespace: str, sample: SampleIds) -> None:
    sub = viz.task_subgraph(store, namespace, sample.task)
    assert viz.to_mermaid(sub).startswith("flowchart TB\n")  # a task view wraps into rows
    text = viz.to_mermaid(sub, direction="LR")
    lines = text.splitlines()
    assert lines[0] == "flowchart LR"
    assert sum(1 for line in lines if "-->" in line or "-.->" in line) == len(sub.edges)
    assert sum(1 for line in lines if line.strip().startswith("style ")) == len(sub.nodes)
    assert '-.->|"EVOLVED_FROM' in text  # evolution edges are dashed
    assert text == viz.to_mermaid(viz.task_subgraph(store, namespace, sample.task), direction="LR")
    with pytest.raises(InvalidInput):
        viz.to_mermaid(sub, direction="sideways")


def test_dot_output(store: MemoryStore, namespace: str, sample: SampleIds) -> None:
    sub = viz.task_subgraph(store, namespace, sample.task)
    text = viz.to_dot(sub)
    assert text.startswith("digraph graphmem {") and text.rstrip().endswith("}")
    assert text.count(" -> ") == len(sub.edges)
    assert f'"{sample.failed}" [label=' in text and "dashed" in text
    assert "rank=same" in text
    with pytest.raises(InvalidInput):
        viz.to_dot(sub, rankdir="diagonal")


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz dot is not installed")
def test_dot_is_valid_graphviz(store: MemoryStore, namespace: str, sample: SampleIds) -> None:
    sub = viz.task_subgraph(store, namespace, sample.task)
    done = subprocess.run(
        ["dot", "-Tplain"], input=viz.to_dot(sub).encode(), capture_output=True, timeout=60
    )
    assert done.returncode == 0, done.stderr.decode()
    plain = done.stdout.decode()
    assert sum(1 for line in plain.splitlines() if line.startswith("node ")) == len(sub.nodes)
    assert viz.to_png(sub, engine="dot").startswith(b"\x89PNG")


def test_png_without_graphviz_uses_matplotlib(
    store: MemoryStore, namespace: str, sample: SampleIds, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("matplotlib")
    monkeypatch.setattr("graphmem.viz.png.dot_binary", lambda: None)
    sub = viz.episode_subgraph(store, namespace, sample.episode)
    png = viz.to_png(sub)
    assert png.startswith(b"\x89PNG") and len(png) > 5_000
    monkeypatch.setattr("graphmem.viz.dot.dot_binary", lambda: None)
    with pytest.raises(viz.VizError, match="graphviz"):
        viz.to_png(sub, engine="dot")


def test_write_picks_the_format_from_the_suffix(
    store: MemoryStore, namespace: str, sample: SampleIds, tmp_path: Path
) -> None:
    sub = viz.task_subgraph(store, namespace, sample.task)
    tmp_path = tmp_path / "out"
    tmp_path.mkdir()
    assert viz.write(sub, tmp_path / "a.mmd").read_text().startswith("flowchart")
    assert viz.write(sub, tmp_path / "a.gv").read_text().startswith("digraph")
    assert viz.write(sub, tmp_path / "a.html").read_text().startswith("<!doctype html>")
    assert viz.write(sub, tmp_path / "a.txt", "dot").read_text().startswith("digraph")
    assert viz.format_for("x.unknown") == "html"
    with pytest.raises(InvalidInput, match="unknown format"):
        viz.format_for("x.html", "svg")
    with pytest.raises(viz.VizError, match="could not write"):
        viz.write(sub, tmp_path / "missing-dir" / "a.html")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.gv", "a.html", "a.mmd", "a.txt"]


def test_html_without_vis_network_says_how_to_get_it(
    store: MemoryStore, namespace: str, sample: SampleIds, monkeypatch: pytest.MonkeyPatch
) -> None:
    from graphmem.viz import html

    html.vis_network_js.cache_clear()
    monkeypatch.setattr(html, "VIS_PACKAGE", "graphmem_no_such_package")
    try:
        with pytest.raises(viz.VizError, match="pyvis"):
            viz.to_html(viz.task_subgraph(store, namespace, sample.task))
    finally:
        html.vis_network_js.cache_clear()


# ---- CLI -----------------------------------------------------------------------------------


@dataclass
class CliResult:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def run_cli(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Callable[..., CliResult]:
    """Run ``graphmem viz ...`` in process against the embedded store in ``store_dir``."""

    def run(store_dir: Path, *args: str) -> CliResult:
        for key in [k for k in os.environ if k.startswith("GRAPHMEM_")]:
            monkeypatch.delenv(key)
        monkeypatch.setenv("GRAPHMEM_STORE", str(store_dir))
        capsys.readouterr()
        code = main(["viz", *args])
        out = capsys.readouterr()
        return CliResult(code, out.out, out.err)

    return run


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    with EmbeddedStore.open(path) as embedded:
        load_sample(embedded, "demo")
    return path


def test_cli_writes_each_view(
    store_dir: Path, tmp_path: Path, run_cli: Callable[..., CliResult]
) -> None:
    out = tmp_path / "chain.html"
    done = run_cli(store_dir, "task", "task-soup", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "12 memories" in done.stderr and out.read_text().startswith("<!doctype html>")

    done = run_cli(store_dir, "episode", "ep-soup-2", "-o", "-", "-f", "mermaid")
    assert done.returncode == 0 and done.stdout.startswith("flowchart LR")

    out = tmp_path / "around.dot"
    done = run_cli(store_dir, "memory", "note-stove", "-n", "demo", "--depth", "2", "-o", str(out))
    assert done.returncode == 0 and out.read_text().startswith("digraph")


def test_cli_errors_are_one_line(
    store_dir: Path, tmp_path: Path, run_cli: Callable[..., CliResult]
) -> None:
    with EmbeddedStore.open(store_dir) as embedded:
        load_sample(embedded, "demo-2")
    cases = {
        ("task", "task-soup"): "choose one with --namespace",
        ("task", "nope", "-n", "demo"): "no memory 'nope'",
        ("task", "nope"): "no memory 'nope' in any namespace",
        ("task", "note-stove", "-n", "demo"): "is a Note",
        ("episode", "ep-soup-2", "-n", "demo", "-o", "-", "-f", "png"): "standard output",
    }
    for args, message in cases.items():
        done = (
            run_cli(store_dir, *args, "-o", str(tmp_path / "x.html"))
            if "-o" not in args
            else (run_cli(store_dir, *args))
        )
        assert done.returncode == 2, (args, done.stderr)
        assert message in done.stderr and "Traceback" not in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "x.html").exists()


# ---- layout: long chains, identical procedures, episode ranks ------------------------------


def chain_store(store: MemoryStore, namespace: str, steps: int = 30) -> tuple[Task, list[Step]]:
    """A task solved twice with the same ``steps`` actions (two procedures, two chains)."""
    task = Task(namespace=namespace, text="Cook the long recipe", key="long recipe")
    procs = [
        Procedure(namespace=namespace, task_text=task.text, key=task.key, granularity=g, q=q)
        for g, q in (("script", 0.5), ("trajectory", 0.8))
    ]
    nodes: list[AnyMemory] = [task, *procs]
    edges = [Edge(namespace=namespace, kind="SOLVED_BY", src=task.id, dst=p.id) for p in procs]
    chains: list[list[Step]] = []
    for proc in procs:
        chain = [
            Step(namespace=namespace, procedure_id=proc.id, index=i, action=f"open door {i}")
            for i in range(steps)
        ]
        chains.append(chain)
        nodes += chain
        edges.append(Edge(namespace=namespace, kind="FIRST_STEP", src=proc.id, dst=chain[0].id))
        edges += [
            Edge(namespace=namespace, kind="NEXT", src=a.id, dst=b.id)
            for a, b in itertools.pairwise(chain)
        ]
    store.upsert(nodes, edges, keep_utility=False)
    return task, chains[1]  # the higher-Q procedure's chain is the one drawn


def boxes_overlap(sub: viz.Subgraph) -> list[tuple[str, str]]:
    pos = layout(sub)
    boxes = {
        i: (x - w / 2, y - h / 2, x + w / 2, y + h / 2)
        for i, (x, y) in pos.items()
        for w, h in [node_box(sub.nodes[i])]
    }
    ids = list(boxes)
    return [
        (a, b)
        for k, a in enumerate(ids)
        for b in ids[k + 1 :]
        if boxes[a][0] < boxes[b][2]
        and boxes[b][0] < boxes[a][2]
        and boxes[a][1] < boxes[b][3]
        and boxes[b][1] < boxes[a][3]
    ]


def test_a_long_chain_wraps_into_rows_without_overlaps(store: MemoryStore, namespace: str) -> None:
    task, chain = chain_store(store, namespace)
    sub = viz.task_subgraph(store, namespace, task.id)
    pos = layout(sub)
    assert set(pos) == set(sub.nodes)
    assert boxes_overlap(sub) == []
    rows = {pos[s.id][1] for s in chain}
    per_row = steps_per_row(sub)
    assert 2 <= per_row < len(chain)
    assert len(rows) == -(-len(chain) // per_row)  # wrapped, not one 30-step line
    # Read in order: each step is beside or right below the one before (a snake).
    for a, b in itertools.pairwise(chain):
        (xa, ya), (xb, yb) = pos[a.id], pos[b.id]
        assert ya == yb or (xa == xb and yb > ya)


def test_identical_procedures_are_grouped_and_their_steps_drawn_once(
    store: MemoryStore, namespace: str
) -> None:
    task, chain = chain_store(store, namespace, steps=5)
    sub = viz.task_subgraph(store, namespace, task.id)
    steps = [n for n in sub.nodes.values() if n.kind == "Step"]
    assert sorted(n.id for n in steps) == sorted(s.id for s in chain)
    drawn = next(n for n in sub.nodes.values() if n.kind == "Procedure" and n.q == 0.8)
    twin = next(n for n in sub.nodes.values() if n.kind == "Procedure" and n.q == 0.5)
    assert "+1 with the same steps" in drawn.caption
    assert twin.fields["same steps as"] == drawn.id
    pos = layout(sub)
    assert pos[twin.id][0] == pos[drawn.id][0] and pos[twin.id][1] > pos[drawn.id][1]
    assert "5 Steps" in sub.subtitle


def test_png_fallback_draws_a_30_step_chain(
    store: MemoryStore, namespace: str, tmp_path: Path
) -> None:
    pytest.importorskip("matplotlib")
    from graphmem.viz.png import matplotlib_png

    task, _ = chain_store(store, namespace)
    png = matplotlib_png(viz.task_subgraph(store, namespace, task.id))
    assert png.startswith(b"\x89PNG")
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert 800 < width < 4000 and 800 < height < 4000  # rows, not a 30-box-wide strip


def test_episode_ranks_follow_score_across_in_task_recalls(
    store: MemoryStore, namespace: str
) -> None:
    """Two recalls each rank their hits from 1: the picture ranks all hits by score."""
    episode = Episode(namespace=namespace, task_text="cook")
    notes = [Note(namespace=namespace, content=f"fact {i}") for i in range(4)]
    recalls = [(1, 0.2), (2, -0.5), (1, 0.9), (2, 0.1)]  # (rank in its recall, score)
    edges = [
        Edge(
            namespace=namespace,
            kind="RETRIEVED",
            src=episode.id,
            dst=n.id,
            props={"rank": rank, "sim": 0.5, "q": 0.5, "score": score},
        )
        for n, (rank, score) in zip(notes, recalls, strict=True)
    ]
    store.upsert([episode, *notes], edges)
    sub = viz.episode_subgraph(store, namespace, episode.id)
    order = [notes[2].id, notes[0].id, notes[3].id, notes[1].id]
    assert [r["id"] for r in sub.table] == order
    assert [r["rank"] for r in sub.table] == ["1", "2", "3", "4"]
    labels = {e.dst: e.label for e in sub.edges if e.kind == "RETRIEVED"}
    assert [labels[i].split()[0] for i in order] == ["#1", "#2", "#3", "#4"]
    pos = layout(sub)
    assert [pos[i][1] for i in order] == sorted(pos[i][1] for i in order)  # top to bottom
    assert boxes_overlap(sub) == []


@pytest.mark.parametrize("games", [5, 30, 300])
def test_learning_curve_is_a_rolling_mean_at_any_length(games: int, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from showcase.demo import _plot, curve_window, rolling_rate

    assert rolling_rate([True, False, True, True], 2) == [1.0, 0.5, 0.5, 1.0]
    assert 3 <= curve_window(games) <= 50
    wins = [i % 3 == 0 for i in range(games)]
    path = _plot([False] * games, wins, tmp_path / "curve.png")
    assert path is not None and path.read_bytes().startswith(b"\x89PNG")


def test_graphviz_png_wraps_a_30_step_chain_too(store: MemoryStore, namespace: str) -> None:
    if shutil.which("dot") is None:
        pytest.skip("Graphviz is not installed")
    task, _ = chain_store(store, namespace)
    sub = viz.task_subgraph(store, namespace, task.id)
    assert 'pos="' in viz.to_dot(sub, positions=True) and 'pos="' not in viz.to_dot(sub)
    png = viz.to_png(sub, engine="dot")
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert png.startswith(b"\x89PNG") and width < 2 * height  # rows, not a 30-box strip


@pytest.mark.parametrize("steps", [4, 9, 30])
def test_mermaid_wraps_a_task_view_into_rows(
    store: MemoryStore, namespace: str, steps: int
) -> None:
    """Rows of steps are subgraphs read left to right, joined row to row; no row is wider than
    the page (the render check in test_viz_browser measures it with mermaid.js)."""
    task, chain = chain_store(store, namespace, steps=steps)
    sub = viz.task_subgraph(store, namespace, task.id)
    text = viz.to_mermaid(sub)
    assert text.splitlines()[0] == "flowchart TB"
    assert viz.to_mermaid(sub, direction="LR").splitlines()[0] == "flowchart LR"  # asked for
    drawn = [line for line in text.splitlines() if "open door" in line]
    assert len(drawn) == len(chain)  # every step of the drawn chain is in the chart
    rows = re.findall(r"subgraph (row\d+)", text)
    per_row = [
        len(re.findall(r"^    n\d+\[\"\d+\. open door", block, re.M))
        for block in text.split("subgraph ")[1:]
    ]
    steps_per_row = [n for n in per_row if n]
    assert sum(steps_per_row) == len(chain) and max(steps_per_row) >= 2
    assert len(steps_per_row) == -(-len(chain) // max(steps_per_row))
    assert len(rows) >= len(steps_per_row)
    assert "direction LR" in text


# ---- procedures told apart (issue 33) ------------------------------------------------------


def test_short_step_labels_and_aligned_cells() -> None:
    assert short_step("take knife") == "take knife"
    assert short_step("cook block of cheese in stove") == "cook cheese in stove"
    assert short_step("take orange bell pepper") == "take bell pepper"
    assert short_step("open door to east") == "open door E"
    assert short_step("open kitchen cupboard") == "open cupboard"
    best = ["take knife", "open fridge", "eat meal"]
    cells = aligned(best, ["take knife", "cook yellow potato in oven", "eat meal", "go east"])
    assert cells == [
        ("·", "same", "·"),
        ("cook yellow potato in oven", "changed", "cook yellow potato in oven"),
        ("· + go east", "added", "· +1"),
    ]
    assert aligned(best, ["take knife"])[1:] == [("—", "missing", "—")] * 2


def recipes(store: MemoryStore, namespace: str) -> tuple[Task, list[Procedure], Episode]:
    """One task text, three procedures that differ in their objects; an episode offered all
    three and used the second."""
    text = "You are hungry! Let's cook a delicious meal."
    task = Task(namespace=namespace, text=text, key=text)
    plans = [
        (0.9, ["take knife", "take red apple", "slice red apple", "cook red apple in oven"]),
        (0.7, ["take knife", "take yellow potato", "dice yellow potato", "eat meal"]),
        (0.6, ["take knife", "take block of cheese", "cook block of cheese in stove"]),
    ]
    procs = [
        Procedure(
            namespace=namespace,
            task_text=text,
            key=text,
            granularity="proceduralized",
            q=q,
            success=True,
            reward=1.0,
        )
        for q, _ in plans
    ]
    nodes: list[AnyMemory] = [task, *procs]
    edges = [Edge(namespace=namespace, kind="SOLVED_BY", src=task.id, dst=p.id) for p in procs]
    for proc, (_, actions) in zip(procs, plans, strict=True):
        chain = [
            Step(namespace=namespace, procedure_id=proc.id, index=i, action=a)
            for i, a in enumerate(actions)
        ]
        nodes += chain
        edges.append(Edge(namespace=namespace, kind="FIRST_STEP", src=proc.id, dst=chain[0].id))
        edges += [
            Edge(namespace=namespace, kind="NEXT", src=a.id, dst=b.id)
            for a, b in itertools.pairwise(chain)
        ]
    episode = Episode(namespace=namespace, task_text=text)
    nodes.append(episode)
    edges += [
        Edge(
            namespace=namespace,
            kind="RETRIEVED",
            src=episode.id,
            dst=p.id,
            props={"rank": k, "sim": 0.9, "q": p.q, "score": 1.0 - k, "used": k == 1},
        )
        for k, p in enumerate(procs)
    ]
    store.upsert(nodes, edges, keep_utility=False)
    return task, procs, episode


def test_procedures_of_one_task_are_told_apart(store: MemoryStore, namespace: str) -> None:
    """Captions say what each procedure has of its own; the page compares them step by step
    in a compact table (step numbers, short labels, whole steps on hover) and tells the
    episode that used one: offered, used, scores."""
    task, procs, episode = recipes(store, namespace)
    sub = viz.task_subgraph(store, namespace, task.id)
    assert [r.id for r in sub.compare] == [p.id for p in procs]  # best Q first
    lines = [sub.nodes[p.id].caption.split("\n")[1] for p in procs if p.id in sub.nodes]
    assert len(lines) == 3 and len(set(lines)) == 3, lines
    assert lines[0].startswith("best") and "yellow potato" in lines[1] and "cheese" in lines[2]
    assert sub.compare[1].cells[1] == ("take yellow potato", "changed", "take yellow potato")
    assert sub.compare[2].cells[2] == (
        "cook block of cheese in stove",
        "changed",
        "cook cheese in stove",
    )
    page = viz.to_html(sub)
    assert '<th title="slice red apple">2</th>' in page  # a column is its step number
    assert (
        '<td class="gm-chg" title="cook block of cheese in stove"><div>cook cheese in stove' in page
    )
    assert [ep.id for ep in sub.episodes] == [episode.id]
    section = page[page.index(f'id="episode-{episode.id}"') :]
    assert "offered 3, used 1" in section and section.count('<tr class="gm-used">') == 1
    assert f'href="#proc-{procs[1].id}"' in section  # the used procedure, linked to its row
    assert f'href="#episode-{episode.id}"' in page[page.index('id="gm-compare"') :]
    # The episode's own view tells the procedures it was offered apart the same way.
    view = viz.episode_subgraph(store, namespace, episode.id)
    memory = {row["id"]: row["memory"] for row in view.table}
    assert memory[procs[0].id].startswith("procedure: best")
    assert "yellow potato" in memory[procs[1].id] and "cheese" in memory[procs[2].id]
    assert [row["used"] for row in view.table] == ["", "used", ""]
    assert view.nodes[procs[1].id].caption.split("\n")[1] == lines[1]
