"""``MemoryLLM``: the chat model behind graphmem's LLM steps, with validated JSON output.

Why and how, in full: docs/design.md, "Module notes", ``graphmem.llm.client``.

>>> from langchain_core.language_models.fake_chat_models import FakeListChatModel
>>> llm = MemoryLLM(FakeListChatModel(responses=['{"keywords": ["fridge", "apple"]}']))
>>> llm.extract_keywords("Put the apple in the fridge")
['fridge', 'apple']
>>> llm.usage.calls, llm.output_mode
(1, 'json')
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import Runnable
from pydantic import BaseModel, ValidationError

from graphmem.errors import LLMError
from graphmem.llm import checks, prompts
from graphmem.llm.failures import describe, partial_reply, reported_usage, short
from graphmem.llm.output import (
    OUTPUT_MODES,
    OutputMode,
    bind,
    check_mode,
    output_schema,
    raw_message,
    rejects_mode,
    reply_text,
)
from graphmem.llm.parsing import InvalidOutput, parse_json_object
from graphmem.llm.schemas import (
    Distilled,
    LinkDecisions,
    Neighbour,
    NoteFields,
    Reflection,
    Script,
    TaskKeywords,
)
from graphmem.llm.transport import RequestLimits, bounded_http_client, request_limits
from graphmem.llm.usage import CallBudget, LLMUsage, token_usage
from graphmem.models import TrajectoryStep

log = logging.getLogger(__name__)

T = TypeVar("T", bound=BaseModel)

DEFAULT_MAX_TOKENS = 1024
DEFAULT_TIMEOUT = 30.0
DEFAULT_RETRIES = 2
RETRY_TEMPERATURE = 0.4
"""Temperature of retries when the model runs at 0: a repeat of the same bytes helps nobody."""

_PLACEHOLDER = re.compile(r"^\s*(?:\.{2,}|…+|<[^<>]*>)\s*$")
"""What small models copy from the prompt's "Shape:" line instead of answering."""
_COPY_MIN_CHARS = 30
_CAP = "GRAPHMEM_LLM_MAX_TOKENS"
CHARS_PER_TOKEN = 16
"""Reply characters allowed per token of the cap (generous: escapes, long tokens)."""
UNCAPPED_REPLY_CHARS = 262_144
"""The bound on a reply's characters when there is no token cap."""

__all__ = [
    "InvalidOutput",
    "MemoryLLM",
    "check_content",
    "forget_output_modes",
    "parse_json_object",
]

_settled: dict[str, list[OutputMode]] = {}
"""Output modes left to try, per base URL, as ``auto`` clients learned them (this process)."""
_settled_lock = threading.Lock()


def forget_output_modes(base_url: str | None = None) -> None:
    """Forget what the server at ``base_url`` (or every server) refused: a new server there."""
    with _settled_lock:
        if base_url is None:
            _settled.clear()
        else:
            _settled.pop(base_url, None)


Check = Callable[[Any], None]
"""An operation's content check: raises :class:`InvalidOutput` saying what is wrong."""


def check_content(value: BaseModel, instructions: str) -> None:
    """Shape is not enough: no placeholder values, no text copied from the instructions."""

    def strings(node: Any) -> list[str]:
        if isinstance(node, str):
            return [node]
        if isinstance(node, dict):
            return [s for v in node.values() for s in strings(v)]
        if isinstance(node, list):
            return [s for v in node for s in strings(v)]
        return []

    for text in strings(value.model_dump()):
        if _PLACEHOLDER.match(text):
            raise InvalidOutput(f"{text!r} is a placeholder, not an answer")
        flat = " ".join(text.split())
        if len(flat) >= _COPY_MIN_CHARS and flat in " ".join(instructions.split()):
            raise InvalidOutput(f"{flat[:60]!r} copies the instructions instead of answering")


