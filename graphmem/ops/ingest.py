"""Batch ingest: many notes or trajectories in one embedding batch and one store write.

:func:`add_notes` stores a list of notes as :func:`graphmem.ops.build.add_note` stores one,
and :func:`build_many` a list of trajectories as :func:`graphmem.ops.build.build` builds one,
with the same results, but the embedder sees every text of the call in one batch (MiniLM embeds
a batch of short texts 3-5× faster per text than one at a time) and the store gets one atomic
``upsert`` for the whole call (one transaction on Neo4j, one durable write on the embedded
store) instead of one a memory.

Every item is checked before anything is written: a bad item raises the error it would raise
alone, prefixed with its position (``notes[3]: ...``), and nothing of the call is stored. Items
that repeat one another, or repeat what the namespace holds, are deduplicated as one at a time
would be: the same note (or build result) is returned at each position.

>>> from graphmem import GraphMemory, HashingEmbedder
>>> from graphmem.stores.embedded import EmbeddedStore
>>> mem = GraphMemory(EmbeddedStore.in_memory(), embedder=HashingEmbedder(64))
>>> notes, written = add_notes(mem, "demo", ["Tea: 80 °C.", {"content": "Coffee: 92 °C."}])
>>> [n.content for n in notes]
['Tea: 80 °C.', 'Coffee: 92 °C.']
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, cast

from graphmem.errors import InvalidInput
from graphmem.keywords import keyword_key
from graphmem.llm import ops
from graphmem.llm.ops import producer
from graphmem.llm.usage import CallBudget
from graphmem.models import (
    AnyMemory,
    Edge,
    Granularity,
    KeyMode,
    MemoryKind,
    Namespace,
    Note,
    Trajectory,
    check_unicode,
    content_hash,
    utcnow,
)
from graphmem.ops.similarity import cosines
from graphmem.stores.base import MemoryStore, Recall, read_each

if TYPE_CHECKING:
    from graphmem.config import MemoryConfig
    from graphmem.llm import MemoryLLM
    from graphmem.ops.build import BuildResult
    from graphmem.ops.context import MemoryContext

log = logging.getLogger(__name__)

NoteInput = str | Mapping[str, Any]
"""One note of :func:`add_notes`: its content, or a dict of ``content`` and the other fields
``add_note`` takes (``tags``, ``keywords``, ``context``, ``category``, ``source_ref``,
``valid_at``, ...)."""

MAX_BATCH = 100_000
"""Most items one call takes (one store write holds them all; split larger loads)."""

_NOTE_EXTRACTED = ("keywords", "tags", "context", "category")
_NOTE_RESERVED = frozenset({"namespace", "kind", "embedding", "content_hash"})


@contextmanager
def _item(what: str, i: int) -> Iterator[None]:
    """Errors of checking item ``i`` name it: ``notes[3]: ...``; the type is kept."""
    try:
        yield
    except InvalidInput as e:
        raise InvalidInput(f"{what}[{i}]: {e}") from e


def _as_list(items: Sequence[Any], what: str) -> list[Any]:
    if isinstance(items, str | bytes | Mapping) or not isinstance(items, Sequence):
        raise InvalidInput(f"{what} is a list, got {type(items).__name__}")
    out = list(items)
    if len(out) > MAX_BATCH:
        raise InvalidInput(f"{len(out)} {what} in one call; the limit is {MAX_BATCH}")
    return out


def _note_item(mem: MemoryContext, namespace: Namespace, raw: Any) -> tuple[str, dict[str, Any]]:
    """(content, fields) of one note input, checked as ``add_note`` checks its arguments."""
    if isinstance(raw, str):
        content, fields = raw, {}
    elif isinstance(raw, Mapping):
        fields = dict(raw)
        if "content" not in fields:
            raise InvalidInput("a note given as a dict needs 'content'")
        content = fields.pop("content")
        for name in fields:
            if not isinstance(name, str):
                raise InvalidInput(f"field names are strings, got {type(name).__name__}")
    else:
        raise InvalidInput(f"a note is a string or a dict, got {type(raw).__name__}")
    if not isinstance(content, str):
        raise InvalidInput(f"note content must be a string, got {type(content).__name__}")
    if not content.strip():
        from graphmem.errors import EmptyContent

        raise EmptyContent("content")
    check_unicode(content, "content")
    if "evolve" in fields:
        raise InvalidInput("evolve is an argument of add_notes, not a field of a note")
    reserved = sorted(_NOTE_RESERVED & set(fields))
    if reserved:
        raise InvalidInput(f"add_notes sets {', '.join(reserved)} itself; do not pass them")
    if "q" in fields:
        fields["q"] = mem.config.check_q(fields["q"])
    digest = content_hash("note", content)
    Note(namespace=namespace, content=content, content_hash=digest, **fields)  # validate
    return content, fields


def add_notes(
    mem: MemoryContext, namespace: Namespace, notes: Sequence[NoteInput]
) -> tuple[list[Note], list[str]]:
    """Store ``notes`` in one embedding batch and one atomic write.

    Returns the notes in the order given, and the ids this call wrote (new notes). A note
    whose content the namespace (or an earlier item) holds already is returned as it stands, a
    demoted one restored first, as :func:`graphmem.ops.build.add_note` does. With consolidation
    on (``MemoryConfig.consolidation``) each new note is consolidated after the write and its
    live version is returned.
    """
    items = _as_list(notes, "notes")
    checked: list[tuple[str, dict[str, Any]]] = []
    for i, raw in enumerate(items):
        with _item("notes", i):
            checked.append(_note_item(mem, namespace, raw))

    # One note per content: the first item with a content makes it, later ones reuse it.
    digests = [content_hash("note", content) for content, _ in checked]
    first: dict[str, int] = {}
    for i, digest in enumerate(digests):
        first.setdefault(digest, i)
    existing = {
        digest: found
        for digest, found in _find_by_hash(mem.store, namespace, MemoryKind.NOTE, list(first))
        if isinstance(found, Note)
    }

    fresh: dict[str, Note] = {}
    budget = CallBudget(mem.config.max_llm_calls)
    for digest, i in first.items():
        if digest in existing:
            continue
        content, fields = checked[i]
        with _item("notes", i):
            fresh[digest] = _new_note(mem.llm, mem.config, namespace, content, fields, budget)
    if fresh:
        new = list(fresh.values())
        vectors = mem.embed_many([n.embed_text() for n in new], namespace=namespace)
        for note, vector in zip(new, vectors, strict=True):
            note.embedding = vector
        mem.store.upsert(new)
        log.info("add_notes: %d new notes in ns=%s (%d given)", len(new), namespace, len(items))

    from graphmem.ops.notes import _consolidated, _relearned

    for digest, note in list(existing.items()):
        existing[digest] = _relearned(mem, namespace, note)
    for digest, note in list(fresh.items()):
        merged = _consolidated(mem, namespace, note.id, MemoryKind.NOTE)
        if merged is not None or mem.config.consolidation.enabled:
            live = mem.store.get(namespace, merged or note.id)
            assert isinstance(live, Note)
            fresh[digest] = live
    from graphmem.ops.fact_updates import link_updates

    later = {e.dst for e in link_updates(mem, namespace, list(fresh.values()))}
    if later & {n.id for n in fresh.values()}:  # older than one stored: read them again
        again = {m.id: m for m in mem.store.get_many(namespace, list(later))}
        for digest, note in list(fresh.items()):
            updated = again.get(note.id)
            if isinstance(updated, Note):
                fresh[digest] = updated
    out = [fresh.get(d) or existing[d] for d in digests]
    return out, [n.id for n in fresh.values()]


def _find_by_hash(
    store: MemoryStore, namespace: str, kind: MemoryKind, digests: list[str]
) -> list[tuple[str, AnyMemory | None]]:
    """(digest, the stored memory of ``kind`` with it or None) for each digest. A server
    store is asked from several threads (:func:`~graphmem.stores.base.read_each`): one round
    trip a look-up made them 60 % of a batch of 300 notes on Neo4j."""
    found = read_each(store, lambda d: store.find_by_hash(namespace, kind, d), digests)
    return list(zip(digests, found, strict=True))


def _new_note(
    llm: MemoryLLM | None,
    config: MemoryConfig,
    namespace: Namespace,
    content: str,
    fields: dict[str, Any],
    budget: CallBudget,
) -> Note:
    """A new note (no embedding yet), its missing fields extracted as add_note extracts them."""
    values = dict(fields)
    missing = [f for f in _NOTE_EXTRACTED if f not in values]
    by = producer(llm)
    if missing:
        extracted = ops.note_fields(llm, content, budget)
        by = extracted.created_by
        for name in missing:
            values[name] = getattr(extracted.value, name)
    values.setdefault("source", "note")
    values.setdefault("created_by", by)
    values.setdefault("q", config.q0)
    values.setdefault("valid_at", utcnow())  # when it was said: the caller's, else now
    return Note(
        namespace=namespace, content=content, content_hash=content_hash("note", content), **values
    )


# ---- trajectories --------------------------------------------------------------------------


def build_many(
    mem: MemoryContext,
    namespace: Namespace,
    trajectories: Sequence[Trajectory | Mapping[str, Any]],
    *,
    granularity: Granularity | str | None = None,
    key_mode: KeyMode | str | None = None,
) -> list[BuildResult]:
    """Build every trajectory as :func:`graphmem.ops.build.build` builds one, in one
    embedding batch (where no model writes the keys) and one atomic write.

    Trajectories of one task share its Task node, a later trajectory links to an earlier
    near-duplicate of the same call as it would to a stored one, and a trajectory repeated
    in the call is built once (the later positions report ``deduplicated``). With
    consolidation on, each new procedure is consolidated after the write.
    """
    from graphmem.ops.build import _as_trajectory, _enum, build, trajectory_hash
    from graphmem.ops.notes import _consolidated

    items = _as_list(trajectories, "trajectories")
    trajs: list[Trajectory] = []
    for i, raw in enumerate(items):
        with _item("trajectories", i):
            traj = _as_trajectory(cast(Any, dict(raw) if isinstance(raw, Mapping) else raw))
            mem.config.check_reward(traj.reward)
            if not traj.steps:
                raise InvalidInput(
                    "a trajectory needs at least one step to build procedural memory"
                )
            trajs.append(traj)

    staged = _StagedStore(mem.store)
    ctx = _StagedContext(mem, staged)
    # The keys no model writes are known now: embed them in one batch.
    mode = _enum(KeyMode, key_mode, mem.config.key_mode, "key_mode")
    _enum(Granularity, granularity, mem.config.granularity, "granularity")
    if mode is KeyMode.QUERY or mem.llm is None:
        keys = [_key(t, mode) for t in trajs]
        ctx.warm(list(dict.fromkeys(keys)), namespace)

    results: list[BuildResult] = []
    built: dict[str, int] = {}
    for i, traj in enumerate(trajs):
        digest = trajectory_hash(traj)
        if digest in built:
            results.append(results[built[digest]].model_copy(update={"deduplicated": True}))
            continue
        with _item("trajectories", i):
            result = build(ctx, namespace, traj, granularity=granularity, key_mode=mode)
        built[digest] = i
        results.append(result)
    staged.flush()
    if mem.config.consolidation.enabled:
        for i, result in enumerate(results):
            if not result.deduplicated and built.get(trajectory_hash(trajs[i])) == i:
                into = _consolidated(mem, namespace, result.procedure.id, MemoryKind.PROCEDURE)
                results[i] = result.model_copy(update={"consolidated_into": into})
    return results


def _key(traj: Trajectory, mode: KeyMode) -> str:
    """The retrieval key ``build`` gives a trajectory when no model writes its keywords."""
    if mode is KeyMode.KEYWORDS:
        return keyword_key(ops.task_keywords(None, traj.task).value) or traj.task
    return traj.task


class _StagedStore:
    """A store whose writes wait in memory until :meth:`flush` writes them in one upsert;
    reads of what ``build`` looks up (a task by hash, near-duplicate procedures) see the
    waiting writes as if they were stored. Everything else reads the store."""

    def __init__(self, store: MemoryStore) -> None:
        self._store = store
        self._nodes: dict[tuple[str, str], AnyMemory] = {}
        self._edges: list[Edge] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def upsert(self, nodes: Sequence[AnyMemory] = (), edges: Sequence[Edge] = (), **_: Any) -> None:
        for node in nodes:
            self._nodes[(node.namespace, node.id)] = node
        self._edges.extend(edges)

    def find_by_hash(self, namespace: str, kind: MemoryKind, digest: str) -> AnyMemory | None:
        for node in self._nodes.values():
            if node.namespace == namespace and node.kind == kind and node.content_hash == digest:
                return node
        return self._store.find_by_hash(namespace, kind, digest)

    def recall(
        self,
        namespace: str,
        vector: Sequence[float],
        k: int,
        *,
        kinds: Sequence[MemoryKind] | None = None,
        include_obsolete: bool = False,
        min_sim: float | None = None,
    ) -> list[Recall]:
        found = self._store.recall(
            namespace, vector, k, kinds=kinds, include_obsolete=include_obsolete, min_sim=min_sim
        )
        wanted = None if kinds is None else {str(x) for x in kinds}
        pending = [
            n
            for n in self._nodes.values()
            if n.namespace == namespace
            and n.embedding is not None
            and (wanted is None or str(n.kind) in wanted)
            and (include_obsolete or not n.obsolete)
        ]
        if not pending:
            return found
        sims = cosines(list(vector), [cast(list[float], n.embedding) for n in pending])
        floor = -1.0 if min_sim is None else min_sim
        found += [Recall(memory=n, sim=s) for n, s in zip(pending, sims, strict=True) if s >= floor]
        found.sort(key=lambda r: (-r.sim, r.memory.id))
        return found[:k]

    def flush(self) -> None:
        if self._nodes or self._edges:
            self._store.upsert(list(self._nodes.values()), self._edges)
            log.info("build_many: wrote %d memories, %d edges", len(self._nodes), len(self._edges))
        self._nodes.clear()
        self._edges = []


class _StagedContext:
    """``mem`` over a :class:`_StagedStore`, with the keys' vectors embedded ahead in one
    batch; consolidation waits until the batch is written."""

    def __init__(self, mem: MemoryContext, staged: _StagedStore) -> None:
        self._mem = mem
        self._staged = staged
        self._vectors: dict[str, list[float]] = {}
        self.config = mem.config.model_copy(
            update={"consolidation": mem.config.consolidation.model_copy(update={"enabled": False})}
        )

    @property
    def store(self) -> MemoryStore:
        return cast(MemoryStore, self._staged)

    @property
    def llm(self) -> MemoryLLM | None:
        return self._mem.llm

    def warm(self, texts: list[str], namespace: Namespace) -> None:
        vectors = self._mem.embed_many(texts, namespace=namespace) if texts else []
        self._vectors.update(zip(texts, vectors, strict=True))

    def embed(self, text: str, *, namespace: Namespace) -> list[float]:
        found = self._vectors.get(text)
        return found if found is not None else self._mem.embed(text, namespace=namespace)

    def embed_many(self, texts: Sequence[str], *, namespace: Namespace) -> list[list[float]]:
        return self._mem.embed_many(texts, namespace=namespace)


__all__ = ["MAX_BATCH", "NoteInput", "add_notes", "build_many"]
