"""Recall on Neo4j runs its statements as auto-commit transactions (one round trip each, no
COMMIT), in a session routed to readers, and is retried on the errors the driver calls
retryable, as the managed transactions it replaced were.

The session adapters are checked against scripted driver sessions (errors cannot be provoked
on demand from a live server); the store-level test spies on a real Neo4j's driver.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from typing import Any

import neo4j
import pytest
from conftest import NEO4J_TEST_DIMENSION, drop_namespaces
from neo4j.exceptions import ClientError, SessionExpired, TransientError

from graphmem.errors import InvalidInput
from graphmem.models import Note
from graphmem.stores.base import MemoryStore
from graphmem.stores.neo4j import tx as neo4j_tx
from graphmem.stores.neo4j.rows import read_memory
from graphmem.stores.neo4j.tx import AsyncSession, SyncSession, Tx, retry_delays, retryable
from graphmem.testing import unique_namespace


@pytest.fixture(autouse=True)
def _no_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(neo4j_tx, "retry_delays", lambda: itertools.repeat(0.0))


class FlakySession:
    """A blocking driver session whose ``run`` fails with ``errors`` first, then answers."""

    def __init__(self, errors: list[Exception]) -> None:
        self.errors = list(errors)
        self.sent: list[str] = []

    def run(self, query: str, parameters: dict[str, Any] | None = None) -> Iterator[Any]:
        self.sent.append(query)
        if self.errors:
            raise self.errors.pop(0)
        return iter([{"n": len(self.sent)}])

    def execute_read(self, *args: Any) -> Any:
        raise AssertionError("an auto-commit read must not open a managed transaction")


class FlakyAsyncSession(FlakySession):
    async def run(self, query: str, parameters: dict[str, Any] | None = None) -> Any:  # type: ignore[override]
        records = super().run(query, parameters)

        class Result:
            def __aiter__(self) -> Any:
                return self

            async def __anext__(self) -> Any:
                try:
                    return next(records)
                except StopIteration:
                    raise StopAsyncIteration from None

        return Result()


async def _two_statements(tx: Tx) -> list[int]:
    first = await tx.run("RETURN 1 AS n")
    second = await tx.run("RETURN 2 AS n")
    return [first[0]["n"], second[0]["n"]]


def _sync(errors: list[Exception]) -> tuple[list[int], FlakySession]:
    session = FlakySession(errors)
    result = neo4j_tx.drive(SyncSession(session).read_autocommit(_two_statements))  # type: ignore[arg-type]
    return result, session


def _async(errors: list[Exception]) -> tuple[list[int], FlakySession]:
    session = FlakyAsyncSession(errors)
    result = asyncio.run(AsyncSession(session).read_autocommit(_two_statements))  # type: ignore[arg-type]
    return result, session


RUNNERS = [pytest.param(_sync, id="sync"), pytest.param(_async, id="async")]


@pytest.mark.parametrize("runner", RUNNERS)
def test_each_statement_is_its_own_auto_commit_transaction(runner: Any) -> None:
    result, session = runner([])
    assert result == [1, 2]
    assert session.sent == ["RETURN 1 AS n", "RETURN 2 AS n"]


@pytest.mark.parametrize("runner", RUNNERS)
def test_a_retryable_failure_runs_the_whole_body_again(runner: Any) -> None:
    result, session = runner([SessionExpired("leader switched"), TransientError("deadlock")])
    # Two failed attempts at the first statement, then the whole body from the start.
    assert session.sent == ["RETURN 1 AS n"] * 3 + ["RETURN 2 AS n"]
    assert result == [3, 4]


@pytest.mark.parametrize("runner", RUNNERS)
def test_a_failure_the_driver_would_not_retry_is_raised_at_once(runner: Any) -> None:
    with pytest.raises(ClientError):
        runner([ClientError("bad statement"), ClientError("never reached")])


@pytest.mark.parametrize("runner", RUNNERS)
def test_retries_stop_when_the_time_allowed_is_spent(
    runner: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(neo4j_tx, "RETRY_FOR_S", 0.0)
    with pytest.raises(SessionExpired):
        runner([SessionExpired("gone")] * 5)


def _torn_then_answer(torn: int) -> tuple[Any, list[int]]:
    """A read body whose rows come back torn ``torn`` times, then whole: what a read of a node
    that a concurrent transaction is deleting or writing sees (some properties, not all)."""
    calls: list[int] = []

    async def body(tx: Tx) -> list[Any]:
        calls.append(1)
        rows = [{"kind": "Note", "namespace": "ns", "id": "n1"}]  # content missing
        if len(calls) > torn:
            rows = [{"kind": "Note", "namespace": "ns", "id": "n1", "content": "kettle"}]
        return [read_memory(r) for r in rows]

    return body, calls


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_a_torn_row_is_read_again_and_a_malformed_one_is_refused(driver: str) -> None:
    def run(body: Any) -> Any:
        if driver == "sync":
            return neo4j_tx.drive(SyncSession(FlakySession([])).read_autocommit(body))  # type: ignore[arg-type]
        return asyncio.run(AsyncSession(FlakyAsyncSession([])).read_autocommit(body))  # type: ignore[arg-type]

    body, calls = _torn_then_answer(2)
    [memory] = run(body)
    assert isinstance(memory, Note) and memory.content == "kettle" and len(calls) == 3
    # A node that reads torn every time is malformed: its own error, after the short re-reads.
    body, calls = _torn_then_answer(10**6)
    with pytest.raises(InvalidInput, match="content"):
        run(body)
    assert len(calls) == len(neo4j_tx.TORN_DELAYS) + 1
    # A row deleted while read (no properties) is no memory and no error.
    assert read_memory({}) is None and read_memory(None) is None


def test_retry_delays_back_off_exponentially_with_bounded_jitter() -> None:
    delays = list(itertools.islice(retry_delays(1.0, 2.0, 0.2), 5))
    for n, delay in enumerate(delays):
        assert 0.8 * 2**n <= delay <= 1.2 * 2**n
    assert retryable(SessionExpired("x")) and retryable(TransientError("x"))
    assert not retryable(ClientError("x")) and not retryable(ValueError("x"))


# ---- the store, against a real server ---------------------------------------------------------


class SpyDriver:
    """A real driver whose sessions record how they were opened and what ran in them."""

    def __init__(self, driver: neo4j.Driver) -> None:
        self._driver = driver
        self.execute_query_bookmark_manager = driver.execute_query_bookmark_manager
        self.modes: list[str] = []
        self.calls: list[str] = []

    def session(self, **kwargs: Any) -> Any:
        self.modes.append(kwargs.get("default_access_mode", neo4j.WRITE_ACCESS))
        spy = self

        class Session:
            def __init__(self, inner: neo4j.Session) -> None:
                self._inner = inner

            def __enter__(self) -> Session:
                return self

            def __exit__(self, *exc: object) -> None:
                self._inner.close()

            def __getattr__(self, name: str) -> Any:
                if name in ("run", "execute_read", "execute_write"):
                    spy.calls.append(name)
                return getattr(self._inner, name)

        return Session(self._driver.session(**kwargs))


@pytest.mark.neo4j
def test_recall_is_one_auto_commit_statement_in_a_read_session(
    neo4j_store: MemoryStore,
) -> None:
    from graphmem.stores.neo4j import Neo4jStore

    assert isinstance(neo4j_store, Neo4jStore)
    ns = unique_namespace()
    vector = [1.0] + [0.0] * (NEO4J_TEST_DIMENSION - 1)
    neo4j_store.upsert([Note(id="n1", namespace=ns, content="kettle", embedding=vector)])
    spy = SpyDriver(neo4j_store.driver)
    store = Neo4jStore(spy, database=neo4j_store._database)  # type: ignore[arg-type]
    try:
        store.recall(ns, vector, 1)  # learns the dimension and the index mode
        spy.modes.clear()
        spy.calls.clear()
        hits = store.recall(ns, vector, 1)
        assert [h.memory.id for h in hits] == ["n1"]
        assert spy.modes == [neo4j.READ_ACCESS]
        # One statement where the index fills k (always on 2026.x); on 5.26 a namespace the
        # shared index's first candidates miss takes a count and an exact scan, each auto-commit.
        assert spy.calls[:1] == ["run"] and set(spy.calls) == {"run"}
    finally:
        drop_namespaces(neo4j_store, ns)


def test_driver_releases_that_stall_concurrent_reads_are_named_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from graphmem.stores.neo4j import ops as neo4j_ops

    neo4j_ops._warn_faulty.cache_clear()
    assert not neo4j_ops.faulty_driver("6.3.1") and not caplog.records
    assert neo4j_ops.faulty_driver("6.4.1") and neo4j_ops.faulty_driver("6.4.1")
    [record] = caplog.records  # once per version: a process has one
    assert "6.4.1" in record.getMessage() and "pip install" in record.getMessage()
    # The driver this project installs is not one of them (constraints.txt pins it).
    assert not neo4j_ops.faulty_driver()


class GivingUpSession(FlakySession):
    """A blocking session whose managed writes fail as the driver reports a retry window spent
    while the server is away (ServiceUnavailable), ``errors`` times, then commit."""

    def execute_write(self, transaction_function: Any) -> Any:
        self.sent.append("write")
        if self.errors:
            raise self.errors.pop(0)
        return "committed"


def test_a_write_the_driver_gave_up_on_is_run_again_until_the_window_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 30: the driver retries a managed write for 30 s, shorter than a restart."""
    from neo4j.exceptions import ServiceUnavailable

    async def body(tx: Tx) -> None:
        return None

    session = GivingUpSession([ServiceUnavailable("restarting")] * 4)
    assert neo4j_tx.drive(SyncSession(session).write(body)) == "committed"  # type: ignore[arg-type]
    assert session.sent == ["write"] * 5
    # A window already spent: the driver's error is raised, not retried.
    session = GivingUpSession([ServiceUnavailable("restarting")] * 4)
    with pytest.raises(ServiceUnavailable):
        neo4j_tx.drive(SyncSession(session, retry_for=0.0).write(body))  # type: ignore[arg-type]
    # An error not worth retrying is raised at once.
    session = GivingUpSession([ClientError("bad statement")])
    with pytest.raises(ClientError):
        neo4j_tx.drive(SyncSession(session).write(body))  # type: ignore[arg-type]
    assert session.sent == ["write"]


def test_the_retry_window_outlasts_a_restart_and_is_configurable() -> None:
    from graphmem.errors import ConfigError
    from graphmem.settings import Settings
    from graphmem.stores.neo4j.tx import RETRY_FOR_S, retry_window

    assert RETRY_FOR_S >= 90  # a restart of 90 s is survived with the defaults
    assert retry_window(None, {}) == RETRY_FOR_S
    assert retry_window(None, {"max_transaction_retry_time": 2.0}) == 2.0
    assert retry_window(300, {"max_transaction_retry_time": 2.0}) == 300.0
    for bad in (0, -1, float("inf"), float("nan"), "60", True):
        with pytest.raises(ConfigError, match="retry window"):
            retry_window(bad, {})
    assert Settings.from_env({}).neo4j_retry_s == RETRY_FOR_S
    assert Settings.from_env({"GRAPHMEM_NEO4J_RETRY_S": "300"}).neo4j_retry_s == 300.0
    for bad in ("0", "-5", "soon", "inf", "nan"):
        with pytest.raises(ConfigError, match="GRAPHMEM_NEO4J_RETRY_S"):
            Settings.from_env({"GRAPHMEM_NEO4J_RETRY_S": bad})
