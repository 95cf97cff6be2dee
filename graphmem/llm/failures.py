"""What a failed chat request means: retry it, stop using the endpoint, or step down a mode.

Provider SDKs raise their own error classes; these are read by duck typing (``status_code``,
class names) so graphmem needs no provider package to understand them. Each failure gets a
one-line message that says what to fix where one can be told.

>>> describe(TimeoutError("read timed out"), base_url="http://127.0.0.1:8080/v1").kind
'timeout'
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ValidationError

from graphmem.llm.transport import too_large
from graphmem.stores.neo4j.uri import redact_uri, shown_uri

FailureKind = Literal["permanent", "timeout", "connection", "transient", "too_large"]

PERMANENT_STATUS = (401, 403, 404)
"""Statuses no retry can fix: wrong key, no access, wrong URL or model."""


@dataclass(frozen=True)
class Failure:
    """One failed request: its kind, HTTP status (if any) and a one-line message."""

    kind: FailureKind
    status: int | None
    message: str
    cut: bool = False
    """The reply arrived but was cut at the token cap (an SDK refused to parse it)."""

    @property
    def permanent(self) -> bool:
        return self.kind == "permanent"


def short(error: BaseException, limit: int = 300) -> str:
    """One line of at most ``limit`` characters about ``error``."""
    if isinstance(error, ValidationError):
        text = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'reply'}: {err['msg']}"
            for err in error.errors()
        )
    else:
        text = " ".join(str(error).split())
    return text if len(text) <= limit else text[:limit] + "…"


def status_of(error: BaseException) -> int | None:
    status = getattr(error, "status_code", None)
    if isinstance(status, int):
        return status
    response = getattr(error, "response", None)
    status = getattr(response, "status_code", None)
    return status if isinstance(status, int) else None


def _names(error: BaseException) -> str:
    return " ".join(cls.__name__ for cls in type(error).__mro__).lower()


def describe(error: BaseException, *, base_url: str | None = None, model: str = "") -> Failure:
    """Classify ``error`` and say, in one line, what happened and what to fix (a secret in the
    base URL is masked)."""
    base_url = shown_uri(base_url) if base_url else base_url
    status = status_of(error)
    what = f"{type(error).__name__}: {redact_uri(short(error, 200))}"
    names = _names(error)
    big = too_large(error)
    if big is not None:
        return Failure("too_large", status, short(big, 200))
    if "lengthfinishreason" in names:
        return Failure("transient", status, what, cut=True)
    if status in PERMANENT_STATUS:
        return Failure("permanent", status, f"{what} ({_hint(status, base_url, model)})")
    if "timeout" in names or isinstance(error, TimeoutError):
        return Failure("timeout", status, f"{what} (no whole reply within the request's "
                       "deadline: raise GRAPHMEM_LLM_TIMEOUT, or check the server)")  # fmt: skip
    if status is None and "connection" in names:
        where = f" {base_url}" if base_url else ""
        return Failure("connection", None, f"{what} (cannot reach{where}: is the server up?)")
    return Failure("transient", status, what)


def _hint(status: int | None, base_url: str | None, model: str) -> str:
    if status == 401:
        return "the server refused the API key: set GRAPHMEM_LLM_API_KEY"
    if status == 403:
        return "the API key may not use this model or endpoint"
    url = (base_url or "").rstrip("/")
    if url and not url.endswith("/v1"):
        return f"the base URL {url} does not end in /v1; OpenAI-compatible servers serve /v1"
    return (
        f"no such endpoint or model: check GRAPHMEM_LLM_BASE_URL ({url or 'unset'}) and "
        f"GRAPHMEM_LLM_MODEL ({model or 'unset'})"
    )


def reported_usage(error: BaseException) -> tuple[int, int]:
    """(prompt, completion) tokens a failed request's error still reports, else (0, 0).

    An HTTP error body may carry ``usage``; an SDK error raised after a reply was received
    (e.g. the reply was cut at the token cap) may hold the completion with its usage.
    """
    for holder in (getattr(error, "completion", None), getattr(error, "body", None)):
        usage = holder.get("usage") if isinstance(holder, dict) else getattr(holder, "usage", None)
        found = _tokens(usage)
        if found != (0, 0):
            return found
    response = getattr(error, "response", None)
    try:
        body = json.loads(getattr(response, "text", "") or "{}")
    except (ValueError, TypeError):
        return 0, 0
    return _tokens(body.get("usage") if isinstance(body, dict) else None)


def _tokens(usage: Any) -> tuple[int, int]:
    if usage is None:
        return 0, 0
    get = usage.get if isinstance(usage, dict) else lambda k, d=None: getattr(usage, k, d)
    try:
        return int(get("prompt_tokens", 0) or 0), int(get("completion_tokens", 0) or 0)
    except (TypeError, ValueError):
        return 0, 0


def partial_reply(error: BaseException) -> str:
    """The text of a reply an SDK received but refused (cut at the token cap), else ''."""
    try:
        content = error.completion.choices[0].message.content  # type: ignore[attr-defined]
    except (AttributeError, IndexError, TypeError):
        return ""
    return content if isinstance(content, str) else ""
