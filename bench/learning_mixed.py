"""A mixed TextWorldExpress stream where memory must choose: graphmem beside plain memories.

Games of four families (twc, cookingworld, coin, mapreader) are interleaved into one stream
that every condition plays in the same order (paired episodes). After each game the facts it
taught ("red apple belongs in fridge", "roast means cook in oven", "coin is found in pantry")
are written to the condition's memory, so memory grows to hundreds or thousands of items, far
more than the agent is handed; cookingworld's games all share one task text, so look-alikes
arise on their own, and where things lie in a coin or cooking game holds for that game only.

The agent is the rule-based explorer of :mod:`showcase.envs.agents` for each family
(the generic novelty explorer in coin and mapreader, which reads no hints: those families
only fill memory with items that do not help). It asks memory at the start of a game (the task
text) and during it (``recall_queries``: "where does the wet towel belong", "roast means cook
in which device"). What each ask returns is one *decision*; at most ``--handover K`` memories
reach the agent per decision in every condition but ``plain``.

Conditions (``--conditions``):

- ``none``: the best explorer without memory (it knows the common-sense cooking devices);
- ``plain``: every memory so far handed over at the start (a set of all facts; no retrieval);
- ``flat-topk``: one item per game in LangGraph's ``InMemoryStore`` with its vector index,
  ``search(query, limit=K)``: a flat top-k by cosine, no utility, no graph (what a LangGraph
  store search, or LangMem over it, gives);
- ``similarity`` / ``two-phase``: graphmem (embedded store) as its agent flow writes facts: one
  note per subject, consolidated into new versions (EVOLVED_FROM) as games teach more, A-MEM
  evolution (links, refreshed neighbours); retrieval k1 candidates, K kept, λ = 0 or 0.5;
  credit by use (only the notes whose facts the explorer acted on join the Episode), then
  ``finish_episode`` (Q ← Q + α(R − Q));
- ``similarity-nograph`` / ``two-phase-nograph``: graphmem over the very items ``flat-topk``
  holds (one note per game, no consolidation, no links, no evolution): the graph off.

Seeds come from :mod:`bench.protocol`: the dev fold for tuning, the held-out test range with
``--heldout`` (the only figures reported).

Run::

    python -m bench.learning --stream mixed --handover 5 --heldout
    python -m bench.learning --stream mixed --episodes 80 --conditions none,flat-topk,two-phase
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from bench.common import (
    machine_info,
    machine_markdown,
    markdown_table,
    matplotlib_figure,
    write_results,
)
from bench.learning_harness import (
    CANDIDATES,
    Condition,
    GraphmemBase,
    ItemList,
    View,
    check_handover,
    interleave,
    paired_comparisons,
    pick_conditions,
    play_conditions,
    play_game,
    run_in_worker,
)
from bench.protocol import stream_range

__all__ = ["CANDIDATES", "Condition"]  # the harness's, used from here by other benches

FAMILIES = ("twc", "cookingworld", "coin", "mapreader")
"""The interleaved game families (explorers that read memory: twc and cookingworld)."""

ORDER_SEED = 20_261_125
"""Seeds the order in which families interleave (the same for every condition)."""

HANDOVER = 5
"""Memories that reach the agent per decision (MemRL's top-k)."""

BLOCK = 100
"""Episodes per block of the learning curve."""


CONDITIONS: dict[str, Condition] = {
    c.name: c
    for c in (
        Condition("none", "no memory (best explorer without it)", "none"),
        Condition("plain", "every memory handed over (no retrieval)", "plain"),
        Condition("flat-topk", "LangGraph InMemoryStore search, top-K by cosine", "flat"),
        Condition(
            "similarity",
            "graphmem λ=0 (graph on)",
            "graphmem",
            0.0,
            abstain=False,
            choose_kinds=False,
        ),
        Condition("two-phase", "graphmem λ=0.5, its defaults (graph on)", "graphmem", 0.5),
        Condition(
            "two-phase-kinds",
            "graphmem λ=0.5, utility chooses the kind per task cluster (graph on)",
            "graphmem",
            0.5,
            choose_kinds=True,
        ),
        Condition(
            "two-phase-nokinds",
            "graphmem λ=0.5, its defaults but utility does not choose the kind (graph on)",
            "graphmem",
            0.5,
            choose_kinds=False,
        ),
        Condition(
            "two-phase-kinds-notes",
            "graphmem λ=0.5, utility chooses the kind per task cluster and ranks notes by Q "
            "too (graph on)",
            "graphmem",
            0.5,
            choose_kinds=True,
            utility_kinds=("Procedure", "Note", "Tip"),
        ),
        Condition(
            "experiences-only",
            "graphmem λ=0.5, procedures only (--items both: the same games)",
            "graphmem",
            0.5,
        ),
        Condition(
            "facts-only",
            "graphmem λ=0.5, distilled notes only (--items both: the same games)",
            "graphmem",
            0.5,
        ),
        Condition(
            "two-phase-noabstain",
            "graphmem λ=0.5, its defaults but abstention and the kind choice off (graph on)",
            "graphmem",
            0.5,
            abstain=False,
            choose_kinds=False,
        ),
        Condition(
            "two-phase-abstain",
            "graphmem λ=0.5, its defaults with abstention on (graph on)",
            "graphmem",
            0.5,
            abstain=True,
        ),
        Condition(
            "two-phase-abstain-strict",
            "graphmem λ=0.5, abstention on, a memory must be one standard error above the "
            "baseline (abstain_z = -1) (graph on)",
            "graphmem",
            0.5,
            abstain=True,
            abstain_z=-1.0,
        ),
        Condition(
            "two-phase-expand",
            "graphmem λ=0.5, its defaults with graph expansion of phase A (graph on)",
            "graphmem",
            0.5,
            expand="links+tasks",
        ),
        Condition(
            "similarity-abstain",
            "graphmem λ=0 with abstention (graph on)",
            "graphmem",
            0.0,
            abstain=True,
        ),
        Condition(
            "two-phase-q0",
            "graphmem λ=0.5, q_prior='q0' (the default before issue 28), graph on",
            "graphmem",
            0.5,
            q_prior="q0",
        ),
        Condition(
            "similarity-nograph",
            "graphmem λ=0, graph off",
            "graphmem",
            0.0,
            graph=False,
            abstain=False,
        ),
        Condition("two-phase-nograph", "graphmem λ=0.5, graph off", "graphmem", 0.5, graph=False),
        Condition(
            "two-phase-reward",
            "graphmem λ=0.5, Q on the reward scale (q_scale='reward'), graph off",
            "graphmem",
            0.5,
            graph=False,
            q_scale="reward",
        ),
        Condition(
            "two-phase-adv",
            "graphmem λ=0.5, advantage credit (R − family baseline), graph off",
            "graphmem",
            0.5,
            graph=False,
            advantage=True,
        ),
        Condition(
            "two-phase-adv-reward",
            "graphmem λ=0.5, advantage credit, Q on the reward scale, graph off",
            "graphmem",
            0.5,
            graph=False,
            q_scale="reward",
            advantage=True,
        ),
        Condition(
            "two-phase-source",
            "graphmem λ=0.5, a procedure's source game counts as its first use, graph off",
            "graphmem",
            0.5,
            graph=False,
            q_prior="source",
        ),
        Condition(
            "two-phase-source-pool",
            "graphmem λ=0.5, source game as first use, untried Q from the pool, graph off",
            "graphmem",
            0.5,
            graph=False,
            q_prior="source-pool",
        ),
        Condition(
            "two-phase-source-pool-l1",
            "graphmem λ=1, source game as first use, untried Q from the pool, graph off",
            "graphmem",
            1.0,
            graph=False,
            q_prior="source-pool",
        ),
    )
}
DEFAULT_CONDITIONS = ("none", "plain", "flat-topk", "similarity", "two-phase")


def mixed_plan(
    n: int, *, start: int = 0, families: Sequence[str] = FAMILIES
) -> list[tuple[str, int]]:
    """The stream: ``n`` (family, seed) episodes, families interleaved in rounds of one game
    each (shuffled per round), each family's seeds running upward from ``start``.

    >>> mixed_plan(6, start=10, families=("a", "b", "c"))[:3]
    [('c', 10), ('b', 10), ('a', 10)]
    """
    return interleave(families, n, start=start, order_seed=ORDER_SEED)


# ---- memories: what each condition stores and hands over -----------------------------------


@dataclass(frozen=True)
class Offer:
    """One memory handed to the agent: its id and the facts it says (a fact item), or the
    experience it is (a past game's task key, steps and outcome, as a plan to follow)."""

    id: str
    facts: tuple[str, ...] = ()
    plan: Any = None


class Memory(Protocol):
    """What the stream runner needs of a condition's memory."""

    def start(self, task: str) -> list[Offer]: ...

    def recall(self, question: str) -> list[Offer]: ...

    def finish(
        self, task: str, used: Sequence[str], success: bool, baseline: float | None = None
    ) -> None: ...

    def learn(self, family: str, task: str, facts: Sequence[str]) -> None: ...

    def learn_experience(self, key: str, steps: Sequence[tuple[str, str]], success: bool) -> None:
        """Keep a finished game as an experience (``--items experiences``)."""

    def size(self) -> int: ...


def game_note(task: str, facts: Sequence[str]) -> str:
    """One game's facts as a note's text (the header ties it to the task it helps)."""
    from showcase.textworld_agent import FACTS_HEADER

    return "\n".join([f"{FACTS_HEADER} {task}", *facts])


class NoMemory:
    def start(self, task: str) -> list[Offer]:
        return []

    def recall(self, question: str) -> list[Offer]:
        return []

    def finish(
        self, task: str, used: Sequence[str], success: bool, baseline: float | None = None
    ) -> None:
        pass

    def learn(self, family: str, task: str, facts: Sequence[str]) -> None:
        pass

    def learn_experience(self, key: str, steps: Sequence[tuple[str, str]], success: bool) -> None:
        pass

    def size(self) -> int:
        return 0


class PlainMemory(ItemList[Offer], NoMemory):
    """Every game's facts, all handed over when a game starts."""

    def start(self, task: str) -> list[Offer]:
        return list(self.items)

    def learn(self, family: str, task: str, facts: Sequence[str]) -> None:
        if facts:
            self.add(Offer(str(len(self.items)), tuple(facts)))


class FlatTopK(NoMemory):
    """A flat vector list: LangGraph's InMemoryStore with an index, one item per game."""

    def __init__(self, embedder: Any, k: int) -> None:
        from langgraph.store.memory import InMemoryStore

        self.k = k
        self.store = InMemoryStore(
            index={
                "dims": embedder.dimension,
                "embed": lambda texts: embedder.embed(list(texts)).tolist(),
                "fields": ["text"],
            }
        )
        self.count = 0

    def _search(self, query: str) -> list[Offer]:
        found = self.store.search(("mixed",), query=query, limit=self.k)
        return [Offer(item.key, tuple(item.value["facts"])) for item in found]

    def start(self, task: str) -> list[Offer]:
        return self._search(task)

    def recall(self, question: str) -> list[Offer]:
        return self._search(question)

    def learn(self, family: str, task: str, facts: Sequence[str]) -> None:
        if facts:
            self.store.put(
                ("mixed",), str(self.count), {"text": game_note(task, facts), "facts": list(facts)}
            )
            self.count += 1

    def size(self) -> int:
        return self.count


class GraphmemMemory(GraphmemBase, NoMemory):
    """graphmem: fact notes, two-phase retrieval, credit by use, and (graph on) consolidation
    by subject with A-MEM evolution."""

    def __init__(self, embedder: Any, condition: Condition, k: int, store_dir: Path | None):
        from graphmem.models import MemoryKind

        super().__init__(embedder, condition, k, (MemoryKind.NOTE,), store_dir)
        self.offered: dict[str, Any] = {}
        """This game's hits by memory id (what credit by use can credit)."""
        self.open_id: str | None = None
        """This game's Episode, which records every memory offered."""
        self.episode_id: str | None = None
        """The last finished game's Episode."""

    def _hits(self, query: str) -> list[Any]:
        """Retrieve for ``query`` into this game's Episode; the hits join the offered ones."""
        hits = self.mem.retrieve(self.namespace, query, self.config, episode_id=self.open_id).hits
        for hit in hits:
            self.offered.setdefault(hit.memory.id, hit)
        return hits

    def _open(self, task: str) -> None:
        """A new game: a new Episode, nothing offered yet."""
        self.offered = {}
        self.open_id = self.mem.start_episode(self.namespace, task).id

    def _retrieve(self, query: str) -> list[Offer]:
        from showcase.textworld_agent import fact_lines

        return [Offer(h.memory.id, tuple(fact_lines(h.memory) or [])) for h in self._hits(query)]

    def start(self, task: str) -> list[Offer]:
        self._open(task)
        return self._retrieve(task)

    def recall(self, question: str) -> list[Offer]:
        return self._retrieve(question)

    def finish(
        self, task: str, used: Sequence[str], success: bool, baseline: float | None = None
    ) -> None:
        if self.open_id is None:
            self._open(task)
        assert self.open_id is not None
        reward = 1.0 if success else 0.0
        if baseline is not None:  # advantage: Q0 + (R − b), inside the reward range
            cfg = self.mem.config
            reward = min(cfg.reward_max, max(cfg.reward_min, cfg.q0 + reward - baseline))
        # Credit by use: the Episode recorded every memory offered; only those used move.
        self.credit(self.open_id, reward, success, [i for i in used if i in self.offered])
        self.episode_id, self.open_id = self.open_id, None

    def learn(self, family: str, task: str, facts: Sequence[str]) -> None:
        from showcase.envs.hints import scope_tag
        from showcase.textworld_agent import FACTS_TAG, learn_subject_facts

        if not facts:
            return
        if not self.graph:
            self.mem.add_note(
                self.namespace, game_note(task, facts), tags=[FACTS_TAG, scope_tag(facts)]
            )
            return
        for note_id in learn_subject_facts(self.mem, self.namespace, facts):
            self.mem.evolve(self.namespace, note_id)

    def size(self) -> int:
        counts = self.mem.store.counts(self.namespace)
        return sum(counts.get(kind, 0) for kind in self.config.kinds)


def _plan(item_id: str, key: str, steps: Sequence[tuple[str, str]], success: bool) -> Any:
    from graphmem.agents import Plan

    return Plan(item_id, key, tuple(steps), success=success)


class PlainExperiences(ItemList[Offer], NoMemory):
    """Every past game handed over at the start, newest first (no retrieval)."""

    def start(self, task: str) -> list[Offer]:
        return self.newest_first()

    def learn_experience(self, key: str, steps: Sequence[tuple[str, str]], success: bool) -> None:
        item_id = str(len(self.items))
        self.add(Offer(item_id, plan=_plan(item_id, key, steps, success)))


class FlatExperiences(NoMemory):
    """Past games in LangGraph's InMemoryStore, the key text indexed; top-K by cosine."""

    def __init__(self, embedder: Any, k: int) -> None:
        self.flat = FlatTopK(embedder, k)

    def start(self, task: str) -> list[Offer]:
        found = self.flat.store.search(("experiences",), query=task, limit=self.flat.k)
        return [
            Offer(
                it.key,
                plan=_plan(
                    it.key,
                    it.value["text"],
                    [tuple(x) for x in it.value["steps"]],
                    it.value["success"],
                ),
            )
            for it in found
        ]

    def learn_experience(self, key: str, steps: Sequence[tuple[str, str]], success: bool) -> None:
        value = {"text": key, "steps": [list(x) for x in steps], "success": success}
        self.flat.store.put(("experiences",), str(self.flat.count), value)
        self.flat.count += 1

    def size(self) -> int:
        return self.flat.count


class GraphmemExperiences(GraphmemMemory):
    """graphmem procedures: each game built by ``update`` (vanilla: failures kept, low-Q
    procedures demoted), two-phase retrieval on the key, credit to the procedures followed;
    graph on: A-MEM evolution of each new procedure (links to related ones)."""

    def __init__(self, embedder: Any, condition: Condition, k: int, store_dir: Path | None):
        from graphmem.models import MemoryKind

        super().__init__(embedder, condition, k, store_dir)
        self.config = self.config.model_copy(update={"kinds": (MemoryKind.PROCEDURE,)})

    def start(self, task: str) -> list[Offer]:
        from graphmem.agents import plans_from_hits

        self._open(task)
        plans = plans_from_hits(self.mem, self.namespace, self._hits(task))
        return [Offer(p.procedure_id, plan=p) for p in plans]

    def recall(self, question: str) -> list[Offer]:
        return []

    def learn_experience(self, key: str, steps: Sequence[tuple[str, str]], success: bool) -> None:
        from graphmem.config import UpdateStrategy

        trajectory = {
            "task": key,
            "steps": [{"action": a, "observation": o} for a, o in steps if a],
            "reward": 1.0 if success else 0.0,
            "success": success,
        }
        out = self.mem.update(
            self.namespace, trajectory, strategy=UpdateStrategy.VANILLA, episode_id=self.episode_id
        )
        if self.graph and out.built is not None and not out.built.deduplicated:
            self.mem.evolve(self.namespace, out.built.procedure.id)


ITEMS = ("experiences", "facts", "both")
"""What memory holds (``--items``): past games as experiences to follow (the start of a game
hands over K of them, chosen for the task and first room), or the facts games taught (asked
for at the start and by question during the game), or both (``--items both``, below: one
hand-over of K of either kind at the start, facts asked for during the game)."""


# ---- both kinds at once (--items both) ----------------------------------------------------
# Both kinds of memory at once on the mixed TextWorldExpress stream (``--items both``).
#
# Every game is kept twice, as the library keeps it: as an experience (the game's steps, a
# procedure to follow) and as the facts it taught (notes by subject). What reaches the agent when
# a game starts is one hand-over of at most K memories of either kind; the questions the explorer
# asks during a game ("where does the wet towel belong?") are answered by notes. Conditions:
#
# - ``plain``: every fact item and every past game handed over at the start;
# - ``flat-topk``: one LangGraph ``InMemoryStore`` for facts (one item per game) and one for past
#   games; the start hands over the K best of both by cosine, questions the K best facts;
# - graphmem (``similarity``, ``two-phase`` and their variants): one namespace. ``update`` builds
#   each game into a procedure and, through the games' distiller
#   (:func:`showcase.envs.hints.game_knowledge` given to ``GraphMemory(distiller=...)``), into notes
#   by subject (:mod:`graphmem.ops.distill`); retrieval ranks procedures and notes together, K in
#   all; credit by use (the notes whose facts the explorer acted on, the procedures it followed);
#   graph on: A-MEM evolution of the new procedure and the notes written;
# - ``experiences-only`` / ``facts-only``: graphmem two-phase with one kind, on the same games.


def _search(flat: FlatTopK, space: str, query: str) -> list[Any]:
    return list(flat.store.search((space,), query=query, limit=flat.k))


def _facts_apart(offers: Sequence[Offer]) -> list[Offer]:
    """Fact items with ids of their own (past games number theirs from 0 too)."""
    return [Offer(f"f{o.id}", o.facts) for o in offers]


_Facts = TypeVar("_Facts", PlainMemory, FlatTopK)
_Games = TypeVar("_Games", PlainExperiences, FlatExperiences)


class _BothKinds(NoMemory, Generic[_Facts, _Games]):
    """A fact list beside a list of past games: each learns what it keeps."""

    facts: _Facts
    games: _Games

    def learn(self, family: str, task: str, facts: Sequence[str]) -> None:
        self.facts.learn(family, task, facts)

    def learn_experience(self, key: str, steps: Sequence[tuple[str, str]], success: bool) -> None:
        self.games.learn_experience(key, steps, success)

    def size(self) -> int:
        return self.facts.size() + self.games.size()


class PlainBoth(_BothKinds[PlainMemory, PlainExperiences]):
    """Every fact item and every past game, all handed over at the start."""

    def __init__(self) -> None:
        self.facts = PlainMemory()
        self.games = PlainExperiences()

    def start(self, task: str) -> list[Offer]:
        return [*_facts_apart(self.facts.start(task)), *self.games.start(task)]


class FlatBoth(_BothKinds[FlatTopK, FlatExperiences]):
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


def make_both(condition: Condition, embedder: Any, k: int, store_dir: Path | None) -> Memory:
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


def make_memory(
    condition: Condition,
    embedder: Any,
    k: int,
    store_dir: Path | None = None,
    items: str = "experiences",
) -> Memory:
    if items == "both":
        return make_both(condition, embedder, k, store_dir)
    if condition.kind == "none":
        return NoMemory()
    if items == "experiences":
        if condition.kind == "plain":
            return PlainExperiences()
        if condition.kind == "flat":
            return FlatExperiences(embedder, k)
        return GraphmemExperiences(embedder, condition, k, store_dir)
    if condition.kind == "plain":
        return PlainMemory()
    if condition.kind == "flat":
        return FlatTopK(embedder, k)
    return GraphmemMemory(embedder, condition, k, store_dir)


def experience_key(task: str, observation: str) -> str:
    """What an experience is stored under and a game asks with: the task and the first room
    (games of a family share their task text; the room and what lies in it tell them apart)."""
    return f"{task.strip()}\n{observation.strip()}"


# ---- playing the stream ---------------------------------------------------------------------


@dataclass
class Game:
    """One episode of the stream as a condition played it."""

    family: str
    seed: int
    success: bool
    steps: int
    decisions: list[int] = field(default_factory=list)
    """Memories handed over at each decision (the start, then each recall question)."""
    used: int = 0
    """Memories whose facts the explorer acted on."""
    seconds: float = 0.0


@dataclass
class Run:
    condition: str
    games: list[Game] = field(default_factory=list)
    memory_items: int = 0
    seconds: float = 0.0
    uses: list[int] = field(default_factory=list)
    """graphmem: credited uses of each memory at the end (why Q can or cannot be learned)."""


def _facts(offers: Sequence[Offer]) -> list[str]:
    return list(dict.fromkeys(f for o in offers for f in o.facts))


def _asker(
    memory: Memory,
    policy: Any,
    decisions: list[int],
    sources: dict[str, set[str]],
    asks: bool,
) -> Callable[[Any], None]:
    """What happens before each action: the explorer's questions (it is always asked for
    them), answered by memory when memory holds facts; each answer is a decision."""

    def ask(obs: Any) -> None:
        questions = policy.recall_queries(obs.text, obs.valid_actions, obs.inventory)
        for question in questions if asks else []:
            found = memory.recall(question)
            decisions.append(len(found))
            for o in found:
                sources.setdefault(o.id, set()).update(o.facts)
            policy.add_hints(_facts(found))

    return ask


def play_stream(
    condition: Condition,
    plan: Sequence[tuple[str, int]],
    *,
    fold: str,
    budget: int,
    handover: int,
    embedder: Any,
    envs: dict[str, Any],
    progress: Callable[[], None] | None = None,
    items: str = "experiences",
) -> Run:
    """Play ``plan`` in order with ``condition``'s memory; every game is learned from (its
    facts, or the game itself as an experience: ``items``)."""
    from showcase.envs.agents import make_explorer
    from showcase.envs.hints import extract_facts

    memory = make_memory(condition, embedder, handover, items=items)
    run = Run(condition.name)
    tally: dict[str, tuple[int, int]] = {}  # family -> (won, played) so far: the baseline
    asks = items != "experiences"  # experiences are handed over once, at the start of a game
    started = time.perf_counter()
    for family, seed in plan:
        t0 = time.perf_counter()
        env = envs[family]
        obs = env.reset(seed, fold=fold)
        key = experience_key(obs.task, obs.text) if items != "facts" else obs.task
        offers = memory.start(key)
        decisions = [len(offers)]
        sources = {o.id: set(o.facts) for o in offers if o.plan is None}
        policy: Any = make_explorer(family)
        policy.begin(obs.task, hints=_facts(offers), seed=seed)
        plans = [o.plan for o in offers if o.plan is not None]
        if plans:
            policy.offer_procedures(plans)
        steps: list[tuple[str, str, float]] = [("", obs.text, 0.0)]
        ask = _asker(memory, policy, decisions, sources, asks)
        result = None
        for decision, result in play_game(env, obs, policy, ask):
            steps.append((decision.action, result.observation.text, result.reward))
        assert result is not None
        obs = result.observation
        acted = set(policy.used_hints()) if hasattr(policy, "used_hints") else set()
        used = [i for i, facts in sources.items() if facts & acted]
        offered_plans = {p.procedure_id for p in plans}
        used += [i for i in policy.followed_procedures() if i in offered_plans]
        wins, played = tally.get(family, (0, 0))
        baseline = (wins + 1) / (played + 2) if condition.advantage else None
        memory.finish(key, used, result.success, baseline)
        tally[family] = (wins + int(bool(result.success)), played + 1)
        if items == "both" and hasattr(memory, "learn_game"):
            memory.learn_game(key, steps[1:], bool(result.success))
        elif items == "both":
            memory.learn_experience(key, [(a, o) for a, o, _ in steps[1:]], bool(result.success))
            memory.learn(family, obs.task, extract_facts(steps))
        elif items == "experiences":
            memory.learn_experience(key, [(a, o) for a, o, _ in steps[1:]], bool(result.success))
        else:
            memory.learn(family, obs.task, extract_facts(steps))
        run.games.append(
            Game(
                family,
                seed,
                bool(result.success),
                len(steps) - 1,
                decisions,
                len(used),
                time.perf_counter() - t0,
            )
        )
        if progress:
            progress()
    run.memory_items = memory.size()
    if isinstance(memory, GraphmemMemory):
        run.uses = memory.uses()
    run.seconds = time.perf_counter() - started
    return run


def open_envs(families: Sequence[str], budget: int) -> dict[str, Any]:
    from showcase.envs.textworld import TextWorldEnv

    return {f: TextWorldEnv(f, step_budget=budget) for f in families}


def _play_one(
    name: str,
    plan: Sequence[tuple[str, int]],
    fold: str,
    budget: int,
    handover: int,
    embedder_name: str,
    items: str = "experiences",
) -> Run:
    """One condition in a worker process (its own JVMs and embedder)."""
    from bench.common import make_embedder

    def play(envs: Any) -> Run:
        return play_stream(
            CONDITIONS[name],
            plan,
            fold=fold,
            budget=budget,
            handover=handover,
            embedder=make_embedder(embedder_name),
            envs=envs,
            items=items,
        )

    families = sorted({f for f, _ in plan})
    return run_in_worker(play, lambda: open_envs(families, budget), close_envs)


def close_envs(envs: Any) -> None:
    for env in envs.values():
        env.close()


# ---- summarising ------------------------------------------------------------------------------


def _rate(games: Sequence[Game]) -> float:
    return sum(g.success for g in games) / len(games) if games else float("nan")


def summary_row(run: Run, families: Sequence[str], block: int) -> dict[str, Any]:
    games = run.games
    memory_families = [g for g in games if g.family in ("twc", "cookingworld")]
    return {
        "condition": run.condition,
        "episodes": len(games),
        "success": _rate(games),
        "success_reading_memory": _rate(memory_families),
        "by_family": {f: _rate([g for g in games if g.family == f]) for f in families},
        "success_per_block": [_rate(games[i : i + block]) for i in range(0, len(games), block)],
        "mean_steps": sum(g.steps for g in games) / len(games) if games else float("nan"),
        "max_handover": max((max(g.decisions) for g in games if g.decisions), default=0),
        "mean_handover": (
            sum(sum(g.decisions) for g in games) / max(1, sum(len(g.decisions) for g in games))
        ),
        "decisions_per_game": sum(len(g.decisions) for g in games) / max(1, len(games)),
        "games_using_memory": sum(1 for g in games if g.used) / max(1, len(games)),
        "memory_items": run.memory_items,
        "seconds_per_episode": run.seconds / max(1, len(games)),
        "credited_memories": sum(1 for u in run.uses if u),
        "uses_per_credited": (
            sum(run.uses) / max(1, sum(1 for u in run.uses if u)) if run.uses else float("nan")
        ),
        "credited_3_plus": sum(1 for u in run.uses if u >= 3),
    }


COMPARISONS = (
    ("two-phase", "flat-topk"),
    ("two-phase", "two-phase-nokinds"),
    ("two-phase", "experiences-only"),
    ("two-phase", "facts-only"),
    ("two-phase-kinds", "two-phase"),
    ("experiences-only", "none"),
    ("facts-only", "none"),
    ("two-phase", "similarity"),
    ("two-phase", "plain"),
    ("two-phase", "none"),
    ("similarity", "flat-topk"),
    ("two-phase-nograph", "flat-topk"),
    ("two-phase-nograph", "similarity-nograph"),
    ("two-phase", "two-phase-nograph"),
    ("plain", "none"),
    ("flat-topk", "none"),
    ("two-phase", "two-phase-q0"),
    ("two-phase", "two-phase-noabstain"),
    ("two-phase-abstain", "two-phase"),
    ("two-phase-abstain", "none"),
    ("two-phase-expand", "two-phase"),
    ("two-phase-abstain-strict", "two-phase"),
    ("two-phase-abstain-strict", "none"),
    ("similarity-abstain", "similarity"),
    ("two-phase-source-pool-l1", "flat-topk"),
    ("two-phase-source-pool-l1", "similarity"),
    ("two-phase-source-pool-l1", "plain"),
    ("two-phase-source-pool-l1", "none"),
)


def _successes(keep: Sequence[str] | None) -> Callable[[Run], list[float]]:
    return lambda run: [float(g.success) for g in run.games if keep is None or g.family in keep]


def comparisons(runs: dict[str, Run]) -> list[dict[str, Any]]:
    """Every pair of :data:`COMPARISONS` played, on the whole stream, on the two families that
    read memory, and per family."""
    scopes: list[tuple[str, Sequence[str] | None]] = [
        ("all", None),
        ("twc+cookingworld", ("twc", "cookingworld")),
    ]
    scopes += [(f, (f,)) for f in FAMILIES]
    views = [View(scope, _successes(keep)) for scope, keep in scopes]
    return paired_comparisons(runs, COMPARISONS, views, "scope")


def targets(cmp: Sequence[dict[str, Any]]) -> list[list[str]]:
    """Issue 45's targets on the mixed stream: never hurts (two-phase ≥ none − 1 point in
    every family), sharper (≥ similarity, and ≥ flat-topk + 5 points at p < 0.01) and within
    3 points of plain."""
    by = {(c["a"], c["b"], c["scope"]): c for c in cmp}
    checks: list[tuple[str, str, str, Callable[[dict[str, Any]], bool]]] = [
        (f, "none", "≥ −1 pp", lambda c: c["diff"] >= -0.01) for f in FAMILIES
    ]
    checks += [
        ("all", "similarity", "≥ 0 pp", lambda c: c["diff"] >= 0.0),
        (
            "all",
            "flat-topk",
            "≥ +5 pp, p < 0.01",
            lambda c: c["diff"] >= 0.05 and c["p_sign"] < 0.01,
        ),
        ("all", "plain", "≥ −3 pp", lambda c: c["diff"] >= -0.03),
    ]
    rows = []
    for scope, b, need, test in checks:
        c = by.get(("two-phase", b, scope))
        if c is None:
            continue
        rows.append(
            [
                f"two-phase vs {b} ({scope})",
                need,
                f"{100 * c['diff']:+.1f} pp",
                f"{c['p_sign']:.3g}",
                "met" if test(c) else "missed",
            ]
        )
    return rows


def _pct(x: float) -> str:
    return "–" if x != x else f"{x:.0%}"


def wilson(wins: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95 % Wilson interval of a success rate of ``wins`` in ``n``.

    >>> [round(x, 3) for x in wilson(50, 100)]
    [0.404, 0.596]
    """
    if n == 0:
        return float("nan"), float("nan")
    p = wins / n
    mid = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * ((p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5) / (1 + z * z / n)
    return mid - half, mid + half


def _rate_ci(games: Sequence[dict[str, Any]]) -> str:
    """A success rate with its 95 % interval, in points: ``62 % [55, 68]``."""
    n = len(games)
    if not n:
        return "–"
    wins = sum(1 for g in games if g["success"])
    lo, hi = wilson(wins, n)
    return f"{wins / n:.0%} [{lo * 100:.0f}, {hi * 100:.0f}]"


def render(path: Path) -> list[Path]:
    """Write ``path``'s Markdown again (and its comparisons, with today's list of pairs) from the
    episodes it holds: ``python -m bench.learning --render FILE.json``."""
    import json

    data = json.loads(path.read_text(encoding="utf-8"))
    runs = {n: Run(n, games=[Game(**g) for g in games]) for n, games in data["episodes"].items()}
    data["comparisons"] = comparisons(runs)
    return write_results(path.parent, path.stem, data, markdown(data))


def markdown(data: dict[str, Any]) -> str:
    setup, rows, cmp = data["setup"], data["results"], data["comparisons"]
    families = setup["families"]
    lines = [
        f"# Mixed TextWorldExpress stream, hand-over K = {setup['handover']} "
        f"({'held-out' if setup['heldout'] else 'tuning'} run)",
        "",
        f"Command: `{setup['command']}`",
        "",
        machine_markdown(setup["machine"]),
        "",
        f"- stream: {setup['episodes']} games, {', '.join(families)} interleaved (the same "
        f"order for every condition), {setup['fold']} fold, seeds from {setup['seed_start']} "
        f"per family ({setup['protocol']}); budget {setup['budget']} steps",
        f"- embedder: {setup['embedder']}; graphmem retrieval k1 = {setup['k1']}, "
        f"k2 = K = {setup['handover']}; α = 0.1, rewards {{0, 1}}, Q0 = 0.5",
        "- explorers: twc and cookingworld read memory's facts; coin and mapreader use the "
        "generic novelty explorer, which reads none (their games only add items to memory)",
        f"- wall time: {setup['seconds']:.0f} s",
        *([f"- note: {setup['note']}"] if setup.get("note") else []),
        "",
        "## Success",
        "",
    ]
    head = [
        "condition",
        "success",
        *[f"{f}" for f in families],
        "mean steps",
        "max / mean hand-over",
        "asks per game",
        "games using memory",
        "memory items",
        "s/episode",
    ]
    labels = {c.name: c.label for c in CONDITIONS.values()}
    table = [
        [
            f"`{r['condition']}` {labels.get(r['condition'], '')}",
            _pct(r["success"]),
            *[_pct(r["by_family"][f]) for f in families],
            f"{r['mean_steps']:.1f}",
            f"{r['max_handover']} / {r['mean_handover']:.1f}",
            f"{r['decisions_per_game']:.1f}",
            _pct(r["games_using_memory"]),
            str(r["memory_items"]),
            f"{r['seconds_per_episode']:.2f}",
        ]
        for r in rows
    ]
    lines.append(markdown_table(head, table))
    lines += [
        "",
        "Success with its 95 % interval (Wilson), overall and per family:",
        "",
    ]
    per = data.get("episodes", {})
    lines.append(
        markdown_table(
            ["condition", "all", *families],
            [
                [
                    f"`{name}`",
                    _rate_ci(games),
                    *[_rate_ci([g for g in games if g["family"] == f]) for f in families],
                ]
                for name, games in per.items()
            ],
        )
    )
    credit = [r for r in rows if r.get("credited_memories")]
    if credit:
        lines += [
            "",
            "Credit (graphmem): memories credited at least once, their mean credited uses, and "
            "how many were credited 3 times or more — Q is an average over uses, so a memory "
            "used once or twice has a Q that says little.",
            "",
            markdown_table(
                ["condition", "credited", "uses per credited", "credited ≥ 3 times"],
                [
                    [
                        r["condition"],
                        r["credited_memories"],
                        f"{r['uses_per_credited']:.1f}",
                        r["credited_3_plus"],
                    ]
                    for r in credit
                ],
            ),
        ]
    blocks = max(len(r["success_per_block"]) for r in rows)
    block = setup["block"]
    lines += ["", f"## Success per block of {block}", ""]
    lines.append(
        markdown_table(
            ["condition", *[f"{i * block + 1}–{(i + 1) * block}" for i in range(blocks)]],
            [[r["condition"], *map(_pct, r["success_per_block"])] for r in rows],
        )
    )
    lines += [
        "",
        "## Paired comparisons",
        "",
        "Same episodes, episode by episode: difference of success rates, games where the first "
        "won and the second lost (and the reverse), exact two-sided sign test, 95 % bootstrap "
        "interval.",
        "",
    ]
    lines.append(
        markdown_table(
            ["a vs b", "games", "Δ success", "a only / b only", "sign test p", "95 % CI"],
            [
                [
                    f"{c['a']} vs {c['b']}",
                    f"{c['scope']} ({c['n']})",
                    f"{100 * c['diff']:+.1f} pp",
                    f"{c['better']} / {c['worse']}",
                    f"{c['p_sign']:.3g}",
                    f"[{100 * c['ci_low']:+.1f}, {100 * c['ci_high']:+.1f}]",
                ]
                for c in cmp
            ],
        )
    )
    if target_rows := targets(cmp):
        lines += ["", "## Targets", ""]
        lines.append(markdown_table(["comparison", "target", "Δ", "p", ""], target_rows))
    return "\n".join(lines) + "\n"


def plot(path: Path, data: dict[str, Any]) -> Path:
    block = data["setup"]["block"]
    with matplotlib_figure(path, width=9, height=4.5) as fig:
        ax = fig.subplots(1, 1)
        for r in data["results"]:
            xs = [(i + 1) * block for i in range(len(r["success_per_block"]))]
            style = "o--" if r["condition"] in ("none", "plain") else "o-"
            ax.plot(xs, r["success_per_block"], style, label=r["condition"])
        ax.set_xlabel("games played")
        ax.set_ylabel(f"success per block of {block}")
        ax.set_ylim(0, 1)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        ax.set_title(f"mixed TextWorldExpress stream, K = {data['setup']['handover']}")
    return path


# ---- command line ---------------------------------------------------------------------------


def run(args: argparse.Namespace, command: str) -> dict[str, Any]:
    """``python -m bench.learning --stream mixed``: play every condition, write the results."""
    names = pick_conditions(args.conditions, list(CONDITIONS), DEFAULT_CONDITIONS)
    check_handover(args.handover)
    episodes = args.episodes if args.episodes is not None else 400
    if args.quick:
        episodes, args.embedder = 8, "hashing"
    if episodes < 1 or args.budget < 1:
        raise SystemExit("--episodes and --budget must be positive")
    seeds = stream_range(heldout=args.heldout)
    plan = mixed_plan(episodes, start=seeds.start)
    block = min(BLOCK, episodes) if args.block is None else args.block
    machine = machine_info()
    started = time.perf_counter()
    jobs = max(1, min(args.jobs, len(names)))
    name = f"learning_mixed_{args.items}_k{args.handover}"
    name += f"_{'heldout' if args.heldout else seeds.fold}"
    name += f"_{args.tag}" if args.tag else ""
    setup = {
        "command": command,
        "machine": machine,
        "heldout": bool(args.heldout),
        "protocol": seeds.purpose,
        "fold": seeds.fold,
        "seed_start": seeds.start,
        "families": list(FAMILIES),
        "episodes": episodes,
        "budget": args.budget,
        "handover": args.handover,
        "items": args.items,
        "k1": CANDIDATES * args.handover,
        "block": block,
        "embedder": "",
        "conditions": {n: asdict(CONDITIONS[n]) for n in names},
        "seconds": 0.0,
    }
    files: list[Path] = []

    def write(done: dict[str, Run]) -> dict[str, Any]:
        """The results of the conditions finished so far (a run cut short keeps them)."""
        from bench.common import embedder_label

        nonlocal files
        setup["embedder"] = embedder_label(args.embedder)
        setup["seconds"] = time.perf_counter() - started
        setup["finished"] = [n for n in names if n in done]
        ordered = {n: done[n] for n in names if n in done}
        data = {
            "setup": setup,
            "plan": plan,
            "results": [summary_row(r, FAMILIES, block) for r in ordered.values()],
            "comparisons": comparisons(ordered),
            "episodes": {n: [asdict(g) for g in r.games] for n, r in ordered.items()},
        }
        files = write_results(args.out, name, data, markdown(data))
        files.append(plot(args.out / f"{name}.png", data))
        return data

    runs = play_conditions(
        names,
        _play_one,
        (plan, seeds.fold, args.budget, args.handover, args.embedder, args.items),
        jobs=jobs,
        write=write,
        progress=not args.no_progress,
    )
    data = write(runs)
    return {"data": data, "files": files, "runs": runs}
