"""Transaction bodies written once for both Neo4j drivers.

Why and how, in full: docs/design.md, "Module notes", ``graphmem.stores.neo4j.tx``.

>>> async def answer() -> int:
...     return 42
>>> drive(answer())
42
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping
from typing import Any, Final, Protocol, TypeVar

import neo4j
from neo4j.exceptions import DriverError, Neo4jError, ServiceUnavailable

from graphmem.coroutines import drive
from graphmem.stores.neo4j.uri import redact_uri

T = TypeVar("T")


class Tx(Protocol):
    """A managed transaction as a transaction body sees it."""

    async def run(self, query: str, /, **params: Any) -> list[neo4j.Record]:
        """Run one statement (text from :mod:`graphmem.stores.neo4j.cypher`); all its records."""
        ...


Work = Callable[[Tx], Coroutine[Any, Any, T]]
"""A transaction body. The driver may run it more than once (retries), so it must only touch
the database through its ``tx``."""


class Session(Protocol):
    """One driver session: bodies run in managed, retried transactions."""

    async def read(self, work: Work[T]) -> T: ...

    async def write(self, work: Work[T]) -> T: ...

    async def read_autocommit(self, work: Work[T]) -> T:
        """Run a read-only body whose statements each run as an auto-commit transaction.

        One round trip per statement: a managed transaction adds a COMMIT round trip after the
        last record (about 0.5 ms a query on a local server), which a hot single-statement
        read such as recall does not need. The statements of one body do not share a snapshot,
        so only bodies whose every statement answers on its own belong here. The whole body is
        run again on errors the driver calls retryable, as a managed transaction would be (the
        driver leaves auto-commit transactions to their caller because a write may have
        committed; a read is safe to repeat).
        """
        ...


RETRY_FOR_S = 120.0
"""How long a failed transaction is retried by default, reads and writes. The driver retries a
managed write for ``max_transaction_retry_time`` (30 s by default), shorter than an ordinary
restart (a 5.26 restart under load took ~60 s), so a batch written across a restart failed;
the sessions here run a write the driver gave up on again, and retry reads themselves, until
this window ends: it outlasts a 90 s outage (tested). A store takes another window as
``retry_for`` (``GRAPHMEM_NEO4J_RETRY_S``)."""

MAX_RETRY_DELAY_S: Final = 8.0
"""The longest wait between two tries: a server back from a restart is used within seconds,
not after an exponential backoff has grown to a minute."""


def retry_window(retry_for: object, driver_config: Mapping[str, Any]) -> float:
    """The retry window of a store made by ``from_uri``: ``retry_for``, else the driver's
    ``max_transaction_retry_time`` if the caller set one, else :data:`RETRY_FOR_S`. A window
    that is not a positive finite number of seconds is a ConfigError."""
    from graphmem.errors import ConfigError

    if retry_for is None:
        retry_for = driver_config.get("max_transaction_retry_time", RETRY_FOR_S)
    if isinstance(retry_for, bool) or not isinstance(retry_for, int | float):
        raise ConfigError(f"the Neo4j retry window must be a number of seconds, not {retry_for!r}")
    if not (0 < retry_for < float("inf")):
        raise ConfigError(f"the Neo4j retry window must be positive and finite, not {retry_for!r}")
    return float(retry_for)


def window_end(retry_for: float | None) -> float:
    """When a retry window opened now ends: ``retry_for`` seconds from now, or
    :data:`RETRY_FOR_S` (read at call time, so a changed default applies) when it is None."""
    return time.monotonic() + (RETRY_FOR_S if retry_for is None else retry_for)


def next_try(
    e: BaseException, races: Iterator[float], delays: Iterator[float], deadline: float
) -> float:
    """The wait before running a failed body again, or ``e`` raised when it is not worth it: a
    lost delete race is re-run after a short wait; an error the driver calls retryable after
    the next backoff delay (at most :data:`MAX_RETRY_DELAY_S`) if that ends before
    ``deadline``."""
    if lost_a_delete_race(e) and (race := next(races, None)) is not None:
        return race
    delay = min(next(delays), MAX_RETRY_DELAY_S)
    if not worth_retrying(e, delay, deadline):
        raise e
    return delay


def retry_delays(first: float = 1.0, factor: float = 2.0, jitter: float = 0.2) -> Iterator[float]:
    """Seconds to wait before each retry: exponential backoff with jitter, as the driver's."""
    delay = first
    while True:
        yield delay * (1 + random.uniform(-jitter, jitter))
        delay *= factor


