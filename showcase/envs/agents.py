"""Rule-based explorers for TextWorldExpress games that memory hints can inform.

Each explorer solves its game by systematic, novelty-seeking exploration (EMPO²-style: prefer
actions not yet tried in this room) without the gold path. Given ``hints`` (action sequences or
facts, see :mod:`showcase.envs.hints`) it first replays still-valid hinted actions and
prefers known facts (placements, cooking devices, where ingredients are), falling back to
exploration. Retrieved procedures handed over with ``offer_procedures`` come first: their steps,
adapted to the game by :class:`~showcase.envs.procedures.ProcedureFollower`, are taken
where they apply, and ``followed_procedures`` names the ones used (the agent flow credits those).

>>> policy = make_explorer("twc")
>>> policy.begin("Put things away.", hints=["newspaper belongs in side table"], seed=0)
>>> policy.act("You are in the kitchen.", ["take newspaper", "move west"], "").action
'take newspaper'
"""

from __future__ import annotations

import difflib
import random
import re
from collections import Counter, deque
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Literal

from graphmem.agents import Decision, Plan, Policy, ProcedurePolicy
from showcase.envs.hints import Knowledge, fact_scope, parse_hints
from showcase.envs.procedures import MAX_PLANS, ProcedureFollower, plan_facts

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from graphmem.llm import MemoryLLM

_ROOM = re.compile(r"You are in the ([^.]+)\.")
_EXIT = re.compile(r"to the (north|south|east|west) you see (?:the |a |an )?([^.]+?)\.", re.I)
_INV_ITEM = re.compile(r"^\s+(?:a |an |some |the )?(.+?)\s*$")
_LOW_VALUE = ("look around", "inventory", "examine ", "close ", "read ", "eat ", "drop ")
_REPLAY_LOOKAHEAD = 3
PLAN_STEPS = 25
"""Steps of each offered procedure a chat model is shown."""


FactKey = tuple[str, ...]
"""A fact as the explorers act on it: ("cook", verb, device), ("found", item, place),
("place", item, place), ("wrong", item, place)."""


def fact_keys(knowledge: Knowledge) -> list[FactKey]:
    """The facts ``knowledge`` holds, as keys."""
    keys: list[FactKey] = [("cook", v, d) for v, d in knowledge.cook_devices.items()]
    keys += [("found", i, p) for i, ps in knowledge.found_in.items() for p in ps]
    keys += [("place", i, p) for i, ps in knowledge.placements.items() for p in ps]
    keys += [("wrong", i, p) for i, p in knowledge.wrong]
    return keys


def _takes_step(key: FactKey, action: str) -> bool:
    """Whether ``action`` is the step fact ``key`` stands for: the put of a placement, a cook
    in a verb's device (a procedure's step with this game's ingredient)."""
    if key[0] == "place":
        return action == f"put {key[1]} in {key[2]}"
    if key[0] == "cook":
        return action.startswith("cook ") and action.endswith(f" in {key[2]}")
    return False


def inventory_items(inventory: str) -> list[str]:
    """Item names from TextWorldExpress' inventory text."""
    items: list[str] = []
    for line in inventory.splitlines()[1:]:
        m = _INV_ITEM.match(line)
        if m and "inventory is currently empty" not in line and m.group(1):
            items.append(m.group(1))
    return items


