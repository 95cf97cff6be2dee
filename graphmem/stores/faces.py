"""One face of the store contract derived from the other: :class:`BlockingStore`.

A store written for asyncio (an :class:`~graphmem.stores.base.AsyncMemoryStore`) gets its
blocking face here, by one generic adapter instead of a forwarding method per primitive: each
primitive of :class:`~graphmem.stores.base.MemoryStore` is :func:`blocking` applied to its
asynchronous twin, so its signature is the twin's (mypy checks both against the contract) and
its body is the same two steps for every method: make the twin's coroutine, run it to its end.

How it runs is the one thing a blocking face chooses:

- by default with :func:`~graphmem.coroutines.drive`, for coroutines that never suspend (their
  I/O blocks): :class:`~graphmem.stores.neo4j.Neo4jStore` runs the Neo4j store's one set of
  coroutines over the blocking driver this way;
- or on an event loop in another thread, for coroutines that do suspend
  (:class:`graphmem.testing.LoopBackedStore` runs the conformance suite through an async store so).

>>> import asyncio
>>> from graphmem.stores.embedded import EmbeddedStore
>>> class Echo(BlockingStore):  # a blocking face over another store's namespaces, for show
...     def _call(self, name, args, kwargs):
...         async def answer():
...             return ["demo"] if name == "namespaces" else None
...         return answer()
...     def close(self): pass
>>> Echo().namespaces()
['demo']
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from typing import Any, ClassVar, Concatenate, ParamSpec, TypeVar, cast

from graphmem.coroutines import drive, drive_iter
from graphmem.stores.base import AsyncMemoryStore, MemoryStore

P = ParamSpec("P")
T = TypeVar("T")


def blocking(
    method: Callable[Concatenate[Any, P], Coroutine[Any, Any, T]],
) -> Callable[Concatenate[BlockingStore, P], T]:
    """The blocking twin of an asynchronous store method: same name, same parameters, its
    result run to the end by the store's :meth:`BlockingStore._run`."""
    name = method.__name__

    def run(self: BlockingStore, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._run(cast(Awaitable[T], self._call(name, args, kwargs)))

    return _named(run, method)


def blocking_iter(
    method: Callable[Concatenate[Any, P], AsyncIterator[T]],
) -> Callable[Concatenate[BlockingStore, P], Iterator[T]]:
    """:func:`blocking` for a method that returns an async iterator: a plain iterator."""
    name = method.__name__

    def run(self: BlockingStore, /, *args: P.args, **kwargs: P.kwargs) -> Iterator[T]:
        return self._run_iter(cast(AsyncIterator[T], self._call(name, args, kwargs)))

    return _named(run, method)


F = TypeVar("F", bound=Callable[..., Any])


def _named(run: F, method: Callable[..., Any]) -> F:
    """``run`` named as ``method``, with the contract's words for it (the blocking face's
    docstring where the twin has none). Not ``functools.wraps``: that would copy the twin's
    ``__isabstractmethod__``, and abc would take the derived method for an abstract one."""
    run.__name__ = method.__name__
    run.__qualname__ = f"BlockingStore.{method.__name__}"
    run.__doc__ = method.__doc__ or getattr(MemoryStore, method.__name__, run).__doc__
    run.__signature__ = inspect.signature(method)  # type: ignore[attr-defined]
    return run


class BlockingStore(MemoryStore):
    """The blocking face of an asynchronous store (see the module doc).

    A subclass says which asynchronous store it faces, either as :attr:`async_face` (a class
    whose methods run on this very object: the store's state and sessions are its own) or by
    overriding :meth:`_call`; and how coroutines run (:meth:`_run`, :meth:`_run_iter`: to
    their end without a loop, unless overridden). It writes :meth:`close` itself, and may
    override any primitive it answers better.
    """

    async_face: ClassVar[type[AsyncMemoryStore] | None] = None
    """The asynchronous store class whose methods :meth:`_call` calls on ``self``: they may
    use this object's state and sessions, but must reach another primitive through a
    function, never through ``self`` (here ``self.get_many`` is the blocking one). The Neo4j
    operations are module functions for this reason."""

    def _call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
        """The asynchronous face's method ``name`` called with these arguments: a coroutine,
        or an async iterator for ``iter_nodes`` / ``iter_edges``."""
        face = self.async_face
        if face is None:
            raise NotImplementedError(f"{type(self).__name__} names no async_face")
        method: Callable[..., object] = getattr(face, name)
        return method(self, *args, **kwargs)

    def _run(self, work: Awaitable[T]) -> T:
        """Run one coroutine of the asynchronous face to its end."""
        return drive(cast(Coroutine[Any, Any, T], work))

    def _run_iter(self, items: AsyncIterator[T]) -> Iterator[T]:
        """The items of one async iterator of the asynchronous face."""
        return drive_iter(cast(Any, items))

    @property
    def dimension(self) -> int | None:
        return self._run(cast(Awaitable[int | None], self._call("dimension", (), {})))

    check_dimension = blocking(AsyncMemoryStore.check_dimension)
    embedder_record = blocking(AsyncMemoryStore.embedder_record)
    record_embedder = blocking(AsyncMemoryStore.record_embedder)
    set_embeddings = blocking(AsyncMemoryStore.set_embeddings)
    upsert = blocking(AsyncMemoryStore.upsert)
    patch = blocking(AsyncMemoryStore.patch)
    update_utility = blocking(AsyncMemoryStore.update_utility)
    finish_episode = blocking(AsyncMemoryStore.finish_episode)
    mark_used = blocking(AsyncMemoryStore.mark_used)
    delete = blocking(AsyncMemoryStore.delete)
    get_many = blocking(AsyncMemoryStore.get_many)
    edges = blocking(AsyncMemoryStore.edges)
    superseded = blocking(AsyncMemoryStore.superseded)
    recall = blocking(AsyncMemoryStore.recall)
    recall_text = blocking(AsyncMemoryStore.recall_text)
    find_by_hash = blocking(AsyncMemoryStore.find_by_hash)
    iter_nodes = blocking_iter(AsyncMemoryStore.iter_nodes)
    iter_edges = blocking_iter(AsyncMemoryStore.iter_edges)
    namespaces = blocking(AsyncMemoryStore.namespaces)


__all__ = ["BlockingStore", "blocking", "blocking_iter"]
