"""The data models: invalid input raises a specific GraphmemError; valid models round-trip."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphmem.errors import (
    DimensionMismatch,
    EmptyContent,
    GraphmemError,
    InvalidInput,
    InvalidNamespace,
    InvalidVector,
)
from graphmem.models import (
    MAX_TEXT_CHARS,
    AnyMemory,
    Edge,
    EdgeKind,
    Episode,
    EpisodeStatus,
    Granularity,
    Note,
    Procedure,
    Step,
    Task,
    Tip,
    TipPolarity,
    Trajectory,
    TrajectoryStep,
    check_vector,
    content_hash,
    memory_from_dict,
)
from graphmem.testing import HOSTILE_TEXTS


def one_of_each(namespace: str = "ns") -> list[AnyMemory]:
    return [
        Note(
            namespace=namespace,
            content="c",
            keywords=["k"],
            tags=["t"],
            context="ctx",
            category="cat",
            data='{"a": [1, 2]}',
            embedding=[0.5, -1.0, 2.0],
        ),
        Task(namespace=namespace, text="make tea", key="tea kettle"),
        Procedure(
            namespace=namespace,
            task_text="make tea",
            key="tea",
            granularity=Granularity.PROCEDURALIZED,
            script="boil, pour",
            reward=1.0,
            success=True,
            n_steps=2,
        ),
        Step(namespace=namespace, procedure_id="p", index=3, thought="t", action="boil"),
        Tip(namespace=namespace, text="warm the pot", polarity=TipPolarity.AVOID, task_text="tea"),
        Episode(
            namespace=namespace,
            task_text="make tea",
            status=EpisodeStatus.FINISHED,
            reward=0.0,
            success=False,
        ),
    ]


@pytest.mark.parametrize("memory", one_of_each(), ids=lambda m: m.kind)
def test_every_kind_round_trips_through_a_dict_and_json(memory: AnyMemory) -> None:
    assert memory_from_dict(memory.model_dump()) == memory
    assert memory_from_dict(json.loads(json.dumps(memory.model_dump(mode="json")))) == memory


@pytest.mark.parametrize("content", ["", "   ", "\n\t"])
def test_empty_content_raises_empty_content(content: str) -> None:
    with pytest.raises(EmptyContent) as info:
        Note(namespace="ns", content=content)
    assert info.value.field == "content"
    with pytest.raises(EmptyContent):
        Task(namespace="ns", text=content, key="k")
    with pytest.raises(EmptyContent):
        Step(namespace="ns", procedure_id="p", index=0, action=content)
    with pytest.raises(EmptyContent):
        Trajectory(task=content, steps=[])


def test_too_long_text_is_rejected_not_truncated() -> None:
    with pytest.raises(InvalidInput, match="limit"):
        Note(namespace="ns", content="x" * (MAX_TEXT_CHARS + 1))


@pytest.mark.parametrize("namespace", ["", " ", "has space", "-dash-first", "x" * 129, "a;b", "ü"])
def test_a_bad_namespace_raises_invalid_namespace(namespace: str) -> None:
    with pytest.raises(InvalidNamespace):
        Note(namespace=namespace, content="x")
    with pytest.raises(InvalidNamespace):
        Edge(namespace=namespace, kind=EdgeKind.NEXT, src="a", dst="b")


def test_a_missing_namespace_is_invalid_input() -> None:
    with pytest.raises(InvalidInput, match="namespace"):
        Note(content="x")  # type: ignore[call-arg]


def test_good_namespaces_and_ids_are_accepted() -> None:
    note = Note(id="a.b:c-d_e", namespace="tenant/agent@v1:x.y-z_w", content="x")
    assert note.namespace == "tenant/agent@v1:x.y-z_w"
    assert len(Note(namespace="ns", content="x").id) == 32


@pytest.mark.parametrize("memory_id", ["", "a b", "a/b", "_x", "x" * 129])
def test_a_bad_id_is_invalid_input(memory_id: str) -> None:
    with pytest.raises(InvalidInput):
        Note(id=memory_id, namespace="ns", content="x")


@pytest.mark.parametrize(
    "embedding", [[math.nan, 1.0], [1.0, math.inf], [-math.inf], [0.0, 0.0], []]
)
def test_a_bad_vector_raises_invalid_vector(embedding: list[float]) -> None:
    with pytest.raises(InvalidVector):
        Note(namespace="ns", content="x", embedding=embedding)
    with pytest.raises(InvalidVector):
        check_vector(embedding)


def test_a_vector_of_the_wrong_dimension_raises_dimension_mismatch() -> None:
    assert check_vector([1, 2, 3], 3) == [1.0, 2.0, 3.0]
    with pytest.raises(DimensionMismatch) as info:
        check_vector([1.0, 2.0], 3)
    assert (info.value.expected, info.value.got) == (3, 2)
    assert isinstance(info.value, InvalidVector)


@pytest.mark.parametrize(
    "data",
    [
        {"namespace": "ns", "content": "x"},  # no kind
        {"kind": "Alien", "namespace": "ns", "content": "x"},
        {"kind": "Note", "namespace": "ns", "content": "x", "unknown_field": 1},
        {"kind": "Note", "namespace": "ns", "content": "x", "q": "high"},
        {"kind": "Note", "namespace": "ns", "content": "x", "uses": -1},
        {"kind": "Note", "namespace": "ns", "content": "x", "data": "{not json"},
        {"kind": "Procedure", "namespace": "ns", "task_text": "t", "key": "k"},
    ],
)
def test_memory_from_dict_rejects_bad_records_with_invalid_input(data: dict[str, Any]) -> None:
    with pytest.raises(InvalidInput):
        memory_from_dict(data)


def test_non_finite_q_is_rejected() -> None:
    with pytest.raises(InvalidInput, match="q"):
        Note(namespace="ns", content="x", q=math.nan)


def test_edges_validate_kind_and_props() -> None:
    edge = Edge(namespace="ns", kind="LINKS_TO", src="a", dst="b", props={"reason": "r", "w": 1})
    assert edge.kind is EdgeKind.LINKS_TO
    assert edge.key == ("ns", "LINKS_TO", "a", "b")
    with pytest.raises(InvalidInput):
        Edge(namespace="ns", kind="TELEPORTS", src="a", dst="b")
    with pytest.raises(InvalidInput):
        Edge(namespace="ns", kind=EdgeKind.NEXT, src="a", dst="b", props={"bad key": 1})
    with pytest.raises(InvalidInput):
        Edge(namespace="ns", kind=EdgeKind.NEXT, src="a", dst="b", props={"w": math.inf})
    with pytest.raises(InvalidInput):
        Edge(namespace="ns", kind=EdgeKind.NEXT, src="a", dst="b", props={"nested": [1]})


def test_assignment_is_validated_too() -> None:
    note = Note(namespace="ns", content="x")
    with pytest.raises(EmptyContent, match="content must not be empty"):
        note.content = " "
    assert note.content == "x"


def test_trajectories_validate_their_steps() -> None:
    trajectory = Trajectory(task="t", steps=[TrajectoryStep(action="look")], reward=1.0)
    assert trajectory.steps[0].action == "look"
    with pytest.raises(InvalidInput):
        Trajectory(task="t", steps=[{"action": "look", "extra": 1}])  # type: ignore[list-item]


def test_input_errors_are_value_errors_and_graphmem_errors() -> None:
    for exc in (EmptyContent("x"), InvalidNamespace("x"), DimensionMismatch(3, 2)):
        assert isinstance(exc, ValueError) and isinstance(exc, GraphmemError)


def test_content_hash_ignores_case_and_spacing_but_not_words() -> None:
    assert content_hash("Open  the\nFridge") == content_hash("open the fridge")
    assert content_hash("open the fridge") != content_hash("open the door")
    assert content_hash("a", "b") != content_hash("a b")


@pytest.mark.parametrize("text", HOSTILE_TEXTS, ids=range(len(HOSTILE_TEXTS)))
def test_hostile_text_is_kept_byte_for_byte(text: str) -> None:
    note = Note(namespace="ns", content=text, keywords=[text], context=text)
    back = memory_from_dict(json.loads(json.dumps(note.model_dump(mode="json"))))
    assert isinstance(back, Note)
    assert (back.content, back.keywords, back.context) == (text, [text], text)


@settings(max_examples=50, deadline=None)
@given(
    content=st.text(min_size=1).filter(lambda s: s.strip() != ""),
    tags=st.lists(st.text(max_size=20), max_size=5),
    q=st.floats(allow_nan=False, allow_infinity=False),
)
def test_any_valid_note_round_trips(content: str, tags: list[str], q: float) -> None:
    note = Note(namespace="ns", content=content, tags=tags, q=q)
    assert memory_from_dict(json.loads(json.dumps(note.model_dump(mode="json")))) == note


# ---- a LangChain Embeddings as graphmem's embedder ----------------------------------------------


def test_langchain_embeddings_plug_in_as_an_embedder() -> None:
    import numpy as np
    from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings

    from graphmem import GraphMemory, LangChainEmbedder
    from graphmem.errors import ConfigError, InvalidInput
    from graphmem.stores.embedded import EmbeddedStore

    emb = LangChainEmbedder(DeterministicFakeEmbedding(size=32))
    assert emb.dimension == 32 and emb.name == "langchain:DeterministicFakeEmbedding"
    vectors = emb.embed(["a", "b"])
    assert vectors.shape == (2, 32) and np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    mem = GraphMemory(EmbeddedStore.in_memory(), embedder=emb)
    note = mem.add_note("lc", "the descaler is under the sink")
    found = mem.retrieve("lc", "descaler", kinds=("Note",), floor=-1.0)  # random vectors
    assert found.hits[0].memory.id == note.id

    class Broken(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [[float("nan")] * 4 for _ in texts]

        def embed_query(self, text: str) -> list[float]:
            return [0.0] * 4

    with pytest.raises(InvalidInput, match="NaN"):
        LangChainEmbedder(Broken(), dimension=4).embed(["x"])
    with pytest.raises(InvalidInput, match="shape"):
        LangChainEmbedder(Broken(), dimension=8).embed(["x"])
    with pytest.raises(ConfigError, match="not a LangChain Embeddings"):
        LangChainEmbedder(object())


def test_construct_builds_the_model_validation_would_build() -> None:
    from graphmem.models import Hit, construct
    from graphmem.ops.retrieve import Retrieval

    note = Note(namespace="ns", content="c", embedding=[1.0, 0.0])
    values = {"memory": note, "rank": 0, "sim": 0.5, "q": 0.5, "z_sim": 1.0, "z_q": -1.0}
    # construct takes every field; the optional ones (hybrid recall's, abstention's) at default.
    optional = {n: f.default for n, f in Hit.model_fields.items() if n not in values}
    optional.pop("score")
    built = construct(Hit, {**values, "score": 0.0, **optional}, [*values, "score"])
    checked = Hit(**values, score=0.0)
    assert built == checked
    assert built.model_dump() == checked.model_dump()
    assert built.model_fields_set == checked.model_fields_set
    with pytest.raises(TypeError, match="private attributes"):
        construct(Retrieval, {})


def test_seeded_ids_repeat_a_sequence_and_random_ids_come_back_after() -> None:
    from graphmem.models import new_id, seeded_ids

    with seeded_ids(7):
        first = [new_id() for _ in range(3)]
        assert Note(namespace="ns", content="c").id not in first
    with seeded_ids(7):
        again = [new_id() for _ in range(3)]
    assert first == again and len(set(first)) == 3
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in first)
    assert new_id() not in first and new_id() != new_id()


@pytest.mark.parametrize(
    "embedding",
    [
        [math.nan, 1.0, 1.0],
        [1.0, math.inf, 1.0],
        [math.inf, -math.inf, 1.0],
        [0.0, 0.0, 0.0],
        [1e-160, 1e-160, 1e-160],  # the plain product underflows; the norm is below bounds
        [1e160, 1.0, 1.0],  # the plain product overflows; the norm is above bounds
        [1e-31, 0.0, 0.0],
        [1e31, 0.0, 0.0],
    ],
)
def test_a_bad_vector_of_the_expected_dimension_is_refused(embedding: list[float]) -> None:
    """The expected dimension takes a one-product path; it refuses what the careful one does."""
    with pytest.raises(InvalidVector):
        check_vector(embedding, 3)


def test_a_vector_near_the_bounds_is_accepted_with_its_norm() -> None:
    from graphmem.models import check_vector_norm

    for values in ([3e-20, 4e-20, 0.0], [3e20, 4e20, 0.0], [3.0, 4.0, 0.0], [1e-29, 0.0, 0.0]):
        array, norm = check_vector_norm(values, 3)
        assert array.tolist() == values
        assert norm == pytest.approx(math.hypot(*values), rel=1e-12)
    mine = np.array([3.0, 4.0, 0.0])
    array, _ = check_vector_norm(mine, 3)
    assert array is not mine  # the caller's array stays the caller's
