"""TextWorldExpress adapter: one JVM reused across episodes, a step budget, typed observations.

>>> env = TextWorldEnv("twc", step_budget=30)          # doctest: +SKIP
>>> obs = env.reset(seed=0, fold="test")               # doctest: +SKIP
>>> result = env.step(obs.valid_actions[0])            # doctest: +SKIP
>>> env.close()                                        # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from types import TracebackType
from typing import Any

from graphmem.agents import Observation, StepResult
from showcase.envs.jvm import (
    EnvError,
    InvalidEnvInput,
    close_once,
    find_java17,
    launching_with_java,
)
from showcase.envs.tasks import task_with_first_observation

log = logging.getLogger(__name__)

GAMES = ("twc", "cookingworld", "coin")
"""Games the adapter has been checked with (TextWorldExpress knows more; they also load)."""

TWX_GAMES = (
    "cookingworld",
    "coin",
    "twc",
    "mapreader",
    "arithmetic",
    "sorting",
    "simonsays",
    "peckingorder",
)
"""Every game TextWorldExpress generates; another name is refused before the JVM starts."""

EXPLORED_GAMES = ("twc", "cookingworld")
"""Games with a rule-based explorer that acts on memory (:mod:`showcase.envs.agents`). In
any other game the generic novelty explorer ignores hints, so memory is inert there."""

DEFAULT_PARAMS: dict[str, dict[str, int]] = {
    # 3 rooms behind doors, 3 items: the explorer must search rooms and try receptacles.
    "twc": {"numLocations": 3, "numItemsToPutAway": 3, "includeDoors": 1, "limitInventorySize": 0},
    # 3 rooms, 2 ingredients + 2 distractors: read the recipe, find, cut and cook the ingredients.
    "cookingworld": {
        "numLocations": 3,
        "numIngredients": 2,
        "numDistractorItems": 2,
        "includeDoors": 1,
        "limitInventorySize": 0,
    },
    "coin": {
        "numLocations": 6,
        "numDistractorItems": 0,
        "includeDoors": 1,
        "limitInventorySize": 0,
    },
}
FOLDS = ("train", "dev", "test")


def params_string(params: Mapping[str, int]) -> str:
    """TextWorldExpress' ``key=value,key=value`` parameter string."""
    return ",".join(f"{k}={int(v)}" for k, v in params.items())


