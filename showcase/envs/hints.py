"""Memory hints for the rule-based agents: plain strings in, structured knowledge out.

Why and how, in full: docs/design.md, "Module notes", ``showcase.envs.hints``.

>>> k = parse_hints(["take newspaper; put newspaper in side table", "fry means cook in stove"])
>>> k.placements["newspaper"], k.cook_devices["fry"]
(['side table'], 'stove')
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from graphmem.ops import distill

_SEQ_SPLIT = re.compile(r"\s*(?:;|->|\n|\|)\s*")
_PUT = re.compile(r"^put (.+?) (?:in|on) (.+)$")
_BELONGS = re.compile(r"^(?:the )?(.+?) belongs? (?:in|on) (?:the )?(.+?)\.?$")
_NOT_BELONGS = re.compile(r"^(?:the )?(.+?) does not belong (?:in|on) (?:the )?(.+?)\.?$")
_AVOID = re.compile(r"^(?:avoid|don't|do not|never)\b:?\s*(.+?)\.?$")
_COOK_MEANS = re.compile(r"^(\w+) means cook in (?:the )?(.+?)\.?$")
_FOUND = re.compile(r"^(?:the )?(.+?) is found (?:in|on) (?:the )?(.+?)\.?$")
_COOKED = re.compile(r"^You (\w+) the (.+?) with the (.+?)\.")
_ROOM = re.compile(r"You are in the ([^.]+)\.")
_CONTAINS = re.compile(r"^You open the (.+?)\. The .+? contains (.+?)\.", re.S)
_MAX_SEQUENCE = 200


@dataclass
class Knowledge:
    """What hints say, in a shape the agents can use directly."""

    placements: dict[str, list[str]] = field(default_factory=dict)
    wrong: set[tuple[str, str]] = field(default_factory=set)
    cook_devices: dict[str, str] = field(default_factory=dict)
    found_in: dict[str, list[str]] = field(default_factory=dict)
    avoid_actions: set[str] = field(default_factory=set)
    sequences: list[list[str]] = field(default_factory=list)

    def add_placement(self, item: str, place: str) -> None:
        places = self.placements.setdefault(item, [])
        if place not in places:
            places.append(place)

    def merge(self, other: Knowledge, *, sequences: bool = True) -> None:
        """Add what ``other`` knows (facts learned in this episode are kept: they come first)."""
        for item, places in other.placements.items():
            for place in places:
                self.add_placement(item, place)
        self.wrong |= other.wrong
        for verb, device in other.cook_devices.items():
            self.cook_devices.setdefault(verb, device)
        for item, places in other.found_in.items():
            known = self.found_in.setdefault(item, [])
            known.extend(p for p in places if p not in known)
        self.avoid_actions |= other.avoid_actions
        if sequences:
            self.sequences.extend(other.sequences)

    def targets(self, item: str) -> list[str]:
        """Known places for ``item`` that are not known to be wrong."""
        return [p for p in self.placements.get(item, []) if (item, p) not in self.wrong]


def _norm(text: str) -> str:
    return " ".join(text.strip().split())


def _absorb_action(k: Knowledge, action: str) -> None:
    put = _PUT.match(action)
    if put:
        k.add_placement(put.group(1), put.group(2))


def parse_hints(hints: Iterable[str]) -> Knowledge:
    """Turn hint strings into :class:`Knowledge`; unrecognised facts are ignored."""
    k = Knowledge()
    for raw in hints:
        if not isinstance(raw, str):
            continue
        parts = [p for p in (_norm(x) for x in _SEQ_SPLIT.split(raw)) if p]
        if len(parts) > 1:
            seq = parts[:_MAX_SEQUENCE]
            k.sequences.append(seq)
            for action in seq:
                _absorb_action(k, action)
            continue
        if not parts:
            continue
        text = parts[0]
        if m := _NOT_BELONGS.match(text):
            k.wrong.add((m.group(1), m.group(2)))
        elif m := _AVOID.match(text):
            k.avoid_actions.add(m.group(1))
            if put := _PUT.match(m.group(1)):
                k.wrong.add((put.group(1), put.group(2)))
        elif m := _BELONGS.match(text):
            k.add_placement(m.group(1), m.group(2))
        elif m := _COOK_MEANS.match(text):
            k.cook_devices[m.group(1).lower()] = m.group(2)
        elif m := _FOUND.match(text):
            places = k.found_in.setdefault(m.group(1), [])
            if m.group(2) not in places:
                places.append(m.group(2))
        else:
            _absorb_action(k, text)
    # A placement seen in a sequence but later marked wrong stays excluded by targets().
    return k


def hints_from_procedures(action_sequences: Sequence[Sequence[str]]) -> list[str]:
    """One hint per retrieved procedure: its steps' actions joined by ``;``.

    >>> hints_from_procedures([["take a", "put a in b"], []])
    ['take a; put a in b']
    """
    hints: list[str] = []
    for actions in action_sequences:
        cleaned = [_norm(a) for a in actions if isinstance(a, str) and a.strip()]
        if cleaned:
            hints.append("; ".join(cleaned))
    return hints


def extract_facts(steps: Sequence[tuple[str, str, float]]) -> list[str]:
    """Transferable facts from (action, observation, reward) steps of any episode.

    Successful and failed episodes both teach something: a put that raised the score says where
    an item belongs, one that lowered it says where it does not; "You grill the X with the
    barbeque" says what grilling needs; a take after opening a container says where an
    ingredient was found.
    """
    facts: list[str] = []
    seen: set[str] = set()
    room = ""
    opened: dict[str, str] = {}

    def add(fact: str) -> None:
        if fact not in seen:
            seen.add(fact)
            facts.append(fact)

    for action, observation, reward in steps:
        if m := _ROOM.search(observation):
            room = m.group(1)
            opened = {}
        if m := _CONTAINS.match(observation):
            for name in re.split(r",\s*(?:and\s+)?|\s+and\s+", m.group(2)):
                opened[re.sub(r"^(?:a|an|some|the)\s+", "", name.strip())] = m.group(1)
        if put := _PUT.match(action):
            if reward > 0:
                add(f"{put.group(1)} belongs in {put.group(2)}")
            elif reward < 0:
                add(f"{put.group(1)} does not belong in {put.group(2)}")
        elif m := _COOKED.match(observation):
            add(f"{m.group(1).lower()} means cook in {m.group(3)}")
        elif action.startswith("take ") and reward > 0 and not action.startswith("take knife"):
            item = action[5:]
            place = opened.get(item) or room
            if place and "cookbook" not in item:
                add(f"{item} is found in {place}")
    return facts


_SUBJECT = re.compile(r"^(.+?) (?:belongs in|does not belong in|is found in|means cook in) .+$")


def fact_subject(fact: str) -> str | None:
    """What a fact from :func:`extract_facts` is about (the item, or the cooking verb).

    >>> fact_subject("gray coat does not belong in bath tub")
    'gray coat'
    >>> fact_subject("fry means cook in stove")
    'fry'
    """
    m = _SUBJECT.match(fact)
    return m.group(1) if m else None


Scope = Literal["episode", "layout", "always"]
"""Where a fact holds: in this episode only, in this game layout (the same map and objects, as
a replayed seed), or in every game of its kind."""

SCOPES: tuple[Scope, ...] = ("episode", "layout", "always")
"""Narrowest first."""

SCOPE_TAG = "scope:"
"""Prefix of the tag that records a fact note's scope (``scope:layout``): a tag, so every store
persists it and retrieval's text sees it, with no schema change."""


