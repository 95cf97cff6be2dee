"""The store contract's two faces agree, and the adapters of stores/faces.py derive every
primitive (issue 54): the conformance suite then checks what they derive, on every store."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

import pytest

from graphmem.models import Note
from graphmem.stores.base import AsyncMemoryStore, MemoryStore
from graphmem.stores.embedded import EmbeddedStore
from graphmem.stores.faces import BlockingStore, ThreadedStore
from graphmem.stores.neo4j import AsyncNeo4jStore, Neo4jStore
from graphmem.testing import LoopBackedStore

CONVENIENCES = {"neighbours", "counts", "export_jsonl", "import_jsonl", "use_embedder"}
"""MemoryStore's methods written once on its primitives, for the blocking face only."""


def public(cls: type) -> dict[str, Any]:
    """The public methods (and properties) ``cls`` has, by name."""
    return {
        name: member
        for name in dir(cls)
        if not name.startswith("_")
        and (inspect.isfunction(member := getattr(cls, name)) or isinstance(member, property))
    }


def parameters(method: Callable[..., Any]) -> list[tuple[str, Any, Any]]:
    """A method's parameters as comparable tuples (name, kind, default), ``self`` left out."""
    params = list(inspect.signature(method).parameters.values())[1:]
    return [(p.name, p.kind, p.default) for p in params]


def test_the_two_faces_declare_the_same_primitives_with_the_same_parameters() -> None:
    blocking, asynchronous = public(MemoryStore), public(AsyncMemoryStore)
    assert set(blocking) - CONVENIENCES == set(asynchronous)
    for name, method in asynchronous.items():
        if name == "dimension":  # a property there, a method here
            assert isinstance(blocking[name], property)
            continue
        assert parameters(blocking[name]) == parameters(method), name
        if name not in ("iter_nodes", "iter_edges"):
            assert inspect.iscoroutinefunction(method), name


def test_the_async_face_declares_each_primitive_once_and_abstract() -> None:
    """AsyncMemoryStore's primitives are MemoryStore's, as abstract async twins: a store that
    leaves one out cannot be made."""
    primitives = set(public(AsyncMemoryStore)) - {"get"}
    assert AsyncMemoryStore.__abstractmethods__ == primitives
    assert AsyncMemoryStore.upsert.__doc__ == MemoryStore.upsert.__doc__

    class Partial(ThreadedStore):
        upsert = AsyncMemoryStore.upsert  # type: ignore[assignment]

    with pytest.raises(TypeError, match="abstract"):
        Partial(EmbeddedStore.in_memory())  # type: ignore[abstract]


@pytest.mark.parametrize(
    ("derived", "contract"), [(BlockingStore, MemoryStore), (ThreadedStore, AsyncMemoryStore)]
)
def test_each_adapter_derives_every_primitive_of_its_face(derived: type, contract: type) -> None:
    left = derived.__abstractmethods__  # type: ignore[attr-defined]
    assert left <= {"close"}, f"{derived.__name__} leaves {sorted(left)} to its subclasses"
    for name, method in public(contract).items():
        # Left to the subclass (close), or written once on the primitives (get and the rest).
        if name in left or name in CONVENIENCES or name in ("dimension", "get"):
            continue
        mine = getattr(derived, name)
        assert mine is not method, f"{derived.__name__}.{name} is the contract's own"
        assert parameters(mine) == parameters(method), name
        assert mine.__doc__, f"{derived.__name__}.{name} has no docstring"


def test_the_neo4j_faces_are_complete_stores() -> None:
    assert not Neo4jStore.__abstractmethods__
    assert AsyncNeo4jStore.__abstractmethods__ == frozenset()
    assert issubclass(Neo4jStore, BlockingStore) and Neo4jStore.async_face is AsyncNeo4jStore
    assert parameters(Neo4jStore.recall) == parameters(MemoryStore.recall)


def test_a_blocking_store_seen_through_both_adapters_is_the_same_store() -> None:
    inner = EmbeddedStore.in_memory()
    there_and_back = LoopBackedStore(lambda: ThreadedStore(inner))
    try:
        there_and_back.upsert([Note(id="n1", namespace="ns", content="the blue pot")])
        assert [m.id for m in inner.iter_nodes("ns")] == ["n1"]
        assert [m.id for m in there_and_back.iter_nodes("ns")] == ["n1"]
        assert there_and_back.get("ns", "n1").content == "the blue pot"
        assert [r.memory.id for r in there_and_back.recall_text("ns", "blue", 3)] == ["n1"]
    finally:
        there_and_back.shutdown()


def test_the_threaded_face_runs_off_the_event_loop() -> None:
    store = EmbeddedStore.in_memory()
    seen: list[bool] = []
    original = store.get_many

    def get_many(*args: Any, **kwargs: Any) -> Any:
        try:
            asyncio.get_running_loop()
            seen.append(True)
        except RuntimeError:
            seen.append(False)  # no loop in this thread: a worker thread
        return original(*args, **kwargs)

    store.get_many = get_many  # type: ignore[method-assign]

    async def main() -> None:
        async with ThreadedStore(store) as face:
            assert await face.get_many("ns", ["nothing"]) == []

    asyncio.run(main())
    assert seen == [False]