class Explorer:
    """Shared machinery: room map, novelty counts, replay of hinted action sequences."""

    name = "explorer"

    def __init__(self) -> None:
        self.begin("")

    def begin(self, task: str, hints: Sequence[str] = (), seed: int = 0) -> None:
        self.task = task
        self.knowledge: Knowledge = parse_hints(hints)
        self.rng = random.Random(seed)
        self.room = ""
        self.exits: dict[str, dict[str, str | None]] = {}
        self.visits: Counter[str] = Counter()
        self.tried: Counter[tuple[str, str]] = Counter()
        self.replay: deque[str] = deque(a for seq in self.knowledge.sequences for a in seq)
        # Which hint said what: acting on a fact or replaying a step marks its hint used.
        self.sources: dict[FactKey, set[str]] = {}
        self.used: dict[str, None] = {}
        self.replay_src: deque[str] = deque(
            raw for raw in hints for seq in parse_hints([raw]).sequences for _ in seq
        )
        self._index(hints)
        self.valid: frozenset[str] = frozenset()
        self.closed_doors: set[tuple[str, str]] = set()
        self.asked: set[str] = set()
        self.offer_procedures([])

    # -- remembered procedures (showcase.envs.procedures) ---------------------------------

    def offer_procedures(self, plans: Sequence[Plan]) -> None:
        """Retrieved procedures, best first: the first few are followed step by step; the
        steps of every one that hold in any game ("put mug in sink", "cook X in stove": where
        an item belongs, what a verb needs) become goals, taken where their objects are here.

        What memory's notes or this game already say comes first: a procedure's fact only
        fills a gap (a device a note names for a verb is not replaced by a procedure's)."""
        self.follower = ProcedureFollower(plans)
        self.follower.observe(self.task)
        self.plan_sources: dict[FactKey, list[str]] = {}
        self.plans_taken: dict[str, None] = {}
        self._acting: FactKey | None = None
        for plan in plans:
            known = parse_hints(plan_facts(plan))
            self.knowledge.merge(known, sequences=False)
            for key in fact_keys(known):
                self.plan_sources.setdefault(key, []).append(plan.procedure_id)

    def followed_procedures(self) -> list[str]:
        """The procedures this episode took steps from (what the reward should credit): those
        the follower took a step of, and those whose goal step the explorer took ("put mug in
        sink" because a procedure put the mug there)."""
        return list(dict.fromkeys([*self.follower.followed(), *self.plans_taken]))

    def _follow(self, observation: str) -> Decision | None:
        """The next applicable step of a remembered procedure; a procedure followed for the
        first time also hands over the facts its episode showed."""
        if not self.follower.plans:
            return None
        before = set(self.follower.followed())
        self.follower.observe(observation)
        step = self.follower.next(sorted(self.valid), room=self.room, allow=self._follow_ok)
        if step is None:
            return None
        if step.procedure_id not in before:
            facts = parse_hints(self.follower.facts(step.procedure_id))
            self.knowledge.merge(facts, sequences=False)
        return self._choose(step.action, step.thought)

    # -- memory during the episode ---------------------------------------------------------

    def recall_queries(
        self, observation: str, valid_actions: Sequence[str], inventory: str
    ) -> list[str]:
        """Questions for memory now (each asked once per episode); none by default."""
        return []

    def _ask(self, questions: Iterable[str]) -> list[str]:
        new = [q for q in dict.fromkeys(questions) if q not in self.asked]
        self.asked.update(new)
        return new

    def add_hints(self, hints: Sequence[str]) -> None:
        """Merge facts recalled during the episode (action sequences are not replayed)."""
        self.knowledge.merge(parse_hints(hints), sequences=False)
        self._index(hints)

    # -- credit by use -----------------------------------------------------------------------

    def _index(self, hints: Iterable[str]) -> None:
        for raw in hints:
            if isinstance(raw, str):
                for key in fact_keys(parse_hints([raw])):
                    self.sources.setdefault(key, set()).add(raw)

    def _use(self, *key: str) -> None:
        """The explorer acts on fact ``key``: the hints that said it were used (a procedure
        that said it is credited once the step the fact stands for is taken, see _choose)."""
        for raw in sorted(self.sources.get(key, ())):
            self.used.setdefault(raw)
        self._acting = key

    def used_hints(self) -> list[str]:
        """The hints this episode acted on (a fact it followed, a step it replayed)."""
        return list(self.used)

    # -- observing -------------------------------------------------------------------------

    def _see(self, observation: str, valid_actions: Sequence[str]) -> None:
        self.valid = frozenset(valid_actions)
        if m := _ROOM.search(observation):
            room = m.group(1).strip()
            if room != self.room:
                self.visits[room] += 1
            self.room = room
            exits = self.exits.setdefault(room, {})
            for direction, what in _EXIT.findall(observation):
                known = None if "door" in what else what.strip()
                if "closed" in what:
                    self.closed_doors.add((room, direction.lower()))
                else:
                    self.closed_doors.discard((room, direction.lower()))
                if known or direction.lower() not in exits:
                    exits[direction.lower()] = known

    def feedback(self, action: str, observation: str, reward: float) -> None:
        self.follower.feedback(action, observation)
        if action.startswith("move ") and (m := _ROOM.search(observation)) and self.room:
            self.exits.setdefault(self.room, {})[action[5:]] = m.group(1).strip()

    def _choose(self, action: str, thought: str) -> Decision:
        self.tried[(self.room, action)] += 1
        if self._acting is not None and _takes_step(self._acting, action):
            for procedure_id in self.plan_sources.get(self._acting, ()):
                self.plans_taken.setdefault(procedure_id)
        self._acting = None
        return Decision(action, thought)

    # -- shared moves ----------------------------------------------------------------------

    def _replay_step(self) -> Decision | None:
        """The next hinted action that is valid now (looking a few actions ahead)."""
        for i, action in enumerate(list(self.replay)[:_REPLAY_LOOKAHEAD]):
            if action in self.valid and self._replay_ok(action):
                for _ in range(i + 1):
                    self.replay.popleft()
                    source = self.replay_src.popleft() if self.replay_src else None
                if source is not None:
                    self.used.setdefault(source)
                return self._choose(action, f"replay remembered step: {action}")
        return None

    def _replay_ok(self, action: str) -> bool:
        return action not in self.knowledge.avoid_actions

    def _follow_ok(self, action: str) -> bool:
        if action.startswith("open door to "):  # a door this game shows open stays as it is
            return (self.room, action[13:]) in self.closed_doors
        return self._replay_ok(action)

    def _path_to(self, goal: str | None) -> str | None:
        """First direction on the shortest known route to room ``goal`` (None: unvisited rooms)."""
        start = self.room
        queue: deque[tuple[str, str | None]] = deque([(start, None)])
        seen = {start}
        while queue:
            room, first = queue.popleft()
            for direction, nxt in sorted(self.exits.get(room, {}).items()):
                if nxt is None or nxt not in self.exits:
                    if goal is None or nxt == goal:
                        return first or direction
                    continue
                if nxt == goal:
                    return first or direction
                if nxt not in seen:
                    seen.add(nxt)
                    queue.append((nxt, first or direction))
        return None

    def _go(self, direction: str, why: str) -> Decision | None:
        # Valid-action lists offer "move" through closed doors too; open the door first.
        closed = (self.room, direction) in self.closed_doors
        if closed and f"open door to {direction}" in self.valid:
            self.closed_doors.discard((self.room, direction))
            return self._choose(f"open door to {direction}", why)
        if f"move {direction}" in self.valid:
            return self._choose(f"move {direction}", why)
        if f"open door to {direction}" in self.valid:
            return self._choose(f"open door to {direction}", why)
        return None

    def _go_to_room(self, room: str | None, why: str) -> Decision | None:
        """A step toward known room ``room`` (None when there already, or no known route)."""
        if not room or room == self.room:
            return None
        direction = self._path_to(room)
        return self._go(direction, why) if direction else None

    def _explore_rooms(self) -> Decision | None:
        direction = self._path_to(None)
        return self._go(direction, "explore: head for an unvisited room") if direction else None

    def _novel(self) -> Decision:
        """EMPO²-style fallback: the valid action tried least often in this room."""
        useful = [a for a in sorted(self.valid) if not a.startswith(_LOW_VALUE)]
        pool = useful or sorted(self.valid) or ["look around"]
        best = min(self.tried[(self.room, a)] for a in pool)
        choice = self.rng.choice([a for a in pool if self.tried[(self.room, a)] == best])
        return self._choose(choice, "explore: least-tried action here")

    def act(self, observation: str, valid_actions: Sequence[str], inventory: str) -> Decision:
        self._see(observation, valid_actions)
        return self._follow(observation) or self._replay_step() or self._novel()


