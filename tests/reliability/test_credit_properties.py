"""Property test of the credit invariant, on both stores.

Hypothesis drives random interleavings of opening episodes (one or several retrievals), finishing
them (with rewards and learning rates anywhere in range, repeated, with another reward, with
hostile values), reflective ``update`` calls, content re-saves, exports re-imported and imports
that fail. After every step each memory's Q must equal Q0 plus the α-updates of exactly the
rewards credited to it, in the order they were credited, and its use count the number of
episodes that credited it; refused calls change nothing.
"""

from __future__ import annotations

import io
import itertools
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    invariant,
    rule,
    run_state_machine_as_test,
)

from graphmem.config import MemoryConfig, RetrievalConfig
from graphmem.embedding import HashingEmbedder
from graphmem.errors import EpisodeFinished, GraphmemError, InvalidInput
from graphmem.memory import GraphMemory
from graphmem.models import Episode, MemoryKind, Note
from graphmem.stores.base import MemoryStore
from graphmem.stores.embedded import EmbeddedStore

from ._workers import DIM

pytestmark = [pytest.mark.reliability]

Q0 = 0.5
WORDS = ("lamp", "kitchen", "garden", "hose", "oven", "knife", "fridge", "door", "key", "map")
REWARDS = st.one_of(
    st.sampled_from([-1.0, 0.0, 1.0]),
    st.floats(min_value=-1.0, max_value=1.0, allow_nan=False),
)
ALPHAS = st.one_of(st.just(None), st.floats(min_value=1e-3, max_value=1.0))
HOSTILE_REWARDS = st.sampled_from(
    [1e156, -1e156, math.nan, math.inf, -math.inf, 1.0000001, -1.5, 2, 1e308]
)


