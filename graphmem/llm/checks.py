"""Content checks: a model reply that passes its schema but is worse than the fallback is refused.

Why and how, in full: docs/design.md, "Module notes", ``graphmem.llm.checks``.

>>> script_check("take the key", ["take key", "open door"], success=True)(
...     Script(steps=["take the key", "open the door"]))
>>> tip_check(["take key", "open door"], "leave the hall")(
...     Reflection(tip="try again with another step", polarity="avoid"))
Traceback (most recent call last):
...
graphmem.llm.parsing.InvalidOutput: the tip names no step or object of the attempt (...)
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

from graphmem.keywords import content_words
from graphmem.llm.parsing import InvalidOutput
from graphmem.llm.schemas import LinkDecisions, Neighbour, NoteFields, Reflection, Script

MIN_CONTEXT_WORDS = 4
"""A context sentence shorter than this ("keys", "door key") says less than the fallback's."""

_MARKUP = re.compile(
    r"^\s*(?:[\[\]{}<>|#`]|(?:action|observation|thought|task|outcome|trajectory|notes?|steps?|"
    r"shape|tip|polarity|failed_step|corrected_steps|context|keywords|tags|category)\s*:)"
    r"|<\|[a-z_]+\|>|</?s>",
    re.IGNORECASE,
)
"""Prompt markup a small model copies: step markers, field labels, chat-template tokens."""


def markup(text: str, what: str) -> None:
    """Refuse ``text`` when it carries prompt markup."""
    if _MARKUP.search(text):
        raise InvalidOutput(f"{what} {text[:60]!r} copies prompt markup instead of answering")


_GENERIC = frozenset(
    {"go", "look", "around", "try", "again", "step", "steps", "action", "actions", "another"}
    | {"task", "attempt", "next", "different", "thing", "things", "something", "instead"}
    | {"first", "then"}
)
"""Words every trajectory and every generic tip share: they ground nothing."""


def _words(texts: Iterable[str]) -> set[str]:
    return {w for t in texts for w in content_words(t)} - _GENERIC


def _grounded(text: str, known: set[str]) -> bool:
    return bool(set(content_words(text)) & known)


def script_check(task: str, actions: Sequence[str], success: bool) -> Callable[[Script], None]:
    """Every step an action of the trajectory or about its objects (or the task's), no markup;
    a successful trajectory's last action (what finished the task) not left out."""
    known = _words([task, *actions])
    last = _words(actions[-1:]) if success else set()

    def check(out: Script) -> None:
        for step in out.steps:
            markup(step, "step")
            if not _grounded(step, known):
                raise InvalidOutput(
                    f"step {step[:60]!r} is no action of the trajectory and names none of its "
                    "objects"
                )
        if out.notes:
            markup(out.notes, "notes")
        if last and not last & _words(out.steps):
            raise InvalidOutput(
                f"the steps leave out the last action, {actions[-1][:60]!r}, which finished "
                "the task"
            )

    return check


def tip_check(
    actions: Sequence[str], task: str, observations: Sequence[str] = ()
) -> Callable[[Reflection], None]:
    """A tip that names a step or an object of the attempts; corrected steps grounded too.

    A corrected step may do what the attempt left undone, so it may name an object the attempts
    only saw (an observation the prompt showed: "you see a switch") besides their actions and
    the task; one naming nothing the model was shown is refused.
    """
    known = _words(actions)
    grounding = known | _words([task, *observations])

    def check(out: Reflection) -> None:
        markup(out.tip, "the tip")
        if not _grounded(out.tip, known):
            raise InvalidOutput(
                f"the tip names no step or object of the attempt ({out.tip[:80]!r})"
            )
        for step in out.corrected_steps or []:
            markup(step, "corrected step")
            if not _grounded(step, grounding):
                raise InvalidOutput(
                    f"corrected step {step[:60]!r} is no action of the attempts and names "
                    "nothing they saw"
                )

    return check


def context_check(text: str) -> Callable[[NoteFields], None]:
    """A context of at least :data:`MIN_CONTEXT_WORDS` words (fewer only for a shorter note)."""
    least = min(MIN_CONTEXT_WORDS, len(text.split()))

    def check(out: NoteFields) -> None:
        markup(out.context, "the context")
        if len(out.context.split()) < least:
            raise InvalidOutput(
                f"the context {out.context!r} is under {least} words: say what the note is about"
            )

    return check


def link_check(
    memory_text: str, neighbours: Sequence[Neighbour]
) -> Callable[[LinkDecisions], None]:
    """Each link's reason names something the two memories say; new contexts are sentences."""
    mine = _words([memory_text])
    theirs = {n.id: _words([n.text, n.context, *n.tags]) for n in neighbours}

    def check(out: LinkDecisions) -> None:
        for link in out.links:
            markup(link.reason, "the reason")
            if not _grounded(link.reason, mine | theirs.get(link.id, set())):
                raise InvalidOutput(
                    f"the reason {link.reason[:60]!r} for linking {link.id} names nothing either "
                    "memory says"
                )
        for update in out.updates:
            if update.context is not None:
                markup(update.context, "the context")
                if len(update.context.split()) < MIN_CONTEXT_WORDS:
                    raise InvalidOutput(
                        f"the new context {update.context!r} of {update.id} is under "
                        f"{MIN_CONTEXT_WORDS} words"
                    )

    return check
