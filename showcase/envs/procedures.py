"""Following remembered procedures in a new game (Mem^p: plan from the most useful past one).

Why and how, in full: docs/design.md, "Module notes", ``showcase.envs.procedures``.

>>> plan = Plan("p1", "cook", (("read cookbook", "Directions:\\n fry the red apple"),
...                           ("cook red apple in stove", "You fry the red apple with the stove.")))
>>> f = ProcedureFollower([plan])
>>> f.next(["cook yellow potato in stove", "read cookbook"], room="").action
'read cookbook'
>>> f.feedback("read cookbook", "Directions:\\n fry the yellow potato")
>>> f.next(["cook yellow potato in stove"], room="").action
'cook yellow potato in stove'
>>> f.followed()
['p1']
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from graphmem.agents import Plan
from showcase.envs.hints import extract_facts, fact_scope

if TYPE_CHECKING:
    pass

log = logging.getLogger(__name__)

_ACTION = re.compile(r"^(\w+) (.+?)(?: (in|on|from|with|to) (.+))?$")
_MOVE = re.compile(r"^(?:move|go) (north|south|east|west)$")
_DOOR = re.compile(r"^open door to (north|south|east|west)$")
_ROOM = re.compile(r"You are in the ([^.]+)\.")
_WORD = re.compile(r"[a-z]+")
_ARTICLES = frozenset({"a", "an", "the", "some"})
_IDLE = ("look", "inventory", "examine ")
_NO_OBJECT_VERBS = frozenset({"look", "inventory", "prepare", "read", "eat", "move", "go"})
_CONTEXT_WORDS = 1
MAX_PLANS = 3
"""Plans a follower considers, best first (the rest of what retrieval found is ignored)."""


@dataclass(frozen=True)
class PlanStep:
    """A step the follower proposes, and the plan it comes from."""

    action: str
    thought: str
    procedure_id: str


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def _norm_lines(text: str) -> str:
    """Lower case, spaces collapsed, line breaks kept (recipes are one instruction a line)."""
    return "\n".join(n for line in text.lower().splitlines() if (n := " ".join(line.split())))


def objects_of(action: str) -> list[str]:
    """The objects an action names ("put gray coat in wardrobe" → gray coat, wardrobe)."""
    if _MOVE.match(action) or _DOOR.match(action):
        return []
    m = _ACTION.match(action)
    if not m or m.group(1) in _NO_OBJECT_VERBS:
        return []
    return [o for o in (m.group(2), m.group(4)) if o]


def _clean(steps: Sequence[tuple[str, str]]) -> list[tuple[int, str, str]]:
    """(index, action, observation) without the old episode's detours: puts taken back,
    containers opened in vain (nothing in them or about them used later), looks, repeats."""
    actions = [_norm(a) for a, _ in steps]
    undone: set[int] = set()
    for i, action in enumerate(actions):
        m = _ACTION.match(action)
        if m and m.group(1) == "put":
            retake = f"take {m.group(2)}"
            if any(a == retake or a.startswith(retake + " from") for a in actions[i + 1 :]):
                undone.add(i)
        elif m and m.group(1) == "open" and not _DOOR.match(action):
            later = {o for a in actions[i + 1 :] for o in objects_of(a)}
            shown = _norm(steps[i][1])
            if m.group(2) not in later and not any(
                re.search(rf"(?<![a-z]){re.escape(o)}(?![a-z])", shown) for o in later
            ):
                undone.add(i)
    kept: list[tuple[int, str, str]] = []
    seen: set[str] = set()
    for i, (action, (_, observation)) in enumerate(zip(actions, steps, strict=True)):
        if i in undone or not action or action.startswith(_IDLE):
            continue
        if not (_MOVE.match(action) or _DOOR.match(action)) and action in seen:
            continue
        seen.add(action)
        kept.append((i, action, observation))
    return kept


@dataclass
class _Adapted:
    """One plan as the follower tracks it in this game."""

    plan: Plan
    rank: int
    steps: list[tuple[int, str, str]]
    context: dict[str, set[tuple[str, ...]]] = field(default_factory=dict)
    rooms: list[str] = field(default_factory=list)
    done: set[int] = field(default_factory=set)
    instructions: dict[int, tuple[str, str]] = field(default_factory=dict)
    """Steps that carried out one of the plan's instructions: index → (verb, plan object)."""

    @classmethod
    def of(cls, plan: Plan, rank: int) -> _Adapted:
        steps = _clean(plan.steps)
        text = _norm_lines("\n".join([plan.task, *(o for _, o in plan.steps)]))
        objects = {o for _, a, _ in steps for o in objects_of(a)}
        context = {o: _contexts(text, o) for o in objects}
        # The room each original step was taken in: the task's, then each observation's.
        rooms: list[str] = []
        room = m.group(1) if (m := _ROOM.search(plan.task)) else ""
        for _, observation in plan.steps:
            rooms.append(_norm(room))
            if m := _ROOM.search(observation):
                room = m.group(1)
        instructions = {
            i: (verb, obj)
            for i, action, observation in steps
            if (did := _carried_out(observation))
            for verb, obj in [did]
            if obj in objects_of(action) and ("", verb) in context.get(obj, set())
        }
        return cls(plan, rank, steps, context, rooms, instructions=instructions)