def retryable(e: BaseException) -> bool:
    """Whether the driver deems a failed transaction worth running again."""
    return isinstance(e, DriverError | Neo4jError) and e.is_retryable()


def worth_retrying(e: BaseException, delay: float, deadline: float) -> bool:
    """Whether to run a failed read-only body again after ``delay`` seconds: the error is
    retryable and the wait ends before ``deadline`` (a ``time.monotonic()`` value)."""
    return retryable(e) and time.monotonic() + delay <= deadline


ENTITY_NOT_FOUND: Final = "Neo.ClientError.Statement.EntityNotFound"
"""What the server raises when a statement goes to lock or load a node that it had matched and
that a concurrent transaction has deleted since ("Unable to load NODE ..."): an upsert's MERGE
matched the node, a DETACH DELETE committed, then the SET could not find it."""

RACE_WINDOW_S = 30.0
"""How long a body that lost such a race keeps being run again. Run again, it no longer matches
the deleted node (an upsert's MERGE creates it afresh, a patch finds nothing); under a stream of
deletes of the same keys it can lose again, so the re-runs are bounded by time, as the driver's
retries are, not by a count (8 re-runs were lost in a row once under CI load)."""


def lost_a_delete_race(e: BaseException) -> bool:
    """Whether a failed body only met a node deleted under it by a concurrent transaction.

    The driver calls every client error final, but graphmem's statements never name a node by
    its internal id, so this code can only come from a concurrent delete: a transient conflict,
    worth running the body again (for a while; see :data:`RACE_WINDOW_S`)."""
    seen: set[int] = set()
    error: BaseException | None = e
    while error is not None and id(error) not in seen:  # the driver may wrap it, e.g. in a
        seen.add(id(error))  # ResultFailedError when another result of the transaction failed
        if isinstance(error, Neo4jError) and error.code == ENTITY_NOT_FOUND:
            return True
        error = error.__cause__ or error.__context__
    return False


def race_delays() -> Iterator[float]:
    """Seconds to wait before each re-run of a body that lost a delete race: short, since the
    delete has committed by the time the error comes back (10 ms doubling to 0.5 s, with jitter
    so that racing writers fall out of step), for as long as :data:`RACE_WINDOW_S` allows."""
    deadline = time.monotonic() + RACE_WINDOW_S
    attempt = 0
    while True:
        delay = min(0.5, 0.01 * 2**attempt) * random.uniform(0.5, 1.5)
        if time.monotonic() + delay > deadline:
            return
        yield delay
        attempt += 1


class TornRead(Exception):
    """A read body met a node that a concurrent transaction was deleting or writing: Neo4j
    reads take no locks, so a row can come back with some of the node's properties but not all
    (e.g. kind and id without content). Raised by the body, carrying the :class:`~graphmem.
    errors.InvalidInput` the row gave, so that the body is run again after a short wait (see
    :data:`TORN_DELAYS`); a node that still reads so is malformed, and that error is raised."""

    def __init__(self, invalid: Exception) -> None:
        super().__init__(str(invalid))
        self.invalid = invalid


TORN_DELAYS: Final = (0.01, 0.02, 0.05, 0.1, 0.2, 0.4)
"""Seconds before each re-run of a read body that met a half-written or half-deleted node; a
concurrent commit ends in milliseconds, so a row still torn after these is taken as it is."""


def single(records: list[neo4j.Record]) -> neo4j.Record | None:
    """The first record, or None when there is none (the statements that use this return one)."""
    return records[0] if records else None


def torn_delay(e: TornRead, delays: Iterator[float]) -> float:
    """The wait before re-running a body that raised ``e``; once ``delays`` are spent, the
    row's own error."""
    delay = next(delays, None)
    if delay is None:
        raise e.invalid from None
    return delay


# ---- the blocking driver ---------------------------------------------------------------------


class SyncTx:
    """:class:`Tx` over the blocking driver's transaction, or over a blocking session, where
    every statement is an auto-commit transaction."""

    __slots__ = ("_tx",)

    def __init__(self, tx: neo4j.ManagedTransaction | neo4j.Session) -> None:
        self._tx = tx

    async def run(self, query: str, /, **params: Any) -> list[neo4j.Record]:
        return list(self._tx.run(query, params))


