"""ScienceWorld adapter, gold trajectories for procedural memory, and a replay-and-adapt policy.

Procedural memory for ScienceWorld is built from gold trajectories of *train* variations
(:func:`gold_trajectory`); on a *test* variation the :class:`ReplayAdapter` policy replays the
nearest remembered procedure, substituting the objects and places that differ between the two
task descriptions (and absent objects by present ones of their kind), deciding conditional
answers from what it observes, skipping actions that do not apply, and falling back to
exploration.

>>> substitutions("boil water in the kitchen", "boil milk in the kitchen")
{'water': 'milk'}
"""

from __future__ import annotations

import difflib
import logging
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from itertools import pairwise
from types import TracebackType
from typing import Any

from graphmem.agents import Decision, Observation, StepResult
from graphmem.models import Trajectory, TrajectoryStep
from showcase.envs.jvm import (
    EnvError,
    InvalidEnvInput,
    close_once,
    find_java17,
    launching_with_java,
)
from showcase.envs.tasks import task_with_first_observation

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

    def task_names(self) -> list[str]:
        """Every task type the simulator knows."""
        return [str(t) for t in self._server().get_task_names()]

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
            close_once(env, "ScienceWorld")

    def __enter__(self) -> ScienceWorldEnv:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def task_text(self, first: Observation) -> str:
        """The task and the first look around (:class:`graphmem.agents.TaskEnv`)."""
        return task_with_first_observation(first)

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


_UNKNOWN_ACTION = "No known action matches that input."
_GROWING = re.compile(r"\(containing [^)\n]* in the [a-z]+ stage")
_AT_STAGE = re.compile(r"^(.+?) in the ([a-z]+) stage in (.+)$")
_PICKED = re.compile(r"You move the ([^.\n]+?) to the inventory\.")
_FOCUSED = re.compile(r"You focus on the ([^.\n]+)\.")
_CONTAINING = re.compile(r"(?:^|\t)(?:a|an) ([^\t\n(]+?) \(containing ([^)\n]*)\)", re.MULTILINE)
_PLACEHOLDERS = frozenset(["substance", "thing", "object", "item", "material"])
_OPTION = re.compile(r"^\s*(\d+):\s*(.+?)\s*$", re.MULTILINE)
_CONDITION = re.compile(
    r"If ((?:[^.]|\.\d)+?), (?:place it in|put it in|move it to|focus on) the ([^.]+?)\.",
    re.IGNORECASE,
)
_THRESHOLD = re.compile(
    r"\b(above|over|greater than|higher than|more than|below|under|less than|lower than)"
    r" (-?\d+(?:\.\d+)?)"
)
_MEASURED = re.compile(r"(-?\d+(?:\.\d+)?) degrees")
_ABOVE = frozenset(["above", "over", "greater than", "higher than", "more than"])
_LISTED = re.compile(
    r"(?:^|[\t:,] ?)(?:a|an|the|A|An|The) ([a-z][A-Za-z0-9 \-]*?)(?=,|\.|\(|:| which|$)",
    re.MULTILINE,
)


def task_object(task: str) -> str | None:
    """The object of the task's first sentence: ``"Your task is to boil lead."`` -> ``lead``.

    None when there is none, or when it names a kind rather than a thing (``"find a(n)
    animal"``: any animal will do, and no object here is called "animal").
    """
    m = re.match(r"\s*Your task is to (.+?)(?:\.|, which)", task)
    if not m:
        return None
    phrase = m.group(1).strip()
    if " of " in phrase:
        phrase = phrase.rsplit(" of ", 1)[1]
    else:
        phrase = phrase.split(" ", 1)[1] if " " in phrase else ""
    if re.match(r"(?:a\(n\)|an|a) ", phrase.strip()):
        return None
    phrase = re.sub(r"^the ", "", phrase.strip())
    return phrase or None


