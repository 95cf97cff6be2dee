"""Offline text-game environments (TextWorldExpress, ScienceWorld) and rule-based agents.

They implement the protocols of :mod:`graphmem.agents` (``GameEnv``, ``Policy`` and its
capabilities).

Needs the ``envs`` extra (textworld-express, scienceworld) and a Java 17 runtime. Submodules
import the game packages lazily, so importing :mod:`showcase.envs` is cheap.
"""

from showcase.envs.agents import CookingExplorer, Explorer, TwcExplorer, make_explorer
from showcase.envs.hints import (
    Knowledge,
    distill_actions,
    extract_facts,
    hints_from_procedures,
    parse_hints,
)
from showcase.envs.jvm import (
    EnvError,
    InvalidEnvInput,
    JavaNotFound,
    find_java17,
    has_java17,
)
from showcase.envs.runner import EpisodeResult, StepRecord, run_episode
from showcase.envs.textworld import TextWorldEnv

__all__ = [
    "CookingExplorer",
    "EnvError",
    "EpisodeResult",
    "Explorer",
    "InvalidEnvInput",
    "JavaNotFound",
    "Knowledge",
    "StepRecord",
    "TextWorldEnv",
    "TwcExplorer",
    "distill_actions",
    "extract_facts",
    "find_java17",
    "has_java17",
    "hints_from_procedures",
    "make_explorer",
    "parse_hints",
    "run_episode",
]
