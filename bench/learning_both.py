"""Both kinds of memory at once on the mixed TextWorldExpress stream (``--items both``).

Every game is kept twice, as the library keeps it: as an experience (the game's steps, a
procedure to follow) and as the facts it taught (notes by subject). What reaches the agent when
a game starts is one hand-over of at most K memories of either kind; the questions the explorer
asks during a game ("where does the wet towel belong?") are answered by notes. Conditions:

- ``plain``: every fact item and every past game handed over at the start;
- ``flat-topk``: one LangGraph ``InMemoryStore`` for facts (one item per game) and one for past
  games; the start hands over the K best of both by cosine, questions the K best facts;
- graphmem (``similarity``, ``two-phase`` and their variants): one namespace. ``update`` builds
  each game into a procedure and, through the games' distiller
  (:func:`showcase.envs.hints.game_knowledge` given to ``GraphMemory(distiller=...)``), into notes
  by subject (:mod:`graphmem.ops.distill`); retrieval ranks procedures and notes together, K in
  all; credit by use (the notes whose facts the explorer acted on, the procedures it followed);
  graph on: A-MEM evolution of the new procedure and the notes written;
- ``experiences-only`` / ``facts-only``: graphmem two-phase with one kind, on the same games.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.learning_harness import Condition
from bench.learning_mixed import (
    FlatExperiences,
    FlatTopK,
    GraphmemMemory,
    NoMemory,
    Offer,
    PlainExperiences,
    PlainMemory,
    _plan,
)


def _search(flat: FlatTopK, space: str, query: str) -> list[Any]:
    return list(flat.store.search((space,), query=query, limit=flat.k))


def _facts_apart(offers: Sequence[Offer]) -> list[Offer]:
    """Fact items with ids of their own (past games number theirs from 0 too)."""
    return [Offer(f"f{o.id}", o.facts) for o in offers]


class PlainBoth(NoMemory):
    """Every fact item and every past game, all handed over at the start."""

    def __init__(self) -> None:
        self.facts = PlainMemory()
        self.games = PlainExperiences()

    def start(self, task: str) -> list[Offer]:
        return [*_facts_apart(self.facts.start(task)), *self.games.start(task)]

    def learn(self, family: str, task: str, facts: Sequence[str]) -> None:
        self.facts.learn(family, task, facts)

    def learn_experience(self, key: str, steps: Sequence[tuple[str, str]], success: bool) -> None:
        self.games.learn_experience(key, steps, success)

    def size(self) -> int:
        return self.facts.size() + self.games.size()


class FlatBoth(NoMemory):
    """Facts and past games in two flat vector lists; the start takes the K best of both."""

    def __init__(self, embedder: Any, k: int) -> None:
        self.k = k
        self.facts = FlatTopK(embedder, k)
        self.games = FlatExperiences(embedder, k)

    def start(self, task: str) -> list[Offer]:
        found = [
            *((it.score or 0.0, "f", it) for it in _search(self.facts, "mixed", task)),
            *((it.score or 0.0, "g", it) for it in _search(self.games.flat, "experiences", task)),
        ]
        found.sort(key=lambda row: -row[0])
        offers: list[Offer] = []
        for _, kind, it in found[: self.k]:
            if kind == "f":
                offers.append(Offer(f"f{it.key}", tuple(it.value["facts"])))
            else:
                steps = [(str(a), str(o)) for a, o in it.value["steps"]]
                plan = _plan(it.key, it.value["text"], steps, bool(it.value["success"]))
                offers.append(Offer(it.key, plan=plan))
        return offers

    def recall(self, question: str) -> list[Offer]:
        return _facts_apart(self.facts.recall(question))

    def learn(self, family: str, task: str, facts: Sequence[str]) -> None:
        self.facts.learn(family, task, facts)

    def learn_experience(self, key: str, steps: Sequence[tuple[str, str]], success: bool) -> None:
        self.games.learn_experience(key, steps, success)

    def size(self) -> int:
        return self.facts.size() + self.games.size()


class GraphmemBoth(GraphmemMemory):
    """graphmem with procedures and distilled notes in one namespace (module doc)."""

    def __init__(
        self,
        embedder: Any,
        condition: Condition,
        k: int,
        store_dir: Path | None,
        kinds: Sequence[str] = ("Procedure", "Note"),
    ) -> None:
        from graphmem.models import MemoryKind
        from showcase.envs.hints import game_knowledge

        super().__init__(embedder, condition, k, store_dir)
        both = tuple(MemoryKind(x) for x in kinds)
        self.config = self.config.model_copy(update={"kinds": both})
        self.mem.config = self.mem.config.model_copy(update={"retrieval": self.config})
        self.questions = self.config.model_copy(
            update={"kinds": (MemoryKind.NOTE,), "choose_kinds": False}
        )
        self.reads_facts = MemoryKind.NOTE in both
        self.keeps_games = MemoryKind.PROCEDURE in both
        self.mem.distiller = game_knowledge if self.reads_facts else (lambda _t: [])
        self.seen: set[str] = set()
        """Notes evolution has linked already (a note that only gained evidence is not new)."""

    def start(self, task: str) -> list[Offer]:
        from graphmem.agents import plans_from_hits
        from graphmem.models import Procedure
        from showcase.textworld_agent import fact_lines

        self._open(task)
        hits = self._hits(task)
        offers = [
            Offer(h.memory.id, tuple(fact_lines(h.memory) or []))
            for h in hits
            if not isinstance(h.memory, Procedure)
        ]
        plans = plans_from_hits(self.mem, self.namespace, hits)
        return [*offers, *(Offer(p.procedure_id, plan=p) for p in plans)]

    def recall(self, question: str) -> list[Offer]:
        from showcase.textworld_agent import fact_lines

        if not self.reads_facts:
            return []
        hits = self.mem.retrieve(
            self.namespace, question, self.questions, episode_id=self.open_id
        ).hits
        for hit in hits:
            self.offered.setdefault(hit.memory.id, hit)
        return [Offer(h.memory.id, tuple(fact_lines(h.memory) or [])) for h in hits]

    def learn(self, family: str, task: str, facts: Sequence[str]) -> None:
        """Facts come from the distiller, in :meth:`learn_game`."""

    def learn_game(self, key: str, steps: Sequence[tuple[str, str, float]], success: bool) -> None:
        """``update`` builds the game into a procedure and its facts into notes."""
        from graphmem.config import UpdateStrategy

        trajectory = {
            "task": key,
            "steps": [
                {"action": a, "observation": o, "reward": float(r)} for a, o, r in steps if a
            ],
            "reward": 1.0 if success else 0.0,
            "success": success,
        }
        if not trajectory["steps"]:
            return
        out = self.mem.update(
            self.namespace, trajectory, strategy=UpdateStrategy.VANILLA, episode_id=self.episode_id
        )
        if not self.graph:
            return
        if self.keeps_games and out.built is not None and not out.built.deduplicated:
            self.mem.evolve(self.namespace, out.built.procedure.id)
        for note in out.notes:
            if note.id not in self.seen:
                self.seen.add(note.id)
                self.mem.evolve(self.namespace, note.id)


def make_both(condition: Condition, embedder: Any, k: int, store_dir: Path | None) -> Any:
    """The memory of ``condition`` with ``--items both``."""
    if condition.kind == "none":
        return NoMemory()
    if condition.kind == "plain":
        return PlainBoth()
    if condition.kind == "flat":
        return FlatBoth(embedder, k)
    if condition.name == "experiences-only":
        return GraphmemBoth(embedder, condition, k, store_dir, kinds=("Procedure",))
    if condition.name == "facts-only":
        return GraphmemBoth(embedder, condition, k, store_dir, kinds=("Note",))
    return GraphmemBoth(embedder, condition, k, store_dir)
