"""Procedures with the same steps share one row of "Procedures compared" and stack in the
picture (issue 55): on the demo's data two pairs of procedures, one of each pair another task's,
had the same steps but other Q and uses, and showed as separate rows and unstacked nodes."""

from __future__ import annotations

from typing import Any

import pytest

from graphmem import viz
from graphmem.models import Edge, EdgeKind, Granularity, Procedure, Step, Task
from graphmem.stores.embedded import EmbeddedStore
from graphmem.viz.layout import layout

pytestmark = pytest.mark.reliability

NS = "games"
TEXT = "Your task is to pick up objects, then place them in their usual locations."


def procedure(pid: str, actions: list[str], q: float, uses: int) -> tuple[list[Any], list[Edge]]:
    proc = Procedure(
        namespace=NS, id=pid, task_text=TEXT, key="tidy up", granularity=Granularity.TRAJECTORY,
        reward=1.0, success=True, n_steps=len(actions), q=q, uses=uses,
    )  # fmt: skip
    nodes: list[Any] = [proc]
    edges: list[Edge] = []
    prev = pid
    for i, action in enumerate(actions):
        step = Step(namespace=NS, id=f"{pid}-s{i}", procedure_id=pid, index=i, action=action)
        kind = EdgeKind.FIRST_STEP if i == 0 else EdgeKind.NEXT
        edges.append(Edge(namespace=NS, kind=kind, src=prev, dst=step.id))
        nodes.append(step)
        prev = step.id
    return nodes, edges


def tidy(thing: str, place: str) -> list[str]:
    return [f"take {thing}", "open door to south", f"put {thing} in {place}", "look"]


@pytest.fixture
def store() -> EmbeddedStore:
    store = EmbeddedStore.in_memory()
    nodes: list[Any] = [Task(namespace=NS, id="task-0", text=TEXT, key="tidy up")]
    edges: list[Edge] = []
    plan = {  # id: (steps, q, uses, own task?)
        "best": (tidy("gray coat", "coat hanger"), 0.69, 10, True),
        "own-b": (tidy("black polo shirt", "dressing table"), 0.45, 1, True),
        "other-b": (tidy("black polo shirt", "dressing table"), 0.45, 3, False),  # pair 1
        "other-c": (tidy("clean whisk", "cutlery drawer"), 0.55, 3, False),
        "other-c2": (tidy("clean whisk", "cutlery drawer"), 0.45, 5, False),  # pair 2
        "other-d": (tidy("red onion", "fridge"), 0.51, 6, False),
    }
    for n, (pid, (steps, q, uses, own)) in enumerate(plan.items()):
        more, links = procedure(pid, steps, q, uses)
        nodes += more
        edges += links
        task = "task-0"
        if not own:
            task = f"task-{n}"
            nodes.append(Task(namespace=NS, id=task, text=TEXT, key="tidy up"))
            edges.append(Edge(namespace=NS, kind=EdgeKind.LINKS_TO, src="best", dst=pid, props={}))
        edges.append(Edge(namespace=NS, kind=EdgeKind.SOLVED_BY, src=task, dst=pid))
    store.upsert(nodes, edges)
    return store


def test_procedures_with_the_same_steps_share_a_row_and_stack(store: EmbeddedStore) -> None:
    sub = viz.task_subgraph(store, NS, "task-0")
    rows = {r.id: r for r in sub.compare}
    assert set(rows) == {"best", "own-b", "other-c", "other-d"}  # 6 procedures, 4 rows
    assert rows["own-b"].twins == ["other-b"]  # the task's own first
    assert rows["other-c"].twins == ["other-c2"]  # the more useful first
    assert "×2 procedures" in viz.to_html(sub)
    pos = layout(sub)
    for rep, twin in (("own-b", "other-b"), ("other-c", "other-c2")):
        assert sub.nodes[twin].fields.get("same steps as") == rep
        (x_rep, y_rep), (x_twin, y_twin) = pos[rep], pos[twin]
        assert x_twin == x_rep and y_twin > y_rep, (rep, pos[rep], twin, pos[twin])
        between = [
            i for i, (x, y) in pos.items() if x == x_rep and y_rep < y < y_twin and i != twin
        ]
        assert not between, f"{twin} is not right under {rep}: {between}"