class TwcExplorer(Explorer):
    """TextWorld Commonsense: take misplaced items and put each where it belongs.

    Without knowledge it tries receptacles one by one (a wrong put lowers the score, so it
    takes the item back and never tries that pair again); with placement hints it goes
    straight to the remembered receptacle.
    """

    name = "twc-explorer"

    def begin(self, task: str, hints: Sequence[str] = (), seed: int = 0) -> None:
        super().begin(task, hints, seed)
        self.placed: set[str] = set()
        self.junk: set[str] = set()
        self.receptacle_room: dict[str, str] = {}
        self.closed: dict[str, set[str]] = {}

    def _see(self, observation: str, valid_actions: Sequence[str]) -> None:
        super()._see(observation, valid_actions)
        closed = self.closed.setdefault(self.room, set())
        for action in valid_actions:
            if action.startswith("open ") and not action.startswith("open door"):
                self.receptacle_room[action[5:]] = self.room
                closed.add(action[5:])
            elif m := re.match(r"put .+? in (.+)$", action):
                self.receptacle_room[m.group(1)] = self.room
                closed.discard(m.group(1))

    def recall_queries(
        self, observation: str, valid_actions: Sequence[str], inventory: str
    ) -> list[str]:
        """Where does each item in sight or in hand belong, when this episode does not know?"""
        items = [a[5:] for a in valid_actions if a.startswith("take ")]
        items += inventory_items(inventory)
        return self._ask(
            f"where does {i} belong: {i} belongs in"
            for i in items
            if i not in self.placed and i not in self.junk and not self.knowledge.targets(i)
        )

    def _replay_ok(self, action: str) -> bool:
        if action.startswith("take ") and action[5:] in self.placed:
            return False
        put = re.match(r"put (.+?) in (.+)$", action)
        if put and (put.group(1), put.group(2)) in self.knowledge.wrong:
            return False
        return super()._replay_ok(action)

    def feedback(self, action: str, observation: str, reward: float) -> None:
        super().feedback(action, observation, reward)
        if put := re.match(r"put (.+?) in (.+)$", action):
            item, place = put.group(1), put.group(2)
            if reward > 0:
                self.placed.add(item)
                self.knowledge.add_placement(item, place)
            elif reward < 0:
                self.knowledge.wrong.add((item, place))
        elif action.startswith("take ") and reward <= 0:
            self.junk.add(action[5:])

    def act(self, observation: str, valid_actions: Sequence[str], inventory: str) -> Decision:
        self._see(observation, valid_actions)
        if follow := self._follow(observation):
            return follow
        held = [i for i in inventory_items(inventory) if i not in self.junk]
        k = self.knowledge
        for action in sorted(self.valid):
            item = action[5:]
            if action.startswith("take ") and item not in self.placed and item not in self.junk:
                return self._choose(action, f"take {item}: it is out of place")
        if replay := self._replay_step():
            return replay
        known = [(i, t) for i in held for t in k.targets(i)]
        for item, target in known:
            if f"put {item} in {target}" in self.valid:
                self._use("place", item, target)
                return self._choose(
                    f"put {item} in {target}", f"memory: {item} belongs in {target}"
                )
        for item, target in known:
            if f"open {target}" in self.valid:
                self._use("place", item, target)
                return self._choose(f"open {target}", f"open {target} to put {item} there")
        for item, target in known:
            room = self.receptacle_room.get(target)
            if go := self._go_to_room(room, f"go to the {room}: {item} belongs in {target}"):
                self._use("place", item, target)
                return go
        # Items whose remembered places this house lacks (all rooms seen) are tried blind too.
        rooms_left = self._path_to(None) is not None
        unknown = [
            i
            for i in held
            if not any(t in self.receptacle_room or rooms_left for t in k.targets(i))
        ]
        for item in unknown:
            for action in sorted(self.valid):
                put = re.match(r"put (.+?) in (.+)$", action)
                if put and put.group(1) == item and (item, put.group(2)) in k.wrong:
                    self._use("wrong", item, put.group(2))  # a known wrong place not tried
                elif put and put.group(1) == item:
                    return self._choose(action, f"explore: does {item} belong in {put.group(2)}?")
        if held:
            for target in sorted(self.closed.get(self.room, set())):
                if f"open {target}" in self.valid and not self.tried[(self.room, f"open {target}")]:
                    return self._choose(f"open {target}", f"explore: open {target}")
        if go := self._explore_rooms():
            return go
        if unknown and (go := self._toward_untried(unknown)):
            return go
        return self._novel()

    def _toward_untried(self, items: Iterable[str]) -> Decision | None:
        """Go to the nearest other room with a receptacle not yet tried for a held item."""
        wanted = {
            room
            for place, room in self.receptacle_room.items()
            if room != self.room and any((i, place) not in self.knowledge.wrong for i in items)
        }
        for room in sorted(wanted, key=lambda r: self.visits[r]):
            if (d := self._path_to(room)) and (go := self._go(d, f"explore: try the {room}")):
                return go
        return None


