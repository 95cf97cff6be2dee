"""One deadline and one size bound per chat request, down at the socket.

Why and how, in full: docs/design.md, "Module notes", ``graphmem.llm.transport``.

>>> with request_limits(5.0, max_bytes=1000) as limits:
...     0 < limits.remaining() <= 5.0
True
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import httpcore
import httpx


class ReplyTooLarge(Exception):
    """The reply outgrew its byte bound; the connection was closed before the rest arrived."""


@dataclass
class RequestLimits:
    """The bounds of the request in progress: a deadline (``time.monotonic``) and a byte cap."""

    seconds: float
    deadline: float
    max_bytes: int | None
    received: int = 0

    def remaining(self) -> float:
        return self.deadline - time.monotonic()


_LIMITS: ContextVar[RequestLimits | None] = ContextVar("graphmem_llm_limits", default=None)


@contextmanager
def request_limits(seconds: float, max_bytes: int | None = None) -> Iterator[RequestLimits]:
    """Bound the HTTP request(s) made inside the block: ``seconds`` in all, ``max_bytes`` read."""
    limits = RequestLimits(seconds, time.monotonic() + seconds, max_bytes)
    token = _LIMITS.set(limits)
    try:
        yield limits
    finally:
        _LIMITS.reset(token)


def _timeout(timeout: float | None, error: type[Exception]) -> float | None:
    """The socket timeout to use now: the caller's, cut to what is left of the deadline."""
    limits = _LIMITS.get()
    if limits is None:
        return timeout
    left = limits.remaining()
    if left <= 0:
        raise error(f"no complete reply within the {limits.seconds:g} s deadline")
    return left if timeout is None else min(timeout, left)


class _Stream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        data = self._inner.read(max_bytes, _timeout(timeout, httpcore.ReadTimeout))
        limits = _LIMITS.get()
        if limits is not None and limits.max_bytes is not None:
            limits.received += len(data)
            if limits.received > limits.max_bytes:
                raise ReplyTooLarge(
                    f"the reply is over {limits.max_bytes:,} bytes, more than the token cap "
                    "allows (GRAPHMEM_LLM_MAX_TOKENS); the server may ignore max_tokens"
                )
        return data

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _timeout(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        wait = _timeout(timeout, httpcore.ConnectTimeout)
        return _Stream(self._inner.start_tls(ssl_context, server_hostname, wait))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _Backend(httpcore.NetworkBackend):
    def __init__(self) -> None:
        self._inner = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        wait = _timeout(timeout, httpcore.ConnectTimeout)
        return _Stream(self._inner.connect_tcp(host, port, wait, local_address, socket_options))

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        wait = _timeout(timeout, httpcore.ConnectTimeout)
        return _Stream(self._inner.connect_unix_socket(path, wait, socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class _Transport(httpx.HTTPTransport):
    """httpx's transport on a connection pool whose sockets honour :func:`request_limits`."""

    def __init__(self) -> None:
        super().__init__()
        limits = httpx.Limits()
        self._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(),
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=_Backend(),
        )


def bounded_http_client(timeout: float) -> httpx.Client:
    """An ``httpx.Client`` for ``ChatOpenAI(http_client=...)`` whose requests honour
    :func:`request_limits` (``timeout`` still bounds each socket operation outside them)."""
    return httpx.Client(transport=_Transport(), timeout=timeout, follow_redirects=True)


def too_large(error: BaseException) -> ReplyTooLarge | None:
    """The :class:`ReplyTooLarge` behind ``error`` (SDKs wrap it), else None."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, ReplyTooLarge):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None
