"""The LLM layer: a LangChain chat model with validated output, and offline fallbacks.

>>> from graphmem.llm import MemoryLLM
>>> llm = MemoryLLM.from_openai(base_url="http://localhost:8000/v1", model="my-model",
...                             api_key="sk-...")  # doctest: +SKIP
>>> from graphmem.llm import ops
>>> ops.note_fields(None, "Keys hang by the door.").created_by  # no model: offline rules
'fallback'
"""

from graphmem.llm import fallbacks, ops
from graphmem.llm.client import MemoryLLM, match_action, parse_json_object
from graphmem.llm.ops import Produced, producer, with_fallback
from graphmem.llm.output import OUTPUT_CHOICES, OUTPUT_MODES, OutputMode
from graphmem.llm.schemas import (
    ActionChoice,
    LinkChoice,
    LinkDecisions,
    Neighbour,
    NeighbourUpdate,
    NoteFields,
    Reflection,
    Script,
    TaskKeywords,
)
from graphmem.llm.usage import CallBudget, LLMUsage, UsageSnapshot

__all__ = [
    "OUTPUT_CHOICES",
    "OUTPUT_MODES",
    "ActionChoice",
    "CallBudget",
    "LLMUsage",
    "LinkChoice",
    "LinkDecisions",
    "MemoryLLM",
    "Neighbour",
    "NeighbourUpdate",
    "NoteFields",
    "OutputMode",
    "Produced",
    "Reflection",
    "Script",
    "TaskKeywords",
    "UsageSnapshot",
    "fallbacks",
    "match_action",
    "ops",
    "parse_json_object",
    "producer",
    "with_fallback",
]
