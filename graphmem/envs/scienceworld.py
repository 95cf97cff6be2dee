"""ScienceWorld adapter, gold trajectories for procedural memory, and a replay-and-adapt policy.

Procedural memory for ScienceWorld is built from gold trajectories of *train* variations
(:func:`gold_trajectory`); on a *test* variation the :class:`ReplayAdapter` policy replays the
nearest remembered procedure, substituting the objects and places that differ between the two
task descriptions, skipping actions that are not valid now, and falling back to exploration.

>>> substitutions("boil water in the kitchen", "boil milk in the kitchen")
{'water': 'milk'}
"""

from __future__ import annotations

import difflib
import logging
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any

from graphmem.envs.agents import Decision
from graphmem.envs.base import Observation, StepResult
from graphmem.envs.jvm import EnvError, InvalidEnvInput, find_java17, launching_with_java
from graphmem.models import Trajectory, TrajectoryStep

log = logging.getLogger(__name__)

FOLDS = ("train", "dev", "test")
_AMBIGUOUS = "Ambiguous request"
_TOKEN = re.compile(r"[A-Za-z0-9.\-']+")
_STOP = frozenset(
    ["a", "an", "the", "of", "to", "in", "on", "is", "it", "if", "and", "or", "your", "task"]
)


class ScienceWorldEnv:
    """One ScienceWorld task with a step budget; the JVM starts once and is reused.

    ``reset(seed, fold)`` loads variation ``seed`` of the task, which must belong to ``fold``.
    Scores are ScienceWorld's 0..100 divided by 100; success is a completed task at 100.
    Valid actions are listed only when ``list_valid_actions`` is true (it costs ~0.1-0.3 s/step).
    """

    def __init__(
        self,
        task: str,
        step_budget: int = 60,
        simplifications: str = "",
        list_valid_actions: bool = True,
    ) -> None:
        if not isinstance(task, str) or not task:
            raise InvalidEnvInput("task must be a ScienceWorld task name such as 'boil'")
        if step_budget < 1:
            raise InvalidEnvInput(f"step_budget must be at least 1, got {step_budget}")
        self.task = task
        self.step_budget = step_budget
        self.simplifications = simplifications
        self.list_valid_actions = list_valid_actions
        self._env: Any = None
        self._steps = 0
        self._done = True
        self._score = 0.0
        self.seed: int | None = None
        self._variations: dict[str, list[int]] = {}

    def _server(self) -> Any:
        if self._env is None:
            java = find_java17()
            try:
                import scienceworld.scienceworld as sw_module
            except ImportError as e:
                raise EnvError("scienceworld is not installed (pip install graphmem[envs])") from e
            with launching_with_java(sw_module, java):
                try:
                    self._env = sw_module.ScienceWorldEnv("", envStepLimit=100_000)
                except Exception as e:
                    raise EnvError(f"could not start ScienceWorld: {e}") from e
            if self.task not in self._env.get_task_names():
                names = ", ".join(self._env.get_task_names())
                self.close()
                raise InvalidEnvInput(f"unknown ScienceWorld task {self.task!r}; known: {names}")
        return self._env

    def variations(self, fold: str) -> list[int]:
        """The variation indices of ``fold`` (train, dev or test) for this task."""
        if fold not in FOLDS:
            raise InvalidEnvInput(f"fold must be one of {', '.join(FOLDS)}, got {fold!r}")
        if fold not in self._variations:
            env = self._server()
            env.load(self.task, 0, self.simplifications)
            getter = {
                "train": env.get_variations_train,
                "dev": env.get_variations_dev,
                "test": env.get_variations_test,
            }[fold]
            self._variations[fold] = [int(v) for v in getter()]
        return list(self._variations[fold])

    def close(self) -> None:
        """Stop the JVM (idempotent)."""
        env, self._env = self._env, None
        self._done = True
        if env is not None:
            try:
                env.close()
            except Exception as e:  # the JVM may already be gone; closing must not raise
                log.debug("closing ScienceWorld: %s", e)

    def __enter__(self) -> ScienceWorldEnv:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def reset(self, seed: int, fold: str = "test") -> Observation:
        """Load variation ``seed`` (one of ``variations(fold)``) and look around."""
        if seed not in self.variations(fold):
            raise InvalidEnvInput(f"variation {seed!r} is not in the {fold} fold of {self.task}")
        env = self._server()
        try:
            env.load(self.task, seed, self.simplifications, generateGoldPath=True)
            env.server.reset()
            text = str(env.server.step("look around"))
        except Exception as e:
            raise EnvError(f"ScienceWorld reset failed: {e}") from e
        self.seed = seed
        self._steps = 0
        self._score = 0.0
        self._done = False
        return self._observation(text, completed=False)

    def step(self, action: str) -> StepResult:
        """Take one action; done on completion, failure (negative score) or spent budget."""
        if self._done or self._env is None:
            raise EnvError("step() needs a running episode: call reset() first")
        if not isinstance(action, str) or not action.strip():
            raise InvalidEnvInput("an action must be a non-empty string")
        previous = self._score
        try:
            # The server directly: the package's step() also lists valid actions every step.
            text = str(self._env.server.step(action))
            self._score = float(self._env.server.getScore())
            completed = bool(self._env.server.getCompleted())
        except Exception as e:
            raise EnvError(f"ScienceWorld step failed: {e}") from e
        self._steps += 1
        obs = self._observation(text, completed)
        done = obs.done or self._steps >= self.step_budget
        self._done = done
        return StepResult(obs, obs.score - previous, done, obs.success)

    def gold_path(self) -> list[str]:
        """The simulator's gold action sequence for the loaded variation."""
        if self._env is None or self.seed is None:
            raise EnvError("gold_path() needs a variation: call reset() first")
        return [str(a) for a in self._env.get_gold_action_sequence()]

    def task_description(self) -> str:
        if self._env is None or self.seed is None:
            raise EnvError("task_description() needs a variation: call reset() first")
        return str(self._env.get_task_description())

    def _observation(self, text: str, completed: bool) -> Observation:
        env = self._env
        score = max(-1.0, min(self._score, 1.0))
        success = completed and self._score >= 1.0
        failure = self._score < 0
        valid: tuple[str, ...] = ()
        if self.list_valid_actions and not (completed or failure):
            valid = tuple(sorted(str(a) for a in env.get_valid_action_object_combinations()))
        return Observation(
            task=str(env.get_task_description()),
            text=text,
            valid_actions=valid,
            inventory=str(env.server.freeActionInventory()),
            look="",
            score=score,
            moves=self._steps,
            done=completed or failure,
            success=success,
            failure=failure,
            info={"game": f"scienceworld:{self.task}", "seed": self.seed or 0},
        )