class MemoryLLM:
    """A chat model plus the rules graphmem uses it by.

    ``retries``: extra requests after an invalid reply or a failed request (per operation call).
    ``fallback``: when output stays invalid, use the deterministic fallback (True) or raise
    :class:`LLMError` (False). ``max_calls``: default cap on requests per operation call when no
    :class:`CallBudget` is passed. ``output``: how replies are constrained (``json_schema``,
    ``tool``, ``json``, ``prompt``, or ``auto``: the strongest the model and server take).
    ``max_failures_in_a_row``: failed requests in a row (timeouts, 5xx) after which the endpoint
    is taken out of use for this run, so a dead server costs bounded time. ``max_tokens``: the
    cap the chat model sends (a reply at it was cut; one over it or over ``CHARS_PER_TOKEN``
    characters a token is refused unparsed). ``timeout``: one deadline per request, covering
    connect, headers, body and parsing (enforced at the socket for :meth:`from_openai`'s models).
    """

    def __init__(
        self,
        chat_model: BaseChatModel,
        *,
        name: str | None = None,
        retries: int = DEFAULT_RETRIES,
        fallback: bool = True,
        max_calls: int | None = None,
        secrets: Sequence[str] = (),
        output: str = "auto",
        base_url: str | None = None,
        retry_temperature: float | None = RETRY_TEMPERATURE,
        max_failures_in_a_row: int | None = None,
        max_tokens: int | None = None,
        timeout: float | None = None,
    ) -> None:
        if retries < 0:
            raise ValueError("retries must be >= 0")
        self.chat_model = chat_model
        self.name = name or _model_name(chat_model)
        self.retries = retries
        self.fallback = fallback
        self.max_calls = max_calls if max_calls is not None else retries + 1
        self.output = check_mode(output)
        self.base_url = base_url
        self.usage = LLMUsage()
        self.max_failures_in_a_row = (
            max_failures_in_a_row if max_failures_in_a_row is not None else 2 * (retries + 1)
        )
        # Strings never to let through into error messages or logs (API keys).
        self._secrets = tuple(s for s in secrets if s)
        self.max_tokens = max_tokens
        self.timeout = timeout
        self.max_reply_chars = (
            CHARS_PER_TOKEN * max_tokens + 4096 if max_tokens else UNCAPPED_REPLY_CHARS
        )
        self.max_reply_bytes = 2 * self.max_reply_chars + 16_384  # JSON escapes, envelope
        self._modes: list[OutputMode] = (
            list(OUTPUT_MODES) if output == "auto" else [output]  # type: ignore[list-item]
        )
        if output == "auto" and base_url:
            with _settled_lock:  # a refusal already seen at this URL is not asked again
                self._modes = list(_settled.get(base_url, self._modes))
        self._lock = threading.Lock()
        self._failures_in_a_row = 0
        self._disabled: str | None = None
        self.first_error: str | None = None
        """The first real error of this client's life (named when the endpoint is disabled)."""
        self._retry_model = _with_temperature(chat_model, retry_temperature)

    @classmethod
    def from_openai(
        cls,
        *,
        base_url: str | None = None,
        model: str,
        api_key: str,
        temperature: float = 0.0,
        timeout: float = DEFAULT_TIMEOUT,
        max_tokens: int | None = DEFAULT_MAX_TOKENS,
        max_tokens_field: str = "max_tokens",
        output: str = "auto",
        retries: int = DEFAULT_RETRIES,
        fallback: bool = True,
        max_retries: int = 0,
        json_mode: bool = False,
        **model_kwargs: Any,
    ) -> MemoryLLM:
        """A ``ChatOpenAI`` on any OpenAI-compatible endpoint.

        ``max_tokens`` caps every reply; it is sent as ``max_tokens`` (what llama.cpp, vLLM and
        Ollama read) or, with ``max_tokens_field="max_completion_tokens"``, under OpenAI's newer
        name (its reasoning models refuse the old one). ``timeout`` is each request's deadline
        in seconds, from connecting to the parsed reply (a server that drips bytes is cut off
        at it, and the connection closed); ``retries`` is graphmem's own retry, counted in
        usage. ``max_retries`` is the SDK's hidden HTTP retry: leave it at 0, or usage and
        budgets miss those requests.
        ``json_mode=True`` is ``output="json"``.
        """
        from graphmem.extras import needs_extra

        with needs_extra("openai", "MemoryLLM.from_openai"):
            from langchain_openai import ChatOpenAI

        if max_tokens is not None and max_tokens < 1:
            raise ValueError("max_tokens must be at least 1 (or None for no cap)")
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        if max_tokens_field not in ("max_tokens", "max_completion_tokens"):
            raise ValueError("max_tokens_field must be 'max_tokens' or 'max_completion_tokens'")
        kwargs: dict[str, Any] = dict(model_kwargs)
        if max_tokens is not None:
            if max_tokens_field == "max_tokens":
                # langchain-openai renames max_tokens to max_completion_tokens, which llama.cpp
                # ignores; extra_body goes into the request as it is.
                kwargs["extra_body"] = {
                    **(kwargs.get("extra_body") or {}),
                    "max_tokens": max_tokens,
                }
            else:
                kwargs["max_tokens"] = max_tokens
        chat = ChatOpenAI(
            base_url=base_url,
            model=model,
            api_key=api_key,
            temperature=temperature,
            timeout=timeout,
            max_retries=max_retries,
            http_client=bounded_http_client(timeout),
            **kwargs,
        )
        return cls(
            chat,
            name=model,
            retries=retries,
            fallback=fallback,
            secrets=(api_key,),
            output="json" if json_mode else output,
            base_url=base_url,
            max_tokens=max_tokens,
            timeout=timeout,
        )

    def __repr__(self) -> str:
        return (
            f"MemoryLLM(name={self.name!r}, output={self.output!r}, retries={self.retries}, "
            f"fallback={self.fallback})"
        )

    @property
    def output_mode(self) -> OutputMode:
        """The output mode requests use now (``auto`` settles on one as it learns)."""
        return self._modes[0]

    @property
    def disabled(self) -> str | None:
        """Why the endpoint was taken out of use for this run (None while it is in use)."""
        return self._disabled

    def reset(self) -> None:
        """Put a disabled endpoint back in use (after fixing the server or its settings)."""
        with self._lock:
            self._disabled = None
            self._failures_in_a_row = 0

    # ---- the operations ------------------------------------------------------------------

    def extract_note_fields(self, text: str, *, budget: CallBudget | None = None) -> NoteFields:
        """Keywords, tags, one-sentence context and category of a note (A-MEM)."""
        return self.structured(
            "extract_note_fields",
            prompts.NOTE_FIELDS,
            prompts.note_fields_user(text),
            NoteFields,
            budget,
            check=checks.context_check(text),
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
            check=checks.script_check(task, [s.action for s in steps], success),
        )

    def distill_knowledge(
        self,
        task: str,
        steps: Sequence[TrajectoryStep],
        success: bool,
        *,
        budget: CallBudget | None = None,
    ) -> Distilled:
        """The facts an episode taught, by subject (graphmem.ops.distill)."""
        return self.structured(
            "distill_knowledge",
            prompts.DISTILL_KNOWLEDGE,
            prompts.distill_knowledge_user(task, steps, success),
            Distilled,
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

        shown = [*failed_steps, *(successful_steps or [])]
        grounded = checks.tip_check([s.action for s in shown], task, [s.observation for s in shown])

        def step_exists(out: Reflection) -> None:
            if out.failed_step is not None and out.failed_step >= len(failed_steps):
                raise InvalidOutput(
                    f"failed_step {out.failed_step} is not a step of the failed attempt "
                    f"(0..{len(failed_steps) - 1}, or null)"
                )
            grounded(out)

        return self.structured(
            "reflect",
            prompts.REFLECT,
            prompts.reflect_user(task, failed_steps, successful_steps),
            Reflection,
            budget,
            check=step_exists,
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
        ids = {n.id for n in neighbours}
        grounded = checks.link_check(memory_text, neighbours)

        def known_ids(out: LinkDecisions) -> None:
            unknown = sorted(({c.id for c in out.links} | {u.id for u in out.updates}) - ids)
            if unknown and len(unknown) == len(out.links) + len(out.updates):
                raise InvalidOutput(
                    f"ids {', '.join(unknown[:3])} are not in the neighbour list; use only its ids"
                )
            grounded(out.restricted_to(ids))

        # The neighbour ids as an enum: a server that enforces the schema (a grammar) then
        # cannot let even a small model invent an id or write a placeholder.
        schema = output_schema(LinkDecisions)
        for field in ("links", "updates"):
            item = schema["properties"][field]["items"]
            item["properties"]["id"]["enum"] = sorted(ids)
        out = self.structured(
            "decide_links",
            prompts.DECIDE_LINKS,
            prompts.decide_links_user(memory_text, neighbours),
            LinkDecisions,
            budget,
            check=known_ids,
            schema=schema,
        )
        kept = out.restricted_to(ids)
        dropped = len(out.links) + len(out.updates) - len(kept.links) - len(kept.updates)
        if dropped:
            log.warning("decide_links: dropped %d decisions about unknown ids", dropped)
        return kept

    def check(self) -> tuple[list[str], float]:
        """Ask the endpoint one small question the way every operation does (endpoint check).

        Returns the keywords and the seconds it took; raises :class:`LLMError` with the cause
        (and what to fix) when the endpoint cannot answer.
        """
        started = time.perf_counter()
        words = self.extract_keywords("Check the endpoint: put the red apple in the fridge.")
        return words, time.perf_counter() - started

    # ---- the one path every operation takes ----------------------------------------------

    def structured(
        self,
        op: str,
        system: str,
        user: str,
        model: type[T],
        budget: CallBudget | None = None,
        *,
        check: Callable[[T], None] | None = None,
        schema: dict[str, Any] | None = None,
        parse: Callable[[str], dict[str, Any]] = parse_json_object,
    ) -> T:
        """Ask the model, parse and validate its JSON reply; retry; raise LLMError at the end.

        ``model`` validates the shape; ``check`` the content; ``schema`` (default: the model's
        JSON schema) is what the server is asked to follow.
        """
        if budget is None:
            budget = CallBudget(self.max_calls)
        if self._disabled is not None:
            raise LLMError(f"{op} via {self.name}: not used: {self._disabled}")
        wanted = schema if schema is not None else output_schema(model)
        messages: list[BaseMessage] = [SystemMessage(system), HumanMessage(user)]
        last_error = "no request was made"
        first_error: str | None = None  # of this operation: kept in the final message
        attempt = 0
        cuts = 0
        while attempt <= self.retries:
            mode, runnable = self._bound(op, wanted, retry=attempt > 0)
            if not budget.take():
                last_error = f"the LLM call budget of {budget.max_calls} per operation is spent"
                break
            cut: str | None = None  # why the reply is unusable as a whole: cut or too large
            partial = ""
            with self._limits() as limits:
                try:
                    result = runnable.invoke(messages)
                    reply: BaseMessage | None = raw_message(result)
                except Exception as e:  # any provider or transport error is one failed request
                    reply = None
                    failure = describe(e, base_url=self.base_url, model=self.name)
                    message = self._redact(failure.message)
                    tokens = reported_usage(e)
                    if len(self._modes) > 1 and rejects_mode(failure.status, message):
                        # Asked nothing: not a failure, and this URL is not asked that again.
                        self.usage.record_call(*tokens, counted=True)
                        self._step_down(mode, message)
                        budget.refund()  # at most three per client: the question was not asked
                        continue
                    answered = failure.cut or failure.status is not None
                    self.usage.record_call(*tokens, counted=answered or tokens != (0, 0))
                    self.usage.record_failure()
                    if failure.cut or failure.kind == "too_large":
                        self._failures_in_a_row = 0  # the server answered; the model rambled
                    if failure.cut:
                        cut = self._cut_at(tokens[1])
                        partial = partial_reply(e)
                    elif failure.kind == "too_large":
                        cut = message
                    else:
                        last_error = f"request failed: {message}"
                        log.warning("%s attempt %d: %s", op, attempt + 1, last_error)
                        self._remember(last_error)
                        first_error = first_error or last_error
                        if failure.permanent:
                            self._disable(last_error)
                            break
                        if self._count_failure():
                            break
                        attempt += 1
                        continue
                if reply is not None:
                    self._failures_in_a_row = 0
                    prompt_tokens, completion_tokens = token_usage(reply)
                    reported = bool(getattr(reply, "usage_metadata", None)) or bool(
                        (getattr(reply, "response_metadata", None) or {}).get("token_usage")
                    )
                    self.usage.record_call(prompt_tokens, completion_tokens, counted=reported)
                    text = reply_text(reply)
                    cut = self._unusable(reply, text, completion_tokens)
                    if cut is None:
                        try:
                            value = model.model_validate(parse(text))
                            check_content(value, system)
                            if check is not None:
                                check(value)
                        except (InvalidOutput, ValidationError) as e:
                            self.usage.record_failure()
                            last_error = f"invalid output: {self._redact(short(e))}"
                            log.warning(
                                "%s attempt %d (%s): %s; reply was %r",
                                op,
                                attempt + 1,
                                mode,
                                last_error,
                                self._redact(text[:200]),
                            )
                            self._remember(last_error)
                            first_error = first_error or last_error
                            # Tell the model what was wrong; a second chance usually works.
                            messages = [
                                *messages[:2],
                                AIMessage(text[:2000]),
                                HumanMessage(prompts.repair(self._redact(short(e, 200)), False)),
                            ]
                            attempt += 1
                            continue
                        if not self._in_time(limits):
                            self.usage.record_failure()
                            last_error = f"request failed: {self._late(limits)}"
                            log.warning("%s attempt %d: %s", op, attempt + 1, last_error)
                            self._remember(last_error)
                            first_error = first_error or last_error
                            if self._count_failure():
                                break
                            attempt += 1
                            continue
                        return value
                    self.usage.record_failure()
                    partial = text
            # The reply was cut at the cap or is over the bound: once more, shorter, then stop.
            cuts += 1
            last_error = f"invalid output: {cut}"
            log.warning("%s attempt %d (%s): %s", op, attempt + 1, mode, last_error)
            self._remember(last_error)
            first_error = first_error or last_error
            if cuts > 1:
                break
            shown = AIMessage(partial[:2000] or "…")
            messages = [*messages[:2], shown, HumanMessage(prompts.repair("", cut=True))]
            attempt += 1
        if first_error and first_error != last_error:
            last_error += f"; first error: {first_error}"
        raise LLMError(f"{op} via {self.name}: {last_error}")

    def _limits(self) -> AbstractContextManager[RequestLimits | None]:
        """The bounds of one request: its deadline and the bytes its reply may have."""
        if self.timeout is None:
            return nullcontext()
        return request_limits(self.timeout, self.max_reply_bytes)

    def _in_time(self, limits: RequestLimits | None) -> bool:
        return limits is None or limits.remaining() > 0

    def _late(self, limits: RequestLimits | None) -> str:
        seconds = limits.seconds if limits is not None else 0.0
        return (
            f"the reply was not parsed within the {seconds:g} s deadline (no answer in time: "
            "raise the timeout, GRAPHMEM_LLM_TIMEOUT, or check the server)"
        )

    def _cut_at(self, tokens: int) -> str:
        at = tokens or self.max_tokens
        where = f"cut at {at} tokens" if at else "cut at the output-token cap"
        return f"the reply was {where} (the cap, {_CAP})"

    def _unusable(self, reply: BaseMessage, text: str, completion_tokens: int) -> str | None:
        """Why a reply is not parsed at all: cut at the cap, or over the bound; else None."""
        if self.max_tokens and completion_tokens > self.max_tokens:
            return (
                f"the reply has {completion_tokens} tokens, over the cap of {self.max_tokens} "
                f"({_CAP}): the server ignores max_tokens"
            )
        if len(text) > self.max_reply_chars:
            return (
                f"the reply is {len(text):,} characters, over the bound of "
                f"{self.max_reply_chars:,} ({_CAP})"
            )
        if _finish_reason(reply) == "length" or (
            self.max_tokens is not None and completion_tokens >= self.max_tokens
        ):
            return self._cut_at(completion_tokens)
        return None

    # ---- helpers -------------------------------------------------------------------------

    def _bound(
        self, op: str, schema: dict[str, Any], *, retry: bool
    ) -> tuple[OutputMode, Runnable[Any, Any]]:
        """The request for the current mode, stepping down modes the chat model cannot bind."""
        chat = self._retry_model if retry else self.chat_model
        while True:
            mode = self._modes[0]
            try:
                return mode, bind(chat, mode, op, schema)
            except (NotImplementedError, ValueError, TypeError) as e:
                if len(self._modes) == 1:
                    raise LLMError(
                        f"{op} via {self.name}: the chat model cannot do output mode {mode!r} "
                        f"({short(e, 120)}); set GRAPHMEM_LLM_OUTPUT=prompt"
                    ) from e
                log.debug("%s cannot bind output mode %s: %s", self.name, mode, short(e, 120))
                with self._lock:
                    if self._modes[0] == mode:
                        self._modes.pop(0)

    def _step_down(self, mode: OutputMode, message: str) -> None:
        with self._lock:
            if self._modes and self._modes[0] == mode and len(self._modes) > 1:
                self._modes.pop(0)
            modes = list(self._modes)
        known = False
        if self.base_url:
            with _settled_lock:
                known = _settled.get(self.base_url) == modes
                _settled[self.base_url] = modes
        # Expected of some servers (llama-cpp-python's refuses json_schema): said once per URL.
        log.log(
            logging.DEBUG if known else logging.INFO,
            "%s refused output mode %s (%s); using %s",
            self.name,
            mode,
            message,
            modes[0],
        )

    def _remember(self, error: str) -> None:
        with self._lock:
            if self.first_error is None:
                self.first_error = error

    def _disable(self, reason: str) -> None:
        with self._lock:
            if self._disabled is None:
                self._disabled = reason
        log.error("LLM endpoint %s taken out of use for this run: %s", self.name, reason)

    def _count_failure(self) -> bool:
        """Count a failed request; True when too many in a row disable the endpoint."""
        with self._lock:
            self._failures_in_a_row += 1
            tripped = self._failures_in_a_row >= self.max_failures_in_a_row
        if tripped:
            self._disable(
                f"{self.max_failures_in_a_row} requests failed in a row; first error: "
                f"{self.first_error}"
            )
        return tripped

    def _redact(self, text: str) -> str:
        return redact_secrets(text, self._secrets)


def redact_secrets(text: str, secrets: Sequence[str]) -> str:
    """``text`` with each secret replaced by ``***`` where it stands as a whole token, never
    inside another word (a short key "en" must not turn "OpenAIConnectionError" into noise).

    >>> redact_secrets("key sk-abc rejected; Bearer sk-abc", ["sk-abc"])
    'key *** rejected; Bearer ***'
    >>> redact_secrets("OpenAIConnectionError (key en)", ["en"])
    'OpenAIConnectionError (key ***)'
    """
    for secret in secrets:
        if secret:
            token = rf"(?<![A-Za-z0-9_\-]){re.escape(secret)}(?![A-Za-z0-9_\-])"
            text = re.sub(token, "***", text)
    return text


def _finish_reason(message: BaseMessage) -> str | None:
    reason = (getattr(message, "response_metadata", None) or {}).get("finish_reason")
    return reason if isinstance(reason, str) else None


def _with_temperature(chat_model: BaseChatModel, temperature: float | None) -> BaseChatModel:
    """A copy of ``chat_model`` at ``temperature`` for retries, when it runs at 0 and has one."""
    if temperature is None or "temperature" not in type(chat_model).model_fields:
        return chat_model
    current = getattr(chat_model, "temperature", None)
    if current is not None and current > 0:
        return chat_model
    return chat_model.model_copy(update={"temperature": temperature})


def _model_name(chat_model: BaseChatModel) -> str:
    for attr in ("model_name", "model", "model_id"):
        value = getattr(chat_model, attr, None)
        if isinstance(value, str) and value:
            return value
    return type(chat_model).__name__