def fact_scope(fact: str) -> Scope:
    """Where a fact from :func:`extract_facts` holds.

    Where an item lies ("block of cheese is found in fridge") is drawn per game: it holds in
    that layout only. What a cooking verb needs and where an item belongs are rules of the
    game kind: they hold always. Anything unrecognised is kept to its episode.

    >>> fact_scope("block of cheese is found in fridge"), fact_scope("fry means cook in stove")
    ('layout', 'always')
    """
    text = _norm(fact)
    if _FOUND.match(text):
        return "layout"
    if _COOK_MEANS.match(text) or _BELONGS.match(text) or _NOT_BELONGS.match(text):
        return "always"
    return "episode"


def scope_tag(facts: Iterable[str]) -> str:
    """The scope tag of a note holding ``facts``: the narrowest of their scopes.

    >>> scope_tag(["fry means cook in stove", "red apple is found in fridge"])
    'scope:layout'
    """
    scopes = {fact_scope(f) for f in facts} or {"episode"}
    return SCOPE_TAG + next(s for s in SCOPES if s in scopes)


def note_scope(tags: Iterable[str]) -> Scope | None:
    """The scope a note's tags record (None: not recorded)."""
    for tag in tags:
        for scope in SCOPES:
            if tag == SCOPE_TAG + scope:
                return scope
    return None


def distill_actions(steps: Sequence[tuple[str, str, float]]) -> list[str]:
    """The actions of an episode without its detours: wrong puts, their retakes, and looks.

    Useful as a same-task replay hint (Mem^p "proceduralized" trajectories are similar).
    """
    kept: list[str] = []
    undo: set[str] = set()
    for action, _, reward in steps:
        if action in ("look around", "inventory") or action.startswith("examine "):
            continue
        put = _PUT.match(action)
        if put and reward < 0:
            undo.add(f"take {put.group(1)}")
            continue
        if action in undo:
            undo.discard(action)
            continue
        kept.append(action)
    return kept


def negation(fact: str) -> str | None:
    """The fact that contradicts ``fact`` ("x belongs in y" ↔ "x does not belong in y"); None
    for a fact nothing contradicts this way."""
    if " does not belong in " in fact:
        return fact.replace(" does not belong in ", " belongs in ", 1)
    if " belongs in " in fact:
        return fact.replace(" belongs in ", " does not belong in ", 1)
    return None


def game_knowledge(trajectory: Any) -> list[distill.Knowledge]:
    """graphmem's distiller for the text games (``GraphMemory(distiller=game_knowledge)``):
    :func:`extract_facts` of a trajectory whose steps carry their rewards, one knowledge item
    per subject (:func:`fact_subject`), each fact retracting its negation, scope-tagged.

    >>> from graphmem.models import Trajectory
    >>> t = Trajectory(task="tidy up", steps=[
    ...     {"action": "put wet towel in bathtub", "observation": "ok", "reward": -1.0}])
    >>> [(k.subject, k.facts, k.retracts) for k in game_knowledge(t)]
    [('wet towel', ['wet towel does not belong in bathtub'], ['wet towel belongs in bathtub'])]
    """
    from graphmem.ops.distill import Knowledge as Learned

    steps = [(s.action, s.observation, s.reward or 0.0) for s in trajectory.steps]
    by_subject: dict[str, list[str]] = {}
    for fact in extract_facts(steps):
        by_subject.setdefault(fact_subject(fact) or "this game", []).append(fact)
    return [
        Learned(
            subject=subject,
            facts=facts,
            retracts=[n for f in facts if (n := negation(f)) is not None],
            tags=[scope_tag(facts)],
        )
        for subject, facts in by_subject.items()
    ]