def _focus_targets(task: str) -> list[str]:
    """What the task says to focus on: ``"First, focus on the thing."`` -> ``["thing"]``."""
    return [t for m in re.findall(r"[Ff]ocus on the ([^.,]+?)[.,]", task) if (t := m.strip())]


def _says_placeholder(named: Sequence[str]) -> bool:
    """Whether a focus target is a placeholder ("the substance", "the thing")."""
    return any(t.split()[-1] in _PLACEHOLDERS for t in named)


def names_a_kind(task: str) -> bool:
    """Whether any thing of a kind will do: ``"find a(n) animal. First, focus on the thing."``

    The task names no object of its own (:func:`task_object` is None) and says to focus on
    a placeholder, so what a remembered run focused on was only one instance of the kind.
    """
    return task_object(task) is None and _says_placeholder(_focus_targets(task))


def focused_names(steps: Sequence[tuple[str, str]]) -> list[str]:
    """``steps``' actions with each focus target written as the simulator named it.

    ``focus on dove`` answered "You focus on the dove egg." makes every ``dove`` standing
    alone ``dove egg`` (``pick up dove`` -> ``pick up dove egg``), so a replay knows what kind
    of thing the run focused on (an egg) and can stand in another of that kind.
    """
    actions = [a for a, _ in steps]
    for action, observation in steps:
        m = _FOCUSED.search(observation)
        if not action.startswith("focus on ") or not m:
            continue
        short, full = action[len("focus on ") :].strip(), m.group(1).strip()
        if not short or short == full:
            continue
        alone = re.compile(rf"\b{re.escape(short)}\b")
        if full in short:  # "adult pea plant" is the pea plant
            actions = [alone.sub(full, a) for a in actions]
        else:  # "dove" is the dove egg, where it is not already "dove egg"
            actions = [full.join(alone.sub(full, part) for part in a.split(full)) for a in actions]
    return actions


def _contained(text: str) -> list[tuple[str, str]]:
    """(item, container) for what the containers a room description lists hold, the item as
    listed without its article: ``("peach tree in the adult stage", "flower pot 3")``."""
    return [
        (item, container.strip())
        for container, inside in _CONTAINING.findall(text)
        for part in re.split(r", | and ", inside)
        if (item := re.sub(r"^(?:a|an|the) (?:substance called )?", "", part.strip()))
        and item != "nothing"
    ]


def contents(text: str) -> dict[str, str]:
    """What the containers a room description lists hold: ``{"peach tree": "flower pot 3"}``."""
    held: dict[str, str] = {}
    for item, container in _contained(text):
        if name := re.sub(r" in the [a-z ]+ stage.*$", "", item).strip():
            held.setdefault(name, container)
    return held


def conditions(task: str) -> list[tuple[str, str]]:
    """The task's conditional answers: ``If C, place it in the X.`` -> ``[(C, X), ...]``."""
    return [(c.strip(), x.strip()) for c, x in _CONDITION.findall(task)]


def choose_option(prompt: str, intended: str, context: str = "") -> str:
    """The number of the disambiguation option that best matches the ``intended`` action.

    Options are scored by the words they share with the intended action (the object's own
    name first), then with ``context`` (e.g. the current room); ties go to the lowest number.
    """
    options = _OPTION.findall(prompt)
    if not options:
        return "0"
    want = set(_tokens(intended))
    where = set(_tokens(context))

    def score(option: tuple[str, str]) -> tuple[int, int, int, int]:
        head = set(_tokens(option[1].split(" (", 1)[0]))
        return (
            len(want & head),
            -len(head - want),  # "tin" before "tin cup" when the action says tin
            len(where & set(_tokens(option[1]))),
            -int(option[0]),
        )

    best: str = max(options, key=score)[0]
    return best


def visible_objects(text: str) -> list[str]:
    """Objects a ScienceWorld room description lists (``a black wire`` -> ``black wire``)."""
    found = [m.strip() for m in _LISTED.findall(text)]
    return list(dict.fromkeys(f for f in found if f and not f.startswith(("door", "room"))))