def gold_trajectory(env: ScienceWorldEnv, variation: int, fold: str = "train") -> Trajectory:
    """Play the gold path of ``variation`` and return it as a graphmem Trajectory.

    Observations are the simulator's replies, so the trajectory is what an agent would have
    seen; ``success`` is what actually happened (gold paths occasionally fall short).
    """
    listing, env.list_valid_actions = env.list_valid_actions, False  # not needed; costly
    try:
        obs = env.reset(variation, fold)
        task = obs.task
        steps: list[TrajectoryStep] = []
        result: StepResult | None = None
        for action in env.gold_path():
            result = env.step(action)
            steps.append(TrajectoryStep(action=action, observation=result.observation.text[:2000]))
            if result.done:
                break
    finally:
        env.list_valid_actions = listing
    final = result.observation if result else obs
    return Trajectory(
        task=task,
        steps=steps,
        reward=final.score,
        success=final.success,
        metadata={"game": f"scienceworld:{env.task}", "variation": variation, "fold": fold},
    )


def _tokens(text: str) -> list[str]:
    return [t.lower().strip(".") for t in _TOKEN.findall(text)]


def similarity(a: str, b: str) -> float:
    """Token Jaccard similarity of two task descriptions (stop words ignored)."""
    ta = set(_tokens(a)) - _STOP
    tb = set(_tokens(b)) - _STOP
    return len(ta & tb) / len(ta | tb) if ta | tb else 0.0


def nearest(task: str, candidates: Mapping[str, Sequence[str]]) -> list[str]:
    """The actions of the candidate whose task description is most similar to ``task``."""
    if not candidates:
        return []
    best = max(candidates, key=lambda c: similarity(task, c))
    return list(candidates[best])


def substitutions(source: str, target: str) -> dict[str, str]:
    """Phrases of ``source`` replaced in ``target`` (objects, places, colours, numbers)."""
    a, b = source.split(), target.split()
    subs: dict[str, str] = {}
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if op != "replace":
            continue
        old = " ".join(a[i1:i2]).strip(".,'\"")
        new = " ".join(b[j1:j2]).strip(".,'\"")
        if old and new and old.lower() not in _STOP and old not in subs:
            subs[old] = new
    return subs


def adapt_actions(actions: Sequence[str], subs: Mapping[str, str]) -> list[str]:
    """``actions`` with every phrase of ``subs`` replaced at once (longest phrase first)."""
    if not subs:
        return list(actions)
    keys = sorted(subs, key=len, reverse=True)
    pattern = re.compile(r"\b(" + "|".join(re.escape(k) for k in keys) + r")\b")
    return [pattern.sub(lambda m: subs[m.group(1)], a) for a in actions]


