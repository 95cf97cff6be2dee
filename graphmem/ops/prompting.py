"""Retrieved memories as text for an agent's prompt.

Procedures show their script and their steps as a numbered list (walked along the
FIRST_STEP / NEXT chain in the store), notes show their context, tips their polarity.

>>> from graphmem.models import Hit, Tip
>>> tip = Tip(namespace="demo", text="Check the drawer before the shelf.", polarity="prefer")
>>> print(format_hits([Hit(memory=tip, rank=0, sim=0.9, q=0.5, score=0.0)], None, "demo"))
Relevant memories from past experience (most useful first):
<BLANKLINE>
1. Tip (prefer): Check the drawer before the shelf.
"""

from __future__ import annotations

from collections.abc import Sequence

from graphmem.models import (
    AnyMemory,
    EdgeKind,
    Episode,
    Hit,
    Namespace,
    Note,
    Procedure,
    Step,
    Task,
    Tip,
    TipPolarity,
)
from graphmem.stores.base import MemoryStore

DEFAULT_HEADER = "Relevant memories from past experience (most useful first):"
MAX_FIELD_CHARS = 2000
"""Longest text of one field put in a prompt; longer text is cut with an ellipsis."""
MAX_OBSERVATION_CHARS = 200


def format_hits(
    hits: Sequence[Hit],
    store: MemoryStore | None,
    namespace: Namespace,
    *,
    header: str | None = None,
    max_steps: int = 50,
) -> str:
    """Numbered, prompt-ready text for ``hits``; without a store, procedures show no steps."""
    if not hits:
        return ""
    blocks = [header if header is not None else DEFAULT_HEADER]
    for n, hit in enumerate(hits, start=1):
        lines = format_memory(hit.memory, store, namespace, max_steps=max_steps)
        blocks.append("\n".join([f"{n}. {lines[0]}", *("   " + line for line in lines[1:])]))
    return "\n\n".join(blocks)


def format_memory(
    memory: AnyMemory, store: MemoryStore | None, namespace: Namespace, *, max_steps: int = 50
) -> list[str]:
    """One memory as prompt lines (the first is its title line)."""
    if isinstance(memory, Procedure):
        return _procedure(memory, store, namespace, max_steps)
    if isinstance(memory, Note):
        head = "Note (a newer note updates this one)" if memory.updated_by else "Note"
        lines = [f"{head}: {_cut(memory.content)}"]
        if memory.context:
            lines.append(f"Context: {_cut(memory.context)}")
        if memory.keywords:
            lines.append(f"Keywords: {', '.join(memory.keywords)}")
        return lines
    if isinstance(memory, Tip):
        verb = "avoid" if memory.polarity is TipPolarity.AVOID else "prefer"
        lines = [f"Tip ({verb}): {_cut(memory.text)}"]
        if memory.task_text:
            lines.append(f"From the task: {_cut(memory.task_text)}")
        return lines
    if isinstance(memory, Task):
        return [f"Task seen before: {_cut(memory.text)}"]
    if isinstance(memory, Step):
        return [f"Step: {_step_text(memory)}"]
    if isinstance(memory, Episode):
        outcome = "" if memory.reward is None else f" (reward {memory.reward:g})"
        return [f"Past episode: {_cut(memory.task_text)}{outcome}"]
    raise AssertionError(f"unhandled memory kind {memory.kind}")  # pragma: no cover


def procedure_steps(
    store: MemoryStore, namespace: Namespace, procedure_id: str, *, limit: int = 1000
) -> list[Step]:
    """A procedure's steps in order, walking FIRST_STEP then NEXT (cycle-safe, ``limit`` long).

    A distilled script without steps of its own (proceduralization: script + trajectory) shows
    the steps of the trajectory it was DISTILLED_FROM.
    """
    ids: list[str] = []
    seen: set[str] = set()
    edges = store.edges(namespace, procedure_id, kinds=[EdgeKind.FIRST_STEP], direction="out")
    if not edges:
        sources = store.edges(
            namespace, procedure_id, kinds=[EdgeKind.DISTILLED_FROM], direction="out"
        )
        if sources:
            source = min(sources, key=lambda e: e.dst).dst
            edges = store.edges(namespace, source, kinds=[EdgeKind.FIRST_STEP], direction="out")
    while edges and len(ids) < limit:
        nxt = min(edges, key=lambda e: e.dst).dst
        if nxt in seen:
            break
        seen.add(nxt)
        ids.append(nxt)
        edges = store.edges(namespace, nxt, kinds=[EdgeKind.NEXT], direction="out")
    return [m for m in store.get_many(namespace, ids) if isinstance(m, Step)]


def _procedure(
    proc: Procedure, store: MemoryStore | None, namespace: Namespace, max_steps: int
) -> list[str]:
    outcome = "succeeded" if proc.success else "failed"
    lines = [f"Procedure for: {_cut(proc.task_text)} ({outcome}, reward {proc.reward:g})"]
    if proc.script:
        lines.append("Script:")
        lines += ["  " + line for line in _cut(proc.script).splitlines() if line.strip()]
    steps = procedure_steps(store, namespace, proc.id, limit=max_steps + 1) if store else []
    if steps:
        lines.append("Steps:")
        lines += [f"  {i}. {_step_text(s)}" for i, s in enumerate(steps[:max_steps], start=1)]
        if len(steps) > max_steps or proc.n_steps > max_steps:
            lines.append(f"  ... ({max(proc.n_steps, len(steps)) - max_steps} more steps)")
    return lines


def _step_text(step: Step) -> str:
    text = _cut(step.action)
    if step.observation:
        text += f" -> {_cut(step.observation, MAX_OBSERVATION_CHARS)}"
    return text


def _cut(text: str, limit: int = MAX_FIELD_CHARS) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
