"""Hostile input through every public entry point: each value is either stored safely and read
back byte-identical, or refused with one clear GraphmemError that changed nothing (a snapshot
export before and after the call is compared).

Entry points: GraphMemory.add_note / build / retrieve / finish_episode, store upsert / patch /
recall / import_jsonl, the CLI's import / export / stats, and the LangGraph BaseStore's put /
get / search (test_hostile_langgraph in this file's second half).
"""

from __future__ import annotations

import io
import itertools
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import strategies as st

from graphmem.errors import GraphmemError, InvalidInput
from graphmem.memory import GraphMemory
from graphmem.models import (
    ID_RE,
    MAX_TEXT_CHARS,
    NAMESPACE_RE,
    Episode,
    Note,
    Step,
)
from graphmem.stores.base import MemoryStore

from ._hostile import (
    check_property,
    hostile_text,
    refused_cleanly,
    snapshot,
    stored_or_refused,
)
from ._workers import DIM

pytestmark = pytest.mark.reliability

HUGE = "x" * (10 * 1024 * 1024 + 1)
"""Over 10 MB: ten times the per-field limit."""
BIG_OK = ("αβγ 漢字 🚀 مرحبا עברית \x00 '\"` MATCH (n) DETACH DELETE n \\ \r\n" * 40_000)[:900_000]
"""900k characters of mixed scripts, control characters and Cypher: must round-trip exactly."""


@pytest.fixture
def fresh(namespace: str) -> Any:
    """A new sub-namespace of the test's namespace per hypothesis example."""
    counter = itertools.count()
    return lambda: f"{namespace}-{next(counter)}"


@pytest.fixture(autouse=True)
def fixed_dimension(store: MemoryStore) -> None:
    # The first embedding fixes a store's dimension; fix it up front so snapshots compare data.
    store.check_dimension(DIM)


# ---- text through the Python API ----------------------------------------------------------


def test_hostile_note_text_is_stored_exactly_or_refused_when_blank(
    memory: GraphMemory, store: MemoryStore, namespace: str, fresh: Any
) -> None:
    def check(text: str) -> None:
        ns = fresh()
        if not text.strip():
            refused_cleanly(store, namespace, lambda: memory.add_note(ns, text))
            refused_cleanly(store, namespace, lambda: memory.retrieve(ns, text, kinds=("Note",)))
            return
        note = memory.add_note(ns, text, tags=[text[:50]], context=text[:80])
        got = store.get(ns, note.id)
        assert isinstance(got, Note)
        assert (got.content, got.tags, got.context) == (text, [text[:50]], text[:80])
        found = memory.retrieve(ns, text, kinds=("Note",), open_episode=True)
        assert [h.memory.id for h in found.hits] == [note.id]
        assert found.hits[0].memory.content == text
        episode = store.get(ns, found.episode_id or "")
        assert isinstance(episode, Episode) and episode.task_text == text

    check_property(store, hostile_text, check)


def test_hostile_trajectories_build_exactly_or_are_refused(
    memory: GraphMemory, store: MemoryStore, namespace: str, fresh: Any
) -> None:
    steps = st.lists(st.tuples(hostile_text, hostile_text, hostile_text), min_size=1, max_size=3)

    def check(case: tuple[str, list[tuple[str, str, str]]]) -> None:
        task, raw_steps = case
        ns = fresh()
        trajectory = {
            "task": task,
            "steps": [{"thought": t, "action": a, "observation": o} for t, a, o in raw_steps],
            "reward": 1.0,
            "success": True,
        }
        built = stored_or_refused(store, namespace, lambda: memory.build(ns, trajectory))
        blank = not task.strip() or any(not a.strip() for _, a, _ in raw_steps)
        assert (built is None) == blank, f"blank={blank} but built={built is not None}"
        if built is None:
            return
        stored = [store.get(ns, s.id) for s in built.steps]
        assert all(isinstance(s, Step) for s in stored)
        got = [(s.thought, s.action, s.observation) for s in stored]  # type: ignore[union-attr]
        assert got == raw_steps
        assert store.get(ns, built.procedure.id).task_text == task  # type: ignore[union-attr]

    check_property(store, st.tuples(hostile_text, steps), check)


BAD_REWARDS = (math.nan, math.inf, -math.inf, "1", None, True, [1.0], 1e309, 1e156, -2.0, 1.5)


