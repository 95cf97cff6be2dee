"""Running coroutines that never suspend, without an event loop.

The stores write their logic once, as coroutines, and the blocking driver runs them to their end
here (their I/O blocks, so they never wait on an event loop); the asynchronous driver awaits
the same code. Pure Python: no store or driver is imported.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Coroutine, Iterator
from typing import Any, TypeVar

T = TypeVar("T")


def drive(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends (one whose I/O blocks) to its end; no event loop.

    Raises RuntimeError, and closes the coroutine, if it does suspend: then it awaited real
    asynchronous work, which only an event loop can finish.
    """
    try:
        coroutine.send(None)
    except StopIteration as done:
        value: T = done.value
        return value
    coroutine.close()
    raise RuntimeError("a coroutine run without an event loop awaited asynchronous work")


def drive_iter(generator: AsyncGenerator[T, None]) -> Iterator[T]:
    """:func:`drive` for an async generator that never suspends: its items, as a plain iterator."""
    try:
        while True:
            try:
                yield drive(_next(generator))
            except StopAsyncIteration:
                return
    finally:
        drive(generator.aclose())


async def _next(generator: AsyncGenerator[T, None]) -> T:
    return await anext(generator)


__all__ = ["drive", "drive_iter"]
