"""``GraphMemory``: the one object users hold. It binds a store, an embedder and (optionally) a
chat model, and exposes the four operations — build, retrieve, update, evolve — written once on
top of the store primitives.

>>> from graphmem import GraphMemory, EmbeddedStore, HashingEmbedder
>>> mem = GraphMemory(EmbeddedStore.in_memory(), embedder=HashingEmbedder())
>>> note = mem.add_note("demo", "The spare key is under the blue flower pot.")
>>> hits = mem.retrieve("demo", "where is the spare key?", kinds=("Note",)).hits
>>> [h.memory.id for h in hits] == [note.id]
True
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from graphmem.config import MemoryConfig, RetentionConfig, RetrievalConfig, UpdateStrategy
from graphmem.embedding import Embedder, EmbedderRecord, default_embedder, embed_one, fingerprint
from graphmem.models import AnyMemory, Granularity, KeyMode, Namespace, Trajectory
from graphmem.stores.base import MemoryStore

if TYPE_CHECKING:
    from graphmem.config import ConsolidationConfig
    from graphmem.llm import MemoryLLM
    from graphmem.models import CreditPolicy, Episode, Note, Task
    from graphmem.ops.build import BuildResult
    from graphmem.ops.consolidation import ConsolidationResult
    from graphmem.ops.distill import Distiller
    from graphmem.ops.episodes import EpisodeOutcome, QChange
    from graphmem.ops.evolve import EvolutionResult
    from graphmem.ops.explain import EpisodeReport
    from graphmem.ops.history import History
    from graphmem.ops.ingest import NoteInput
    from graphmem.ops.retention import RetentionResult
    from graphmem.ops.retrieve import Retrieval
    from graphmem.ops.update import UpdateResult


class GraphMemory:
    """Long-term memory for an agent, over any :class:`MemoryStore`.

    ``embedder`` defaults to offline all-MiniLM-L6-v2; ``llm`` (a :class:`MemoryLLM`) is
    optional: without it every LLM step uses its deterministic fallback.
    """

    def __init__(
        self,
        store: MemoryStore,
        *,
        embedder: Embedder | None = None,
        llm: MemoryLLM | None = None,
        config: MemoryConfig | None = None,
        distiller: Distiller | None = None,
    ) -> None:
        self.store = store
        self.embedder = embedder if embedder is not None else default_embedder()
        self.llm = llm
        self.distiller = distiller
        """What turns a trajectory into notes (:mod:`graphmem.ops.distill`); None: the LLM
        layer, with its offline rule as the fallback."""
        self.config = config if config is not None else MemoryConfig()
        self._dimension_checked = False
        self._identity: EmbedderRecord | None = None
        self._embedder_checked: set[str] = set()
        self._identity_lock = threading.Lock()

    # ---- shared helpers for the operation modules ---------------------------------------

    def embed(self, text: str, *, namespace: str | None = None) -> list[float]:
        """Embed one text, checking the embedder's dimension against the store once, and,
        given the namespace the vector is for, that the namespace was embedded by this
        embedder (:meth:`check_embedder`)."""
        self._check(namespace)
        return embed_one(self.embedder, text)

    def embed_many(
        self, texts: Sequence[str], *, namespace: str | None = None
    ) -> list[list[float]]:
        self._check(namespace)
        return [[float(x) for x in row] for row in self.embedder.embed(list(texts))]

    def _check(self, namespace: str | None) -> None:
        if not self._dimension_checked:
            self.store.check_dimension(self.embedder.dimension)
            self._dimension_checked = True
        if namespace is not None:
            self.check_embedder(namespace)

    def check_embedder(self, namespace: str) -> None:
        """Check that this memory's embedder made the namespace's vectors, recording it if
        nothing is recorded yet (a new namespace, or one written before graphmem recorded
        embedders); raises :class:`~graphmem.errors.EmbedderMismatch`, changing nothing,
        otherwise. Checked once per namespace for the life of this object (a re-embed by
        another process while this one writes is not noticed: stop writers first)."""
        if namespace in self._embedder_checked:
            return
        self.store.use_embedder(Namespace(namespace), self.embedder_identity())
        self._embedder_checked.add(namespace)

    def embedder_identity(self) -> EmbedderRecord:
        """The record that identifies this memory's embedder (computed once)."""
        with self._identity_lock:
            if self._identity is None:
                self._identity = fingerprint(self.embedder)
            return self._identity

    def get(self, namespace: str, memory_id: str) -> AnyMemory:
        return self.store.get(Namespace(namespace), memory_id)

    def delete(self, namespace: str, memory_ids: Sequence[str]) -> list[str]:
        """Explicitly delete memories and the orphans they leave (e.g. a procedure's steps)."""
        return self.store.delete(Namespace(namespace), memory_ids)

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> GraphMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- build (graphmem.ops.build) ----------------------------------------------------------

    def add_note(
        self, namespace: str, content: str, *, evolve: bool = False, **fields: Any
    ) -> Note:
        """Store a Zettelkasten note (keywords, tags, context and category extracted).

        ``evolve=True`` then links it to its neighbours and refreshes them (A-MEM).
        """
        from graphmem.ops.build import add_note

        namespace = Namespace(namespace)
        strict = evolve and self.llm is not None and not self.llm.fallback
        fresh = strict and not self._has_note(namespace, content)
        note = add_note(self, namespace, content, **fields)
        if evolve:
            from graphmem.errors import LLMError
            from graphmem.ops.evolve import evolve_many

            try:
                evolve_many(self, namespace, [note.id])
            except LLMError:
                # fallback=False means all of it or nothing: a note this call stored goes too.
                if fresh:
                    self.store.delete(namespace, [note.id])
                raise
        self._retain(namespace)
        return note

    def add_notes(
        self, namespace: str, notes: Sequence[NoteInput], *, evolve: bool = False
    ) -> list[Note]:
        """Store many notes at once: each a text or a dict of ``content`` and the fields
        :meth:`add_note` takes (``valid_at``, ``tags``, ``source_ref``, ...). Returns the notes
        in the order given (a repeated or already stored content gives the note that holds it).

        One embedding batch and one atomic store write for the whole list; every item is
        checked first, and a bad one raises naming its position (``notes[3]: ...``) with
        nothing written (:mod:`graphmem.ops.ingest`). ``evolve=True`` then links the new notes
        to their neighbours, as :meth:`add_note` does.
        """
        from graphmem.ops.ingest import add_notes

        namespace = Namespace(namespace)
        out, written = add_notes(self, namespace, notes)
        if evolve and written:
            from graphmem.errors import LLMError
            from graphmem.ops.evolve import evolve_many

            try:
                evolve_many(self, namespace, written)
            except LLMError:
                # fallback=False means all of it or nothing: the notes this call stored go too.
                if self.llm is not None and not self.llm.fallback:
                    self.store.delete(namespace, written)
                raise
        self._retain(namespace)
        return out

    def _has_note(self, namespace: str, content: str) -> bool:
        from graphmem.models import MemoryKind, content_hash

        found = self.store.find_by_hash(namespace, MemoryKind.NOTE, content_hash("note", content))
        return found is not None

    def build(
        self,
        namespace: str,
        trajectory: Trajectory | dict[str, Any],
        *,
        granularity: Granularity | str | None = None,
        key_mode: KeyMode | str | None = None,
        evolve: bool = False,
    ) -> BuildResult:
        """Turn a trajectory into procedural memory (Mem^p ``B(τ, r)``).

        ``evolve=True`` then links the new procedure to related ones (A-MEM).
        """
        from graphmem.ops.build import build

        namespace = Namespace(namespace)
        result = build(self, namespace, trajectory, granularity=granularity, key_mode=key_mode)
        if evolve and not result.deduplicated:
            from graphmem.ops.evolve import evolve_many

            evolve_many(self, namespace, [result.procedure.id])
        self._retain(namespace)
        return result

    def build_many(
        self,
        namespace: str,
        trajectories: Sequence[Trajectory | dict[str, Any]],
        *,
        granularity: Granularity | str | None = None,
        key_mode: KeyMode | str | None = None,
        evolve: bool = False,
    ) -> list[BuildResult]:
        """:meth:`build` for many trajectories: one embedding batch and one atomic store
        write; every trajectory is checked first and a bad one raises naming its position
        with nothing written (:func:`graphmem.ops.ingest.build_many`). Results in order."""
        from graphmem.ops.ingest import build_many

        namespace = Namespace(namespace)
        results = build_many(
            self, namespace, trajectories, granularity=granularity, key_mode=key_mode
        )
        if evolve:
            from graphmem.ops.evolve import evolve_many

            fresh = [r.procedure.id for r in results if not r.deduplicated]
            evolve_many(self, namespace, fresh)
        self._retain(namespace)
        return results

    # ---- retrieve and learn (graphmem.ops.retrieve, graphmem.ops.episodes) ----------------------

    def retrieve(
        self,
        namespace: str,
        query: str,
        config: RetrievalConfig | None = None,
        *,
        open_episode: bool = False,
        episode_id: str | None = None,
        **overrides: Any,
    ) -> Retrieval:
        """Two-phase retrieval; ``open_episode=True`` records what was handed to the agent
        (``episode_id`` adds to an episode from :meth:`start_episode` instead)."""
        from graphmem.ops.retrieve import retrieve

        return retrieve(
            self,
            Namespace(namespace),
            query,
            config,
            open_episode=open_episode,
            episode_id=episode_id,
            **overrides,
        )

    def start_episode(self, namespace: str, task_text: str) -> Episode:
        """Open an episode for an agent that retrieves several times in one run."""
        from graphmem.ops.episodes import start_episode

        return start_episode(self, Namespace(namespace), task_text)

    def q_history(self, namespace: str, memory_id: str) -> list[QChange]:
        """The finished episodes that moved a memory's Q, oldest first."""
        from graphmem.ops.episodes import q_history

        return q_history(self, Namespace(namespace), memory_id)

    def explain_episode(self, namespace: str, episode_id: str) -> EpisodeReport:
        """What an episode was offered (rank, sim, Q, score) and used, its reward, and each
        credited memory's Q before → after (:func:`graphmem.ops.explain.explain_episode`)."""
        from graphmem.ops.explain import explain_episode

        return explain_episode(self, Namespace(namespace), episode_id)

    def finish_episode(
        self,
        namespace: str,
        episode_id: str,
        reward: float,
        *,
        success: bool | None = None,
        alpha: float | None = None,
        used: Sequence[str] | None = None,
        credit: CreditPolicy | str | None = None,
    ) -> EpisodeOutcome:
        """Credit assignment: ``Q ← Q + α(R − Q)`` on what the episode was offered or, with
        ``used=[ids]`` (or ``credit="used"`` after :meth:`mark_used`), on what it used only.
        See :func:`graphmem.ops.episodes.finish_episode`."""
        from graphmem.ops.episodes import finish_episode

        return finish_episode(
            self,
            Namespace(namespace),
            episode_id,
            self.config.check_reward(reward),
            success=success,
            alpha=alpha,
            used=used,
            credit=credit,
        )

    def report_baseline(
        self, namespace: str, task_text: str, reward: float, *, success: bool | None = None
    ) -> Task:
        """Count an episode of ``task_text`` played without memory (reward in the reward
        range): abstention's baseline for its task cluster learns from it, as it does from
        every finished episode that credits no memory. Returns the task's Task node."""
        from graphmem.errors import InvalidInput
        from graphmem.models import check_unicode
        from graphmem.ops.abstention import record_baseline

        ns = Namespace(namespace)
        if not isinstance(task_text, str) or not task_text.strip():
            raise InvalidInput("the task text must be a non-empty string")
        check_unicode(task_text, "the task text")
        r = self.config.check_reward(reward)
        ok = r >= self.config.success_reward if success is None else bool(success)
        return record_baseline(self, ns, task_text, r, success=ok)

    def mark_used(self, namespace: str, episode_id: str, memory_ids: Sequence[str]) -> list[str]:
        """Mark memories an open episode was offered as used; returns all it has marked used.
        An id it was not offered is refused and nothing is marked."""
        from graphmem.ops.episodes import mark_used

        return mark_used(self, Namespace(namespace), episode_id, memory_ids)

    # ---- update and evolve (graphmem.ops.update, graphmem.ops.evolve, graphmem.ops.history) ------

    def update(
        self,
        namespace: str,
        trajectory: Trajectory | dict[str, Any],
        *,
        strategy: UpdateStrategy | str = UpdateStrategy.ADJUSTMENT,
        episode_id: str | None = None,
    ) -> UpdateResult:
        """Memory-set update after an episode (vanilla / validation / adjustment)."""
        from graphmem.ops.update import update

        namespace = Namespace(namespace)
        result = update(self, namespace, trajectory, strategy=strategy, episode_id=episode_id)
        self._retain(namespace)
        return result

    # ---- retention (graphmem.ops.retention) ------------------------------------------------

    def enforce_retention(
        self, namespace: str, config: RetentionConfig | None = None
    ) -> RetentionResult:
        """Evict what the namespace holds beyond its capacity (``config`` defaults to
        ``self.config.retention``): archived with the reason, or deleted if so configured.
        The write paths (add_note, build, update) call it after writing."""
        from graphmem.ops.retention import enforce_capacity

        return enforce_capacity(self, Namespace(namespace), config)

    def _retain(self, namespace: Namespace) -> None:
        if self.config.retention.enabled:
            self.enforce_retention(namespace)

    def restore(self, namespace: str, memory_id: str) -> AnyMemory:
        """Undo a demotion: the memory is live and retrievable again, its Q and uses untouched.

        The exact inverse of demotion (``UpdateResult.demoted`` lists what ``update`` demoted);
        a superseded memory is refused with InvalidInput.
        """
        from graphmem.ops.obsolescence import restore

        return restore(self, Namespace(namespace), memory_id)

    def evolve(self, namespace: str, memory_id: str) -> EvolutionResult:
        """A-MEM evolution: link a memory to its neighbours and refresh them as new versions."""
        from graphmem.ops.evolve import evolve

        return evolve(self, Namespace(namespace), memory_id)

    def history(self, namespace: str, memory_id: str) -> History:
        """The versions, links and episodes that shaped a memory."""
        from graphmem.ops.history import history

        return history(self, Namespace(namespace), memory_id)

    def consolidate(
        self, namespace: str, config: ConsolidationConfig | None = None
    ) -> ConsolidationResult:
        """Sweep a namespace for look-alikes: procedures of one task cluster whose steps match
        and notes of one subject and content merge into one version pooling their uses and
        Q; a note contradicting an older live note of its subject supersedes it
        (:mod:`graphmem.ops.consolidation`; ``config`` defaults to
        ``self.config.consolidation``, whose ``enabled`` flag only governs the write hook)."""
        from graphmem.ops.consolidation import consolidate

        return consolidate(self, Namespace(namespace), config=config)