class CreditMachine(RuleBasedStateMachine):
    store: MemoryStore
    prefix: str
    counter = itertools.count()

    episodes = Bundle("episodes")

    def __init__(self) -> None:
        super().__init__()
        self.ns = f"{self.prefix}-{next(self.counter)}"
        self.mem = GraphMemory(
            self.store,
            embedder=HashingEmbedder(DIM),
            # Memories' Q alone: with the kind choice on, an episode that credits nothing also
            # counts on its Task as the no-memory baseline (tests/test_choose_kinds.py).
            config=MemoryConfig(alpha=0.2, q0=Q0, retrieval=RetrievalConfig(choose_kinds=False)),
        )
        self.q: dict[str, float] = {}
        self.uses: dict[str, int] = {}
        self.retrieved: dict[str, set[str]] = {}
        self.finished: dict[str, tuple[float, dict[str, float]]] = {}
        self.texts = itertools.count()

    # ---- the model ------------------------------------------------------------------------

    def _learn_new(self) -> None:
        """Memories the model has not seen must be new: Q0, unused."""
        for m in self.store.iter_nodes(self.ns):
            if m.kind == MemoryKind.EPISODE or m.id in self.q:
                continue
            assert (m.q, m.uses) == (Q0, 0), f"new memory {m.id} starts at {m.q}/{m.uses}"
            self.q[m.id], self.uses[m.id] = Q0, 0

    def _export(self) -> str:
        out = io.StringIO()
        self.store.export_jsonl(out, self.ns)
        return out.getvalue()

    # ---- rules ----------------------------------------------------------------------------

    @rule(words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=4))
    def add_note(self, words: list[str]) -> None:
        self.mem.add_note(self.ns, f"{' '.join(words)} fact {next(self.texts)}")
        self._learn_new()

    @rule(target=episodes, words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3))
    def open_episode(self, words: list[str]) -> str:
        r = self.mem.retrieve(
            self.ns, " ".join(words), kinds=("Note", "Procedure"), k1=5, k2=3, open_episode=True
        )
        assert r.episode_id is not None
        self.retrieved[r.episode_id] = {h.memory.id for h in r.hits}
        return r.episode_id

    @rule(episode=episodes, words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3))
    def retrieve_again(self, episode: str, words: list[str]) -> None:
        if episode in self.finished:
            with pytest.raises(EpisodeFinished):
                self.mem.retrieve(self.ns, " ".join(words), kinds=("Note",), episode_id=episode)
            return
        r = self.mem.retrieve(self.ns, " ".join(words), kinds=("Note",), episode_id=episode)
        self.retrieved[episode] |= {h.memory.id for h in r.hits}

    @rule(episode=episodes, reward=REWARDS, alpha=ALPHAS)
    def finish(self, episode: str, reward: float, alpha: float | None) -> None:
        if episode in self.finished:
            first_reward, first_q = self.finished[episode]
            if reward != first_reward:
                with pytest.raises(EpisodeFinished):
                    self.mem.finish_episode(self.ns, episode, reward, alpha=alpha)
                return
            out = self.mem.finish_episode(self.ns, episode, reward, alpha=alpha)
            assert out.replayed and out.q == first_q
            return
        out = self.mem.finish_episode(self.ns, episode, reward, alpha=alpha)
        a = 0.2 if alpha is None else alpha
        live = {m.id for m in self.store.get_many(self.ns, sorted(self.retrieved[episode]))}
        assert set(out.q) == live and not out.replayed
        for memory_id in live:
            self.q[memory_id] += a * (reward - self.q[memory_id])
            self.uses[memory_id] += 1
        self.finished[episode] = (reward, out.q)

    @rule(episode=episodes, reward=HOSTILE_REWARDS)
    def hostile_finish(self, episode: str, reward: float) -> None:
        before = self._export()
        with pytest.raises(InvalidInput):
            self.mem.finish_episode(self.ns, episode, reward)
        assert self._export() == before

    @rule(episode=episodes, success=st.booleans())
    def reflect(self, episode: str, success: bool) -> None:
        trajectory = {
            "task": f"fetch the {WORDS[len(self.q) % len(WORDS)]}",
            "steps": [{"action": "go to kitchen"}, {"action": "take key"}],
            "reward": 1.0 if success else 0.0,
            "success": success,
        }
        self.mem.update(self.ns, trajectory, strategy="adjustment", episode_id=episode)
        self._learn_new()

    @rule(data=st.data())
    def resave_a_note(self, data: st.DataObject) -> None:
        notes = [m for m in self.store.iter_nodes(self.ns, kinds=["Note"]) if isinstance(m, Note)]
        if not notes:
            return
        note = data.draw(st.sampled_from(notes))
        # A content write with a stale (and absurd) q: it must not touch utility.
        self.store.upsert(
            [note.model_copy(update={"content": note.content + " (edited)", "q": 0.0})]
        )

    @rule()
    def reimport_the_export(self) -> None:
        self.store.import_jsonl(self._export().splitlines())

    @rule()
    def failing_import_changes_nothing(self) -> None:
        before = self._export()
        with pytest.raises(GraphmemError):
            self.store.import_jsonl([*before.splitlines(), '{"type": "node", "kind": "Nope"}'])
        assert self._export() == before

    @rule()
    def hostile_note_q(self) -> None:
        before = self._export()
        with pytest.raises(GraphmemError):
            self.mem.add_note(self.ns, f"overflowing fact {next(self.texts)}", q=1e300)
        assert self._export() == before

    # ---- the invariant --------------------------------------------------------------------

    @invariant()
    def q_is_q0_plus_the_credited_updates(self) -> None:
        found = {m.id: m for m in self.store.iter_nodes(self.ns) if not isinstance(m, Episode)}
        assert set(found) == set(self.q)
        for memory_id, m in found.items():
            assert m.q == pytest.approx(self.q[memory_id], abs=1e-12), memory_id
            assert m.uses == m.q_updates == self.uses[memory_id], memory_id
            assert -1.0 <= m.q <= 1.0


def test_credit_invariant_holds_under_random_interleavings(
    store: MemoryStore, namespace: str
) -> None:
    embedded = isinstance(store, EmbeddedStore)
    machine: Any = type("Machine", (CreditMachine,), {"store": store, "prefix": namespace})
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=30 if embedded else 6,
            stateful_step_count=25 if embedded else 15,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
            database=None,
        ),
    )