_CUT_VERBS = ("slice", "chop", "dice")
COMMON_SENSE_DEVICES: dict[str, str] = {"roast": "oven", "fry": "stove", "grill": "barbeque"}
"""What any cook (and any chat model) knows without memory: the device each cooking verb
names. The no-memory explorer starts from it, so memory is measured against the best agent we
can write without it, not against one that guesses the device at random."""
_RECIPE_LINE = re.compile(r"^\s*(\w+) the (.+?)\s*$")


def _has_recipe(text: str) -> bool:
    return "Ingredients:" in text and "Directions:" in text


class CookingExplorer(Explorer):
    """CookingWorld: read the recipe, gather ingredients (and a knife), cut, cook, eat.

    Which device a cooking verb needs (fry, roast, grill) is not in the recipe: the explorer
    knows the common-sense one (:data:`COMMON_SENSE_DEVICES`) unless ``common_sense=False``;
    a verb it has no knowledge of is guessed among the devices it has seen, and a wrong
    guess fails the game. Memory (a note, a procedure) overrides both.
    """

    name = "cooking-explorer"

    def __init__(self, *, common_sense: bool = True) -> None:
        self.common_sense = common_sense
        super().__init__()

    def begin(self, task: str, hints: Sequence[str] = (), seed: int = 0) -> None:
        super().begin(task, hints, seed)
        self.ingredients: list[str] = []
        self.directions: list[tuple[str, str]] = []
        self.done: set[tuple[str, str]] = set()
        self.read = False
        self.devices: dict[str, str] = {}
        self.guesses: dict[str, str] = {}
        self.containers: dict[str, str] = {}
        self.held: set[str] = set()

    def _see(self, observation: str, valid_actions: Sequence[str]) -> None:
        super()._see(observation, valid_actions)
        for action in valid_actions:
            if m := re.match(r"cook .+? in (.+)$", action):
                self.devices[m.group(1)] = self.room
            elif action.startswith("open ") and not action.startswith("open door"):
                self.containers[action[5:]] = self.room
        if _has_recipe(observation):
            self._parse_recipe(observation)

    def _parse_recipe(self, text: str) -> None:
        ingredients, directions = text.split("Ingredients:", 1)[1].split("Directions:", 1)
        self.ingredients = [i.strip() for i in ingredients.strip().splitlines() if i.strip()]
        self.directions = [
            (m.group(1).lower(), m.group(2))
            for line in directions.strip().splitlines()
            if (m := _RECIPE_LINE.match(line))
        ]
        self.read = True

    def recall_queries(
        self, observation: str, valid_actions: Sequence[str], inventory: str
    ) -> list[str]:
        """Once the recipe is read: which device each cooking verb needs, where ingredients are."""
        # Asked before this step's act(), so the recipe on screen is read here first.
        if not self.read and _has_recipe(observation):
            self._parse_recipe(observation)
        if not self.read:
            return []
        k = self.knowledge
        verbs = {v for v, _ in self.directions if v not in _CUT_VERBS and v != "prepare"}
        questions = [f"{v} means cook in which device" for v in sorted(verbs - set(k.cook_devices))]
        questions += [
            f"where is {i} found: {i} is found in" for i in self.ingredients if i not in k.found_in
        ]
        return self._ask(questions)

    def feedback(self, action: str, observation: str, reward: float) -> None:
        super().feedback(action, observation, reward)
        if m := re.match(r"^You (\w+) the (.+?) with the (.+?)\.", observation):
            self.knowledge.cook_devices[m.group(1).lower()] = m.group(3)
            self.done.add((m.group(1).lower(), m.group(2)))
        elif reward > 0 and (m := re.match(r"(\w+) (.+)$", action)):
            self.done.add((m.group(1), m.group(2)))

    def _device_for(self, verb: str) -> str | None:
        if verb in self.knowledge.cook_devices:
            self._use("cook", verb, self.knowledge.cook_devices[verb])
            return self.knowledge.cook_devices[verb]
        if self.common_sense and (known := COMMON_SENSE_DEVICES.get(verb)):
            if known in self.devices or self._path_to(None) is None:
                return known  # seen here, or every room seen: nothing better to go on
            return None  # not seen yet: keep exploring, it is in another room
        if self._path_to(None) is not None and not self._gathered():
            # Rooms left and ingredients to find there: their devices may settle the guess.
            # Once every ingredient is in hand, waiting to see every room (11 in
            # TextWorldExpress' default house) costs more than the guess risks.
            return None
        if verb not in self.guesses and self.devices:
            # No knowledge: a guess, and a wrong one fails the game (what memory fixes).
            # Devices known to do another verb are ruled out.
            taken = set(self.knowledge.cook_devices.values())
            options = sorted(d for d in self.devices if d not in taken) or sorted(self.devices)
            self.guesses[verb] = self.rng.choice(options)
        return self.guesses.get(verb)

    def _gathered(self) -> bool:
        """Every ingredient of the recipe is in hand (as of the last step)."""
        return bool(self.ingredients) and all(i in self.held for i in self.ingredients)

    def act(self, observation: str, valid_actions: Sequence[str], inventory: str) -> Decision:
        self._see(observation, valid_actions)
        if step := self._follow(observation) or self._replay_step():
            return step
        if not self.read:
            if "read cookbook" in self.valid:
                return self._choose("read cookbook", "read the recipe first")
            return self._explore_for([]) or self._novel()
        # Prepared ingredients change name ("a chopped red apple"): match on the ending.
        raw = inventory_items(inventory)
        if "eat meal" in self.valid and any(h.endswith("meal") for h in raw):
            return self._choose("eat meal", "the meal is ready: eat it")
        held = {
            name
            for name in [*self.ingredients, "knife"]
            if any(h == name or h.endswith(" " + name) for h in raw)
        }
        self.held = held
        cutting = any(v in _CUT_VERBS for v, _ in self.directions)
        if cutting and "knife" not in held and "take knife" in self.valid:
            return self._choose("take knife", "the recipe needs cutting")
        for item in self.ingredients:
            if item not in held and f"take {item}" in self.valid:
                return self._choose(f"take {item}", f"take {item}: an ingredient")
        pending = [(v, i) for v, i in self.directions if (v, i) not in self.done]
        for verb, item in pending:
            if verb == "prepare" or item not in held:
                continue
            if verb in _CUT_VERBS:
                if f"{verb} {item}" in self.valid:
                    return self._choose(f"{verb} {item}", f"recipe: {verb} the {item}")
                continue
            if any(v in _CUT_VERBS and i == item for v, i in pending):
                continue  # cut before cooking, as the recipe orders
            device = self._device_for(verb)
            if device is None:
                continue
            thought = f"recipe: {verb} the {item} (cook in {device})"
            if f"cook {item} in {device}" in self.valid:
                return self._choose(f"cook {item} in {device}", thought)
            room = self.devices.get(device)
            if go := self._go_to_room(room, f"go to the {room} to {verb} the {item}"):
                return go
        if [(v, i) for v, i in pending if v != "prepare"] == [] and all(
            i in held for i in self.ingredients
        ):
            if "prepare meal" in self.valid:
                return self._choose("prepare meal", "all directions done: prepare the meal")
            if go := self._go_to_room(
                self.devices.get("stove"), "go back to the kitchen to prepare the meal"
            ):
                return go
        missing = [i for i in self.ingredients if i not in held]
        return self._explore_for(missing) or self._novel()

    def _explore_for(self, missing: Sequence[str]) -> Decision | None:
        """Look for ``missing`` ingredients: remembered places in this room first, then the
        room's other containers (those no game in memory found an ingredient in last), then
        unvisited rooms (those memory found ingredients in first).

        Where an item lies holds in one layout only
        (:func:`~showcase.envs.hints.fact_scope`): a remembered place is opened when the
        explorer is in its room anyway, but it is walked to before unvisited rooms only for a fact
        that holds always; a layout's fact from another game would send the agent across the house
        for nothing.
        """
        remembered = [(i, p) for i in missing for p in self.knowledge.found_in.get(i, [])]
        for item, place in remembered:
            if f"open {place}" in self.valid and not self.tried[(self.room, f"open {place}")]:
                self._use("found", item, place)
                return self._choose(f"open {place}", f"memory: {item} is found in {place}")
        trips = [
            (item, place, fact_scope(f"{item} is found in {place}") == "always")
            for item, place in remembered
        ]
        if go := self._trip(t for t in trips if t[2]):
            return go
        # The knife is no ingredient (memory does not say where it lay): while the recipe may
        # need it, every container is as likely as any other.
        knife = not self.read or (
            any(v in _CUT_VERBS for v, _ in self.directions) and "knife" not in self.held
        )
        places = set() if knife else {p for ps in self.knowledge.found_in.values() for p in ps}
        later: list[str] = []
        for container in sorted(c for c, r in self.containers.items() if r == self.room):
            action = f"open {container}"
            if action in self.valid and not self.tried[(self.room, action)]:
                if places and container not in places:
                    later.append(action)  # no game in memory found an ingredient in one
                    continue
                return self._choose(action, f"explore: look inside the {container}")
        if go := self._toward_named_rooms(remembered, places) or self._explore_rooms():
            return go
        for action in later:
            return self._choose(action, f"explore: look inside the {action[5:]} after all")
        return self._trip(t for t in trips if not t[2])

    def _toward_named_rooms(
        self, remembered: Sequence[tuple[str, str]], places: set[str]
    ) -> Decision | None:
        """A step toward an unvisited room memory names, before the nearest one: where a
        missing ingredient lay in another game, then where any ingredient did. Which room holds
        what is drawn per game, but the kind of room that holds food is not."""
        named = [*remembered, *(("", p) for p in sorted(places))]
        for item, room in named:
            if room in self.exits or not (direction := self._path_to(room)):
                continue  # visited, a container, or not in sight
            if go := self._go(direction, f"explore: head for the {room}, where memory found food"):
                if item:
                    self._use("found", item, room)
                return go
        return None

    def _trip(self, trips: Iterable[tuple[str, str, bool]]) -> Decision | None:
        """A step toward the first remembered place with a known route."""
        for item, place, _ in trips:
            room = place if place in self.exits else self.containers.get(place)
            if go := self._go_to_room(room, f"memory: {item} is found in the {place}"):
                self._use("found", item, place)
                return go
        return None


