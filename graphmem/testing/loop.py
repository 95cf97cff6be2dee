"""An asynchronous store seen as a blocking one, through an event loop in another thread: how
the conformance suite, written for :class:`~graphmem.stores.base.MemoryStore`, checks an
:class:`~graphmem.stores.base.AsyncMemoryStore` (``AsyncNeo4jStore``, or a user's own):
``LoopBackedStore(make_my_async_store)`` is a ``store`` for
:class:`~graphmem.testing.StoreConformance` (tests/test_store_conformance.py does so).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, TypeVar

from graphmem.stores.base import AsyncMemoryStore
from graphmem.stores.faces import BlockingStore

T = TypeVar("T")


class LoopBackedStore(BlockingStore):
    """Every primitive of the contract awaits the asynchronous store ``make()`` returns, on an
    event loop of its own in a daemon thread (the store is made on that loop, since an async
    driver's connections belong to the loop that opened them).

    :meth:`close` leaves the asynchronous store open (the conformance suite closes its store,
    and one loop-backed store may serve every test of a module); :meth:`shutdown` closes it
    and stops the loop.
    """

    def __init__(self, make: Callable[[], AsyncMemoryStore]) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()

        async def made() -> AsyncMemoryStore:
            return make()

        self.face = self._run(made())

    def _call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
        method: Callable[..., object] = getattr(self.face, name)
        return method(*args, **kwargs)

    def _run(self, work: Awaitable[T]) -> T:
        async def run() -> T:
            return await work

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result()

    def _run_iter(self, items: AsyncIterator[T]) -> Iterator[T]:
        async def collect() -> list[T]:
            return [item async for item in items]

        return iter(self._run(collect()))

    def close(self) -> None:
        """Closes nothing (see the class doc)."""

    def shutdown(self) -> None:
        """Close the asynchronous store and stop the loop; idempotent."""
        if self._loop.is_closed():
            return
        self._run(self.face.close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()


__all__ = ["LoopBackedStore"]