_ROOM_NAME = re.compile(r"This (?:room|outside location) is called the ([^.]+)\.")
_MOVED = re.compile(r"You move (?:through the door )?to the ([^.]+)\.")
_DOOR = re.compile(r"door to the ([^(\n]+?) \(that is (open|closed)\)")
_UNKNOWN = "No known action matches"


_OBJECT_VERBS = re.compile(
    r"^(?:pick up|focus on|move|use|open|activate|read|eat) (.+?)"
    r"(?: in inventory)?(?: (?:to|on|in) .*)?$"
)


def _object_of(action: str) -> str | None:
    """The object an action acts on (``pick up X`` / ``focus on X in inventory`` -> X)."""
    if action.startswith(("open door", "go to", "look")):
        return None
    m = _OBJECT_VERBS.match(action)
    return m.group(1).strip() if m else None


def _first_sentence(text: str) -> str:
    return text.strip().split(". ", 1)[0].strip().lower()


def room_edges(actions: Sequence[str]) -> set[tuple[str, str]]:
    """Room adjacencies a procedure reveals: consecutive ``go to A`` ... ``go to B`` moves."""
    edges: set[tuple[str, str]] = set()
    room: str | None = None
    for action in actions:
        if action.startswith("go to "):
            nxt = action[6:].strip()
            if room and room != nxt:
                edges |= {(room, nxt), (nxt, room)}
            room = nxt
    return edges