_DID = re.compile(r"^you (\w+) (?:the |a |an |some )?(.+?)(?: with .*| in .*| on .*)?\.?$")


def _carried_out(observation: str) -> tuple[str, str] | None:
    """(verb, object) of an observation that reports an act ("You roast the red apple with the
    oven." → roast, red apple)."""
    m = _DID.match(_norm(observation).split(". ", 1)[0])
    return (m.group(1), m.group(2)) if m else None


def _mentions(text: str, phrase: str) -> bool:
    return re.search(rf"(?<![a-z]){re.escape(phrase)}(?![a-z])", text) is not None


def _contexts(text: str, phrase: str) -> set[tuple[str, ...]]:
    """The words before each mention of ``phrase`` that starts a line, articles dropped, after
    a leading "" ("fry the red apple" → ("", "fry"))."""
    out: set[tuple[str, ...]] = set()
    for m in re.finditer(rf"(?<![a-z]){re.escape(phrase)}(?![a-z])", text):
        line = text[: m.start()].rsplit("\n", 1)[-1]
        words = [w for w in _WORD.findall(line) if w not in _ARTICLES]
        if not words:
            continue
        # Only an instruction-like line ("fry the red apple") gives an object a role; a mention
        # inside a longer sentence ("the fridge contains a red apple") does not.
        if len(words) <= _CONTEXT_WORDS:
            out.add(("", *words))
    return out


_SEP = r"[^a-z\n]+(?:(?:a|an|the|some)[^a-z\n]+)?"


def _context_pattern(ctx: tuple[str, ...]) -> re.Pattern[str]:
    """What follows the words ``ctx`` up to the end of the clause, in lines of text."""
    start = r"(?m)^[^a-z\n]*" if ctx[0] == "" else r"(?<![a-z])"
    words = _SEP.join(re.escape(w) for w in ctx if w)
    return re.compile(start + words + _SEP + r"([a-z][a-z -]*?)\s*(?=[.,;:!?\n]|$)")


