"""graphmem as a Model Context Protocol server, for agents outside LangGraph (Claude Desktop,
IDE agents) and for LangGraph agents through ``langchain-mcp-adapters``.

Why and how, in full: docs/design.md, "Module notes", ``graphmem.integrations.mcp_server``.

>>> from graphmem import GraphMemory, HashingEmbedder
>>> from graphmem.stores.embedded import EmbeddedStore
>>> import asyncio
>>> server = build_server(GraphMemory(EmbeddedStore.in_memory(), embedder=HashingEmbedder()))
>>> sorted(t.name for t in asyncio.run(server.list_tools()))  # doctest: +NORMALIZE_WHITESPACE
['build_from_trajectory', 'memory_history', 'report_outcome', 'save_note', 'save_notes',
 'search_memory']
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any, Literal, TypeVar

from graphmem.extras import needs_extra
from graphmem.models import Note

with needs_extra("mcp", "the MCP server"):
    import anyio.to_thread
    from mcp.server.fastmcp import FastMCP
    from mcp.server.fastmcp.exceptions import ToolError
    from pydantic import BaseModel, Field

    from graphmem.config import DEFAULT_KINDS
    from graphmem.errors import GraphmemError
    from graphmem.memory import GraphMemory
    from graphmem.models import CreditPolicy, MemoryKind, Namespace, Trajectory
    from graphmem.ops.history import summarize

log = logging.getLogger(__name__)

T = TypeVar("T")

SearchKind = Literal["Procedure", "Note", "Tip"]
NamespaceArg = Annotated[
    str | None,
    Field(description="Whose memory (tenant / agent / user); the server's own when it has one."),
]


class MemoryHit(BaseModel):
    """One retrieved memory and the parts of its score."""

    memory_id: str
    kind: str
    summary: str = Field(description="One line saying what the memory holds.")
    rank: int = Field(description="0-based rank in the final selection.")
    sim: float = Field(description="Cosine similarity of the query and the memory's key.")
    q: float = Field(description="The memory's learned utility when retrieved.")
    z_sim: float = Field(description="sim as a z-score over the recalled candidates.")
    z_q: float = Field(description="q as a z-score over the recalled candidates.")
    score: float = Field(description="(1-λ)·z_sim + λ·z_q: what the selection ranked by.")
    expected: float | None = Field(
        default=None, description="The reward it is expected to earn when used (abstention)."
    )
    updated_by: str | None = Field(
        default=None,
        description="A note: the id of a newer note that updates it (it may be out of date).",
    )
    newer_than: str | None = Field(
        default=None, description="The id of the older note this one was ranked above."
    )


class WithheldHit(BaseModel):
    """A candidate not handed over: it is not expected to beat acting without memory."""

    memory_id: str
    kind: str
    summary: str = Field(description="One line saying what the memory holds.")
    expected: float | None = Field(description="The reward it is expected to earn when used.")
    reason: str = Field(description="Why it was withheld.")


class SearchResult(BaseModel):
    namespace: str
    episode_id: str | None = Field(description="Report the task's outcome against this id.")
    hits: list[MemoryHit]
    prompt: str = Field(description="The hits rendered for a prompt (empty when none).")
    withheld: list[WithheldHit] = Field(
        default_factory=list,
        description="Candidates not handed over, with why (abstention); never credited.",
    )
    baseline: float | None = Field(
        default=None,
        description="The reward this kind of task earns without memory, as learned so far.",
    )


class SavedNote(BaseModel):
    namespace: str
    memory_id: str
    keywords: list[str]
    tags: list[str]
    context: str


class NoteIn(BaseModel):
    """One note of save_notes."""

    content: str = Field(description="One fact or lesson, a sentence or two.")
    tags: list[str] | None = Field(default=None, description="Optional short labels.")
    valid_at: str | None = Field(
        default=None,
        description="When it was said or observed, ISO 8601 (e.g. the conversation turn's "
        "date); the time of saving when left out.",
    )


class SavedNotes(BaseModel):
    namespace: str
    notes: list[SavedNote] = Field(description="One per note given, in order.")


class BuiltProcedure(BaseModel):
    namespace: str
    task_id: str
    procedure_id: str
    deduplicated: bool = Field(description="True when this trajectory was stored already.")
    steps: int


class Outcome(BaseModel):
    namespace: str
    episode_id: str
    reward: float
    success: bool | None
    credit: str = Field(description="What was credited: every hit (offered) or those used.")
    replayed: bool = Field(description="True when the episode was finished already: no credit.")
    q_updates: dict[str, float] = Field(description="New q of each credited memory.")
    summary: str = Field(
        default="", description="What the reward credited, in words (nothing, when used=[])."
    )


def credit_summary(
    credited: dict[str, float], replayed: bool, used: list[str] | None, policy: str
) -> str:
    """One line on what a report credited, so a client is told, not left to infer it from an
    empty ``q_updates``."""
    if replayed:
        return "finished already: the recorded outcome, nothing credited again"
    if credited:
        which = "the hits marked used" if policy == CreditPolicy.USED else "every hit"
        return f"credited {len(credited)} memories ({which})"
    if used is not None and not used:
        return "credited nothing: used=[] says no hit was used (leave used out to credit every hit)"
    return "credited nothing: the episode holds no memory to credit"


class MemoryHistory(BaseModel):
    namespace: str
    memory_id: str
    kind: str
    summary: str
    q: float
    uses: int
    obsolete: bool
    versions: list[dict[str, Any]]
    links: list[dict[str, Any]]
    episodes: list[dict[str, Any]]
    text: str = Field(description="The whole history, readable.")


@contextmanager
def _as_tool_errors() -> Iterator[None]:
    """graphmem's errors reach the client as tool errors it can read, not as crashes."""
    try:
        yield
    except GraphmemError as e:
        raise ToolError(f"{type(e).__name__}: {e}") from e