def test_finish_episode_refuses_hostile_rewards_and_ids(
    memory: GraphMemory, store: MemoryStore, namespace: str
) -> None:
    ns = f"{namespace}-ep"
    memory.add_note(ns, "the lamp switch is by the door")
    opened = memory.retrieve(ns, "lamp switch", kinds=("Note",), open_episode=True)
    episode_id = opened.episode_id or ""
    for reward in BAD_REWARDS:
        refused_cleanly(store, namespace, lambda r=reward: memory.finish_episode(ns, episode_id, r))
    for bad_alpha in (0.0, -0.1, 1.5, math.nan):
        refused_cleanly(
            store,
            namespace,
            lambda a=bad_alpha: memory.finish_episode(ns, episode_id, 1.0, alpha=a),
        )
    for bad_id in ("", "x" * 129, "a b", "'); MATCH (n) DETACH DELETE n //", "missing-id"):
        refused_cleanly(store, namespace, lambda i=bad_id: memory.finish_episode(ns, i, 1.0))
    outcome = memory.finish_episode(ns, episode_id, 1.0)  # still open: nothing was consumed
    assert outcome.episode.reward == 1.0 and len(outcome.updated) == 1
    # Finished: another reward is refused; the same reward replays the outcome, crediting nothing.
    refused_cleanly(store, namespace, lambda: memory.finish_episode(ns, episode_id, 0.0))
    assert memory.finish_episode(ns, episode_id, 1.0).q == outcome.q


# ---- vectors ------------------------------------------------------------------------------

BAD_VECTORS: tuple[Any, ...] = (
    [1.0] * (DIM - 1),
    [1.0] * (DIM + 1),
    [math.nan] + [1.0] * (DIM - 1),
    [math.inf] + [1.0] * (DIM - 1),
    [-math.inf] + [1.0] * (DIM - 1),
    [0.0] * DIM,
    [],
    ["a"] * DIM,
    [[1.0]] * DIM,
    "1" * DIM,
    None,
    [2e40 / math.sqrt(DIM)] * DIM,  # norm 2e40: overflows float32 dot products
    [3e-44] + [0.0] * (DIM - 1),  # norm 3e-44: underflows them
    [10**400] + [1.0] * (DIM - 1),  # an integer no float holds
)
"""Refused alike by both stores (Neo4j used to accept the out-of-range norms)."""


def test_hostile_vectors_are_refused_everywhere(store: MemoryStore, namespace: str) -> None:
    ns = f"{namespace}-v"
    good = Note(id="good", namespace=ns, content="good", embedding=[1.0] * DIM)
    store.upsert([good])
    for vector in BAD_VECTORS:
        if vector is not None:
            refused_cleanly(
                store,
                namespace,
                lambda v=vector: store.upsert(
                    [Note(id="bad", namespace=ns, content="bad", embedding=v)]
                ),
            )
        refused_cleanly(store, namespace, lambda v=vector: store.recall(ns, v, 3))
    for k in (-1, True, 2.5, "3"):
        refused_cleanly(store, namespace, lambda k=k: store.recall(ns, [1.0] * DIM, k))
    for min_sim in (math.nan, math.inf):
        refused_cleanly(
            store, namespace, lambda m=min_sim: store.recall(ns, [1.0] * DIM, 3, min_sim=m)
        )
    assert [r.memory.id for r in store.recall(ns, [1.0] * DIM, 3)] == ["good"]


@pytest.mark.parametrize(
    "poison",
    [math.nan, math.inf],
    ids=["nan", "inf"],
)
def test_a_vector_poisoned_after_validation_is_still_refused(
    store: MemoryStore, namespace: str, poison: float, request: pytest.FixtureRequest
) -> None:
    """Validation runs on assignment, not on in-place list edits: the store must check too."""
    ns = f"{namespace}-p"
    note = Note(id="p", namespace=ns, content="poisoned later", embedding=[1.0] * DIM)
    assert note.embedding is not None
    try:
        note.embedding[0] = poison
        refused_cleanly(store, namespace, lambda: store.upsert([note]))
        note.embedding[0] = 1.0
        note.embedding.append(1.0)  # wrong dimension
        refused_cleanly(store, namespace, lambda: store.upsert([note]))
    finally:
        store.delete(ns, ["p"])  # a poisoned node that got in would break every later read


