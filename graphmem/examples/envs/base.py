"""What every text-game adapter returns: one typed observation and one step result."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple, Protocol


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
    """What :func:`graphmem.examples.envs.runner.run_episode` needs from an environment."""

    step_budget: int

    def reset(self, seed: int, fold: str = "test") -> Observation: ...

    def step(self, action: str) -> StepResult: ...

    def gold_path(self) -> list[str]: ...

    def close(self) -> None: ...
