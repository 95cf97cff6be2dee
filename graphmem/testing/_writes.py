"""Conformance tests of the store's writes: upsert, edges, patch, update_utility, delete."""

from __future__ import annotations

import math
from typing import Any

import pytest

from graphmem.errors import (
    DimensionMismatch,
    EmptyContent,
    InvalidInput,
    MemoryNotFound,
)
from graphmem.models import (
    AnyMemory,
    Edge,
    EdgeKind,
    Episode,
    Granularity,
    Note,
    Procedure,
    Step,
    Task,
    Tip,
)
from graphmem.stores.base import MemoryStore
from graphmem.testing.helpers import (
    assert_same_memory,
    chain,
    note,
    vec,
)


class WriteConformance:
    """Mixed into :class:`StoreConformance`; needs its fixtures."""

    # ---- upsert / get ---------------------------------------------------------------------

    def test_upsert_then_get_returns_an_equal_private_copy(
        self, store: MemoryStore, namespace: str, dim: int
    ) -> None:
        original = note(namespace, "n1", "The spare key is under the pot.", vec(dim, 1, 2))
        original.keywords = ["key", "pot"]
        store.upsert([original])
        got = store.get(namespace, "n1")
        assert_same_memory(got, original)
        assert isinstance(got, Note)
        got.keywords.append("mutated")
        again = store.get(namespace, "n1")
        assert isinstance(again, Note) and again.keywords == ["key", "pot"]

    def test_get_missing_raises_memory_not_found(self, store: MemoryStore, namespace: str) -> None:
        with pytest.raises(MemoryNotFound) as info:
            store.get(namespace, "nope")
        assert info.value.memory_id == "nope"

    def test_get_many_keeps_the_order_asked_and_skips_missing(
        self, store: MemoryStore, namespace: str, dim: int
    ) -> None:
        store.upsert([note(namespace, i, f"note {i}", vec(dim, 1)) for i in ("a", "b", "c")])
        found = store.get_many(namespace, ["c", "missing", "a", "b"])
        assert [m.id for m in found] == ["c", "a", "b"]
        assert store.get_many(namespace, []) == []

    def test_every_kind_round_trips(self, store: MemoryStore, namespace: str, dim: int) -> None:
        memories: list[AnyMemory] = [
            Note(id="note", namespace=namespace, content="c", tags=["t"], embedding=vec(dim, 1)),
            Task(id="task", namespace=namespace, text="make tea", key="tea", embedding=vec(dim, 2)),
            Procedure(
                id="proc",
                namespace=namespace,
                task_text="make tea",
                key="tea",
                granularity=Granularity.SCRIPT,
                script="1. boil\n2. pour",
                reward=1.0,
                success=True,
                n_steps=2,
            ),
            Step(id="step", namespace=namespace, procedure_id="proc", index=0, action="boil"),
            Tip(id="tip", namespace=namespace, text="warm the pot first"),
            Episode(id="ep", namespace=namespace, task_text="make tea", reward=0.5),
        ]
        store.upsert(memories)
        for memory in memories:
            got = store.get(namespace, memory.id)
            assert got.kind == memory.kind
            assert_same_memory(got, memory)

    def test_empty_upsert_is_a_no_op(self, store: MemoryStore, namespace: str) -> None:
        store.upsert([], [])
        assert list(store.iter_nodes(namespace)) == []

    def test_upsert_rejects_what_is_not_a_memory(self, store: MemoryStore, namespace: str) -> None:
        with pytest.raises(InvalidInput):
            store.upsert([{"namespace": namespace, "content": "x"}])  # type: ignore[list-item]

    def test_replace_keeps_utility(self, store: MemoryStore, namespace: str, dim: int) -> None:
        store.upsert([note(namespace, "n", "old", vec(dim, 1))])
        store.update_utility(namespace, ["n"], 1.0, 0.5, success=True)
        replacement = note(namespace, "n", "new", vec(dim, 0, 1))
        replacement.q = 0.0
        store.upsert([replacement])
        got = store.get(namespace, "n")
        assert isinstance(got, Note) and got.content == "new"
        assert (got.q, got.q_updates, got.uses, got.successes) == (0.75, 1, 1, 1)
        assert got.embedding == pytest.approx(vec(dim, 0, 1), abs=1e-6)

    def test_replace_without_keep_utility_takes_the_new_values(
        self, store: MemoryStore, namespace: str, dim: int
    ) -> None:
        store.upsert([note(namespace, "n", "old", vec(dim, 1))])
        store.update_utility(namespace, ["n"], 1.0, 0.5)
        replacement = note(namespace, "n", "new", vec(dim, 1))
        replacement.q, replacement.uses = 0.1, 7
        store.upsert([replacement], keep_utility=False)
        got = store.get(namespace, "n")
        assert (got.q, got.q_updates, got.uses) == (0.1, 0, 7)

    def test_replace_with_another_kind_is_rejected(
        self, store: MemoryStore, namespace: str, dim: int
    ) -> None:
        store.upsert([note(namespace, "x", "a note", vec(dim, 1))])
        with pytest.raises(InvalidInput):
            store.upsert([Task(id="x", namespace=namespace, text="t", key="t")])
        assert store.get(namespace, "x").kind == "Note"

    def test_a_failing_batch_writes_nothing(
        self, store: MemoryStore, namespace: str, dim: int
    ) -> None:
        store.check_dimension(dim)
        good = note(namespace, "good", "fine", vec(dim, 1))
        bad = note(namespace, "bad", "wrong size", [1.0] * (dim + 1))
        with pytest.raises(DimensionMismatch):
            store.upsert([good, bad])
        assert store.get_many(namespace, ["good", "bad"]) == []

    def test_memory_without_embedding_is_stored_but_never_recalled(
        self, store: MemoryStore, namespace: str, dim: int
    ) -> None:
        store.upsert(
            [note(namespace, "plain", "no vector"), note(namespace, "v", "v", vec(dim, 1))]
        )
        assert store.get(namespace, "plain").embedding is None
        assert [r.memory.id for r in store.recall(namespace, vec(dim, 1), 5)] == ["v"]

    def test_replacing_the_embedding_moves_recall(
        self, store: MemoryStore, namespace: str, dim: int
    ) -> None:
        store.upsert(
            [note(namespace, "a", "a", vec(dim, 1)), note(namespace, "b", "b", vec(dim, 0, 1))]
        )
        query = vec(dim, 1, 0.5)
        assert store.recall(namespace, query, 1)[0].memory.id == "a"
        store.upsert([note(namespace, "a", "a", vec(dim, 0, 0, 1))])
        assert store.recall(namespace, query, 1)[0].memory.id == "b"
        store.upsert([note(namespace, "b", "b")])  # embedding removed
        assert [r.memory.id for r in store.recall(namespace, vec(dim, 1), 5)] == ["a"]

    # ---- edges ----------------------------------------------------------------------------

    def test_writing_an_edge_again_merges_its_props(
        self, store: MemoryStore, namespace: str, dim: int
    ) -> None:
        store.upsert(
            [note(namespace, "a", "a", vec(dim, 1)), note(namespace, "b", "b", vec(dim, 1))]
        )
        link = {"namespace": namespace, "kind": EdgeKind.LINKS_TO, "src": "a", "dst": "b"}
        store.upsert((), [Edge(**link, props={"reason": "same topic", "strength": 0.5})])
        store.upsert((), [Edge(**link, props={"strength": 0.9, "checked": True})])
        (edge,) = store.edges(namespace, "a")
        assert edge.props == {"reason": "same topic", "strength": 0.9, "checked": True}
        assert sum(1 for _ in store.iter_edges(namespace)) == 1

    def test_edges_by_direction_and_kind(
        self, store: MemoryStore, namespace: str, dim: int
    ) -> None:
        store.upsert([note(namespace, i, i, vec(dim, 1)) for i in ("a", "b", "c")])
        store.upsert(
            (),
            [
                Edge(namespace=namespace, kind=EdgeKind.LINKS_TO, src="a", dst="b"),
                Edge(namespace=namespace, kind=EdgeKind.EVOLVED_FROM, src="a", dst="c"),
                Edge(namespace=namespace, kind=EdgeKind.LINKS_TO, src="c", dst="a"),
            ],
        )

        def ends(direction: Any, kinds: Any = None) -> set[tuple[str, str, str]]:
            found = store.edges(namespace, "a", kinds=kinds, direction=direction)
            return {(e.kind.value, e.src, e.dst) for e in found}

        assert ends("out") == {("LINKS_TO", "a", "b"), ("EVOLVED_FROM", "a", "c")}
        assert ends("in") == {("LINKS_TO", "c", "a")}
        assert ends("both") == ends("out") | ends("in")
        assert ends("both", [EdgeKind.LINKS_TO]) == {("LINKS_TO", "a", "b"), ("LINKS_TO", "c", "a")}
        assert ends("out", [EdgeKind.SUPERSEDES]) == set()
        assert store.edges(namespace, "a", direction="both") == store.edges(
            namespace, "a", direction="both"
        )

    def test_an_edge_to_a_missing_memory_is_rejected_with_its_batch(
        self, store: MemoryStore, namespace: str, dim: int
    ) -> None:
        with pytest.raises(MemoryNotFound):
            store.upsert(
                [note(namespace, "a", "a", vec(dim, 1))],
                [Edge(namespace=namespace, kind=EdgeKind.LINKS_TO, src="a", dst="ghost")],
            )
        assert store.get_many(namespace, ["a"]) == []

    def test_an_edge_between_memories_of_the_same_batch_is_accepted(
        self, store: MemoryStore, namespace: str, dim: int
    ) -> None:
        store.upsert(
            [note(namespace, "a", "a", vec(dim, 1)), note(namespace, "b", "b", vec(dim, 1))],
            [Edge(namespace=namespace, kind=EdgeKind.LINKS_TO, src="a", dst="b")],
        )
        assert [(e.src, e.dst) for e in store.edges(namespace, "b", direction="in")] == [("a", "b")]

    def test_edges_never_cross_namespaces(
        self, store: MemoryStore, namespace: str, dim: int
    ) -> None:
        other = namespace + "-other"
        store.upsert([note(namespace, "a", "a", vec(dim, 1)), note(other, "b", "b", vec(dim, 1))])
        with pytest.raises(MemoryNotFound):
            store.upsert((), [Edge(namespace=namespace, kind=EdgeKind.LINKS_TO, src="a", dst="b")])
        assert store.edges(namespace, "a", direction="both") == []

    def test_neighbours_pair_each_edge_with_its_other_end(
        self, store: MemoryStore, namespace: str, dim: int
    ) -> None:
        store.upsert(
            [note(namespace, i, f"note {i}", vec(dim, 1)) for i in ("a", "b", "c")],
            [
                Edge(namespace=namespace, kind=EdgeKind.LINKS_TO, src="a", dst="b"),
                Edge(namespace=namespace, kind=EdgeKind.LINKS_TO, src="c", dst="a"),
            ],
        )
        pairs = store.neighbours(namespace, "a", direction="both")
        assert sorted((e.src, e.dst, m.id) for e, m in pairs) == [("a", "b", "b"), ("c", "a", "c")]
        assert store.neighbours(namespace, "missing") == []

    # ---- patch ----------------------------------------------------------------------------

    def test_patch_sets_fields_and_updated_at(
        self, store: MemoryStore, namespace: str, dim: int
    ) -> None:
        store.upsert([note(namespace, "n", "before", vec(dim, 1))])
        before = store.get(namespace, "n")
        new = store.patch(namespace, "n", {"content": "after", "tags": ["x"], "version": 2})
        assert isinstance(new, Note)
        assert (new.content, new.tags, new.version) == ("after", ["x"], 2)
        assert new.updated_at >= before.updated_at
        assert new.created_at == before.created_at
        assert_same_memory(store.get(namespace, "n"), new)
        assert new.embedding == pytest.approx(vec(dim, 1), abs=1e-6)

    @pytest.mark.parametrize("field", ["id", "namespace", "kind", "q", "uses", "embedding"])
    def test_patch_rejects_identity_utility_and_embedding(
        self, store: MemoryStore, namespace: str, dim: int, field: str
    ) -> None:
        store.upsert([note(namespace, "n", "n", vec(dim, 1))])
        value: Any = vec(dim, 1) if field == "embedding" else ("x" if field != "q" else 0.9)
        with pytest.raises(InvalidInput):
            store.patch(namespace, "n", {field: value})
        got = store.get(namespace, "n")
        assert (got.id, got.namespace, got.kind, got.q, got.uses) == (
            "n",
            namespace,
            "Note",
            0.5,
            0,
        )

    def test_patch_rejects_bad_values_and_changes_nothing(
        self, store: MemoryStore, namespace: str, dim: int
    ) -> None:
        store.upsert([note(namespace, "n", "keep me", vec(dim, 1))])
        with pytest.raises(EmptyContent):
            store.patch(namespace, "n", {"content": "  "})
        with pytest.raises(InvalidInput):
            store.patch(namespace, "n", {"no_such_field": 1})
        with pytest.raises(InvalidInput):
            store.patch(namespace, "n", {})
        got = store.get(namespace, "n")
        assert isinstance(got, Note) and got.content == "keep me"
        with pytest.raises(MemoryNotFound):
            store.patch(namespace, "ghost", {"content": "x"})

    def test_patching_obsolete_hides_from_recall(
        self, store: MemoryStore, namespace: str, dim: int
    ) -> None:
        store.upsert(
            [note(namespace, "a", "a", vec(dim, 1)), note(namespace, "b", "b", vec(dim, 1, 1))]
        )
        store.patch(namespace, "a", {"obsolete": True, "obsolete_reason": "superseded"})
        assert [h.memory.id for h in store.recall(namespace, vec(dim, 1), 5)] == ["b"]
        store.patch(namespace, "a", {"obsolete": False})
        assert [h.memory.id for h in store.recall(namespace, vec(dim, 1), 5)] == ["a", "b"]

    # ---- update_utility -------------------------------------------------------------------

    def test_update_utility_moves_q_and_counts(
        self, store: MemoryStore, namespace: str, dim: int
    ) -> None:
        store.upsert(
            [note(namespace, "a", "a", vec(dim, 1)), note(namespace, "b", "b", vec(dim, 1))]
        )
        updated = store.update_utility(namespace, ["a", "b"], 1.0, 0.1, success=True)
        assert [m.id for m in updated] == ["a", "b"]
        assert updated[0].q == pytest.approx(0.55, abs=1e-12)
        store.update_utility(namespace, ["a"], 0.0, 0.1, success=False)
        store.update_utility(namespace, ["a"], -1.0, 1.0)
        a, b = store.get_many(namespace, ["a", "b"])
        assert a.q == pytest.approx(-1.0, abs=1e-12)
        assert (a.q_updates, a.uses, a.successes) == (3, 3, 1)
        assert b.q == pytest.approx(0.55, abs=1e-12)
        assert (b.q_updates, b.uses, b.successes) == (1, 1, 1)

    def test_update_utility_with_a_missing_id_changes_nothing(
        self, store: MemoryStore, namespace: str, dim: int
    ) -> None:
        store.upsert([note(namespace, "a", "a", vec(dim, 1))])
        with pytest.raises(MemoryNotFound):
            store.update_utility(namespace, ["a", "ghost"], 1.0, 0.5)
        a = store.get(namespace, "a")
        assert (a.q, a.q_updates, a.uses) == (0.5, 0, 0)

    @pytest.mark.parametrize(("reward", "alpha"), [(math.nan, 0.1), (math.inf, 0.1)])
    def test_update_utility_never_writes_a_non_finite_q(
        self, store: MemoryStore, namespace: str, dim: int, reward: float, alpha: float
    ) -> None:
        """Reward and alpha come checked (:meth:`MemoryConfig.check_reward`, the facade's
        alpha); what the store guards itself is its own result: a non-finite Q is refused."""
        store.upsert([note(namespace, "a", "a", vec(dim, 1))])
        with pytest.raises(InvalidInput):
            store.update_utility(namespace, ["a"], reward, alpha)
        assert store.get(namespace, "a").q == 0.5

    # ---- delete ---------------------------------------------------------------------------

    def test_delete_removes_memories_and_their_edges(
        self, store: MemoryStore, namespace: str, dim: int
    ) -> None:
        store.upsert(
            [note(namespace, i, i, vec(dim, 1)) for i in ("a", "b", "c")],
            [
                Edge(namespace=namespace, kind=EdgeKind.LINKS_TO, src="a", dst="b"),
                Edge(namespace=namespace, kind=EdgeKind.LINKS_TO, src="b", dst="c"),
            ],
        )
        assert store.delete(namespace, ["b"]) == ["b"]
        assert [m.id for m in store.get_many(namespace, ["a", "b", "c"])] == ["a", "c"]
        assert list(store.iter_edges(namespace)) == []
        assert [h.memory.id for h in store.recall(namespace, vec(dim, 1), 5)] == ["a", "c"]
        assert store.delete(namespace, ["b", "ghost"]) == []

    def test_deleting_a_procedure_takes_its_step_chain(
        self, store: MemoryStore, namespace: str, dim: int
    ) -> None:
        nodes, edges = chain(namespace, "p", 4, dim)
        task = Task(id="t", namespace=namespace, text="t", key="t", embedding=vec(dim, 1))
        solved = Edge(namespace=namespace, kind=EdgeKind.SOLVED_BY, src="t", dst="p")
        store.upsert([task, *nodes], [*edges, solved])
        deleted = store.delete(namespace, ["p"])
        assert deleted[0] == "p"
        assert sorted(deleted) == ["p", "p-s0", "p-s1", "p-s2", "p-s3"]
        assert [m.id for m in store.iter_nodes(namespace)] == ["t"]
        assert list(store.iter_edges(namespace)) == []

    def test_a_tip_goes_with_its_last_about_target(
        self, store: MemoryStore, namespace: str, dim: int
    ) -> None:
        store.upsert(
            [
                note(namespace, "a", "a", vec(dim, 1)),
                Task(id="b", namespace=namespace, text="b", key="b", embedding=vec(dim, 1)),
                Tip(id="tip", namespace=namespace, text="check first", embedding=vec(dim, 1)),
                Tip(id="free", namespace=namespace, text="attached to nothing"),
            ],
            [
                Edge(namespace=namespace, kind=EdgeKind.ABOUT, src="tip", dst="a"),
                Edge(namespace=namespace, kind=EdgeKind.ABOUT, src="tip", dst="b"),
            ],
        )
        assert store.delete(namespace, ["a"]) == ["a"]
        assert store.get(namespace, "tip").kind == "Tip"
        assert sorted(store.delete(namespace, ["b"])) == ["b", "tip"]
        assert [m.id for m in store.iter_nodes(namespace)] == ["free"]

    def test_delete_stays_in_its_namespace(
        self, store: MemoryStore, namespace: str, dim: int
    ) -> None:
        other = namespace + "-other"
        store.upsert([note(namespace, "same", "mine", vec(dim, 1)), note(other, "same", "theirs")])
        assert store.delete(namespace, ["same"]) == ["same"]
        kept = store.get(other, "same")
        assert isinstance(kept, Note) and kept.content == "theirs"