# ---- namespaces, ids and patches ----------------------------------------------------------

odd_names = st.one_of(
    hostile_text,
    st.from_regex(NAMESPACE_RE, fullmatch=True),
    st.sampled_from(["a/../b", "a//b", "-a", ".a", "a b", "a\x00b", "ä", "a" * 129, "*", "a\n"]),
)


def test_odd_namespaces_and_ids_work_exactly_or_are_refused(
    memory: GraphMemory, store: MemoryStore, namespace: str
) -> None:
    def check(name: str) -> None:
        ns = f"{namespace}-{name}"
        if not NAMESPACE_RE.match(ns):
            # Refused where a namespace enters (a model, the facade) ...
            for refused in (
                lambda: Note(namespace=ns, content="c"),
                lambda: memory.add_note(ns, "text"),
                lambda: memory.retrieve(ns, "text", kinds=("Note",)),
                lambda: memory.finish_episode(ns, "e1", 1.0),
            ):
                refused_cleanly(store, namespace, refused)
            # ... and harmless below it: a store trusts its namespace, so one handed to it
            # unchecked finds nothing, writes nothing, or is refused cleanly.
            for trusting in (
                lambda: store.get(ns, "n1"),
                lambda: store.recall(ns, [1.0] * DIM, 1),
                lambda: store.patch(ns, "n1", {"content": "x"}),
                lambda: store.update_utility(ns, ["n1"], 1.0, 0.5),
                lambda: store.delete(ns, ["n1"]),
                lambda: list(store.iter_nodes(ns)),
                lambda: store.export_jsonl(io.StringIO(), ns),
                lambda: store.import_jsonl([], namespace=ns),
            ):
                before = snapshot(store, namespace)
                stored_or_refused(store, namespace, trusting)
                assert snapshot(store, namespace) == before
            return
        store.upsert([Note(id="n1", namespace=ns, content="c", embedding=[1.0] * DIM)])
        assert store.get(ns, "n1").namespace == ns
        assert ns in store.namespaces()
        if ID_RE.match(name):  # the name as an id
            store.upsert([Note(id=name, namespace=ns, content="id")])
            assert store.get(ns, name).id == name
            assert store.delete(ns, [name]) == [name]
            return
        for call in (
            lambda: Note(id=name, namespace=ns, content="c"),
            lambda: store.get(ns, name),
            lambda: store.get_many(ns, [name]),
            lambda: store.patch(ns, name, {"content": "x"}),
            lambda: store.update_utility(ns, [name], 1.0, 0.5),
            lambda: store.delete(ns, [name]),
            lambda: store.edges(ns, name),
            lambda: memory.finish_episode(ns, name, 1.0),
        ):
            refused_cleanly(store, namespace, call)

    check_property(store, odd_names, check)


BAD_PATCHES: tuple[dict[str, Any], ...] = (
    {},
    {"content": ""},
    {"content": " \t\n"},
    {"content": HUGE},
    {"content": 5},
    {"content": None},
    {"q": 1.0},
    {"uses": 99},
    {"id": "other"},
    {"namespace": "other"},
    {"kind": "Task"},
    {"embedding": [1.0] * DIM},
    {"no_such_field": 1},
    {"`) DETACH DELETE n //": 1},
    {"keywords": "not a list"},
    {"data": "{not json"},
    {"version": 0},
)


def test_hostile_patches_are_refused_and_hostile_values_round_trip(
    store: MemoryStore, namespace: str
) -> None:
    ns = f"{namespace}-patch"
    store.upsert([Note(id="n", namespace=ns, content="original", embedding=[1.0] * DIM)])
    for changes in BAD_PATCHES:
        refused_cleanly(store, namespace, lambda c=changes: store.patch(ns, "n", c))
    refused_cleanly(store, namespace, lambda: store.patch(ns, "n", "content"))  # type: ignore[arg-type]

    def check(text: str) -> None:
        if not text.strip():
            refused_cleanly(store, namespace, lambda: store.patch(ns, "n", {"content": text}))
            return
        store.patch(ns, "n", {"content": text, "context": text, "keywords": [text]})
        got = store.get(ns, "n")
        assert isinstance(got, Note)
        assert (got.content, got.context, got.keywords) == (text, text, [text])

    check_property(store, hostile_text, check)


