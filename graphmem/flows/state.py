"""Typed state and run context of the graphmem flows.

Every flow takes its dependencies from LangGraph's run context (``context_schema`` /
``Runtime``), never from globals::

    graph.invoke({"query": "..."}, context=MemoryContext(namespace="agent-1", memory=mem))

``memory`` may instead be bound when the graph is built (``build_retrieve_graph(memory=mem)``).
Over HTTP (``langgraph dev``, LangGraph Server) the context arrives as JSON, so the served graphs of
:mod:`graphmem.flows.server` take :class:`ServedContext` instead: plain values that Studio shows
as a form (a served agent's context, e.g. ``showcase.served_agent``'s, extends it to name its
environment and policy rather than hold them). States hold plain JSON values only, so any
checkpointer can persist them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Required, cast, get_args

from langgraph.runtime import Runtime
from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import TypedDict  # pydantic needs it for JSON schemas on Python 3.11

from graphmem.config import DEFAULT_KINDS, RetrievalConfig, UpdateStrategy
from graphmem.errors import ConfigError, InvalidInput
from graphmem.memory import GraphMemory
from graphmem.models import GraphmemModel, Hit, MemoryKind, Namespace

if TYPE_CHECKING:
    from graphmem.agents import GameEnv, Policy


# ---- run context ---------------------------------------------------------------------------


@dataclass
class MemoryContext:
    """What every memory flow needs for one run: the namespace and (usually) the memory.

    ``retrieval`` overrides the memory's retrieval config; ``strategy`` picks the memory-set
    update (vanilla / validation / adjustment).
    """

    namespace: str
    memory: GraphMemory | None = None
    retrieval: RetrievalConfig | None = None
    strategy: UpdateStrategy | str = UpdateStrategy.ADJUSTMENT


HintsFn = Callable[[GraphMemory, str, str, Sequence[Hit]], list[str]]
"""Turns retrieved hits into hints for the policy: (memory, namespace, task, hits) → hints."""

LearnFn = Callable[[GraphMemory, str, "AgentState"], list[str]]
"""Extra learning after an episode (e.g. domain facts as notes); returns new memory ids."""


@dataclass
class AgentContext(MemoryContext):
    """Context of the agent flow: the memory context plus an environment and a policy.

    ``env`` follows :class:`graphmem.agents.GameEnv` (reset / step / step_budget) and
    ``policy`` follows :class:`graphmem.agents.Policy` (begin / act / feedback).
    ``use_memory=False`` runs the same agent without retrieval or learning (the baseline).
    ``recall`` (a retrieval config) lets a policy that asks questions during the task
    (:class:`graphmem.agents.RecallingPolicy`) get answers before each step; what it
    recalls joins the task's Episode, so it is credited like the first retrieval. A policy
    that reports which hints it acted on (:class:`graphmem.agents.UsingPolicy`, e.g.
    the rule-based explorers) is credited by use instead: the Episode records every memory
    retrieved at the start and recalled during the task, and marks used only those whose hints
    it used, which alone the reward credits.
    ``procedures`` (a retrieval config) hands a policy that follows procedures
    (:class:`graphmem.agents.ProcedurePolicy`) the successful procedures two-phase
    retrieval finds for the task; they are recorded as offered, and only those it took steps
    from are marked used, so the reward credits the procedures actually followed.
    """

    env: GameEnv | None = None
    policy: Policy | None = None
    fold: str = "test"
    use_memory: bool = True
    hints: HintsFn | None = None
    learn: LearnFn | None = None
    task_prefix: str = ""
    recall: RetrievalConfig | None = None
    procedures: RetrievalConfig | None = None


DEFAULT_NAMESPACE = "default"
"""The namespace of a served run whose context names none."""


class ServedContext(GraphmemModel):
    """The run context of a memory flow served over HTTP: JSON only, so Studio shows it as a form.

    The memory is the server's own (opened from the environment, see :mod:`graphmem.flows.server`);
    the context picks the namespace (``"default"`` when left out) and may override the
    retrieval config and the update strategy. Unknown keys are refused, so a misspelt
    ``namspace`` cannot silently fall back to the default: here by ``extra="forbid"``, and under
    LangGraph Server, which drops them before the run sees them, by :meth:`refuse_unknown_keys`
    in the served graphs' factories.
    """

    model_config = ConfigDict(extra="forbid")

    namespace: Namespace = Field(
        default=Namespace(DEFAULT_NAMESPACE),
        description="Whose memory: tenant / agent / user scope.",
    )
    retrieval: RetrievalConfig | None = Field(
        default=None,
        description="Two-phase retrieval settings; the memory's own when unset. Kinds left "
        "out: Procedure, Note and Tip, as MCP's search_memory.",
    )
    strategy: UpdateStrategy = Field(
        default=UpdateStrategy.ADJUSTMENT, description="Memory-set update after an episode."
    )

    @classmethod
    def refuse_unknown_keys(cls, context: object) -> None:
        """ConfigError naming each key of ``context`` (the JSON object a client sent) that this
        context does not take, a nested one as ``retrieval.kind``.

        LangGraph Server drops the top-level keys a graph's context schema lacks before the run
        starts, and pydantic ignores unknown keys inside ``retrieval``, so neither would fail.
        """
        unknown = _unknown_keys(cls, context, "")
        if unknown:
            named = "; ".join(f"{key!r} (known: {', '.join(known)})" for key, known in unknown)
            raise ConfigError(f"unknown context key {named}")

    def memory_context(self, memory: GraphMemory) -> MemoryContext:
        """The in-process context of the same run, over ``memory``."""
        return MemoryContext(
            namespace=self.namespace,
            memory=memory,
            retrieval=self.retrieval_over(memory),
            strategy=self.strategy,
        )

    def retrieval_over(self, memory: GraphMemory) -> RetrievalConfig:
        """The run's retrieval config: the context's, else ``memory``'s; unless the context
        names ``kinds``, it looks through :data:`~graphmem.integrations.langchain_tools.
        DEFAULT_KINDS` (procedures, notes, tips), as MCP's ``search_memory`` and the LangChain
        tools do, so a note saved over MCP is found by the served retrieve too."""
        if self.retrieval is not None and "kinds" in self.retrieval.model_fields_set:
            return self.retrieval
        base = self.retrieval if self.retrieval is not None else memory.config.retrieval
        return base.model_copy(update={"kinds": DEFAULT_KINDS})


def _unknown_keys(model: type[BaseModel], data: object, prefix: str) -> list[tuple[str, list[str]]]:
    """The keys of ``data`` (a JSON object) that ``model`` has no field for, with those it has;
    the keys of a nested object are checked against its field's model."""
    if not isinstance(data, Mapping):
        return []
    found: list[tuple[str, list[str]]] = []
    for key, value in data.items():
        field = model.model_fields.get(key)
        if field is None:
            found.append((f"{prefix}{key}", list(model.model_fields)))
            continue
        for nested in get_args(field.annotation) or (field.annotation,):
            if isinstance(nested, type) and issubclass(nested, BaseModel):
                found += _unknown_keys(nested, value, f"{prefix}{key}.")
    return found