class ReplayAdapter:
    """Replay a remembered ScienceWorld procedure on a new variation, adapting it.

    ``begin(task, hints)`` takes hints of the form ``"TASK DESCRIPTION :: a1; a2; ..."`` (or
    plain ``"a1; a2"``); the nearest one is adapted (:func:`substitutions`) and replayed:
    ``open door to X`` / ``go to X`` become "walk to room X" over the room map learned from
    all hints and from the doors seen so far (variations start in different rooms), a focus on
    something not in sight is skipped (a wrong focus fails the task), and actions the simulator
    does not know are passed over. Without hints, or when the replay runs out, it explores.
    """

    name = "sw-replay"

    def __init__(self) -> None:
        self.begin("")

    def begin(self, task: str, hints: Sequence[str] = (), seed: int = 0) -> None:
        self.task = task
        procedures: dict[str, list[str]] = {}
        for hint in hints:
            desc, sep, actions = hint.partition("::")
            seq = [a.strip() for a in (actions if sep else desc).split(";") if a.strip()]
            if seq:
                procedures[desc.strip() if sep else f"procedure {len(procedures)}"] = seq
        self.edges: set[tuple[str, str]] = set()
        for seq in procedures.values():
            self.edges |= room_edges(seq)
        best = max(procedures, key=lambda d: similarity(task, d), default=None)
        plan = procedures[best] if best else []
        adapted = adapt_actions(plan, substitutions(best, task)) if best else []
        # What served as "the thing" in procedures of this very task (same first sentence):
        # stand-ins when the replayed procedure's own object is not around.
        self.stand_ins: list[str] = list(
            dict.fromkeys(
                obj
                for desc, seq in procedures.items()
                if _first_sentence(desc) == _first_sentence(task)
                for action in adapt_actions(seq, substitutions(desc, task))
                if action.startswith("focus on ") and (obj := _object_of(action))
            )
        )
        # Door openings are redone by the navigator, whatever room the variation starts in.
        self.plan = [a for a in adapted if not a.startswith("open door to ")]
        self.tried: Counter[str] = Counter()
        self.focused: set[str] = set()
        self.room = ""
        self.seen = ""
        self.closed: set[str] = set()
        self.visited: set[str] = set()
        self.last_action = ""
        self.targets = [
            m.strip() for m in re.findall(r"[Ff]ocus on the ([^.,]+?)[.,]", task) if m.strip()
        ]

    def _observe(self, text: str) -> None:
        if m := _ROOM_NAME.search(text):
            self.room = m.group(1).strip()
            self.seen = text
            for door, state in _DOOR.findall(text):
                self.edges |= {(self.room, door.strip()), (door.strip(), self.room)}
                if state == "closed":
                    self.closed.add(door.strip())
                else:
                    self.closed.discard(door.strip())
        elif m := _MOVED.search(text):
            self.room = m.group(1).strip()
            self.seen = ""
        if self.room:
            self.visited.add(self.room)

    def _hop(self, goal: str) -> str | None:
        """Next room on the shortest known route to ``goal``."""
        frontier, parent = [self.room], {self.room: self.room}
        while frontier:
            nxt: list[str] = []
            for room in frontier:
                for a, b in sorted(self.edges):
                    if a == room and b not in parent:
                        parent[b] = room
                        nxt.append(b)
            frontier = nxt
        if goal not in parent:
            return None
        while parent[goal] != self.room:
            goal = parent[goal]
        return goal

    def _walk(self, goal: str) -> Decision | None:
        hop = self._hop(goal)
        if hop is None:
            # No known route: head for the nearest room not yet visited; its doors extend the map.
            unvisited = [r for r in sorted({b for _, b in self.edges}) if r not in self.visited]
            hops = [h for r in unvisited if (h := self._hop(r))]
            if not hops:
                return None
            hop = hops[0]
        if hop in self.closed:
            self.closed.discard(hop)
            return self._choose(f"open door to {hop}", f"walk to the {goal}: open the door")
        return self._choose(f"go to {hop}", f"walk to the {goal}")

    def _in_sight(self, thing: str, inventory: str) -> bool:
        # Whole words: "thing" is not in sight because the room holds "something".
        pattern = re.compile(rf"\b{re.escape(thing)}\b")
        return bool(pattern.search(self.seen) or pattern.search(inventory))

    def _search(self) -> Decision | None:
        if not self.seen:
            return self._choose("look around", "search: look")
        unvisited = sorted({b for _, b in self.edges} - self.visited)
        for room in unvisited:
            if step := self._walk(room):
                return step
        return None

    def act(self, observation: str, valid_actions: Sequence[str], inventory: str) -> Decision:
        self._observe(observation)
        if _AMBIGUOUS in observation:
            answer = self.plan.pop(0) if self.plan and self.plan[0].isdigit() else "0"
            return Decision(answer, "answer the disambiguation prompt")
        while self.plan:
            action = self.plan[0]
            if action.startswith("go to "):
                goal = action[6:].strip()
                if goal == self.room:
                    self.plan.pop(0)
                    if not self.seen:
                        return self._choose("look around", f"arrived in the {goal}: look")
                    continue
                if not self.seen:
                    return self._choose("look around", "look for doors before walking")
                if self.tried[f"walk {goal}"] < 30 and (step := self._walk(goal)):
                    self.tried[f"walk {goal}"] += 1
                    return step
                self.plan.pop(0)
                continue
            if action == "look around" and self.last_action == "look around":
                self.plan.pop(0)
                continue
            thing = _object_of(action)
            if thing and not self._in_sight(thing, inventory) and action.startswith("focus on "):
                stand_in = next((o for o in self.stand_ins if self._in_sight(o, inventory)), None)
                if stand_in:
                    self.plan = adapt_actions(self.plan, {thing: stand_in})
                    action, thing = self.plan[0], stand_in
            if thing and not self._in_sight(thing, inventory):
                # Not here: search unvisited rooms for it for a while, else skip the step
                # (a focus on something absent would fail the task).
                if self.tried[f"search {thing}"] < 10 and (step := self._search()):
                    self.tried[f"search {thing}"] += 1
                    return step
                self.plan.pop(0)
                continue
            self.plan.pop(0)
            if action.isdigit():
                continue
            return self._choose(action, f"replay adapted step: {action}")
        return self._explore(set(valid_actions), inventory)

    def _explore(self, valid: set[str], inventory: str) -> Decision:
        if not self.seen:
            return self._choose("look around", "explore: look")
        for target in self.targets:
            action = f"focus on {target}"
            if target not in self.focused and self._in_sight(target, inventory):
                self.focused.add(target)
                return self._choose(action, f"the task says to focus on the {target}")
        unvisited = sorted(b for a, b in self.edges if a == self.room and b not in self.visited)
        if unvisited and (step := self._walk(unvisited[0])):
            return step
        pool = sorted(a for a in valid if not a.startswith(("focus on", "look at", "read")))
        if not pool:
            return self._choose("look around", "explore: nothing better to do")
        best = min(self.tried[a] for a in pool)
        fresh = [a for a in pool if self.tried[a] == best]
        return self._choose(fresh[0], "explore: least-tried action")

    def _choose(self, action: str, thought: str) -> Decision:
        self.tried[action] += 1
        self.last_action = action
        return Decision(action, thought)

    def feedback(self, action: str, observation: str, reward: float) -> None:
        self._observe(observation)


def procedure_hint(task_description: str, actions: Sequence[str]) -> str:
    """A ReplayAdapter hint: ``"TASK :: a1; a2; ..."``."""
    return f"{' '.join(task_description.split())} :: " + "; ".join(actions)