EXPLORERS: dict[str, type[Explorer]] = {"twc": TwcExplorer, "cookingworld": CookingExplorer}


def make_explorer(game: str, *, common_sense: bool = True) -> Explorer:
    """The rule-based explorer for a TextWorldExpress game (a generic novelty explorer else).

    ``common_sense=False`` gives the cooking explorer no prior on cooking devices (it guesses
    among those it has seen), as the benchmarks before the plain-baseline work ran it."""
    if game == "cookingworld":
        return CookingExplorer(common_sense=common_sense)
    return EXPLORERS.get(game, Explorer)()


# ---- a chat-model policy ---------------------------------------------------------------------


class ChatPolicy:
    """A :class:`Policy` that asks a chat model for each action, through :class:`MemoryLLM`.

    Every call is counted in ``llm.usage``, bounded by a per-step :class:`CallBudget`, retried
    when the reply names no valid action or the request fails, and constrained to the list of
    valid actions where the server takes a JSON schema. A step the model cannot answer is taken
    by ``fallback`` (by default a rule-based :class:`Explorer`), so a slow, dead or confused
    endpoint degrades the agent instead of killing the run; ``fallback=None`` raises
    :class:`~graphmem.errors.LLMError` instead (the agent flow then ends that game).

    >>> from langchain_core.language_models.fake_chat_models import FakeListChatModel
    >>> policy = ChatPolicy(FakeListChatModel(responses=["I will open the fridge."]))
    >>> policy.begin("Cook a meal.")
    >>> policy.act("You are in the kitchen.", ["open fridge", "move west"], "").action
    'open fridge'
    """

    def __init__(
        self,
        llm: MemoryLLM | BaseChatModel,
        *,
        fallback: Policy | Literal["explorer"] | None = "explorer",
        history: int = 6,
    ) -> None:
        from graphmem.llm import MemoryLLM

        self.llm = llm if isinstance(llm, MemoryLLM) else MemoryLLM(llm)
        self.fallback: Policy | None = Explorer() if fallback == "explorer" else fallback
        self.history = history
        self.model_steps = 0
        self.fallback_steps = 0
        self.fallback_reasons: Counter[str] = Counter()
        """Why the explorer took steps for the model: timeout, invalid reply, disabled endpoint…"""
        self.begin("")

    @property
    def model(self) -> BaseChatModel:
        return self.llm.chat_model

    def begin(self, task: str, hints: Sequence[str] = (), seed: int = 0) -> None:
        self.task = task
        self.hints = list(hints)
        self.recent: list[str] = []
        self.plans: list[Plan] = []
        self.taken: Counter[str] = Counter()
        if self.fallback is not None:
            self.fallback.begin(task, hints, seed)

    def add_hints(self, hints: Sequence[str]) -> None:
        self.hints.extend(h for h in hints if h not in self.hints)

    def offer_procedures(self, plans: Sequence[Plan]) -> None:
        """Show the model the steps of the best retrieved procedures (Mem^p: plan from the most
        useful past procedure); the model adapts them to what it sees."""
        self.plans = [p for p in plans if p.success][:MAX_PLANS]
        if isinstance(self.fallback, ProcedurePolicy):
            self.fallback.offer_procedures(plans)

    def followed_procedures(self) -> list[str]:
        """The offered procedures the model acted on: at least two of their steps taken (or
        their only one), looks and inventory checks not counted."""
        followed = []
        for plan in self.plans:
            actions = {_norm(a) for a, _ in plan.steps} - {""}
            actions = {a for a in actions if not a.startswith(("look", "inventory", "examine "))}
            if actions and sum(1 for a in actions if self.taken[a]) >= min(2, len(actions)):
                followed.append(plan.procedure_id)
        return followed

    def situation(self, observation: str, inventory: str) -> str:
        """What the model is shown to choose its next action."""
        memory = "\n".join(f"- {h}" for h in self.hints[:30]) or "(none)"
        procedures = "".join(
            f"\n{i}. for '{plan.task[:120]}': {'; '.join(a for a, _ in plan.steps[:PLAN_STEPS])}"
            for i, plan in enumerate(self.plans, 1)
        )
        shown = (
            "\n\nProcedures that solved similar tasks (follow the one that fits, with this "
            f"game's objects and places; skip steps that do not apply):{procedures}"
            if procedures
            else ""
        )
        return (
            f"Task: {self.task}\n\nWhat memory says:\n{memory}{shown}\n\n"
            f"Recent steps:\n{chr(10).join(self.recent[-self.history :]) or '(none)'}\n\n"
            f"Observation:\n{observation[:1500]}\n\nInventory:\n{inventory[:500]}"
        )

    def act(self, observation: str, valid_actions: Sequence[str], inventory: str) -> Decision:
        from graphmem.errors import LLMError
        from showcase.llm_actions import llm_choose_action

        situation = self.situation(observation, inventory)
        try:
            choice = llm_choose_action(self.llm, situation, valid_actions)
        except LLMError as e:
            if self.fallback is None:
                raise
            self.fallback_steps += 1
            self.fallback_reasons[failure_reason(str(e))] += 1
            decision = self.fallback.act(observation, valid_actions, inventory)
            reason = " ".join(str(e).split())[:160]
            return Decision(decision.action, f"model failed ({reason}); rule: {decision.thought}")
        self.model_steps += 1
        return Decision(choice.action, f"model: {choice.thought.strip()[:200]}")

    def summary(self) -> str:
        """Who acted, in one line: the steps the model chose, and those the rules took and why.

        >>> from langchain_core.language_models.fake_chat_models import FakeListChatModel
        >>> policy = ChatPolicy(FakeListChatModel(responses=["I will open the fridge."]))
        >>> policy.summary()
        'the model chose no step (no step was played)'
        """
        total = self.model_steps + self.fallback_steps
        why = ", ".join(f"{n} {reason}" for reason, n in self.fallback_reasons.most_common())
        if total == 0:
            return "the model chose no step (no step was played)"
        if self.model_steps == 0:
            return f"the model chose no step: the explorer took all {total} ({why})"
        if self.fallback_steps == 0:
            return f"the model chose all {total} steps"
        return (
            f"the model chose {self.model_steps} of {total} steps; the explorer took "
            f"{self.fallback_steps} ({why})"
        )

    def feedback(self, action: str, observation: str, reward: float) -> None:
        self.taken[_norm(action)] += 1
        self.recent.append(f"{action} -> {observation.strip()[:120]} (reward {reward:g})")
        if self.fallback is not None:
            self.fallback.feedback(action, observation, reward)


def _norm(action: str) -> str:
    return " ".join(action.lower().split())


def failure_reason(error: str) -> str:
    """Why a model step failed, in a word or two, from its :class:`LLMError` message.

    >>> failure_reason("choose_action via m: not used: 2 requests failed in a row")
    'disabled endpoint'
    """
    lower = error.lower()
    if ": not used: " in lower:
        return "disabled endpoint"
    if "budget" in lower:
        return "call budget spent"
    if "cut at" in lower or "over the bound" in lower or "over the cap" in lower:
        return "reply too long"
    if "invalid output" in lower:
        return "invalid reply"
    if "timeout" in lower or "timed out" in lower or "deadline" in lower:
        return "timeout"
    return "failed request"


def choose_action(text: str, valid_actions: Sequence[str]) -> str:
    """The valid action a model's reply names: exact line, contained action, or closest match."""
    from showcase.llm_actions import match_action

    valid = list(valid_actions) or ["look around"]
    found = match_action(text, valid)
    if found is not None:
        return found
    lowered = {a.lower(): a for a in valid}
    flat = " ".join(text.lower().split())[:200]
    best = difflib.get_close_matches(flat, list(lowered), n=1, cutoff=0.0)
    return lowered[best[0]] if best else valid[0]