class MemoryTools:
    """The tools' operations over one memory, in a fixed namespace or the one each call names."""

    def __init__(self, memory: GraphMemory, namespace: str | None = None) -> None:
        self.memory = memory
        self.namespace = Namespace(namespace) if namespace is not None else None

    def namespace_of(self, asked: str | None) -> Namespace:
        """The namespace a call works in, checked (the tools' one namespace check); a ToolError
        when it names none or a foreign one."""
        if self.namespace is not None:
            if asked is not None and asked != self.namespace:
                raise ToolError(
                    f"this server serves namespace {self.namespace!r} only, not {asked[:80]!r}"
                )
            return self.namespace
        if asked is None:
            raise ToolError("name a namespace: this server was started without --namespace")
        with _as_tool_errors():
            return Namespace(asked)

    def search_memory(
        self,
        query: Annotated[str, Field(description="The task or question, in plain words.")],
        namespace: NamespaceArg = None,
        kinds: Annotated[
            list[SearchKind] | None, Field(description="Kinds to search; default all three.")
        ] = None,
        limit: Annotated[int | None, Field(ge=1, le=50, description="Memories kept (k2).")] = None,
        episode_id: Annotated[
            str | None, Field(description="Add these hits to this open episode.")
        ] = None,
        open_episode: Annotated[
            bool, Field(description="Record what was handed out, for report_outcome.")
        ] = True,
    ) -> SearchResult:
        """Search long-term memory (two-phase: recall by similarity, keep by learned utility).
        Call it before acting on a task; report the task's outcome with the episode id. Where
        abstention is on, hits not expected to beat acting without memory are left out: listed
        in ``withheld`` (each with its ``expected`` reward and why), beside the ``baseline``
        reward such tasks earn without memory; withheld memories are never credited."""
        ns = self.namespace_of(namespace)
        with _as_tool_errors():
            chosen = tuple(MemoryKind(k) for k in kinds) if kinds else DEFAULT_KINDS
            update: dict[str, Any] = {"kinds": chosen}
            config = self.memory.config.retrieval
            if limit is not None:
                update |= {"k2": limit, "k1": max(config.k1, limit)}
            found = self.memory.retrieve(
                ns,
                query,
                config.model_copy(update=update),
                open_episode=open_episode and episode_id is None,
                episode_id=episode_id,
            )
            hits = [
                MemoryHit(
                    memory_id=h.memory.id,
                    kind=str(h.memory.kind),
                    summary=summarize(h.memory, 200),
                    rank=h.rank,
                    sim=h.sim,
                    q=h.q,
                    z_sim=h.z_sim,
                    z_q=h.z_q,
                    score=h.score,
                    expected=h.expected,
                    updated_by=h.memory.updated_by if isinstance(h.memory, Note) else None,
                    newer_than=h.newer_than,
                )
                for h in found.hits
            ]
            withheld = [
                WithheldHit(
                    memory_id=h.memory.id,
                    kind=str(h.memory.kind),
                    summary=summarize(h.memory, 200),
                    expected=h.expected,
                    reason=h.withheld or "",
                )
                for h in found.withheld
            ]
            prompt = found.as_prompt() if found.hits else ""
        return SearchResult(
            namespace=ns,
            episode_id=found.episode_id,
            hits=hits,
            prompt=prompt,
            withheld=withheld,
            baseline=found.baseline,
        )

    def save_note(
        self,
        content: Annotated[str, Field(description="One fact or lesson, a sentence or two.")],
        namespace: NamespaceArg = None,
        tags: Annotated[list[str] | None, Field(description="Optional short labels.")] = None,
    ) -> SavedNote:
        """Save one atomic fact or lesson to long-term memory for future tasks."""
        ns = self.namespace_of(namespace)
        with _as_tool_errors():
            fields: dict[str, Any] = {"tags": list(tags)} if tags else {}
            note = self.memory.add_note(ns, content, **fields)
        return SavedNote(
            namespace=ns,
            memory_id=note.id,
            keywords=note.keywords,
            tags=note.tags,
            context=note.context,
        )

    def save_notes(
        self,
        notes: Annotated[
            list[NoteIn],
            Field(description="The facts or lessons, each with optional tags.", max_length=1000),
        ],
        namespace: NamespaceArg = None,
    ) -> SavedNotes:
        """Save many facts at once (e.g. a conversation's history): all or none are saved."""
        ns = self.namespace_of(namespace)
        with _as_tool_errors():
            given = [n.model_dump(exclude_none=True) for n in notes]
            saved = self.memory.add_notes(ns, given)
        return SavedNotes(
            namespace=ns,
            notes=[
                SavedNote(
                    namespace=ns,
                    memory_id=n.id,
                    keywords=n.keywords,
                    tags=n.tags,
                    context=n.context,
                )
                for n in saved
            ],
        )

    def build_from_trajectory(
        self,
        trajectory: Annotated[
            Trajectory,
            Field(description="The task, its steps (action, observation, thought) and outcome."),
        ],
        namespace: NamespaceArg = None,
    ) -> BuiltProcedure:
        """Turn a finished task's steps into a procedure memory, retrievable by later tasks."""
        ns = self.namespace_of(namespace)
        with _as_tool_errors():
            built = self.memory.build(ns, trajectory)
        return BuiltProcedure(
            namespace=ns,
            task_id=built.task.id,
            procedure_id=built.procedure.id,
            deduplicated=built.deduplicated,
            steps=len(built.steps),
        )

    def report_outcome(
        self,
        episode_id: Annotated[str, Field(description="The id search_memory returned.")],
        reward: Annotated[float, Field(description="How the task went, in the reward range.")],
        namespace: NamespaceArg = None,
        success: Annotated[bool | None, Field(description="Whether the task succeeded.")] = None,
        used: Annotated[
            list[str] | None,
            Field(
                description="The memory ids (from search_memory's hits) you actually used; "
                "when given, only those are credited ([] credits nothing). Leave out to credit "
                "every hit."
            ),
        ] = None,
    ) -> Outcome:
        """Finish an episode: Q ← Q + α(reward − Q) on what it retrieved, or, given ``used``,
        on the hits you used only. Exactly once: a repeat with the same reward (and used ids)
        replays the outcome; another reward is refused."""
        ns = self.namespace_of(namespace)
        with _as_tool_errors():  # finish_episode checks the reward (the one check)
            outcome = self.memory.finish_episode(ns, episode_id, reward, success=success, used=used)
        return Outcome(
            namespace=ns,
            episode_id=episode_id,
            reward=float(reward),
            success=outcome.episode.success,
            credit=str(outcome.episode.credit or CreditPolicy.OFFERED),
            replayed=outcome.replayed,
            q_updates=outcome.q,
            summary=credit_summary(
                outcome.q, outcome.replayed, used, outcome.episode.credit or CreditPolicy.OFFERED
            ),
        )

    def memory_history(
        self,
        memory_id: Annotated[str, Field(description="The memory's id.")],
        namespace: NamespaceArg = None,
    ) -> MemoryHistory:
        """The versions, links and episodes that shaped a memory (why it ranks as it does)."""
        ns = self.namespace_of(namespace)
        with _as_tool_errors():
            found = self.memory.history(ns, memory_id)
        m = found.memory
        return MemoryHistory(
            namespace=ns,
            memory_id=m.id,
            kind=str(m.kind),
            summary=summarize(m, 200),
            q=m.q,
            uses=m.uses,
            obsolete=m.obsolete,
            versions=[v.model_dump(mode="json") for v in found.versions],
            links=[link.model_dump(mode="json") for link in found.links],
            episodes=[e.model_dump(mode="json") for e in found.episodes],
            text=found.render(),
        )


