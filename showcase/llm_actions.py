"""A chat model choosing a text-game agent's next action: the game step of the ``--llm`` agent.

This is an example's use of :class:`graphmem.llm.MemoryLLM`, not a memory operation: it asks
through :meth:`~graphmem.llm.MemoryLLM.structured` like every operation does (one output mode,
bounded retries, usage counted under ``choose_action``), constrained to the valid actions where
the server takes a schema. Needs the ``langchain`` extra.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pydantic import Field

from graphmem.llm.schemas import LLMOutput

if TYPE_CHECKING:
    from graphmem.llm import MemoryLLM
    from graphmem.llm.usage import CallBudget

CHOOSE_ACTION = """graphmem op: choose_action
You play a text adventure. Pick the next action: exactly one of the valid actions, copied as it
is written. Use what memory says when it fits the situation.
Reply with one JSON object and nothing else: {"action": "<one valid action>", "thought": "<why>"}"""

MAX_SITUATION_CHARS = 6000
"""The situation is cut to this many characters (its end kept) before it is sent."""


class ActionChoice(LLMOutput):
    """A text-game agent's next action (one of the valid actions) and why."""

    action: str = Field(min_length=1, description="Exactly one of the valid actions.")
    thought: str = Field(default="", description="Why, in a few words.")


def choose_action_user(situation: str, valid_actions: Sequence[str]) -> str:
    from graphmem.llm.prompts import clip

    return f"{clip(situation, MAX_SITUATION_CHARS)}\n\nValid actions:\n" + "\n".join(valid_actions)


def match_action(text: str, valid_actions: Sequence[str]) -> str | None:
    """The valid action ``text`` names: an exact line, else the longest action it contains.

    >>> match_action("> Take Apple.", ["take apple", "look"])
    'take apple'
    >>> match_action("I would look around", ["look", "look around"])
    'look around'
    """
    lines = [
        re.sub(r"^[\s\-*>\d.]*", "", ln).strip().strip("`\"'.").lower() for ln in text.splitlines()
    ]
    lowered = {a.lower(): a for a in valid_actions}
    for line in lines:
        if line in lowered:
            return lowered[line]
    contained = [a for a in valid_actions if a.lower() in text.lower()]
    return max(contained, key=len) if contained else None


def llm_choose_action(
    llm: MemoryLLM,
    situation: str,
    valid_actions: Sequence[str],
    *,
    budget: CallBudget | None = None,
) -> ActionChoice:
    """The next action: one of ``valid_actions`` (constrained to the list where the server takes
    a schema; a plain-text reply naming one is accepted too). Raises ``LLMError`` when the model
    gives none."""
    from graphmem.llm.output import output_schema
    from graphmem.llm.parsing import InvalidOutput, parse_json_object

    valid = list(dict.fromkeys(valid_actions)) or ["look around"]
    schema = output_schema(ActionChoice)
    schema["properties"]["action"]["enum"] = valid

    def parse(text: str) -> dict[str, Any]:
        try:
            return parse_json_object(text)
        except InvalidOutput:
            return {"action": text.strip()}

    def named(out: ActionChoice) -> None:
        action = match_action(out.action, valid)
        if action is None:
            raise InvalidOutput(f"{out.action[:80]!r} is not one of the valid actions")
        out.action = action

    return llm.structured(
        "choose_action",
        CHOOSE_ACTION,
        choose_action_user(situation, valid),
        ActionChoice,
        budget,
        check=named,
        schema=schema,
        parse=parse,
    )
