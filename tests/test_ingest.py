"""Batch ingest (graphmem.ops.ingest): ``add_notes`` and ``build_many`` on both stores.

Order and ids as given, duplicates as one-at-a-time would make them, and a bad item anywhere
in the call stores nothing (checked before the write, or refused by the store's one atomic
write).
"""

from __future__ import annotations

from typing import Any

import pytest

from graphmem import GraphMemory
from graphmem.embedding import HashingEmbedder
from graphmem.errors import GraphmemError, InvalidInput
from graphmem.models import EdgeKind, MemoryKind, Note, Procedure, Task
from graphmem.stores.base import MemoryStore


def _mem(store: MemoryStore, embedder: HashingEmbedder) -> GraphMemory:
    return GraphMemory(store, embedder=embedder)


def _count(store: MemoryStore, namespace: str) -> int:
    return sum(1 for _ in store.iter_nodes(namespace))


def _traj(task: str, *actions: str, reward: float = 1.0) -> dict[str, Any]:
    return {
        "task": task,
        "reward": reward,
        "success": reward > 0.5,
        "steps": [{"action": a, "observation": f"did {a}"} for a in actions],
    }


def test_add_notes_returns_notes_in_order_and_stores_them(
    store: MemoryStore, embedder: HashingEmbedder, namespace: str
) -> None:
    mem = _mem(store, embedder)
    given: list[Any] = [
        "The spare key is under the blue flower pot.",
        {"content": "Alice's birthday is on 3 May.", "tags": ["family"], "source_ref": "turn-2"},
        "Bob takes his coffee black.",
    ]
    notes = mem.add_notes(namespace, given)
    assert [n.content for n in notes] == [given[0], given[1]["content"], given[2]]
    assert len({n.id for n in notes}) == 3
    assert notes[1].tags == ["family"] and notes[1].source_ref == "turn-2"
    for note in notes:
        stored = store.get(namespace, note.id)
        assert isinstance(stored, Note) and stored.content == note.content
        assert stored.embedding is not None and len(stored.embedding) == embedder.dimension
    # The same fields add_note extracts: keywords, context, category.
    alone = _mem(store, embedder).add_note(namespace + "-alone", given[2])
    assert (notes[2].keywords, notes[2].context, notes[2].category) == (
        alone.keywords,
        alone.context,
        alone.category,
    )
    assert notes[2].embedding == pytest.approx(alone.embedding)
    hits = mem.retrieve(namespace, "where is the spare key?", kinds=("Note",)).hits
    assert hits[0].memory.id == notes[0].id


def test_add_notes_deduplicates_within_the_call_and_against_the_store(
    store: MemoryStore, embedder: HashingEmbedder, namespace: str
) -> None:
    mem = _mem(store, embedder)
    old = mem.add_note(namespace, "Carol lives in Lisbon.")
    notes = mem.add_notes(
        namespace, ["Dan likes chess.", "Carol lives in Lisbon.", "Dan likes chess."]
    )
    assert notes[1].id == old.id
    assert notes[0].id == notes[2].id != old.id
    assert _count(store, namespace) == 2


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("   ", "notes[2]"),
        ({"tags": ["x"]}, "notes[2]: a note given as a dict needs 'content'"),
        ({"content": "ok", "embedding": [0.0]}, "notes[2]: add_notes sets embedding"),
        ({"content": "ok", "q": float("nan")}, "notes[2]"),
        (42, "notes[2]: a note is a string or a dict"),
        ({"content": "ok", "no_such_field": 1}, "notes[2]"),
    ],
)
def test_a_bad_note_names_its_position_and_nothing_is_written(
    store: MemoryStore, embedder: HashingEmbedder, namespace: str, bad: Any, message: str
) -> None:
    mem = _mem(store, embedder)
    with pytest.raises(InvalidInput, match=message.replace("[", r"\[").replace("]", r"\]")):
        mem.add_notes(namespace, ["first fact", "second fact", bad, "fourth fact"])
    assert _count(store, namespace) == 0


def test_a_note_the_store_refuses_rolls_the_whole_batch_back(
    store: MemoryStore, embedder: HashingEmbedder, namespace: str
) -> None:
    """The store's one write fails (a note reusing a procedure's id): nothing of the call
    is stored, neither before nor after the bad item."""
    mem = _mem(store, embedder)
    proc = mem.build(namespace, _traj("make tea", "boil water", "pour")).procedure
    before = _count(store, namespace)
    with pytest.raises(GraphmemError):
        mem.add_notes(namespace, ["first fact", {"content": "clash", "id": proc.id}, "last fact"])
    assert _count(store, namespace) == before
    assert isinstance(store.get(namespace, proc.id), Procedure)


def test_add_notes_refuses_what_is_not_a_list(
    store: MemoryStore, embedder: HashingEmbedder, namespace: str
) -> None:
    mem = _mem(store, embedder)
    for bad in ("one text", {"content": "x"}, None):
        with pytest.raises(InvalidInput, match="notes is a list"):
            mem.add_notes(namespace, bad)  # type: ignore[arg-type]
    assert mem.add_notes(namespace, []) == []


def test_add_notes_with_evolve_links_the_new_notes(
    store: MemoryStore, embedder: HashingEmbedder, namespace: str
) -> None:
    mem = _mem(store, embedder)
    mem.add_note(namespace, "Green tea is best brewed at 80 degrees.")
    notes = mem.add_notes(namespace, ["Brew green tea at 80 degrees, not boiling."], evolve=True)
    links = store.edges(namespace, notes[0].id, kinds=[EdgeKind.LINKS_TO])
    assert links, "evolution linked the new note to its neighbour"