# ---- size limits --------------------------------------------------------------------------


def test_over_ten_megabytes_is_refused_at_every_entry_point(
    memory: GraphMemory, store: MemoryStore, namespace: str
) -> None:
    ns = f"{namespace}-huge"
    store.upsert([Note(id="n", namespace=ns, content="small", embedding=[1.0] * DIM)])
    calls = [
        lambda: memory.add_note(ns, HUGE),
        lambda: memory.retrieve(ns, HUGE, kinds=("Note",)),
        lambda: memory.build(ns, {"task": HUGE, "steps": [{"action": "a"}]}),
        lambda: memory.build(ns, {"task": "t", "steps": [{"action": HUGE}]}),
        lambda: store.upsert([Note(namespace=ns, content=HUGE)]),
        lambda: store.patch(ns, "n", {"content": HUGE}),
        lambda: store.import_jsonl(
            [json.dumps({"type": "node", "kind": "Note", "namespace": ns, "content": HUGE})]
        ),
    ]
    for call in calls:
        error = refused_cleanly(store, namespace, call)
        assert isinstance(error, InvalidInput)
        assert str(MAX_TEXT_CHARS) in str(error), f"the limit is not named: {error}"


def test_a_900k_character_note_round_trips_byte_identical(
    memory: GraphMemory, store: MemoryStore, namespace: str, tmp_path: Path
) -> None:
    ns = f"{namespace}-big"
    note = memory.add_note(ns, BIG_OK, context="big")
    direct = Note(id="direct", namespace=ns, content=BIG_OK[::-1], embedding=[1.0] * DIM)
    store.upsert([direct])
    assert store.get(ns, note.id).content == BIG_OK  # type: ignore[union-attr]
    assert store.get(ns, "direct").content == BIG_OK[::-1]  # type: ignore[union-attr]
    export = tmp_path / "big.jsonl"
    with export.open("w", encoding="utf-8") as out:
        store.export_jsonl(out, ns)
    with export.open(encoding="utf-8") as lines:
        assert store.import_jsonl(lines, namespace=f"{ns}-copy") == (2, 0)
    copied = store.get(f"{ns}-copy", note.id)
    assert isinstance(copied, Note) and copied.content.encode() == BIG_OK.encode()


def test_text_that_is_not_valid_unicode_is_refused_clearly(
    memory: GraphMemory, store: MemoryStore, namespace: str
) -> None:
    ns = f"{namespace}-s"
    text = "lone \ud800 surrogate"
    for call in (
        lambda: memory.add_note(ns, text),
        lambda: store.upsert([Note(namespace=ns, content=text, embedding=[1.0] * DIM)]),
        lambda: store.upsert([Note(namespace=ns, content="ok", context=text)]),
        lambda: memory.retrieve(ns, text, kinds=("Note",)),
    ):
        try:
            refused_cleanly(store, namespace, call)
        except UnicodeError as e:
            raise AssertionError(f"raw {type(e).__name__} instead of a GraphmemError") from e


# ---- the LangGraph BaseStore --------------------------------------------------------------

labels = st.lists(hostile_text, min_size=1, max_size=3).map(tuple)


def test_hostile_langgraph_items_round_trip_or_are_refused(
    memory: GraphMemory, store: MemoryStore, namespace: str
) -> None:
    from langgraph.store.base import InvalidNamespaceError

    from graphmem.integrations.langgraph_store import GraphMemoryStore

    lg = GraphMemoryStore(memory, root=f"{namespace}-lg")

    def check(case: tuple[tuple[str, ...], str, str]) -> None:
        ns, key, text = case
        value = {"text": text, "nested": {"k": [text, 1, None, True]}}
        before = snapshot(store, namespace)
        try:
            lg.put(ns, key, value)
        except (GraphmemError, InvalidNamespaceError) as e:
            assert str(e).strip(), "an empty error message"
            assert snapshot(store, namespace) == before
            return
        got = lg.get(ns, key)
        assert got is not None and (got.key, got.value, got.namespace) == (key, value, ns)
        assert (key, value) in [(i.key, i.value) for i in lg.search(ns, limit=100)]
        if text.strip():
            assert key in [i.key for i in lg.search(ns, query=text, limit=100)]
        assert ns in lg.list_namespaces(prefix=ns, limit=1000)

    check_property(store, st.tuples(labels, hostile_text, hostile_text), check)

    for bad_value in (
        {"x": math.nan},
        {"x": math.inf},
        {"x": {1, 2}},
        {"x": b"bytes"},
        {"text": HUGE},
        ["not", "a", "dict"],
    ):
        refused_cleanly(store, namespace, lambda v=bad_value: lg.put(("ok",), "k", v))
    lg.put(("ok",), "k", {"x": 1})
    for bad_filter in ({"x": {"$regex": ".*"}}, {"x": {"$where": "1"}}):
        refused_cleanly(store, namespace, lambda f=bad_filter: lg.search(("ok",), filter=f))
    long_label = ("x" * 200,)  # past graphmem's 128 characters: stored hashed, read back
    lg.put(long_label, "k", {"text": "t"})
    assert lg.list_namespaces(prefix=long_label) == [long_label]