def sync_work(work: Work[T]) -> Callable[[neo4j.ManagedTransaction], T]:
    """A transaction body as the blocking driver's transaction function."""
    return lambda tx: drive(work(SyncTx(tx)))


class SyncSession:
    """:class:`Session` over a blocking ``neo4j.Session``."""

    __slots__ = ("_retry_for", "_session")

    def __init__(self, session: neo4j.Session, retry_for: float | None = None) -> None:
        self._session = session
        self._retry_for = retry_for

    async def read(self, work: Work[T]) -> T:
        return self._session.execute_read(sync_work(work))

    async def write(self, work: Work[T]) -> T:
        deadline = window_end(self._retry_for)
        races, delays = race_delays(), retry_delays()
        while True:
            try:
                return self._session.execute_write(sync_work(work))
            except (DriverError, Neo4jError) as e:  # DriverError: a ResultFailedError wrapping it
                delay = next_try(e, races, delays, deadline)
            time.sleep(delay)

    async def read_autocommit(self, work: Work[T]) -> T:
        deadline = window_end(self._retry_for)
        races, delays, torn = race_delays(), retry_delays(), iter(TORN_DELAYS)
        while True:
            try:
                return drive(work(SyncTx(self._session)))
            except TornRead as e:
                delay = torn_delay(e, torn)
            except (DriverError, Neo4jError) as e:
                delay = next_try(e, races, delays, deadline)
            time.sleep(delay)


# ---- the async driver ------------------------------------------------------------------------


class AsyncTx:
    """:class:`Tx` over the async driver's transaction, or over an async session, where every
    statement is an auto-commit transaction."""

    __slots__ = ("_tx",)

    def __init__(self, tx: neo4j.AsyncManagedTransaction | neo4j.AsyncSession) -> None:
        self._tx = tx

    async def run(self, query: str, /, **params: Any) -> list[neo4j.Record]:
        result = await self._tx.run(query, params)
        return [record async for record in result]


def async_work(work: Work[T]) -> Callable[[neo4j.AsyncManagedTransaction], Awaitable[T]]:
    """A transaction body as the async driver's transaction function."""
    return lambda tx: work(AsyncTx(tx))


class AsyncSession:
    """:class:`Session` over a ``neo4j.AsyncSession``."""

    __slots__ = ("_retry_for", "_session")

    def __init__(self, session: neo4j.AsyncSession, retry_for: float | None = None) -> None:
        self._session = session
        self._retry_for = retry_for

    async def read(self, work: Work[T]) -> T:
        return await self._session.execute_read(async_work(work))

    async def write(self, work: Work[T]) -> T:
        deadline = window_end(self._retry_for)
        races, delays = race_delays(), retry_delays()
        while True:
            try:
                return await self._session.execute_write(async_work(work))
            except (DriverError, Neo4jError) as e:  # DriverError: a ResultFailedError wrapping it
                delay = next_try(e, races, delays, deadline)
            await asyncio.sleep(delay)

    async def read_autocommit(self, work: Work[T]) -> T:
        deadline = window_end(self._retry_for)
        races, delays, torn = race_delays(), retry_delays(), iter(TORN_DELAYS)
        while True:
            try:
                return await work(AsyncTx(self._session))
            except TornRead as e:
                delay = torn_delay(e, torn)
            except (DriverError, Neo4jError) as e:
                delay = next_try(e, races, delays, deadline)
            await asyncio.sleep(delay)


# ---- errors ----------------------------------------------------------------------------------


def reason(e: BaseException) -> str:
    """One line about a driver error that says what went wrong; never the query parameters,
    and credentials in any URI it quotes are redacted."""
    if isinstance(e, ServiceUnavailable):
        return "the server is unavailable"
    # A server error's ``message`` is the server's text; the driver's own errors only carry a
    # generic GQL status there ("50N42: Unexpected error ..."), their text is str(e).
    message = e.message if isinstance(e, Neo4jError) else None
    text = str(message or e).strip()
    line = redact_uri(text.splitlines()[0])[:300] if text else type(e).__name__
    code = e.code if isinstance(e, Neo4jError) else None
    return f"{line} ({code})" if code else line
