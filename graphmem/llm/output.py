"""How a reply is constrained to an operation's schema: the output modes and their requests.

Why and how, in full: docs/design.md, "Module notes", ``graphmem.llm.output``.

>>> output_schema(__import__("graphmem.llm.schemas", fromlist=["x"]).TaskKeywords)["required"]
['keywords']
"""

from __future__ import annotations

import copy
import json
from typing import Any, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import Runnable
from pydantic import BaseModel

from graphmem.config import LLM_OUTPUT_CHOICES, LLM_OUTPUT_MODES, LlmOutputMode

# The modes are vocabulary (config.py), so settings can check GRAPHMEM_LLM_OUTPUT without
# importing LangChain; these names are kept for the LLM layer and its users.
OutputMode = LlmOutputMode
OUTPUT_MODES: tuple[OutputMode, ...] = LLM_OUTPUT_MODES
"""Strongest first: ``auto`` tries them in this order."""
OUTPUT_CHOICES: tuple[str, ...] = LLM_OUTPUT_CHOICES

_METHOD = {"json_schema": "json_schema", "tool": "function_calling", "json": "json_mode"}
_REJECTION_WORDS = (
    "response_format",
    "json_schema",
    "json schema",
    "tool",
    "function",
    "grammar",
    "not supported",
    "unsupported",
)


def check_mode(mode: str) -> str:
    """``mode`` if it is an output mode or ``auto``, else a ValueError naming the choices."""
    if mode not in OUTPUT_CHOICES:
        raise ValueError(
            f"unknown LLM output mode {mode!r}; choose one of {', '.join(OUTPUT_CHOICES)}"
        )
    return mode


def output_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema of an output model, ``$ref``s inlined (small grammars handle it best)."""
    schema = model.model_json_schema()
    defs = schema.pop("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                return inline(copy.deepcopy(defs[ref.split("/")[-1]]))
            return {k: inline(v) for k, v in node.items()}
        if isinstance(node, list):
            return [inline(v) for v in node]
        return node

    return cast(dict[str, Any], inline(schema))


def bind(
    chat_model: BaseChatModel, mode: OutputMode, op: str, schema: dict[str, Any]
) -> Runnable[Any, Any]:
    """A runnable that sends the messages with ``mode``'s constraint; raises when the chat model
    cannot do that mode (NotImplementedError, ValueError, TypeError)."""
    if mode == "prompt":
        return chat_model
    if mode == "json":
        # JSON mode with the schema beside it: llama-cpp-python's server turns
        # {"type": "json_object", "schema": ...} into a grammar (it refuses "json_schema"),
        # other servers take it as plain JSON mode.
        return chat_model.bind(response_format={"type": "json_object", "schema": schema})
    if mode == "tool":
        tool = {"name": op, "description": f"graphmem {op} output", "parameters": schema}
        if _is_openai(chat_model):
            # The request with_structured_output would send, without its output parser: the
            # reply is parsed once, bounded, by the client (tool arguments are plain JSON).
            return chat_model.bind_tools([tool], tool_choice=op, parallel_tool_calls=False)
        return chat_model.with_structured_output(tool, method="function_calling", include_raw=True)
    if _is_openai(chat_model):
        # LangChain's JSON parser behind with_structured_output(method="json_schema") is
        # quadratic in the reply's length; the client parses the reply itself, bounded.
        return chat_model.bind(response_format={"type": "json_schema", "json_schema": {
            "name": op, "schema": schema}})  # fmt: skip
    return chat_model.with_structured_output(
        {"name": op, "schema": schema}, method=_METHOD[mode], include_raw=True
    )


def _is_openai(chat_model: BaseChatModel) -> bool:
    """Whether ``chat_model`` is langchain-openai's (whose requests graphmem builds itself)."""
    try:
        from langchain_openai.chat_models.base import BaseChatOpenAI
    except ImportError:  # pragma: no cover - langchain-openai is a dependency
        return False
    return isinstance(chat_model, BaseChatOpenAI)


def raw_message(result: Any) -> BaseMessage:
    """The chat reply inside what a bound runnable returned."""
    if isinstance(result, dict) and isinstance(result.get("raw"), BaseMessage):
        return cast(BaseMessage, result["raw"])
    if isinstance(result, BaseMessage):
        return result
    raise TypeError(f"unexpected reply of type {type(result).__name__}")


def reply_text(message: BaseMessage) -> str:
    """The reply's JSON text: the forced tool call's arguments, else the message text."""
    if isinstance(message, AIMessage) and message.tool_calls:
        return json.dumps(message.tool_calls[0].get("args", {}))
    if isinstance(message, AIMessage) and message.invalid_tool_calls:
        return str(message.invalid_tool_calls[0].get("args") or "")
    content = message.content
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
    return "".join(parts)


def rejects_mode(status: int | None, message: str) -> bool:
    """Whether an HTTP error says the server does not take the output constraint we sent.

    Usually a 400/422/501; llama-cpp-python's server answers a ``response_format`` it cannot
    parse with a 500 whose text names ``response_format``, so that counts too.
    """
    lower = message.lower()
    if status == 500:
        return "response_format" in lower
    if status not in (400, 422, 501):
        return False
    return any(word in lower for word in _REJECTION_WORDS)