def test_langgraph_namespaces_keys_and_filters_that_used_to_crash(
    memory: GraphMemory, store: MemoryStore, namespace: str
) -> None:
    """Graphmem namespaces under a root that this store did not write (``<root>/.zz``: a bad
    escape; ``<root>/.c3``: half a UTF-8 character) are not LangGraph namespaces: listing and
    searching skip them. A lone surrogate in a key or label, and a filter on 10**400, are
    refused or answered, never a raw UnicodeError or OverflowError."""
    from graphmem.integrations.langgraph_store import GraphMemoryStore

    for suffix, foreign in (("a", ".zz"), ("b", ".c3"), ("c", ".41"), ("d", ".2e"), ("e", "x//y")):
        root = f"{namespace}-{suffix}"
        lg = GraphMemoryStore(memory, root=root)
        lg.put(("real",), "k", {"text": "the real item", "n": 5})
        memory.add_note(f"{root}/{foreign}", "a note some other code wrote under the root")
        before = snapshot(store, namespace)
        assert lg.list_namespaces() == [("real",)]
        assert [i.key for i in lg.search(("real",))] == ["k"]
        assert [i.key for i in lg.search((), query="real item")] == ["k"]
        assert snapshot(store, namespace) == before
    for call in (
        lambda: lg.put(("real",), "lone \ud800 key", {"text": "t"}),
        lambda: lg.put(("lone \udc00 label",), "k", {"text": "t"}),
        lambda: lg.get(("real",), "\ud800"),
        lambda: lg.delete(("real",), "\ud800"),
    ):
        refused_cleanly(store, namespace, call)
    huge = 10**400
    assert [i.key for i in lg.search(("real",), filter={"n": {"$lt": huge}})] == ["k"]
    assert lg.search(("real",), filter={"n": {"$gt": huge}}) == []
    assert lg.search(("real",), filter={"n": huge}) == []
    lg.put(("real",), "big", {"n": huge})
    assert [i.key for i in lg.search(("real",), filter={"n": {"$gte": huge}})] == ["big"]
    assert lg.get(("real",), "big").value == {"n": huge}  # type: ignore[union-attr]


def test_a_megabyte_token_makes_no_megabyte_keyword_or_tag() -> None:
    """A note of one ~1 MB token (no spaces) is stored whole, but its keywords and tags, and a
    keyword key made from it, stay short: no token over MAX_KEYWORD_CHARS becomes one."""
    from graphmem import HashingEmbedder
    from graphmem.keywords import MAX_KEYWORD_CHARS, clean_keywords, keywords_key_for
    from graphmem.stores.embedded import EmbeddedStore

    mem = GraphMemory(EmbeddedStore.in_memory(), embedder=HashingEmbedder(384))
    token = "a" * 999_000
    note = mem.add_note("hostile", token)
    assert len(note.content) == 999_000
    assert all(len(k) <= MAX_KEYWORD_CHARS for k in note.keywords)
    assert all(len(t) <= MAX_KEYWORD_CHARS for t in note.tags)
    mixed = mem.add_note("hostile", f"The descaler {token} is under the sink")
    assert mixed.keywords == ["descaler", "sink"]
    assert clean_keywords(["ok", "b" * 65]) == ["ok"]  # a model's over-long keyword is dropped
    assert len(keywords_key_for(f"boil {token} water")) < 100
