"""Deterministic stand-ins for every LLM operation: graphmem works offline through these.

They return the same output models as :class:`~graphmem.llm.MemoryLLM`, so callers never care
which one answered. Same input, same output, always.

>>> from graphmem.models import TrajectoryStep as S
>>> print(script("open the box", [S(action="go to box 1"), S(action="go to box 2"),
...                               S(action="open box 2")], success=True).text())
1. go to box <n> (repeat as needed)
2. open box <n>
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from graphmem.keywords import extract_keywords
from graphmem.llm.schemas import (
    LinkChoice,
    LinkDecisions,
    Neighbour,
    NoteFields,
    Reflection,
    Script,
)
from graphmem.models import TrajectoryStep

FALLBACK = "fallback"
"""``created_by`` of memories whose LLM-derived fields came from these rules."""

DEFAULT_LINK_THRESHOLD = 0.5
MAX_CONTEXT_CHARS = 200

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])")
_QUOTED = re.compile(r"\"[^\"]{1,200}\"|'[^']{1,200}'")

# (category, cue words): first match wins, so more specific categories come first.
_CATEGORY_CUES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("lesson", ("avoid", "don't", "never", "mistake", "failed", "fail", "error", "instead")),
    ("preference", ("prefer", "prefers", "favourite", "favorite", "likes", "dislikes", "hate")),
    ("procedure", ("step", "first", "then", "next", "finally", "how to", "to do")),
    ("event", ("yesterday", "today", "tomorrow", "meeting", "happened", "visited", "went")),
)


def one_sentence(text: str, limit: int = MAX_CONTEXT_CHARS) -> str:
    """The first sentence of ``text``, cut at a word boundary to ``limit`` characters."""
    flat = " ".join(text.split())
    first = _SENTENCE_END.split(flat, maxsplit=1)[0] if flat else ""
    if len(first) > limit:
        first = first[:limit].rsplit(" ", 1)[0].rstrip(",;:") + "…"
    return first


def category(text: str) -> str:
    """A one-word category from cue words; ``question`` for questions, else ``fact``."""
    lower = " ".join(text.lower().split())
    words = set(re.findall(r"[a-z']+", lower))
    if re.match(r"^\s*(?:\d+[.)]|-|\*)\s", text) or re.search(r"\n\s*\d+[.)]\s", text):
        return "procedure"
    for name, cues in _CATEGORY_CUES:
        if any((cue in lower) if " " in cue else (cue in words) for cue in cues):
            return name
    if lower.rstrip().endswith("?"):
        return "question"
    return "fact"


def note_fields(text: str) -> NoteFields:
    """Keywords (content words ranked by frequency and position), tags, context, category."""
    keywords = extract_keywords(text, 6) or ["note"]
    cat = category(text)
    tags = [cat, *keywords[:2]]
    context = one_sentence(text) or keywords[0]
    return NoteFields(keywords=keywords, tags=tags, context=context, category=cat)


def task_keywords(task_text: str) -> list[str]:
    """The AveFact key offline: the task's top content words (the task's words if none)."""
    return extract_keywords(task_text) or [" ".join(task_text.split())[:100] or "task"]


def parameterise(action: str) -> str:
    """Abstract the obvious one-off parts of an action: quoted strings and numbers."""
    action = " ".join(action.split())
    action = _QUOTED.sub("<text>", action)
    return _NUMBER.sub("<n>", action)


def script(task: str, steps: Sequence[TrajectoryStep], success: bool) -> Script:
    """A templated script: parameterised actions, consecutive repeats collapsed, in order."""
    lines: list[str] = []
    counts: list[int] = []
    for step in steps:
        action = parameterise(step.action)
        if not action:
            continue
        if lines and lines[-1] == action:
            counts[-1] += 1
        else:
            lines.append(action)
            counts.append(1)
    out = [f"{a} (repeat as needed)" if n > 1 else a for a, n in zip(lines, counts, strict=True)]
    if not out:
        out = [f"work on: {one_sentence(task)}"]
    notes = ""
    if not success:
        last = " ".join(steps[-1].action.split()) if steps else "(nothing)"
        notes = f"this sequence did not complete the task; it ended with '{last}'."
    return Script(steps=out, notes=notes)


def _norm(action: str) -> str:
    return " ".join(action.lower().split())


def reflect(
    task: str,
    failed_steps: Sequence[TrajectoryStep],
    successful_steps: Sequence[TrajectoryStep] | None = None,
) -> Reflection:
    """Rule-based reflection on a failed attempt.

    With a successful attempt at a similar task: the first step where the two went different
    ways ("prefer" the successful action, corrected steps = the successful actions). Without
    one: the action the agent got stuck repeating, else the last action before failure ("avoid").
    """
    goal = one_sentence(task, 120)
    if successful_steps:
        good = [s.action for s in successful_steps]
        for i, good_action in enumerate(good):
            bad = failed_steps[i].action if i < len(failed_steps) else None
            if bad is None or _norm(bad) != _norm(good_action):
                instead = f" instead of '{' '.join(bad.split())}'" if bad is not None else ""
                return Reflection(
                    tip=(
                        f"For tasks like '{goal}': at step {i + 1}, do "
                        f"'{' '.join(good_action.split())}'{instead}."
                    ),
                    polarity="prefer",
                    failed_step=min(i, max(0, len(failed_steps) - 1)) if failed_steps else None,
                    corrected_steps=good,
                )
        # Same actions throughout: the failure came from something after the shared prefix.
        i = len(good)
        if i < len(failed_steps):
            extra = " ".join(failed_steps[i].action.split())
            return Reflection(
                tip=f"For tasks like '{goal}': stop after step {i}; '{extra}' was not needed.",
                polarity="avoid",
                failed_step=i,
                corrected_steps=good,
            )
    if not failed_steps:
        return Reflection(
            tip=f"For tasks like '{goal}': the attempt took no action; start by exploring.",
            polarity="prefer",
        )
    counts: dict[str, int] = {}
    for s in failed_steps:
        counts[_norm(s.action)] = counts.get(_norm(s.action), 0) + 1
    repeated, times = max(counts.items(), key=lambda kv: kv[1])
    if times >= 3 and times * 3 >= len(failed_steps):
        index = next(i for i, s in enumerate(failed_steps) if _norm(s.action) == repeated)
        return Reflection(
            tip=(
                f"For tasks like '{goal}': avoid repeating '{repeated}' ({times} times without "
                "progress); try a different action."
            ),
            polarity="avoid",
            failed_step=index,
        )
    last = failed_steps[-1]
    seen = f" (it led to: '{one_sentence(last.observation, 120)}')" if last.observation else ""
    return Reflection(
        tip=f"For tasks like '{goal}': '{' '.join(last.action.split())}' did not work{seen}.",
        polarity="avoid",
        failed_step=len(failed_steps) - 1,
    )


def decide_links(
    memory_text: str,
    neighbours: Sequence[Neighbour],
    threshold: float = DEFAULT_LINK_THRESHOLD,
) -> LinkDecisions:
    """Link every neighbour at least ``threshold`` similar; refresh none.

    Rewriting neighbours' context without a model would only churn versions, so the offline
    rule leaves neighbours as they are.
    """
    del memory_text  # the similarity already summarises it offline
    links = [
        LinkChoice(id=n.id, reason=f"similar content (sim={n.sim:.2f})", strength=_unit(n.sim))
        for n in neighbours
        if n.sim >= threshold
    ]
    return LinkDecisions(links=links)


def _unit(x: float) -> float:
    return round(min(1.0, max(0.0, x)), 4)