def build_server(
    memory: GraphMemory,
    *,
    namespace: str | None = None,
    host: str = "127.0.0.1",
    port: int = 8765,
) -> FastMCP:
    """An MCP server with the six memory tools over ``memory``; ``namespace`` fixes theirs.

    ``host`` and ``port`` are where the streamable-HTTP transport listens (``/mcp``).
    """
    tools = MemoryTools(memory, namespace)
    where = f"namespace {tools.namespace!r}" if tools.namespace else "the namespace each call names"
    server = FastMCP(
        "graphmem",
        instructions=(
            "Long-term memory that learns which memories help. Before a task, search_memory; "
            "after it, report_outcome with the episode id, a reward and the ids of the hits "
            "you used. Save lasting facts with save_note (many at once: save_notes) and "
            f"finished tasks with build_from_trajectory. Works in {where}."
        ),
        host=host,
        port=port,
    )
    for tool in (
        tools.search_memory,
        tools.save_note,
        tools.save_notes,
        tools.build_from_trajectory,
        tools.report_outcome,
        tools.memory_history,
    ):
        server.add_tool(_in_a_thread(tool))
    return server


def _in_a_thread(tool: Callable[..., T]) -> Callable[..., Awaitable[T]]:
    """``tool`` as a coroutine that runs it in a worker thread: the SDK calls a plain function
    on its event loop, where a store call would stall every other request."""

    @functools.wraps(tool)  # the SDK reads the tool's signature and docstring through this
    async def run(**arguments: Any) -> T:
        return await anyio.to_thread.run_sync(functools.partial(tool, **arguments))

    return run
