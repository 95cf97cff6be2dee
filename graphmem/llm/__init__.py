"""The LLM layer: a LangChain chat model with validated output, and offline fallbacks.

>>> from graphmem.llm import MemoryLLM
>>> llm = MemoryLLM.from_openai(base_url="http://localhost:8000/v1", model="my-model",
...                             api_key="sk-...")  # doctest: +SKIP
>>> from graphmem.llm import ops
>>> ops.note_fields(None, "Keys hang by the door.").created_by  # no model: offline rules
'fallback'
"""

from typing import TYPE_CHECKING, Any

from graphmem.extras import needs_extra
from graphmem.llm import fallbacks, ops
from graphmem.llm.ops import Produced, producer, with_fallback
from graphmem.llm.parsing import parse_json_object
from graphmem.llm.schemas import (
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

if TYPE_CHECKING:
    from graphmem.llm.client import MemoryLLM
    from graphmem.llm.output import OUTPUT_CHOICES, OUTPUT_MODES, OutputMode

_NEEDS_LANGCHAIN = {
    "MemoryLLM": "graphmem.llm.client",
    "OUTPUT_CHOICES": "graphmem.llm.output",
    "OUTPUT_MODES": "graphmem.llm.output",
    "OutputMode": "graphmem.llm.output",
}
"""Names that need LangChain (the ``langchain`` extra), imported when first asked for: the
offline fallbacks and the operations work without it."""


def __getattr__(name: str) -> Any:
    if name not in _NEEDS_LANGCHAIN:
        raise AttributeError(f"module 'graphmem.llm' has no attribute {name!r}")
    import importlib

    with needs_extra("langchain", "graphmem's chat-model layer (MemoryLLM)"):
        module = importlib.import_module(_NEEDS_LANGCHAIN[name])
    return getattr(module, name)


__all__ = [
    "OUTPUT_CHOICES",
    "OUTPUT_MODES",
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
    "ops",
    "parse_json_object",
    "producer",
    "with_fallback",
]
