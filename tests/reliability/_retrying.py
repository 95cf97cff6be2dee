"""A client thread that keeps working through a Neo4j server's death and restart.

The fault tests kill the server with SIGKILL while such a thread writes or credits; the thread
retries every :class:`~graphmem.errors.StoreError` with capped exponential back-off until its
deadline and records what was acknowledged, so a test can check that nothing acknowledged was
lost and nothing was applied twice.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from graphmem.errors import StoreError

if TYPE_CHECKING:
    from graphmem.stores.neo4j import Neo4jStore

T = TypeVar("T")


class RetryingClient(threading.Thread):
    """Runs :meth:`work` on its own store, retrying each call until ``deadline``; records the
    failed attempts, the longest outage it saw and any error that ended it."""

    def __init__(self, uri: str, password: str, namespace: str, deadline: float) -> None:
        super().__init__(daemon=True)
        self.uri, self.password, self.ns, self.deadline = uri, password, namespace, deadline
        self.acked: list[str] = []
        self.failures: list[str] = []
        self.error: BaseException | None = None
        self.longest_outage = 0.0

    def retry(self, call: Callable[[], T]) -> T:
        delay, first_failure = 0.1, None
        while True:
            try:
                result = call()
            except StoreError as e:
                self.failures.append(str(e))
                first_failure = first_failure or time.monotonic()
                if time.monotonic() > self.deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 2.0)
                continue
            if first_failure is not None:
                self.longest_outage = max(self.longest_outage, time.monotonic() - first_failure)
            return result

    def run(self) -> None:
        from graphmem.stores.neo4j import Neo4jStore

        try:
            # Short driver-level retry and timeouts: the loop here does the long retrying.
            store = self.retry(
                lambda: Neo4jStore.from_uri(
                    self.uri,
                    "neo4j",
                    self.password,
                    max_transaction_retry_time=2.0,
                    connection_timeout=2.0,
                    connection_acquisition_timeout=5.0,
                )
            )
            try:
                self.work(store)
            finally:
                store.close()
        except BaseException as e:
            self.error = e

    def work(self, store: Neo4jStore) -> None:
        raise NotImplementedError