def _bigrams(text: str) -> set[str]:
    tokens = _tokens(text)
    return {f"{a} {b}" for a, b in pairwise(tokens)}


def threshold_choice(conds: Sequence[tuple[str, str]], observations: Sequence[str]) -> str | None:
    """The answer whose ``above/below N`` condition the last measured value satisfies."""
    value = next(
        (float(m[-1]) for text in reversed(observations) if (m := _MEASURED.findall(text))),
        None,
    )
    if value is None:
        return None
    for cond, answer in conds:
        if t := _THRESHOLD.search(cond):
            limit = float(t.group(2))
            above = t.group(1) in _ABOVE
            if (value > limit) if above else (value < limit):
                return answer
    return None


_POINT = re.compile(r"\b(melting) point of (?:the |a |an )?([^,.]+)")
_CHANGED_STATE = {"melting": "liquid"}


def point_of(task: str) -> tuple[str, str] | None:
    """``("melting", "tin")`` for a task about tin's melting point, else None."""
    m = _POINT.search(task)
    return (m.group(1), m.group(2).strip()) if m else None


def point_choice(
    conds: Sequence[tuple[str, str]], readings: Sequence[tuple[str, float]], state: str
) -> str | None:
    """The answer a melting point task's readings decide, or None while undecided.

    ``readings`` are (what was measured, degrees) in order; a reading of something named for
    the changed state (``liquid tin``) was taken after the change, any other before it. Still
    unchanged above the threshold: the point is above it. Changed at a first reading below the
    threshold: below it. Changed between a reading below the threshold and one above it: the
    nearer one's side of the midpoint. Readings before the change that are all below the
    threshold decide nothing: a substance at room temperature says nothing of its melting point.
    """
    limits = [(t, answer) for cond, answer in conds if (t := _THRESHOLD.search(cond))]
    if not readings or not limits:
        return None
    above = next((a for t, a in limits if t.group(1) in _ABOVE), None)
    below = next((a for t, a in limits if t.group(1) not in _ABOVE), None)
    limit = float(limits[0][0].group(2))
    before = [v for name, v in readings if not name.startswith(state)]
    after = [v for name, v in readings if name.startswith(state)]
    if any(v > limit for v in before):
        return above
    if not after:
        return None
    estimate = after[0] if not before else (before[-1] + after[0]) / 2
    return above if estimate > limit else below


def changed_pairs(before: str, after: str) -> set[str]:
    """Word pairs of ``after`` that ``before`` lacked (``bulb, which is on`` after ``off``)."""
    return _bigrams(after) - _bigrams(before)


def evidence_choice(
    conds: Sequence[tuple[str, str]], examples: Sequence[tuple[str, str]], now: set[str]
) -> str | None:
    """The answer whose remembered evidence the change this run observed matches.

    ``examples`` are (condition, evidence) pairs from remembered runs; an evidence is the word
    pairs (``"is on | on a"``) that appeared in the room between the first look and the look
    before answering. Each condition keeps the pairs all its evidence shares and no other
    condition's evidence has; the condition whose pairs ``now`` holds best wins. With evidence
    for one of two conditions only, its pairs' absence means the other condition.
    None when nothing decides.
    """
    by_cond: dict[str, set[str]] = {}
    for cond, evidence in examples:
        pairs = {p.strip() for p in evidence.split("|") if p.strip()}
        by_cond[cond] = by_cond[cond] & pairs if cond in by_cond else pairs
    others = {c: set().union(*(by_cond[o] for o in by_cond if o != c)) for c in by_cond}
    own = {c: pairs - others[c] for c, pairs in by_cond.items() if pairs - others[c]}
    shares = {c: len(pairs & now) / len(pairs) for c, pairs in own.items()}
    if not shares:
        return None
    cond = max(shares, key=lambda c: shares[c])
    if shares[cond] < 0.5:
        if len(own) > 1 or len(conds) != 2:
            return None
        cond = next(c for c, _ in conds if c != cond)  # the one sign memory knows is absent
    return next((answer for c, answer in conds if c == cond), None)


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


