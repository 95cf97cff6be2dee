"""What a user implements to plug an agent and an environment into graphmem's flows.

Why and how, in full: docs/design.md, "Module notes", ``graphmem.agents``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple, Protocol, runtime_checkable

if TYPE_CHECKING:
    from graphmem.memory import GraphMemory
    from graphmem.models import Hit

__all__ = [
    "Decision",
    "GameEnv",
    "Observation",
    "Plan",
    "Policy",
    "ProcedurePolicy",
    "RecallingPolicy",
    "StepResult",
    "TaskEnv",
    "UsingPolicy",
    "plans_from_hits",
    "task_of",
]


# ---- the environment ----------------------------------------------------------------------


@dataclass(frozen=True)
class Observation:
    """What the agent sees after reset or a step.

    ``score`` is normalised to 0..1 whatever the game's own scale (ScienceWorld reports 0..100).
    """

    task: str
    text: str
    valid_actions: tuple[str, ...]
    inventory: str = ""
    look: str = ""
    score: float = 0.0
    moves: int = 0
    done: bool = False
    success: bool = False
    failure: bool = False
    info: dict[str, str | int | float | bool] = field(default_factory=dict)


class StepResult(NamedTuple):
    """``env.step(action)``: the new observation, the score change, done, success."""

    observation: Observation
    reward: float
    done: bool
    success: bool


class GameEnv(Protocol):
    """An environment the agent flow can run a policy in: reset to a task, then step."""

    step_budget: int

    def reset(self, seed: int, fold: str = "test") -> Observation: ...

    def step(self, action: str) -> StepResult: ...

    def gold_path(self) -> list[str]: ...

    def close(self) -> None: ...


@runtime_checkable
class TaskEnv(Protocol):
    """An environment that says what task its first observation poses.

    The agent flow retrieves, learns and files the episode under this text. Without it the task is
    the observation's ``task``; an environment whose tasks share one wording (every cooking game
    says "cook a meal") can add what tells them apart, e.g. the first room's description.
    """

    def task_text(self, first: Observation) -> str: ...


def task_of(env: object, first: Observation) -> str:
    """The task ``first`` (the observation after reset) poses: ``env.task_text(first)`` for a
    :class:`TaskEnv`, else ``first.task`` with its whitespace collapsed.

    >>> task_of(object(), Observation(task=" Find  the key. ", text="A hall.", valid_actions=()))
    'Find the key.'
    """
    if isinstance(env, TaskEnv):
        return env.task_text(first)
    return " ".join(first.task.split())


# ---- the agent ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Decision:
    """An action and why it was chosen (stored as the trajectory step's thought)."""

    action: str
    thought: str


class Policy(Protocol):
    """An agent for one episode at a time: ``begin`` it, then ``act`` / ``feedback`` per step."""

    def begin(self, task: str, hints: Sequence[str] = (), seed: int = 0) -> None: ...

    def act(self, observation: str, valid_actions: Sequence[str], inventory: str) -> Decision: ...

    def feedback(self, action: str, observation: str, reward: float) -> None: ...


@runtime_checkable
class RecallingPolicy(Policy, Protocol):
    """A policy that asks memory questions during the episode, not only at its start.

    Before each step the agent flow calls ``recall_queries``; it retrieves for each query and
    hands what it found to ``add_hints``. A question is asked once per episode.
    """

    def recall_queries(
        self, observation: str, valid_actions: Sequence[str], inventory: str
    ) -> list[str]: ...

    def add_hints(self, hints: Sequence[str]) -> None: ...


@runtime_checkable
class UsingPolicy(Policy, Protocol):
    """A policy that reports which of its hints it acted on (credit by use).

    The agent flow then credits only the memories whose hints were used: a recalled note the
    policy never acted on neither earns nor loses utility from the episode's reward.
    """

    def used_hints(self) -> list[str]: ...


# ---- procedures offered to a policy -------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """A retrieved procedure for the policy: its memory id, task and (action, observation)s."""

    procedure_id: str
    task: str
    steps: tuple[tuple[str, str], ...]
    success: bool = True
    """A failed attempt's steps are never followed (its moves may be what failed it); only its
    facts that hold always are offered."""


@runtime_checkable
class ProcedurePolicy(Protocol):
    """A policy that can be handed retrieved procedures and says which ones it followed."""

    def offer_procedures(self, plans: Sequence[Plan]) -> None: ...

    def followed_procedures(self) -> list[str]: ...


def plans_from_hits(memory: GraphMemory, namespace: str, hits: Sequence[Hit]) -> list[Plan]:
    """The procedures among ``hits`` as plans, in retrieval order; one per action sequence (a
    distilled script and the trajectory it came from share their steps). A failed procedure
    (stored where the update strategy keeps failures) is offered as ``success=False``: its
    steps are not followed, its moves may be what failed the game, but what its steps showed
    always holds (where an item went and stayed) can be acted on."""
    from graphmem.models import Namespace, Procedure
    from graphmem.ops.build import procedure_chain

    plans: list[Plan] = []
    seen: set[tuple[str, ...]] = set()
    for hit in hits:
        proc = hit.memory
        if not isinstance(proc, Procedure):
            continue
        chain, _ = procedure_chain(memory.store, Namespace(namespace), proc.id)
        steps = tuple((s.action, s.observation) for s in chain if s.action.strip())
        key = tuple(a for a, _ in steps)
        if not steps or key in seen:
            continue
        seen.add(key)
        plans.append(Plan(proc.id, proc.task_text, steps, success=proc.success))
    return plans