def test_build_many_matches_build_one_at_a_time(
    store: MemoryStore, embedder: HashingEmbedder, namespace: str
) -> None:
    trajs = [
        _traj("heat the soup", "open fridge", "take soup", "use stove"),
        _traj("heat the soup", "open fridge", "take soup", "use microwave", reward=0.0),
        _traj("water the plants", "take can", "fill can", "pour"),
        _traj("heat the soup", "open fridge", "take soup", "use stove"),  # repeats the first
    ]
    batch = _mem(store, embedder).build_many(namespace, trajs)
    one = _mem(store, embedder)
    singles = [one.build(namespace + "-one", t) for t in trajs]
    assert [r.deduplicated for r in batch] == [r.deduplicated for r in singles]
    assert batch[3].procedure.id == batch[0].procedure.id
    # One Task for one task text, shared within the call as across calls.
    assert batch[0].task.id == batch[1].task.id != batch[2].task.id
    assert [len(r.steps) for r in batch] == [len(r.steps) for r in singles]
    assert [len(r.near_duplicates) for r in batch] == [len(r.near_duplicates) for r in singles]
    counts = store.counts(namespace)
    assert counts == store.counts(namespace + "-one")
    tasks = [m for m in store.iter_nodes(namespace, kinds=[MemoryKind.TASK])]
    assert len(tasks) == 2 and all(isinstance(t, Task) for t in tasks)
    for r in batch:
        assert isinstance(store.get(namespace, r.procedure.id), Procedure)


def test_a_bad_trajectory_names_its_position_and_nothing_is_written(
    store: MemoryStore, embedder: HashingEmbedder, namespace: str
) -> None:
    mem = _mem(store, embedder)
    good = _traj("heat the soup", "open fridge", "use stove")
    with pytest.raises(InvalidInput, match=r"trajectories\[1\]: a trajectory needs at least"):
        mem.build_many(namespace, [good, {"task": "x", "reward": 1.0, "steps": []}, good])
    with pytest.raises(InvalidInput, match=r"trajectories\[2\]"):
        mem.build_many(namespace, [good, good, _traj("x", "y", reward=7.0)])
    with pytest.raises(InvalidInput, match="granularity"):
        mem.build_many(namespace, [good], granularity="huge")
    assert _count(store, namespace) == 0


def _cli(tmp_path: Any, *args: str, stdin: str) -> Any:
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHMEM_")}
    env |= {"GRAPHMEM_STORE": str(tmp_path / "store"), "GRAPHMEM_EMBEDDER": "hashing"}
    return subprocess.run(
        [sys.executable, "-m", "graphmem", *args],
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_graphmem_import_notes_and_trajectories(tmp_path: Any) -> None:
    import json

    from graphmem.stores.embedded import EmbeddedStore

    lines = ["The spare key is under the pot.", {"content": "Alice: 3 May.", "tags": ["family"]}]
    text = "\n".join(json.dumps(x) for x in lines) + "\n\n" + json.dumps("Bob: tea.") + "\n"
    done = _cli(tmp_path, "import", "--notes", "-", "-n", "chat", "--batch", "2", stdin=text)
    assert done.returncode == 0, done.stderr
    assert "notes: 3/3" in done.stderr
    bad = json.dumps(_traj("x", "y")) + "\n" + json.dumps({"task": "z", "steps": []}) + "\n"
    failed = _cli(tmp_path, "import", "--trajectories", "-", "-n", "procs", stdin=bad)
    assert failed.returncode != 0 and "line 2: trajectories[1]" in failed.stderr
    assert "Traceback" not in failed.stderr
    good = json.dumps(_traj("heat the soup", "open fridge", "use stove")) + "\n"
    assert (
        _cli(tmp_path, "import", "--trajectories", "-", "-n", "procs", stdin=good).returncode == 0
    )
    no_ns = _cli(tmp_path, "import", "--notes", "-", stdin=text)
    assert no_ns.returncode != 0 and "needs --namespace" in no_ns.stderr
    store = EmbeddedStore.open(tmp_path / "store")
    try:
        contents = [m.content for m in store.iter_nodes("chat") if isinstance(m, Note)]
        procs = [m for m in store.iter_nodes("procs", kinds=[MemoryKind.PROCEDURE])]
    finally:
        store.close()
    assert sorted(contents) == sorted(
        ["The spare key is under the pot.", "Alice: 3 May.", "Bob: tea."]
    )
    assert len(procs) == 2  # proceduralized + trajectory of the one good build


def test_notes_keep_when_they_were_said(
    store: MemoryStore, embedder: HashingEmbedder, namespace: str
) -> None:
    from datetime import UTC, datetime

    mem = _mem(store, embedder)
    before = datetime.now(UTC)
    said = datetime(2023, 5, 3, 14, 30, tzinfo=UTC)
    one = mem.add_note(namespace, "Alice moved to Porto.", valid_at=said)
    many = mem.add_notes(
        namespace,
        [
            {"content": "Alice moved to Lisbon.", "valid_at": "2024-01-09T08:00:00"},
            "Bob likes tea.",
        ],
    )
    assert store.get(namespace, one.id).valid_at == said  # type: ignore[union-attr]
    stored = store.get(namespace, many[0].id)
    assert isinstance(stored, Note)
    assert stored.valid_at == datetime(2024, 1, 9, 8, 0, tzinfo=UTC)  # no zone: UTC
    now = store.get(namespace, many[1].id)
    assert isinstance(now, Note) and now.valid_at is not None and now.valid_at >= before
    with pytest.raises(InvalidInput, match=r"notes\[0\]"):
        mem.add_notes(namespace, [{"content": "x", "valid_at": "last tuesday"}])
