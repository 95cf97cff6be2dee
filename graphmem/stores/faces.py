"""One face of the store contract derived from the other, by one generic adapter each way.

:class:`BlockingStore` is the blocking face of an asynchronous store (an
:class:`~graphmem.stores.base.AsyncMemoryStore`): each primitive of
:class:`~graphmem.stores.base.MemoryStore` is :func:`blocking` applied to its asynchronous twin,
so its signature is the twin's (mypy checks both against the contract) and its body is the same
for every method: make the twin's coroutine, run it to its end. How it runs is the one thing a
blocking face chooses:

- by default with :func:`~graphmem.coroutines.drive`, for coroutines that never suspend (their
  I/O blocks): :class:`~graphmem.stores.neo4j.Neo4jStore` runs the Neo4j store's one set of
  coroutines over the blocking driver this way;
- or on an event loop in another thread, for coroutines that do suspend
  (:class:`graphmem.testing.LoopBackedStore`, how the conformance suite checks an async store).

:class:`ThreadedStore` is the other way round: the asynchronous face of a blocking store, each
primitive run in a worker thread, so async code can await the embedded store:

>>> import asyncio
>>> from graphmem.models import Note
>>> from graphmem.stores.embedded import EmbeddedStore
>>> async def main() -> list[str]:
...     async with ThreadedStore(EmbeddedStore.in_memory()) as store:
...         await store.upsert([Note(id="n1", namespace="demo", content="hi")])
...         return [m.id async for m in store.iter_nodes("demo")]
>>> asyncio.run(main())
['n1']
"""

from __future__ import annotations

import asyncio
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

    return _named(run, method, "BlockingStore")


def blocking_iter(
    method: Callable[Concatenate[Any, P], AsyncIterator[T]],
) -> Callable[Concatenate[BlockingStore, P], Iterator[T]]:
    """:func:`blocking` for a method that returns an async iterator: a plain iterator."""
    name = method.__name__

    def run(self: BlockingStore, /, *args: P.args, **kwargs: P.kwargs) -> Iterator[T]:
        return self._run_iter(cast(AsyncIterator[T], self._call(name, args, kwargs)))

    return _named(run, method, "BlockingStore")


F = TypeVar("F", bound=Callable[..., Any])


def _named(run: F, method: Callable[..., Any], face: str) -> F:
    """``run`` named as ``method``, with the contract's words for it (the blocking face's
    docstring where the twin has none). Not ``functools.wraps``: that would copy the twin's
    ``__isabstractmethod__``, and abc would take the derived method for an abstract one."""
    run.__name__ = method.__name__
    run.__qualname__ = f"{face}.{method.__name__}"
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


def threaded(
    method: Callable[Concatenate[Any, P], T],
) -> Callable[Concatenate[ThreadedStore, P], Coroutine[Any, Any, T]]:
    """The asynchronous twin of a blocking store method: same name, same parameters, run in a
    worker thread on the store :class:`ThreadedStore` wraps."""
    name = method.__name__

    async def run(self: ThreadedStore, /, *args: P.args, **kwargs: P.kwargs) -> T:
        call: Callable[..., T] = getattr(self.store, name)
        return await asyncio.to_thread(call, *args, **kwargs)

    return _named(run, method, "ThreadedStore")


def threaded_iter(
    method: Callable[Concatenate[Any, P], Iterator[T]],
) -> Callable[Concatenate[ThreadedStore, P], AsyncIterator[T]]:
    """:func:`threaded` for a method that returns an iterator: the items are read in a worker
    thread, all at once, then handed out (an async iterator)."""
    name = method.__name__

    async def items(self: ThreadedStore, args: Any, kwargs: Any) -> AsyncIterator[T]:
        call: Callable[..., Iterator[T]] = getattr(self.store, name)
        for item in await asyncio.to_thread(lambda: list(call(*args, **kwargs))):
            yield item

    def run(self: ThreadedStore, /, *args: P.args, **kwargs: P.kwargs) -> AsyncIterator[T]:
        return items(self, args, kwargs)

    return _named(run, method, "ThreadedStore")


class ThreadedStore(AsyncMemoryStore):
    """The asynchronous face of a blocking store (see the module doc): every primitive runs
    ``store``'s in a worker thread (``asyncio.to_thread``), so the event loop never waits on
    its locks or disk. ``store`` must allow calls from several threads at once (the built-in
    stores do). :meth:`close` closes it."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store

    async def dimension(self) -> int | None:
        return await asyncio.to_thread(lambda: self.store.dimension)

    check_dimension = threaded(MemoryStore.check_dimension)
    embedder_record = threaded(MemoryStore.embedder_record)
    record_embedder = threaded(MemoryStore.record_embedder)
    set_embeddings = threaded(MemoryStore.set_embeddings)
    upsert = threaded(MemoryStore.upsert)
    patch = threaded(MemoryStore.patch)
    update_utility = threaded(MemoryStore.update_utility)
    finish_episode = threaded(MemoryStore.finish_episode)
    mark_used = threaded(MemoryStore.mark_used)
    delete = threaded(MemoryStore.delete)
    get_many = threaded(MemoryStore.get_many)
    get = threaded(MemoryStore.get)
    edges = threaded(MemoryStore.edges)
    superseded = threaded(MemoryStore.superseded)
    recall = threaded(MemoryStore.recall)
    recall_text = threaded(MemoryStore.recall_text)
    find_by_hash = threaded(MemoryStore.find_by_hash)
    iter_nodes = threaded_iter(MemoryStore.iter_nodes)
    iter_edges = threaded_iter(MemoryStore.iter_edges)
    namespaces = threaded(MemoryStore.namespaces)
    close = threaded(MemoryStore.close)


__all__ = [
    "BlockingStore",
    "ThreadedStore",
    "blocking",
    "blocking_iter",
    "threaded",
    "threaded_iter",
]
