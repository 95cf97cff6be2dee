"""``MemoryLLM``: the chat model behind graphmem's LLM steps, with validated JSON output.

Any LangChain ``BaseChatModel`` works; :meth:`MemoryLLM.from_openai` builds a ``ChatOpenAI`` for
any OpenAI-compatible endpoint. Output is parsed from the reply text (fences and chatter around
the JSON are tolerated) and validated against the operation's pydantic model, so it works with
servers that support neither tool calling nor JSON mode. Invalid output is retried a bounded
number of times; every request counts against the operation's :class:`CallBudget`.

>>> from langchain_core.language_models.fake_chat_models import FakeListChatModel
>>> llm = MemoryLLM(FakeListChatModel(responses=['{"keywords": ["fridge", "apple"]}']))
>>> llm.extract_keywords("Put the apple in the fridge")
['fridge', 'apple']
>>> llm.usage.calls
1
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from typing import Any, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, ValidationError

from graphmem.errors import LLMError
from graphmem.llm import prompts
from graphmem.llm.schemas import (
    LinkDecisions,
    Neighbour,
    NoteFields,
    Reflection,
    Script,
    TaskKeywords,
)
from graphmem.llm.usage import CallBudget, LLMUsage, token_usage
from graphmem.models import TrajectoryStep

log = logging.getLogger(__name__)

T = TypeVar("T", bound=BaseModel)

_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)
_DECODER = json.JSONDecoder()


class InvalidOutput(ValueError):
    """The model's reply was not a JSON object valid for the operation."""


def message_text(message: BaseMessage) -> str:
    """The text of a chat reply, whether its content is a string or a list of blocks."""
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


def parse_json_object(text: str) -> dict[str, Any]:
    """The first JSON object in ``text``: bare, inside ```json fences, or amid prose."""
    text = _THINK.sub("", text).strip()
    candidates = [m.group(1).strip() for m in _FENCE.finditer(text)] + [text]
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except json.JSONDecodeError:
            value = None
        if isinstance(value, dict):
            return value
        for match in re.finditer(r"\{", candidate):
            try:
                value, _ = _DECODER.raw_decode(candidate, match.start())
            except json.JSONDecodeError:
                continue
            if isinstance(value, dict):
                return value
    raise InvalidOutput("the reply holds no JSON object")


def _short(error: Exception, limit: int = 300) -> str:
    if isinstance(error, ValidationError):
        text = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'reply'}: {err['msg']}"
            for err in error.errors()
        )
    else:
        text = " ".join(str(error).split())
    return text if len(text) <= limit else text[:limit] + "…"