def required(state: Mapping[str, object], key: str, flow: str, example: str) -> Any:
    """``state[key]``, or InvalidInput naming the field when the flow's input left it out
    (a served run gets the message, not a bare ``KeyError``)."""
    value = state.get(key)
    if value is None:
        raise InvalidInput(f'the {flow} flow needs "{key}" in its input, e.g. {example}')
    return value


def resolve(
    runtime: Runtime[Any], bound: GraphMemory | None
) -> tuple[GraphMemory, Namespace, MemoryContext]:
    """The run's memory, namespace and context; a clear ConfigError when one is missing."""
    ctx = runtime.context
    if isinstance(ctx, dict):
        ctx = MemoryContext(**ctx)
    if not isinstance(ctx, MemoryContext):
        raise ConfigError(
            "graphmem flows need a run context: invoke(..., context=MemoryContext(namespace=..., "
            "memory=...))"
        )
    memory = ctx.memory if ctx.memory is not None else bound
    if memory is None:
        raise ConfigError(
            "no GraphMemory for this run: pass context=MemoryContext(memory=...) or build the "
            "graph with memory=..."
        )
    return memory, Namespace(ctx.namespace), ctx


# ---- state ---------------------------------------------------------------------------------


class HitRecord(TypedDict):
    """One retrieved memory and the parts of its score (JSON-friendly :class:`Hit`)."""

    memory_id: str
    kind: str
    rank: int
    sim: float
    q: float
    z_sim: float
    z_q: float
    score: float
    expected: float | None
    """Abstention: the reward it is expected to earn when used (None: not judged)."""


class WithheldRecord(TypedDict):
    """A candidate abstention did not hand over, and why (never credited)."""

    memory_id: str
    kind: str
    expected: float | None
    reason: str


class StepRecord(TypedDict):
    """One agent step as the flows record it."""

    thought: str
    action: str
    observation: str
    reward: float


class BuildState(TypedDict, total=False):
    """Build: ``trajectory`` (a :class:`graphmem.models.Trajectory` as a dict) in, ids out."""

    trajectory: dict[str, Any]
    granularity: str
    key_mode: str
    task_id: str
    new_memory_ids: list[str]


class RetrieveState(TypedDict, total=False):
    """Retrieve: ``query`` in; hits with score parts, a prompt and the episode id out.

    ``open_episode`` (default True) records the retrieval as an Episode; an ``episode_id`` given
    on input adds the hits to that open episode instead.
    """

    query: str
    open_episode: bool
    episode_id: str | None
    hits: list[HitRecord]
    prompt: str
    withheld: list[WithheldRecord]
    baseline: float | None


