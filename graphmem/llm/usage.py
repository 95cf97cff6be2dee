"""Counting what the chat model cost, and capping how many calls one operation may make.

>>> budget = CallBudget(2)
>>> budget.take(), budget.take(), budget.remaining
(True, True, 0)
>>> budget.take()
False
"""

from __future__ import annotations

import threading
from typing import Any

from pydantic import BaseModel, Field


class UsageSnapshot(BaseModel):
    """Totals at one moment (what ``MemoryLLM.usage`` reports)."""

    calls: int = Field(default=0, description="Chat-model requests made (failed ones too).")
    prompt_tokens: int = Field(default=0, description="Input tokens, from usage metadata.")
    completion_tokens: int = Field(default=0, description="Output tokens, from usage metadata.")
    failures: int = Field(default=0, description="Requests that failed or returned invalid output.")
    fallbacks: int = Field(default=0, description="Operations answered by the offline fallback.")
    uncounted: int = Field(
        default=0,
        description="Requests whose tokens the server never reported (timed out, cut off by "
        "graphmem, or a chat model without usage metadata): the token counts miss them.",
    )

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def summary(self) -> str:
        """One line for the end of a run.

        >>> UsageSnapshot(calls=3, prompt_tokens=1200, completion_tokens=80, failures=1).summary()
        '3 requests (1 failed), 1,200 prompt + 80 completion tokens, 0 fallbacks'
        """
        failed = f" ({self.failures} failed)" if self.failures else ""
        unknown = f" (tokens of {self.uncounted:,} not reported)" if self.uncounted else ""
        return (
            f"{self.calls:,} requests{failed}, {self.prompt_tokens:,} prompt + "
            f"{self.completion_tokens:,} completion tokens{unknown}, {self.fallbacks:,} fallbacks"
        )


class LLMUsage:
    """Thread-safe running totals of LLM calls and tokens."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._totals = UsageSnapshot()

    def record_call(
        self, prompt_tokens: int, completion_tokens: int, *, counted: bool = True
    ) -> None:
        """One request; ``counted=False`` when the server reported no tokens for it."""
        with self._lock:
            t = self._totals
            t.calls += 1
            t.uncounted += 0 if counted else 1
            t.prompt_tokens += max(0, prompt_tokens)
            t.completion_tokens += max(0, completion_tokens)

    def record_failure(self) -> None:
        with self._lock:
            self._totals.failures += 1

    def record_fallback(self) -> None:
        with self._lock:
            self._totals.fallbacks += 1

    def snapshot(self) -> UsageSnapshot:
        with self._lock:
            return self._totals.model_copy()

    def reset(self) -> None:
        with self._lock:
            self._totals = UsageSnapshot()

    @property
    def calls(self) -> int:
        return self.snapshot().calls

    @property
    def prompt_tokens(self) -> int:
        return self.snapshot().prompt_tokens

    @property
    def completion_tokens(self) -> int:
        return self.snapshot().completion_tokens

    @property
    def failures(self) -> int:
        return self.snapshot().failures

    @property
    def fallbacks(self) -> int:
        return self.snapshot().fallbacks

    @property
    def uncounted(self) -> int:
        return self.snapshot().uncounted

    def __repr__(self) -> str:
        s = self.snapshot()
        return (
            f"LLMUsage(calls={s.calls}, prompt_tokens={s.prompt_tokens}, "
            f"completion_tokens={s.completion_tokens}, failures={s.failures}, "
            f"fallbacks={s.fallbacks}, uncounted={s.uncounted})"
        )


class CallBudget:
    """A cap on chat-model requests for one graphmem operation (retries included)."""

    def __init__(self, max_calls: int) -> None:
        self.max_calls = max(0, int(max_calls))
        self._used = 0
        self._lock = threading.Lock()

    def take(self) -> bool:
        """Reserve one call; False when the budget is spent."""
        with self._lock:
            if self._used >= self.max_calls:
                return False
            self._used += 1
            return True

    def refund(self) -> None:
        """Give back one call: a request the server refused before generating anything
        (an output mode it does not take) is counted in usage, not against the operation."""
        with self._lock:
            self._used = max(0, self._used - 1)

    @property
    def used(self) -> int:
        return self._used

    @property
    def remaining(self) -> int:
        return self.max_calls - self._used

    def __repr__(self) -> str:
        return f"CallBudget(used={self._used}, max_calls={self.max_calls})"


def token_usage(message: Any) -> tuple[int, int]:
    """(prompt, completion) tokens of an AIMessage: usage_metadata, else OpenAI's token_usage."""
    meta = getattr(message, "usage_metadata", None)
    if meta:
        return int(meta.get("input_tokens", 0) or 0), int(meta.get("output_tokens", 0) or 0)
    raw = (getattr(message, "response_metadata", None) or {}).get("token_usage") or {}
    return int(raw.get("prompt_tokens", 0) or 0), int(raw.get("completion_tokens", 0) or 0)