class ProcedureFollower:
    """Adapt retrieved plans (best first) to the current game and propose their steps.

    ``observe`` / ``feedback`` feed it the game's text; ``next`` returns the next applicable
    step or None (then the caller explores). ``followed`` lists the plans steps were taken from.
    """

    def __init__(self, plans: Iterable[Plan] = (), *, max_plans: int = MAX_PLANS) -> None:
        followable = [p for p in plans if p.success][:max_plans]
        self.plans = [_Adapted.of(p, i) for i, p in enumerate(followable)]
        self.text = ""
        self.bindings: dict[str, str] = {}
        self.executed: set[str] = set()
        self.used: list[str] = []
        self.last = ""

    # -- the game's text -------------------------------------------------------------------

    def observe(self, text: str) -> None:
        """Read what the game shows (task, observation); it decides what objects mean here."""
        self.text = f"{self.text}\n{_norm_lines(text)}"[-20_000:]
        self.last = _norm_lines(text)

    def feedback(self, action: str, observation: str) -> None:
        self.executed.add(_norm(action))
        self.observe(observation)

    # -- adapting ----------------------------------------------------------------------------

    def _present(self, obj: str) -> bool:
        return re.search(rf"(?<![a-z]){re.escape(obj)}(?![a-z])", self.text) is not None

    def _bind(self, adapted: _Adapted, obj: str, valid_objects: set[str]) -> str | None:
        """What ``obj`` of the plan is in this game: itself, its role-mate, or unknown."""
        if obj in self.bindings:
            return self.bindings[obj]
        if self._present(obj) or obj in valid_objects:
            return obj
        roles = sorted(adapted.context.get(obj, set()))
        if not roles:
            return None
        # Bound only to a phrase with every role the plan object had ("dice" and "grill" the
        # red apple <-> "dice" and "grill" the carrot), and the only such phrase.
        found: set[str] | None = None
        for ctx in roles:
            here = {m.group(1).strip() for m in _context_pattern(ctx).finditer(self.text)}
            found = here if found is None else found & here
        found = (found or set()) - set(self.bindings.values()) - set(adapted.context)
        if len(found) != 1:
            return None
        self.bindings[obj] = found.pop()
        log.debug("plan object %r is %r here (by %s)", obj, self.bindings[obj], roles)
        return self.bindings[obj]

    def _adapt(self, adapted: _Adapted, action: str, valid_objects: set[str]) -> str | None:
        out = action
        for obj in objects_of(action):
            here = self._bind(adapted, obj, valid_objects)
            if here is None:
                return None
            if here != obj:
                out = re.sub(rf"(?<![a-z]){re.escape(obj)}(?![a-z])", here, out)
        return out

    def _needed(self, adapted: _Adapted, index: int, valid_objects: set[str]) -> bool:
        """An opening is taken for what the plan did after it: a step still to do on the
        opened thing or on what it held whose objects are all in this game (the old house's
        trash can is not opened for a rotten apple this one lacks)."""
        _, action, shown = next(s for s in adapted.steps if s[0] == index)
        m = _ACTION.match(action)
        if not m or m.group(1) != "open" or _DOOR.match(action):
            return True
        opened, shown = m.group(2), _norm(shown)
        for later, step, _ in adapted.steps:
            objects = objects_of(step)
            if later <= index or later in adapted.done or not objects:
                continue
            uses = opened in objects or any(_mentions(shown, o) for o in objects)
            if uses and all(self._bind(adapted, o, valid_objects) for o in objects):
                return True
        return False

    def _instructed(self, adapted: _Adapted, index: int) -> bool:
        """A step that carried out an instruction of the old game ("roast the red apple")
        applies only where this game's text gives the same instruction for the object it is
        bound to: an object both games share may have another role here."""
        if index not in adapted.instructions:
            return True
        verb, obj = adapted.instructions[index]
        here = self.bindings.get(obj, obj)
        told = {m.group(1).strip() for m in _context_pattern(("", verb)).finditer(self.text)}
        return here in told

    def _move_ok(self, adapted: _Adapted, index: int, direction: str, room: str) -> bool:
        """A remembered move applies where the plan stood in this room and went where the
        current observation shows that direction leads."""
        if adapted.rooms[index] != _norm(room) or not room:
            return False
        later = [r for r in adapted.rooms[index + 1 :] if r != adapted.rooms[index]]
        if not later:
            return False
        shows = rf"to the {direction}[^.]*? you see (?:the |a |an )?{re.escape(later[0])}\b"
        return re.search(shows, self.last) is not None

    # -- proposing -------------------------------------------------------------------------

    def next(
        self,
        valid_actions: Sequence[str],
        *,
        room: str,
        allow: Callable[[str], bool] | None = None,
    ) -> PlanStep | None:
        """The earliest applicable step of the best plan that has one (None: explore)."""
        valid = {_norm(a): a for a in valid_actions}
        valid_objects = {o for a in valid for o in objects_of(a)}
        for adapted in self.plans:
            for index, action, _ in adapted.steps:
                if index in adapted.done:
                    continue
                if (m := _MOVE.match(action) or _DOOR.match(action)) is not None:
                    here: str | None = action
                    if action in valid and not self._move_ok(adapted, index, m.group(1), room):
                        continue
                else:
                    here = self._adapt(adapted, action, valid_objects)
                    if here is None:
                        continue
                    if here in self.executed:
                        adapted.done.add(index)  # this game did it already
                        continue
                    if not self._instructed(adapted, index):
                        continue  # what the old instructions said, this game's do not (yet)
                    if not self._needed(adapted, index, valid_objects):
                        continue  # an opening for things this game does not have
                if here not in valid or (allow is not None and not allow(valid[here])):
                    continue
                adapted.done.add(index)
                pid = adapted.plan.procedure_id
                if pid not in self.used:
                    self.used.append(pid)
                why = f"procedure #{adapted.rank + 1}: {action}"
                if here != action:
                    why += f" (as {here})"
                return PlanStep(valid[here], why, pid)
        return None

    def followed(self) -> list[str]:
        """Ids of the plans at least one step was taken from, in the order first followed."""
        return list(self.used)

    def facts(self, procedure_id: str) -> list[str]:
        """Facts a followed plan's own (successful) episode showed, detours dropped: where
        things went, what a cooking verb needs, where things were found."""
        for adapted in self.plans:
            if adapted.plan.procedure_id == procedure_id:
                return extract_facts([(a, o, 1.0) for _, a, o in adapted.steps])
        return []


def plan_facts(plan: Plan) -> list[str]:
    """What every game of the kind can take from ``plan``: the facts of its steps that hold
    always (where an item belongs, what a cooking verb needs), detours dropped. Where an item
    lay holds in that plan's layout only, so it is left out.

    >>> plan_facts(Plan("p", "tidy", (("take mug", "You take the mug."),
    ...                               ("put mug in sink", "You put the mug in the sink."))))
    ['mug belongs in sink']
    """
    steps = _clean(plan.steps)
    if not plan.success and steps and steps[-1][0] == len(plan.steps) - 1:
        # A failed attempt's last step was never checked by what came after it (a wrong put
        # is taken back by the next step): it is not taken as a fact.
        steps = steps[:-1]
    # The plan's own spelling of each action (cleaning lowers its case: "TV stand").
    facts = extract_facts([(plan.steps[i][0].strip(), o, 1.0) for i, _, o in steps])
    facts += [f"{item} does not belong in {place}" for item, place in _taken_back(plan.steps)]
    return [f for f in dict.fromkeys(facts) if fact_scope(f) == "always"]


def _taken_back(steps: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """(item, place) of each put the episode took back later: where the item did not belong."""
    actions = [" ".join(a.split()) for a, _ in steps]
    out: list[tuple[str, str]] = []
    for i, action in enumerate(actions):
        m = _ACTION.match(action)
        if m and m.group(1) == "put" and m.group(4):
            retake = f"take {m.group(2)}"
            if any(a == retake or a.startswith(retake + " from") for a in actions[i + 1 :]):
                out.append((m.group(2), m.group(4)))
    return out