class TextWorldEnv:
    """A TextWorldExpress game with a step budget.

    The JVM starts on the first :meth:`reset` and is reused by later episodes; :meth:`close`
    (or leaving a ``with`` block) stops it. ``step_budget`` counts agent actions per episode.
    """

    def __init__(
        self,
        game: str = "twc",
        params: Mapping[str, int] | None = None,
        step_budget: int = 80,
        *,
        twx_defaults: bool = False,
    ) -> None:
        if not isinstance(game, str) or not game:
            raise InvalidEnvInput("game must be a TextWorldExpress game name such as 'twc'")
        if game not in TWX_GAMES:
            raise InvalidEnvInput(
                f"unknown TextWorldExpress game {game!r}; known: {', '.join(TWX_GAMES)}"
            )
        if step_budget < 1:
            raise InvalidEnvInput(f"step_budget must be at least 1, got {step_budget}")
        self.game = game
        # twx_defaults: send only ``params``, so TextWorldExpress' own defaults fill the rest
        # (cookingworld: 11 rooms, 3 ingredients, 10 distractors; harder than ours).
        base = {} if twx_defaults else DEFAULT_PARAMS.get(game, {})
        self.params: dict[str, int] = {**base, **(params or {})}
        self.step_budget = step_budget
        self._env: Any = None
        self._loaded = False
        self._steps = 0
        self._done = True
        self._last: Observation | None = None
        self.seed: int | None = None

    # -- lifetime --------------------------------------------------------------------------

    def _server(self) -> Any:
        if self._env is None:
            java = find_java17()
            try:
                import textworld_express.textworld_express as twx_module
            except ImportError as e:
                raise EnvError(
                    "textworld-express is not installed (pip install graphmem[envs])"
                ) from e
            with launching_with_java(twx_module, java):
                try:
                    # The env's own limit is a safety net; our budget ends episodes first.
                    self._env = twx_module.TextWorldExpressEnv(envStepLimit=100_000)
                except Exception as e:
                    raise EnvError(f"could not start TextWorldExpress: {e}") from e
            log.debug("started TextWorldExpress JVM with %s", java)
        return self._env

    def close(self) -> None:
        """Stop the JVM (idempotent)."""
        env, self._env = self._env, None
        self._loaded = False
        self._done = True
        if env is not None:
            close_once(env, "TextWorldExpress")

    def __enter__(self) -> TextWorldEnv:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __del__(self) -> None:
        # At interpreter shutdown the gateway may be half gone; nothing useful to do then.
        with contextlib.suppress(Exception):
            self.close()

    # -- episodes ----------------------------------------------------------------------------

    def task_text(self, first: Observation) -> str:
        """The task and the first room (:class:`graphmem.agents.TaskEnv`)."""
        return task_with_first_observation(first)

    def reset(self, seed: int, fold: str = "test") -> Observation:
        """Start the game generated from ``seed`` in ``fold`` (train, dev or test)."""
        if fold not in FOLDS:
            raise InvalidEnvInput(f"fold must be one of {', '.join(FOLDS)}, got {fold!r}")
        if not isinstance(seed, int) or seed < 0:
            raise InvalidEnvInput(f"seed must be a non-negative integer, got {seed!r}")
        server = self._server()
        if not self._loaded:
            try:
                server.load(self.game, params_string(self.params))
            except ValueError as e:
                raise InvalidEnvInput(f"TextWorldExpress rejected {self.game!r}: {e}") from e
            except Exception as e:
                raise EnvError(f"TextWorldExpress load failed: {e}") from e
            self._loaded = True
        twx_fold = "dev" if fold == "dev" else fold
        try:
            _, infos = server.reset(seed=seed, gameFold=twx_fold, generateGoldPath=True)
        except Exception as e:
            raise EnvError(f"TextWorldExpress reset failed: {e}") from e
        self.seed = seed
        self._steps = 0
        self._done = False
        self._last = self._observation(infos, infos["observation"])
        return self._last

    def step(self, action: str) -> StepResult:
        """Take one action; the episode is done on success, failure or when the budget is spent."""
        if self._done or self._env is None:
            raise EnvError("step() needs a running episode: call reset() first")
        if not isinstance(action, str) or not action.strip():
            raise InvalidEnvInput("an action must be a non-empty string")
        previous = self._last.score if self._last else 0.0
        try:
            text, _, _, infos = self._env.step(action)
        except Exception as e:
            raise EnvError(f"TextWorldExpress step failed: {e}") from e
        self._steps += 1
        obs = self._observation(infos, text)
        done = obs.success or obs.failure or self._steps >= self.step_budget
        if done != obs.done:
            obs = Observation(**{**obs.__dict__, "done": done})
        self._done = done
        self._last = obs
        return StepResult(obs, obs.score - previous, done, obs.success)

    def gold_path(self) -> list[str]:
        """The game's own solution for the current seed (never given to the explorer)."""
        if self._env is None or self.seed is None:
            raise EnvError("gold_path() needs a game: call reset() first")
        return [str(a) for a in self._env.getGoldActionSequence()]

    @property
    def steps(self) -> int:
        return self._steps

    def _observation(self, infos: Mapping[str, Any], text: str) -> Observation:
        success = bool(infos.get("tasksuccess"))
        failure = bool(infos.get("taskfailure"))
        return Observation(
            task=str(infos.get("taskDescription", "")),
            text=str(text),
            # TextWorldExpress shuffles valid actions each step; sorting keeps agents reproducible.
            valid_actions=tuple(sorted(str(a) for a in infos.get("validActions", ()))),
            inventory=str(infos.get("inventory", "")),
            look=str(infos.get("look", "")),
            score=float(infos.get("score", 0.0)),
            moves=self._steps,
            done=success or failure,
            success=success,
            failure=failure,
            info={"game": self.game, "seed": self.seed if self.seed is not None else -1},
        )