class UpdateState(TypedDict, total=False):
    """Update: reward the episode (utility), then update the memory set (reflect / build).

    ``used`` (memory ids the episode was offered) credits those only; None credits every
    memory it was offered (or as the memory's config says).
    """

    trajectory: dict[str, Any]
    episode_id: str | None
    reward: float
    success: bool
    used: list[str] | None
    q_updates: dict[str, float]
    new_memory_ids: list[str]
    update: dict[str, Any]


class EvolveState(TypedDict, total=False):
    """Evolve: link each new memory to its neighbours (A-MEM)."""

    new_memory_ids: list[str]
    evolution: list[dict[str, Any]]


class AgentState(TypedDict, total=False):
    """The agent flow: one task (``seed``) from reset to learning."""

    seed: int
    task: str
    query: str
    open_episode: bool
    episode_id: str | None
    hits: list[HitRecord]
    prompt: str
    hints: list[str]
    recalled: list[str]
    plans: list[HitRecord]
    followed: list[str]
    sources: dict[str, list[str]]
    used: list[str] | None
    observation: str
    valid_actions: list[str]
    inventory: str
    steps: list[StepRecord]
    done: bool
    success: bool
    reward: float
    score: float
    trajectory: dict[str, Any]
    q_updates: dict[str, float]
    new_memory_ids: list[str]
    update: dict[str, Any]
    evolution: list[dict[str, Any]]


# ---- what the served graphs take and give (their Studio forms) ------------------------------


class RetrieveInput(TypedDict, total=False):
    """Retrieve: the query; ``open_episode`` (default True) or an open ``episode_id``."""

    query: Required[str]
    open_episode: bool
    episode_id: str | None


class RetrieveOutput(TypedDict, total=False):
    hits: list[HitRecord]
    prompt: str
    episode_id: str | None


class BuildInput(TypedDict, total=False):
    """Build: a trajectory ``{"task", "steps": [{"action", ...}], "reward", "success"}``."""

    trajectory: Required[dict[str, Any]]
    granularity: str
    key_mode: str


class BuildOutput(TypedDict, total=False):
    task_id: str
    new_memory_ids: list[str]


class UpdateInput(TypedDict, total=False):
    """Update: the episode's reward (credits what it retrieved, or, given ``used``, only those
    of its memories) and its trajectory."""

    episode_id: str | None
    reward: float
    success: bool
    used: list[str] | None
    trajectory: dict[str, Any]


class UpdateOutput(TypedDict, total=False):
    q_updates: dict[str, float]
    new_memory_ids: list[str]
    update: dict[str, Any]


class EvolveInput(TypedDict, total=False):
    new_memory_ids: Required[list[str]]


class EvolveOutput(TypedDict, total=False):
    evolution: list[dict[str, Any]]


class AgentInput(TypedDict):
    """Agent: one task, the game generated from ``seed``."""

    seed: int


class AgentOutput(TypedDict, total=False):
    task: str
    success: bool
    reward: float
    score: float
    steps: list[StepRecord]
    episode_id: str | None
    hits: list[HitRecord]
    hints: list[str]
    recalled: list[str]
    q_updates: dict[str, float]
    new_memory_ids: list[str]


def hit_record(hit: Hit) -> HitRecord:
    return HitRecord(
        memory_id=hit.memory.id,
        kind=str(hit.memory.kind),
        rank=hit.rank,
        sim=hit.sim,
        q=hit.q,
        z_sim=hit.z_sim,
        z_q=hit.z_q,
        score=hit.score,
        expected=hit.expected,
    )


def withheld_record(hit: Hit) -> WithheldRecord:
    return WithheldRecord(
        memory_id=hit.memory.id,
        kind=str(hit.memory.kind),
        expected=hit.expected,
        reason=hit.withheld or "",
    )


_KINDS = frozenset(k.value for k in MemoryKind)


def summary(result: Any) -> dict[str, Any]:
    """An operation's result as JSON for the state, each memory shortened to its id and kind."""
    if isinstance(result, BaseModel):
        dumped = result.model_dump(mode="json")
    elif dataclasses.is_dataclass(result) and not isinstance(result, type):
        dumped = jsonable(dataclasses.asdict(result))
    else:
        dumped = {"result": jsonable(result)}
    return cast(dict[str, Any], _shorten(dumped))


def jsonable(value: Any) -> Any:
    """Pydantic models (also inside lists and dicts) as plain JSON values."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    return value


def _shorten(value: Any) -> Any:
    if isinstance(value, dict):
        if value.get("kind") in _KINDS and "id" in value and "namespace" in value:
            return {"id": value["id"], "kind": value["kind"]}
        return {k: _shorten(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shorten(v) for v in value]
    return value
