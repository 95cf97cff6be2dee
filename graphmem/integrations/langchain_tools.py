"""LangChain tools that give a ReAct-style agent a graphmem memory.

Why and how, in full: docs/design.md, "Module notes", ``graphmem.integrations.langchain_tools``.

>>> from graphmem import GraphMemory, HashingEmbedder
>>> from graphmem.stores.embedded import EmbeddedStore
>>> mem = GraphMemory(EmbeddedStore.in_memory(), embedder=HashingEmbedder())
>>> search, save, report = memory_tools(mem, "agent-1")
>>> save.invoke({"content": "The wifi password is on the fridge."}).startswith("Saved note")
True
>>> "wifi password" in search.invoke({"query": "where is the wifi password?"})
True
>>> report.invoke({"success": True}).startswith("Episode")
True
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from graphmem.extras import needs_extra

with needs_extra("langchain", "the LangChain tools"):
    from langchain_core.tools import BaseTool, StructuredTool

    from graphmem.config import DEFAULT_KINDS, RetrievalConfig
    from graphmem.errors import GraphmemError, InvalidReward
    from graphmem.memory import GraphMemory
    from graphmem.models import MemoryKind, Namespace

log = logging.getLogger(__name__)


class MemoryToolkit:
    """The tools of one agent run, sharing its open episode.

    ``retrieval`` defaults to the memory's retrieval config with ``kinds`` set to
    :data:`DEFAULT_KINDS`.
    """

    def __init__(
        self,
        memory: GraphMemory,
        namespace: str,
        *,
        retrieval: RetrievalConfig | None = None,
        kinds: Sequence[MemoryKind | str] | None = None,
    ) -> None:
        self.memory = memory
        self.namespace = Namespace(namespace)
        base = retrieval if retrieval is not None else memory.config.retrieval
        chosen = tuple(MemoryKind(k) for k in kinds) if kinds is not None else None
        if chosen is None and retrieval is None:
            chosen = DEFAULT_KINDS
        self.retrieval = base if chosen is None else base.model_copy(update={"kinds": chosen})
        self.episode_id: str | None = None
        self._lock = threading.Lock()

    # ---- the operations behind the tools -------------------------------------------------

    def search(self, query: str) -> str:
        """Retrieve memories for ``query`` and record them in the run's episode."""
        with self._lock:
            try:
                if self.episode_id is None:
                    self.episode_id = self.memory.start_episode(self.namespace, query).id
                result = self.memory.retrieve(
                    self.namespace, query, self.retrieval, episode_id=self.episode_id
                )
            except GraphmemError as e:
                return f"Memory search failed: {e}"
        if not result.hits:
            return "No relevant memories found."
        ids = ", ".join(f"{n} = {h.memory.id}" for n, h in enumerate(result.hits, start=1))
        return f"{result.as_prompt()}\n\nMemory ids (for report_outcome's used): {ids}"

    def save_note(self, content: str, tags: Sequence[str] | None = None) -> str:
        """Store a note; returns its id."""
        try:
            note = self.memory.add_note(self.namespace, content, tags=list(tags or []))
        except GraphmemError as e:
            return f"Could not save the note: {e}"
        return f"Saved note {note.id}."

    def report_outcome(
        self, success: bool, reward: float | None = None, used: Sequence[str] | None = None
    ) -> str:
        """Finish the run's episode with ``reward`` (default: the config's success/failure).

        The model picks ``reward``: one outside the config's reward range (or not a number) is
        answered with an error message and credits nothing; the episode stays open, so the
        model can report again with a valid reward. ``used`` names the memories the model
        acted on: only those are credited (an id it was not shown is refused the same way).
        """
        cfg = self.memory.config
        value = (
            reward
            if reward is not None
            else (cfg.success_reward if success else cfg.failure_reward)
        )
        with self._lock:
            if self.episode_id is None:
                return "No memory was searched in this run, so there is nothing to credit."
            episode_id = self.episode_id
            try:
                outcome = self.memory.finish_episode(
                    self.namespace,
                    episode_id,
                    value,
                    success=success,
                    used=None if used is None else list(used),
                )
            except InvalidReward as e:  # the episode stays open: the model may report again
                return (
                    f"Could not record the outcome: {e}. Report again with a reward between "
                    f"{cfg.reward_min:g} and {cfg.reward_max:g}, or leave it out."
                )
            except GraphmemError as e:
                return f"Could not record the outcome: {e}"
            self.episode_id = None
        moved = ", ".join(f"{mid}: q={q:.3f}" for mid, q in sorted(outcome.q.items()))
        return f"Episode {episode_id} finished with reward {value:g}. Updated {moved or 'nothing'}."

    # ---- the tools -------------------------------------------------------------------------

    @property
    def tools(self) -> list[BaseTool]:
        """``[search_memory, save_note, report_outcome]`` as LangChain tools."""

        def search_memory(query: str) -> str:
            """Search long-term memory for procedures, notes and tips relevant to a task or
            question. Call it before acting on a new task.

            Args:
                query: the task or question, in plain words.
            """
            return self.search(query)

        def save_note(content: str, tags: list[str] | None = None) -> str:
            """Save one atomic fact or lesson to long-term memory for future tasks.

            Args:
                content: the fact or lesson, one or two sentences.
                tags: optional short labels.
            """
            return self.save_note(content, tags)

        def report_outcome(
            success: bool, reward: float | None = None, used: list[str] | None = None
        ) -> str:
            return self.report_outcome(success, reward, used)

        cfg = self.memory.config
        report_outcome.__doc__ = f"""Report how the current task ended, so memory learns which
            memories helped. Call it once, when the task is over.

            Args:
                success: whether the task was accomplished.
                reward: optional numeric reward from {cfg.reward_min:g} to {cfg.reward_max:g}
                    (default {cfg.success_reward:g} for success, {cfg.failure_reward:g} for
                    failure).
                used: optional ids of the memories you actually used (search_memory lists
                    them); only those are credited. Leave it out to credit all you were shown.
            """
        return [
            _tool(search_memory),
            _tool(save_note),
            _tool(report_outcome),
        ]


def _tool(function: Callable[..., str]) -> BaseTool:
    """A tool whose bad arguments (a reward that is not a number...) come back to the model as
    a message, as LangChain's ``handle_validation_error`` does, instead of raising."""
    return StructuredTool.from_function(
        function,
        parse_docstring=True,
        handle_validation_error=_invalid_arguments,
        handle_tool_error=True,
    )


def _invalid_arguments(error: Exception) -> str:
    """The first pydantic error as one line the model can act on."""
    errors = getattr(error, "errors", None)
    found = errors() if callable(errors) else []
    if not found:
        return f"Invalid arguments: {error}. Try again."
    where = ".".join(str(p) for p in found[0].get("loc", ()))
    return f"Invalid arguments: {where}: {found[0].get('msg', 'invalid value')}. Try again."


def memory_tools(
    memory: GraphMemory,
    namespace: str,
    *,
    retrieval: RetrievalConfig | None = None,
    kinds: Sequence[MemoryKind | str] | None = None,
) -> list[BaseTool]:
    """``[search_memory, save_note, report_outcome]`` bound to ``memory`` and ``namespace``."""
    return MemoryToolkit(memory, namespace, retrieval=retrieval, kinds=kinds).tools


__all__ = ["DEFAULT_KINDS", "MemoryToolkit", "memory_tools"]