class MemoryLLM:
    """A chat model plus the rules graphmem uses it by.

    ``retries``: extra requests after an invalid reply or a failed request (per operation call).
    ``fallback``: when output stays invalid, use the deterministic fallback (True) or raise
    :class:`LLMError` (False). ``max_calls``: default cap on requests per operation call when no
    :class:`CallBudget` is passed.
    """

    def __init__(
        self,
        chat_model: BaseChatModel,
        *,
        name: str | None = None,
        retries: int = 2,
        fallback: bool = True,
        max_calls: int | None = None,
        secrets: Sequence[str] = (),
    ) -> None:
        if retries < 0:
            raise ValueError("retries must be >= 0")
        self.chat_model = chat_model
        self.name = name or _model_name(chat_model)
        self.retries = retries
        self.fallback = fallback
        self.max_calls = max_calls if max_calls is not None else retries + 1
        self.usage = LLMUsage()
        # Strings never to let through into error messages or logs (API keys).
        self._secrets = tuple(s for s in secrets if s)

    @classmethod
    def from_openai(
        cls,
        *,
        base_url: str | None = None,
        model: str,
        api_key: str,
        temperature: float = 0.0,
        timeout: float = 60.0,
        max_retries: int = 2,
        json_mode: bool = False,
        retries: int = 2,
        fallback: bool = True,
        **model_kwargs: Any,
    ) -> MemoryLLM:
        """A ``ChatOpenAI`` on any OpenAI-compatible endpoint.

        ``max_retries`` is the HTTP client's own retry (with back-off) on transport errors and
        rate limits; ``retries`` is graphmem's retry on invalid output. ``json_mode`` asks the
        server for ``response_format={"type": "json_object"}`` (not every server supports it;
        parsing works without it).
        """
        from langchain_openai import ChatOpenAI

        kwargs: dict[str, Any] = dict(model_kwargs)
        if json_mode:
            kwargs["model_kwargs"] = {
                **kwargs.get("model_kwargs", {}),
                "response_format": {"type": "json_object"},
            }
        chat = ChatOpenAI(
            base_url=base_url,
            model=model,
            api_key=api_key,
            temperature=temperature,
            timeout=timeout,
            max_retries=max_retries,
            **kwargs,
        )
        return cls(chat, name=model, retries=retries, fallback=fallback, secrets=(api_key,))

    def __repr__(self) -> str:
        return f"MemoryLLM(name={self.name!r}, retries={self.retries}, fallback={self.fallback})"

    # ---- the operations ------------------------------------------------------------------

    def extract_note_fields(self, text: str, *, budget: CallBudget | None = None) -> NoteFields:
        """Keywords, tags, one-sentence context and category of a note (A-MEM)."""
        return self.structured(
            "extract_note_fields",
            prompts.NOTE_FIELDS,
            prompts.note_fields_user(text),
            NoteFields,
            budget,
        )

    def extract_keywords(self, task_text: str, *, budget: CallBudget | None = None) -> list[str]:
        """Keywords of a task statement (the AveFact key)."""
        out = self.structured(
            "extract_keywords",
            prompts.TASK_KEYWORDS,
            prompts.task_keywords_user(task_text),
            TaskKeywords,
            budget,
        )
        return out.keywords

    def distill_script(
        self,
        task: str,
        steps: Sequence[TrajectoryStep],
        success: bool,
        *,
        budget: CallBudget | None = None,
    ) -> Script:
        """Abstract, reusable instructions distilled from a trajectory (Mem^p script)."""
        return self.structured(
            "distill_script",
            prompts.DISTILL_SCRIPT,
            prompts.distill_script_user(task, steps, success),
            Script,
            budget,
        )

    def reflect(
        self,
        task: str,
        failed_steps: Sequence[TrajectoryStep],
        successful_steps: Sequence[TrajectoryStep] | None = None,
        *,
        budget: CallBudget | None = None,
    ) -> Reflection:
        """A tip (and maybe corrected steps) from a failed attempt (Mem^p adjustment)."""
        return self.structured(
            "reflect",
            prompts.REFLECT,
            prompts.reflect_user(task, failed_steps, successful_steps),
            Reflection,
            budget,
        )

    def decide_links(
        self,
        memory_text: str,
        neighbours: Sequence[Neighbour],
        *,
        budget: CallBudget | None = None,
    ) -> LinkDecisions:
        """Which neighbours to link to and which to refresh (A-MEM evolution)."""
        if not neighbours:
            return LinkDecisions(links=[])
        out = self.structured(
            "decide_links",
            prompts.DECIDE_LINKS,
            prompts.decide_links_user(memory_text, neighbours),
            LinkDecisions,
            budget,
        )
        ids = {n.id for n in neighbours}
        kept = out.restricted_to(ids)
        dropped = len(out.links) + len(out.updates) - len(kept.links) - len(kept.updates)
        if dropped:
            log.warning("decide_links: dropped %d decisions about unknown ids", dropped)
        return kept

    # ---- the one path every operation takes ----------------------------------------------

    def structured(
        self,
        op: str,
        system: str,
        user: str,
        schema: type[T],
        budget: CallBudget | None = None,
    ) -> T:
        """Ask the model, parse and validate its JSON reply; retry; raise LLMError at the end."""
        if budget is None:
            budget = CallBudget(self.max_calls)
        messages: list[BaseMessage] = [SystemMessage(system), HumanMessage(user)]
        last_error = "no request was made"
        for attempt in range(self.retries + 1):
            if not budget.take():
                last_error = f"LLM call budget of {budget.max_calls} per operation is spent"
                break
            try:
                reply = self.chat_model.invoke(messages)
            except Exception as e:  # any provider or transport error is one failed attempt
                self.usage.record_call(0, 0)
                self.usage.record_failure()
                last_error = f"request failed: {type(e).__name__}: {self._redact(_short(e))}"
                log.warning("%s attempt %d: %s", op, attempt + 1, last_error)
                continue
            prompt_tokens, completion_tokens = token_usage(reply)
            self.usage.record_call(prompt_tokens, completion_tokens)
            text = message_text(reply)
            try:
                return schema.model_validate(parse_json_object(text))
            except (InvalidOutput, ValidationError) as e:
                self.usage.record_failure()
                last_error = f"invalid output: {self._redact(_short(e))}"
                log.warning(
                    "%s attempt %d: %s; reply was %r",
                    op,
                    attempt + 1,
                    last_error,
                    self._redact(text[:200]),
                )
                # Tell the model what was wrong; a second chance with the error usually works.
                messages = [
                    *messages[:2],
                    reply,
                    HumanMessage(
                        f"That reply was not valid ({self._redact(_short(e, 200))}). "
                        + prompts.JSON_ONLY
                    ),
                ]
        raise LLMError(f"{op} via {self.name}: {last_error}")

    def _redact(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text


def _model_name(chat_model: BaseChatModel) -> str:
    for attr in ("model_name", "model", "model_id"):
        value = getattr(chat_model, attr, None)
        if isinstance(value, str) and value:
            return value
    return type(chat_model).__name__
