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
from difflib import SequenceMatcher

from graphmem.keywords import extract_keywords
from graphmem.llm.schemas import (
    Distilled,
    KnowledgeItem,
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


_PREPOSITIONS = frozenset(
    [
        "in",
        "into",
        "on",
        "onto",
        "to",
        "with",
        "from",
        "at",
        "under",
        "inside",
        "through",
        "over",
        "for",
        "using",
    ]
)
EARNED = "earned reward"
COST = "cost reward"


def action_subject(action: str) -> str:
    """What an action acts on: the words after its verb, up to a preposition.

    >>> action_subject("put red apple in fridge"), action_subject("look")
    ('red apple', 'look')
    """
    words = action.split()
    taken: list[str] = []
    for word in words[1:]:
        if word.lower() in _PREPOSITIONS:
            break
        taken.append(word)
    return " ".join(taken or words[:1])


def knowledge(task: str, steps: Sequence[TrajectoryStep], success: bool) -> Distilled:
    """The offline rule of :mod:`graphmem.ops.distill`: each action whose step earned reward
    is a fact about what it acted on (``<action>: earned reward``), one that cost reward the
    opposite, retracting the other. Steps without a reward teach nothing here (a domain's
    distiller or the LLM layer reads them). ``task`` and ``success`` are not needed: a step's
    reward says what the action did wherever it is taken.

    >>> from graphmem.models import TrajectoryStep as S
    >>> out = knowledge("t", [S(action="put mug in sink", reward=-1.0), S(action="look")], False)
    >>> [(k.subject, k.facts, k.retracts) for k in out.notes]
    [('mug', ['put mug in sink: cost reward'], ['put mug in sink: earned reward'])]
    """
    del task, success
    items: dict[str, KnowledgeItem] = {}
    for step in steps:
        if step.reward is None or step.reward == 0:
            continue
        action = " ".join(step.action.split())
        good, bad = (EARNED, COST) if step.reward > 0 else (COST, EARNED)
        subject = action_subject(action)
        item = items.setdefault(subject.casefold(), KnowledgeItem(subject=subject))
        item.facts.append(f"{action}: {good}")
        item.retracts.append(f"{action}: {bad}")
    return Distilled(notes=list(items.values()))


def _norm(action: str) -> str:
    return " ".join(action.lower().split())


def reflect(
    task: str,
    failed_steps: Sequence[TrajectoryStep],
    successful_steps: Sequence[TrajectoryStep] | None = None,
) -> Reflection:
    """Rule-based reflection on a failed attempt.

    With a successful procedure of a similar task, the two are aligned (numbers abstracted, so
    "mug 1" matches "mug 2") and the first step of the success that the attempt left out or did
    differently is the lesson ("prefer" it; corrected steps = the successful actions); steps
    the attempt added ("look") are blamed only when nothing was missing or wrong. Without one,
    or when the attempt did exactly what succeeded: the action the agent got stuck repeating,
    else the last action before failure ("avoid").

    >>> from graphmem.models import TrajectoryStep as S
    >>> good = [S(action=a) for a in ("take mug 1", "clean mug 1", "put mug 1 in machine")]
    >>> bad = [S(action=a) for a in ("take mug 2", "put mug 2 in machine", "look")]
    >>> print(reflect("make coffee", bad, good).tip)
    For tasks like 'make coffee': do 'clean mug 1' after 'take mug 2'; the attempt left it out.
    """
    goal = one_sentence(task, 120)
    if successful_steps:
        found = _against_reference(goal, failed_steps, successful_steps)
        if found is not None:
            return found
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


def _against_reference(
    goal: str,
    failed_steps: Sequence[TrajectoryStep],
    successful_steps: Sequence[TrajectoryStep],
) -> Reflection | None:
    """The first step a successful procedure has and the attempt missed or got wrong, else the
    first step the attempt added; None when the two did the same."""
    good = [_flat(s.action) for s in successful_steps if s.action.strip()]
    bad = [_flat(s.action) for s in failed_steps]
    if not good:
        return None
    matcher = SequenceMatcher(
        a=[_match_key(a) for a in bad], b=[_match_key(a) for a in good], autojunk=False
    )
    opcodes = [op for op in matcher.get_opcodes() if op[0] != "equal"]
    last = max(0, len(bad) - 1)
    for tag, i1, _, j1, _ in opcodes:
        if tag == "insert":  # the success did good[j1] here; the attempt never did
            where = f" after '{bad[i1 - 1]}'" if i1 > 0 else " first"
            return Reflection(
                tip=f"For tasks like '{goal}': do '{good[j1]}'{where}; the attempt left it out.",
                polarity="prefer",
                failed_step=min(i1, last) if bad else None,
                corrected_steps=good,
            )
        if tag == "replace":
            return Reflection(
                tip=(
                    f"For tasks like '{goal}': at step {i1 + 1}, do '{good[j1]}' instead of "
                    f"'{bad[i1]}'."
                ),
                polarity="prefer",
                failed_step=i1,
                corrected_steps=good,
            )
    for _, i1, _, _, _ in opcodes:  # only additions are left
        return Reflection(
            tip=(
                f"For tasks like '{goal}': '{bad[i1]}' (step {i1 + 1}) is not part of what "
                "succeeded; leave it out."
            ),
            polarity="avoid",
            failed_step=i1,
            corrected_steps=good,
        )
    return None


def _flat(text: str) -> str:
    return " ".join(text.split())


def _match_key(action: str) -> str:
    """What two actions must share to count as the same step: case, spacing and numbers aside."""
    return parameterise(action).lower()


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