def _adapted(desc: str, task: str) -> str:
    """A remembered task description with this task's objects, places and numbers."""
    return adapt_actions([desc], substitutions(desc, task))[0]


def _focus_room(actions: Sequence[str]) -> str | None:
    """The room a procedure was in at its first focus (the last ``go to`` before it)."""
    room = None
    for action in actions:
        if action.startswith("focus on "):
            return room
        if action.startswith("go to "):
            room = action[len("go to ") :].strip()
    return None


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
    does not know are passed over. An object of the replay that is not here is replaced by one
    of its kind that is and that the plan does not use (a red wire for a blue one). In a task
    any thing of a kind will do (:func:`names_a_kind`), a remembered focus that is absent is
    replaced by a thing here with the same last word (a frog egg for a dove egg), carried in
    the container that holds it here, after a walk to where remembered runs focused. A thing
    the plan waited for (a hatchling) or a life stage not reached yet is waited for, not
    searched for elsewhere; a stage focus goes to the pot that holds that stage here. An answer
    the task makes conditional (``If C, place it in the X``) is decided anew from this run's
    observations (:func:`threshold_choice`, :func:`evidence_choice`; hints may carry the
    evidence as ``"TASK :: a1; a2 :: EVIDENCE"``) and skipped when nothing decides it. A
    melting point is decided by the substance's state when measured (:func:`point_choice`),
    and while the replayed readings decide nothing it goes on measuring, waiting between them.
    Without hints, or when the replay runs out, it explores: it focuses on what the task names
    (``the substance`` is the task's own object, :func:`task_object`), answers disambiguation
    prompts with the option that matches its intended action (:func:`choose_option`) and walks
    on to rooms not seen while a target is missing.
    """

    name = "sw-replay"

    def __init__(self) -> None:
        self.begin("")

    def begin(self, task: str, hints: Sequence[str] = (), seed: int = 0) -> None:
        self.task = task
        procedures: dict[str, list[str]] = {}
        evidence: dict[str, str] = {}
        for hint in hints:
            desc, sep, rest = hint.partition("::")
            actions, _, seen = rest.partition("::") if sep else (desc, "", "")
            seq = [a.strip() for a in actions.split(";") if a.strip()]
            if seq:
                key = desc.strip() if sep else f"procedure {len(procedures)}"
                procedures[key] = seq
                if seen.strip():
                    evidence[key] = seen.strip()
        self.edges: set[tuple[str, str]] = set()
        for seq in procedures.values():
            self.edges |= room_edges(seq)
        best = max(procedures, key=lambda d: similarity(task, d), default=None)
        self.replayed: str | None = best
        """The description of the hint it replays: the most similar to the task (token
        Jaccard), the first handed over on a tie; None without hints."""
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
        # Where remembered runs of this task focused: a replayed plan that started there (so
        # never walks there) still looks there first for its thing.
        self.focus_rooms: list[str] = list(
            dict.fromkeys(
                room
                for desc, seq in procedures.items()
                if _first_sentence(_adapted(desc, task)) == _first_sentence(task)
                and (room := _focus_room(adapt_actions(seq, substitutions(desc, task))))
            )
        )
        # Answers that depend on the variation ("if conductive, place it in the red box"):
        # never replayed as remembered; decided from what this run observes.
        self.conds = conditions(task)
        self.examples: list[tuple[str, str]] = []
        for desc, seq in procedures.items():
            answer = _answer_index(conditions(desc), seq)
            if answer is not None and answer < len(self.conds) and desc in evidence:
                self.examples.append((self.conds[answer][0], evidence[desc]))
        # Door openings are redone by the navigator, whatever room the variation starts in;
        # remembered disambiguation answers are not replayed (the options differ per variation).
        self.plan = _without_transit(
            [a for a in adapted if not a.startswith("open door to ") and not a.isdigit()]
        )
        self.tried: Counter[str] = Counter()
        self.focused: set[str] = set()
        self.held: set[str] = set()
        self.focus_skipped = False
        self.room = ""
        self.seen = ""
        self.history: list[str] = []
        self.first_look: dict[str, str] = {}
        self.closed: set[str] = set()
        self.visited: set[str] = set()
        self.last_action = ""
        self.done_actions: list[str] = []
        # A melting point task: what the thermometer read, on what, in order.
        self.point = point_of(task)
        self.readings: list[tuple[str, float]] = []
        self.measured_on = ""
        self.thermometer = "use thermometer in inventory"
        self.seen_last = ""
        # "Focus on the substance": the task's own object (boil lead -> lead), not the word.
        obj = task_object(task)
        named = _focus_targets(task)
        self.targets = list(
            dict.fromkeys(obj if obj and t.split()[-1] in _PLACEHOLDERS else t for t in named)
        )
        # When the task says "focus on the substance", its object is the one thing to focus on:
        # a remembered focus on anything else was the remembered variation's object, and a
        # focus on the wrong thing fails the task.
        self.sole_focus = obj if obj and _says_placeholder(named) else None
        # "Find a(n) animal. First, focus on the thing.": another of the remembered kind will do.
        self.kind = obj is None and _says_placeholder(named)

    def _observe(self, text: str) -> None:
        if text and (not self.history or self.history[-1] != text):
            self.history.append(text)
        if m := _ROOM_NAME.search(text):
            self.room = m.group(1).strip()
            self.seen = text
            self.first_look.setdefault(self.room, text)
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
        if pattern.search(self.seen) or pattern.search(inventory):
            return True
        # The simulator's own phrasing of a thing: "egg giant tortoise in outside" is the
        # giant tortoise egg listed here (the same words, where it is).
        core = (
            re.sub(rf" in (?:inventory|{re.escape(self.room)})$", "", thing) if self.room else thing
        )
        words = sorted(core.split())
        if len(words) > 1 and any(
            sorted(o.split()) == words
            for o in [*visible_objects(self.seen), *visible_objects(inventory)]
        ):
            return True
        # Picked up under one name and carried under another (the frog egg hatched into a
        # common toad; "flower pot 3 containing peach tree and soil" is flower pot 3).
        return any(re.search(rf"\b{re.escape(h)}\b", thing) for h in self.held)

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
            intended = self.last_action
            answer = choose_option(observation, intended, f"{self.room} inventory")
            self.last_action = answer
            return Decision(answer, f"the option that matches {intended!r}")
        if self.sole_focus and self.sole_focus not in self.focused:
            # First find and focus on the task's own object, as the baseline does; the replay
            # (which cannot know where this variation put it) follows.
            if self._in_sight(self.sole_focus, inventory):
                self.focused.add(self.sole_focus)
                thought = f"the task says to focus on the {self.sole_focus}"
                return self._choose(f"focus on {self.sole_focus}", thought)
            if self.tried["search sole focus"] < 30 and (step := self._search()):
                self.tried["search sole focus"] += 1
                return step
        if step := self._measure_on():
            return step
        while self.plan:
            action = self.plan[0]
            if action.startswith("focus on ") and (self.sole_focus or self.focus_skipped):
                # Only the task's own object is focused on (above, once it is in sight). And a
                # focus is an answer given in order ("from earliest to latest"): once one was
                # skipped, replaying the later ones would give wrong answers, which fail the task.
                self.plan.pop(0)
                continue
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
            target = action[len("focus on ") :] if action.startswith("focus on ") else ""
            if target and _AT_STAGE.match(target) and self.seen:
                if staged := self._at_stage(target):
                    # "lemon tree in the adult stage in flower pot 9": here the adult grows in
                    # another pot; the focus goes to the pot that holds that stage here.
                    self.plan[0] = action = f"focus on {staged}"
                    self.plan.pop(0)
                    self.done_actions.append(action)
                    return self._choose(action, f"replay adapted step: {action}")
                if _GROWING.search(self.seen) and (step := self._wait_for(target, True)):
                    return step  # nothing at that stage yet: it grows while we wait
            if thing and not self._in_sight(thing, inventory) and action.startswith("focus on "):
                # Not one the plan focuses on itself (a later answer given early is wrong).
                planned = {_object_of(a) for a in [*self.plan, *self.done_actions]}
                stand_in = next(
                    (
                        o
                        for o in self.stand_ins
                        if o not in planned and self._in_sight(o, inventory)
                    ),
                    None,
                )
                if stand_in is None and self.kind:
                    stand_in = self._kin_in_sight(thing, planned)
                if stand_in:
                    self.plan = adapt_actions(self.plan, self._carried(thing, stand_in))
                    action, thing = self.plan[0], stand_in
            if thing and not self._in_sight(thing, inventory):
                if step := self._wait_for(thing):
                    return step
                # Not here: search unvisited rooms for it for a while, else skip the step
                # (a focus on something absent would fail the task).
                if action.startswith("focus on ") and (step := self._to_focus_room()):
                    return step
                if self.tried[f"search {thing}"] < 10 and (step := self._search()):
                    self.tried[f"search {thing}"] += 1
                    return step
                self.focus_skipped |= action.startswith("focus on ")
                self.plan.pop(0)
                continue
            given = self._answer_in(action) if self.conds else None
            # A task with conditional answers names everything to focus on: its targets and
            # its answers. A remembered focus on anything else (another variation's answer
            # box) would be a wrong answer, which fails the task.
            unnamed = thing and not any(thing in t or t in thing for t in self.targets)
            if self.conds and not given and action.startswith("focus on ") and unnamed:
                self.plan.pop(0)
                continue
            if given:
                decided = self._decide()
                if decided is None:
                    # Undecided: a remembered answer belongs to its own variation; guessing
                    # wrong fails the task, skipping keeps the progress made.
                    self.plan.pop(0)
                    continue
                action = re.sub(rf"\b{re.escape(given)}\b", decided, action)
                self.plan[0] = action
            if not action.startswith(("go to", "look", "wait", "open door")):
                self._stand_in_for_missing(action, inventory)
                action = self.plan[0]
            if self.kind and thing and action.startswith("focus on "):
                # The remembered plan carries its thing in the pot it grew in; here the thing
                # may grow in another one.
                self.plan = adapt_actions(self.plan, self._carried(thing, thing))
            self.plan.pop(0)
            self.done_actions.append(action)
            return self._choose(action, f"replay adapted step: {action}")
        return self._explore(set(valid_actions), inventory)

    def _at_stage(self, thing: str) -> str | None:
        """``X in the S stage in P`` as it is here: what is at stage S in this room, in the
        container that holds it (P itself when P does), named as listed here (``lemon seed in
        the seed stage in pot 4``: a seed is the seed stage). None when ``thing`` names no
        stage or nothing here is at that stage."""
        m = _AT_STAGE.match(thing)
        if not m or not self.seen:
            return None
        _, stage, remembered = m.groups()
        found: list[tuple[str, str]] = []
        for item, container in _contained(self.seen):
            if at := re.match(rf"^(.+?) in the {re.escape(stage)} stage\b", item):
                found.append((at.group(1), container))
            elif stage == "seed" and re.fullmatch(r"[a-z ]*\bseed", item):
                found.append((item, container))
        if not found:
            return None
        name, where = next((f for f in found if f[1] == remembered.strip()), found[0])
        return f"{name} in the {stage} stage in {where}"

    def _wait_for(self, thing: str, grows: bool = False) -> Decision | None:
        """The plan waited for ``thing`` to appear here (a hatchling after the egg), or it
        ``grows`` here: when it has not appeared yet, wait on and look again, for a while,
        rather than search elsewhere."""
        if not grows and not any(a.startswith("wait") for a in self.done_actions[-3:]):
            return None
        if self.tried[f"wait for {thing}"] >= 16:
            return None
        self.tried[f"wait for {thing}"] += 1
        if self.last_action.startswith("wait"):
            return self._choose("look around", f"has the {thing} appeared yet?")
        return self._choose("wait1", f"the {thing} is not here yet: wait")

    def _to_focus_room(self) -> Decision | None:
        """A step towards a room remembered runs focused in, not visited yet in this run."""
        for room in self.focus_rooms:
            if room in self.visited or self.tried[f"walk {room}"] >= 30:
                continue
            if not self.seen:
                return self._choose("look around", "look for doors before walking")
            if step := self._walk(room):
                self.tried[f"walk {room}"] += 1
                return step
        return None

    def _kin_in_sight(self, thing: str, planned: set[str | None]) -> str | None:
        """In a task any thing of a kind will do, one here of the kind remembered runs focused
        on (a frog egg for a dove egg, a peach tree for a cherry tree: the same last word),
        not used by the plan and not focused on yet."""
        kinds = {o.split()[-1] for o in [thing, *self.stand_ins] if o}
        here = [*visible_objects(self.seen), *contents(self.seen)]
        return next(
            (
                o
                for o in here
                if o.split()[-1] in kinds and o not in planned and o not in self.focused
            ),
            None,
        )

    def _carried(self, thing: str, stand_in: str) -> dict[str, str]:
        """The plan's substitutions for ``stand_in``: the thing itself, and the container the
        remembered run picked up to carry it (its flower pot) by the one holding the stand-in
        here."""
        subs = {thing: stand_in}
        holder = contents(self.seen).get(stand_in)
        carried = next(
            (o for a in self.plan[1:] if a.startswith("pick up ") and (o := _object_of(a))),
            None,
        )
        if holder and carried and carried not in (thing, holder) and thing not in carried:
            subs[carried] = holder
        return subs

    def _answer_in(self, action: str) -> str | None:
        """The conditional answer (e.g. ``green box``) an action gives, if any."""
        return next((x for _, x in self.conds if re.search(rf"\b{re.escape(x)}\b", action)), None)

    def _measure_on(self) -> Decision | None:
        """In a melting point task whose replayed measurements decided nothing (the
        remembered variation's substance changed state sooner), go on measuring where they
        were taken, waiting between readings, for a while (then the answer is skipped)."""
        if not (self.point and self.readings and self.conds) or self._decide() is not None:
            return None
        if self.plan and self.plan[0].startswith(("use thermometer", "examine", "wait")):
            return None  # the replay is still measuring
        if self.tried["measure on"] >= 24:
            return None
        self.tried["measure on"] += 1
        if self.last_action.startswith("use thermometer") and _UNKNOWN_ACTION not in self.seen_last:
            return self._choose("wait1", "not decided yet: let it heat a while")
        state, substance = _CHANGED_STATE[self.point[0]], self.point[1]
        name = self.measured_on
        if _UNKNOWN_ACTION in self.seen_last:  # the name changed with the state
            name = f"{state} {substance}" if not name.startswith(state) else name
        action = f"{self.thermometer} on {name}"
        return self._choose(action, "not decided yet: measure again")

    def _decide(self) -> str | None:
        """The answer this run's observations support: a measured threshold, else evidence."""
        if self.point:
            return point_choice(self.conds, self.readings, _CHANGED_STATE[self.point[0]])
        if answer := threshold_choice(self.conds, self.history):
            return answer
        last = next((t for t in reversed(self.history) if _ROOM_NAME.search(t)), "")
        first = self.first_look.get(_room(last), last)
        return evidence_choice(self.conds, self.examples, changed_pairs(first, last))

    def _stand_in_for_missing(self, action: str, inventory: str) -> None:
        """Replace an object of ``action`` that is not here by one of its kind that is.

        ``connect blue wire ...`` with no blue wire in sight but a red one, not used by the
        rest of the plan: the plan's blue wire becomes the red wire from here on.
        """
        here = visible_objects(self.seen) + visible_objects(inventory)
        rest = " ; ".join([*self.plan, *self.done_actions])
        for obj in here:
            words = obj.split()
            if len(words) < 2:
                continue
            head = " ".join(words[-2:] if len(words) > 2 else words[-1:])
            for m in re.finditer(rf"\b([a-z0-9\-]+) {re.escape(head)}\b", action):
                phrase = f"{m.group(1)} {head}"
                if m.start() == 0 or m.group(1) in _STOP or self._in_sight(phrase, inventory):
                    continue
                spare = [
                    o
                    for o in here
                    if o.endswith(f" {head}")
                    and o.count(" ") == phrase.count(" ")
                    and not re.search(rf"\b{re.escape(o)}\b", rest)
                ]
                if spare:
                    self.plan = adapt_actions(self.plan, {phrase: spare[0]})
                    return

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
        if set(self.targets) - self.focused and self.tried["search targets"] < 20:
            # A target not found yet: walk on to rooms not seen, further away too.
            self.tried["search targets"] += 1
            if step := self._search():
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
        self.seen_last = observation
        if action.startswith("use thermometer") and " on " in action:
            self.thermometer, _, measured = action.partition(" on ")
            if _UNKNOWN_ACTION not in observation:
                self.measured_on = measured
            if found := _MEASURED.findall(observation):
                self.readings.append((measured, float(found[-1])))
        if action.startswith("pick up ") and (m := _PICKED.search(observation)):
            self.held |= {action[len("pick up ") :].strip(), m.group(1).strip()}
        if action.startswith("focus on ") and _UNKNOWN_ACTION in observation:
            # The simulator did not take the focus (the remembered phrasing does not name
            # anything here): as good as skipped, so the later ordered answers are not given.
            self.focus_skipped = True


def _without_transit(actions: Sequence[str]) -> list[str]:
    """``actions`` without moves into rooms merely passed through (the navigator routes)."""
    kept = []
    for i, action in enumerate(actions):
        nxt = actions[i + 1] if i + 1 < len(actions) else ""
        if action.startswith("go to ") and nxt.startswith("go to "):
            continue
        kept.append(action)
    return kept


def _answer_index(conds: Sequence[tuple[str, str]], actions: Sequence[str]) -> int | None:
    """Which of ``conds`` the last answering action of a procedure chose."""
    for action in reversed(actions):
        for i, (_, answer) in enumerate(conds):
            if re.search(rf"\b{re.escape(answer)}\b", action):
                return i
    return None


def answer_evidence(task: str, steps: Sequence[tuple[str, str]]) -> str:
    """What a run saw last before its conditional answer: the latest room description.

    ``steps`` are (action, observation) pairs; empty when the task has no conditional answer
    or the run never gave one.
    """
    answer = _answer_index(conditions(task), [a for a, _ in steps])
    if answer is None:
        return ""
    option = conditions(task)[answer][1]
    last = max(i for i, (a, _) in enumerate(steps) if re.search(rf"\b{re.escape(option)}\b", a))
    looks = [o for _, o in steps[:last] if _ROOM_NAME.search(o)]
    if not looks:
        return ""
    first = next(o for o in looks if _room(o) == _room(looks[-1]))
    return " | ".join(sorted(changed_pairs(first, looks[-1])))


def _room(text: str) -> str:
    m = _ROOM_NAME.search(text)
    return m.group(1).strip() if m else ""


def procedure_hint(task_description: str, actions: Sequence[str], evidence: str = "") -> str:
    """A ReplayAdapter hint: ``"TASK :: a1; a2; ..."``, or ``"TASK :: a1; a2 :: EVIDENCE"``.

    ``evidence`` is what the run saw last before answering (a room described after the
    experiment); it lets a replay decide a conditional answer on a new variation.
    """
    head = f"{' '.join(task_description.split())} :: " + "; ".join(actions)
    return f"{head} :: {' '.join(evidence.split())}" if evidence.strip() else head
