"""Episode loop: drive a policy in an environment and record a graphmem-ready trajectory.

>>> with TextWorldEnv("twc", step_budget=30) as env:             # doctest: +SKIP
...     result = run_episode(env, make_explorer("twc"), seed=0)
...     mem.build("agent-1", result.trajectory)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from graphmem.agents import GameEnv, Policy
from graphmem.models import Trajectory, TrajectoryStep
from showcase.envs.hints import distill_actions, extract_facts

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StepRecord:
    """One step as the runner saw it, with the reward graphmem's TrajectoryStep has no field for."""

    thought: str
    action: str
    observation: str
    reward: float
    score: float


@dataclass
class EpisodeResult:
    """How an episode went, and its record in the forms memory wants."""

    task: str
    seed: int
    success: bool
    steps: int
    score: float
    records: list[StepRecord] = field(default_factory=list)
    seconds: float = 0.0
    game: str = ""

    @property
    def trajectory(self) -> Trajectory:
        """A :class:`graphmem.models.Trajectory` for ``GraphMemory.build``."""
        return Trajectory(
            task=self.task,
            steps=[
                TrajectoryStep(thought=r.thought, action=r.action, observation=r.observation)
                for r in self.records
            ],
            reward=self.score,
            success=self.success,
            metadata={"seed": self.seed, "game": self.game, "steps": self.steps},
        )

    @property
    def actions(self) -> list[str]:
        return [r.action for r in self.records]

    def facts(self) -> list[str]:
        """Transferable facts this episode taught (see :func:`extract_facts`)."""
        return extract_facts([(r.action, r.observation, r.reward) for r in self.records])

    def distilled_actions(self) -> list[str]:
        """The episode's actions without detours: a replay hint for the same task."""
        return distill_actions([(r.action, r.observation, r.reward) for r in self.records])


def run_episode(
    env: GameEnv,
    policy: Policy,
    seed: int,
    hints: Sequence[str] = (),
    fold: str = "test",
    task_prefix: str = "",
) -> EpisodeResult:
    """Play one episode of ``env`` (seed, fold) with ``policy`` until done or out of budget.

    The trajectory's task text is the game's task description plus the first observation's
    room description, so that similar tasks retrieve each other; ``task_prefix`` (e.g. the game
    name) is put in front.
    """
    started = time.perf_counter()
    obs = env.reset(seed, fold)
    first_line = obs.text.strip().split("\n", 1)[0][:300]
    task = " ".join(p for p in (task_prefix, obs.task.strip(), first_line) if p) or "text game"
    policy.begin(obs.task, hints=list(hints), seed=seed)
    records: list[StepRecord] = []
    done = False
    while not done:
        decision = policy.act(obs.text, obs.valid_actions, obs.inventory)
        result = env.step(decision.action)
        policy.feedback(decision.action, result.observation.text, result.reward)
        obs = result.observation
        records.append(
            StepRecord(decision.thought, decision.action, obs.text, result.reward, obs.score)
        )
        done = result.done
    elapsed = time.perf_counter() - started
    log.debug("seed %s: success=%s in %d steps", seed, obs.success, len(records))
    return EpisodeResult(
        task=task,
        seed=seed,
        success=obs.success,
        steps=len(records),
        score=obs.score,
        records=records,
        seconds=elapsed,
        game=str(obs.info.get("game", "")),
    )
