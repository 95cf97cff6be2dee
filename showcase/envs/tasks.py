"""The task text the text-game environments give the agent flow (:class:`graphmem.agents.TaskEnv`).

Games of one kind share their task wording (every cooking game says "cook a meal"), and what the
first room holds tells them apart, so the task is the task line and the whole first observation:
a procedure replayed on "the same task" is then one from the same game.
"""

from __future__ import annotations

from graphmem.agents import Observation

FIRST_OBSERVATION_CHARS = 2000
"""How much of the first observation (whitespace collapsed) the task text keeps."""


def task_with_first_observation(first: Observation) -> str:
    """``first.task`` and the first observation's text, whitespace collapsed.

    >>> task_with_first_observation(
    ...     Observation(task="Cook a meal.", text="You are in\\n the kitchen.", valid_actions=())
    ... )
    'Cook a meal. You are in the kitchen.'
    """
    text = " ".join(first.text.split())[:FIRST_OBSERVATION_CHARS]
    return " ".join(p for p in (first.task.strip(), text) if p)
