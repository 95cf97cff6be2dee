"""Every LLM step of graphmem goes through :func:`with_fallback`: model first, rules on failure.

- no model configured → the deterministic fallback answers (``created_by="fallback"``);
- text copied verbatim (steps, a query key, caller-given fields) is ``"fallback"`` too: no model
  wrote it (:func:`producer`);
- the model answers with valid output → its answer (``created_by=<model name>``);
- the model keeps failing (or the call budget is spent) → ``LLMError`` if the model was built
  with ``fallback=False``, else a warning is logged and the fallback answers.

The named helpers below (``note_fields``, ``task_keywords``, ...) are what operation modules call.

>>> task_keywords(None, "Put a clean apple in the fridge").value[:2]
['put', 'clean']
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

from graphmem.errors import LLMError
from graphmem.llm import fallbacks
from graphmem.llm.schemas import (
    Distilled,
    LinkDecisions,
    Neighbour,
    NoteFields,
    Reflection,
    Script,
)
from graphmem.llm.usage import CallBudget
from graphmem.models import TrajectoryStep

if TYPE_CHECKING:
    from graphmem.llm.client import MemoryLLM

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class Produced(Generic[T]):
    """An operation's output and who produced it (``created_by`` of memories made from it)."""

    value: T
    created_by: str

    @property
    def by_model(self) -> bool:
        return self.created_by != fallbacks.FALLBACK


def producer(llm: MemoryLLM | None) -> str:
    """``created_by`` for memories an operation copies verbatim (no model output in them).

    ``created_by`` names a model only where that model's output is in the memory, so a copy of
    the caller's text is ``"fallback"`` whether or not a model is configured (and whether or
    not it answered). ``llm`` is taken so that call sites read the same either way.
    """
    del llm
    return fallbacks.FALLBACK


def with_fallback(
    llm: MemoryLLM | None,
    op: str,
    call: Callable[[MemoryLLM], T],
    fallback: Callable[[], T],
) -> Produced[T]:
    """``call(llm)``, or ``fallback()`` without a model or after persistent failure."""
    if llm is None:
        return Produced(fallback(), fallbacks.FALLBACK)
    try:
        return Produced(call(llm), llm.name)
    except LLMError as e:
        if not llm.fallback:
            raise
        llm.usage.record_fallback()
        log.warning("%s: using the offline fallback (%s)", op, e)
        return Produced(fallback(), fallbacks.FALLBACK)


def note_fields(
    llm: MemoryLLM | None, text: str, budget: CallBudget | None = None
) -> Produced[NoteFields]:
    return with_fallback(
        llm,
        "extract_note_fields",
        lambda m: m.extract_note_fields(text, budget=budget),
        lambda: fallbacks.note_fields(text),
    )


def task_keywords(
    llm: MemoryLLM | None, task_text: str, budget: CallBudget | None = None
) -> Produced[list[str]]:
    return with_fallback(
        llm,
        "extract_keywords",
        lambda m: m.extract_keywords(task_text, budget=budget),
        lambda: fallbacks.task_keywords(task_text),
    )


def distill_script(
    llm: MemoryLLM | None,
    task: str,
    steps: Sequence[TrajectoryStep],
    success: bool,
    budget: CallBudget | None = None,
) -> Produced[Script]:
    return with_fallback(
        llm,
        "distill_script",
        lambda m: m.distill_script(task, steps, success, budget=budget),
        lambda: fallbacks.script(task, steps, success),
    )


def distill_knowledge(
    llm: MemoryLLM | None,
    task: str,
    steps: Sequence[TrajectoryStep],
    success: bool,
    budget: CallBudget | None = None,
) -> Produced[Distilled]:
    return with_fallback(
        llm,
        "distill_knowledge",
        lambda m: m.distill_knowledge(task, steps, success, budget=budget),
        lambda: fallbacks.knowledge(task, steps, success),
    )


def reflect(
    llm: MemoryLLM | None,
    task: str,
    failed_steps: Sequence[TrajectoryStep],
    successful_steps: Sequence[TrajectoryStep] | None = None,
    budget: CallBudget | None = None,
) -> Produced[Reflection]:
    return with_fallback(
        llm,
        "reflect",
        lambda m: m.reflect(task, failed_steps, successful_steps, budget=budget),
        lambda: fallbacks.reflect(task, failed_steps, successful_steps),
    )


def decide_links(
    llm: MemoryLLM | None,
    memory_text: str,
    neighbours: Sequence[Neighbour],
    budget: CallBudget | None = None,
    threshold: float = fallbacks.DEFAULT_LINK_THRESHOLD,
) -> Produced[LinkDecisions]:
    """``threshold`` only applies to the fallback (the model judges relatedness itself)."""
    return with_fallback(
        llm,
        "decide_links",
        lambda m: m.decide_links(memory_text, neighbours, budget=budget),
        lambda: fallbacks.decide_links(memory_text, neighbours, threshold),
    )
