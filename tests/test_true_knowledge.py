"""Memory that never deletes true knowledge (issue 20): revival, the subject guard, fact scope,
credit by use."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from graphmem import GraphMemory, HashingEmbedder
from graphmem.agents import Decision, Observation, StepResult, UsingPolicy
from graphmem.config import ObsolescenceConfig, RetrievalConfig
from graphmem.flows.agent import build_agent_graph, run_task
from graphmem.flows.state import AgentContext, AgentState
from graphmem.models import EdgeKind, MemoryKind, Note
from graphmem.ops.obsolescence import demote, note_subject
from graphmem.stores.embedded import EmbeddedStore
from showcase.envs.agents import CookingExplorer
from showcase.envs.hints import fact_scope, note_scope, scope_tag
from showcase.textworld_agent import learn_facts_by_subject

NS = "truth"
ONCE = ObsolescenceConfig(min_uses=1)


@pytest.fixture
def mem() -> GraphMemory:
    return GraphMemory(EmbeddedStore.in_memory(), embedder=HashingEmbedder(64))


def _fail(mem: GraphMemory, *ids: str) -> None:
    mem.store.update_utility(NS, list(ids), 0.0, 0.9)


# ---- a retired true fact is revived by learning it again -------------------------------------


def test_a_retired_true_fact_is_revived_by_learning_it_again(mem: GraphMemory) -> None:
    note = mem.add_note(NS, "roast means cook in oven")
    _fail(mem, note.id)
    assert [d.memory_id for d in demote(mem, NS, config=ONCE)] == [note.id]
    assert mem.get(NS, note.id).obsolete

    again = mem.add_note(NS, "roast means cook in oven")
    assert again.id == note.id and not again.obsolete
    assert not mem.get(NS, note.id).obsolete
    assert note.id in [
        h.memory.id
        for h in mem.retrieve(
            NS, "roast means cook in oven", k1=5, k2=5, kinds=(MemoryKind.NOTE,)
        ).hits
    ]


# ---- demotion never removes the only memory of a subject -------------------------------------


def test_demotion_never_empties_a_subject(mem: GraphMemory) -> None:
    only = mem.add_note(NS, "Facts about fry:\nfry means cook in stove", tags=["subject:fry"])
    a = mem.add_note(NS, "Facts about grill:\ngrill means cook in barbeque", tags=["subject:grill"])
    b = mem.add_note(NS, "Facts about grill:\ngrill means cook in oven", tags=["subject:grill"])
    loose = mem.add_note(NS, "The lift is on the left.")
    todo = mem.add_note(NS, "TODO:\ncheck the lift")  # a header-like line is no subject
    assert note_subject(only) == "fry" and note_subject(loose) is None
    assert note_subject(todo) is None
    _fail(mem, todo.id)
    _fail(mem, only.id, a.id, b.id, loose.id)
    _fail(mem, b.id)  # b is the worse of the two grill notes
    demoted = {d.memory_id for d in demote(mem, NS, config=ONCE)}
    assert demoted == {b.id, loose.id, todo.id}, "each subject keeps its best note; subjectless go"
    assert not mem.get(NS, only.id).obsolete and not mem.get(NS, a.id).obsolete
    # Demoting again, even one id at a time, still leaves the subject its note.
    assert demote(mem, NS, [a.id], config=ONCE) == []


def test_subject_tag_names_the_subject(mem: GraphMemory) -> None:
    one = mem.add_note(NS, "the red door opens with the brass key", tags=["subject:red door"])
    two = mem.add_note(NS, "the red door is locked at night", tags=["subject:Red  Door"])
    _fail(mem, one.id, two.id)
    _fail(mem, two.id)
    assert [d.memory_id for d in demote(mem, NS, config=ONCE)] == [two.id]


# ---- a fact's scope is stored and used -------------------------------------------------------


def test_fact_scope_is_stored_on_the_note(mem: GraphMemory) -> None:
    assert fact_scope("red apple is found in fridge") == "layout"
    assert fact_scope("roast means cook in oven") == "always"
    assert fact_scope("gray coat belongs in wardrobe") == "always"
    steps = [
        {
            "action": "open fridge",
            "observation": "You open the fridge. The fridge contains a red apple.",
            "reward": 0.0,
            "thought": "",
        },
        {
            "action": "take red apple",
            "observation": "You take the red apple.",
            "reward": 1.0,
            "thought": "",
        },
        {
            "action": "cook red apple in oven",
            "observation": "You roast the red apple with the oven.",
            "reward": 1.0,
            "thought": "",
        },
    ]
    state: AgentState = {"task": "cookingworld", "seed": 0, "steps": steps}  # type: ignore[typeddict-item]
    ids = learn_facts_by_subject(mem, NS, state)
    notes = [n for n in mem.store.get_many(NS, ids) if isinstance(n, Note)]
    scopes = {n.content.splitlines()[0]: note_scope(n.tags) for n in notes}
    assert scopes == {"Facts about red apple:": "layout", "Facts about roast:": "always"}
    assert scope_tag(["x is found in y", "fry means cook in stove"]) == "scope:layout"


def _explorer_in_hall(hints: Sequence[str]) -> CookingExplorer:
    """A cooking explorer in the hall, having read the recipe (a red apple), with the kitchen
    (and its fridge) seen to the west and an unvisited room to the east."""
    p = CookingExplorer()
    p.begin("cook", hints=hints, seed=0)
    p.ingredients, p.directions, p.read = ["red apple"], [], True
    p.exits = {"hall": {"west": "kitchen", "east": None}, "kitchen": {"east": "hall"}}
    p.containers = {"fridge": "kitchen"}
    p.room = "hall"
    return p


def test_a_layout_fact_does_not_send_the_explorer_across_the_house_first() -> None:
    hint = "red apple is found in fridge"
    p = _explorer_in_hall([hint])
    p.valid = frozenset({"move west", "move east"})
    step = p._explore_for(["red apple"])
    assert step is not None and step.action == "move east", "unvisited rooms before a trip"
    assert p.used_hints() == []

    here = _explorer_in_hall([hint])
    here.room = "kitchen"
    here.valid = frozenset({"open fridge", "move east"})
    step = here._explore_for(["red apple"])
    assert step is not None and step.action == "open fridge", "a remembered place here: open it"
    assert here.used_hints() == [hint]


def test_containers_no_game_found_food_in_wait_for_the_unvisited_rooms() -> None:
    # Memory has found ingredients in fridges and pantries, never in a wardrobe: in a bedroom
    # the explorer looks for the red apple in the unvisited rooms first, the wardrobe last.
    def in_bedroom(hints: Sequence[str], directions: list[tuple[str, str]]) -> CookingExplorer:
        p = _explorer_in_hall(hints)
        p.room, p.directions, p.held = "hall", directions, {"knife"}
        p.containers = {"wardrobe": "hall"}
        p.valid = frozenset({"open wardrobe", "move east", "move west"})
        return p

    memory = ["carrot is found in fridge", "flour is found in pantry"]
    step = in_bedroom(memory, [])._explore_for(["red apple"])
    assert step is not None and step.action == "move east"
    step = in_bedroom([], [])._explore_for(["red apple"])
    assert step is not None and step.action == "open wardrobe", "no memory: as before"
    # Still to find a knife (memory never says where one lay): every container may hold it.
    needs_knife = in_bedroom(memory, [("slice", "red apple")])
    needs_knife.held = set()
    step = needs_knife._explore_for(["red apple"])
    assert step is not None and step.action == "open wardrobe"


def test_an_unvisited_room_memory_found_food_in_comes_before_the_nearest() -> None:
    p = _explorer_in_hall(["carrot is found in pantry"])
    p.exits = {"hall": {"east": "bedroom", "west": "pantry"}}
    p.containers = {}
    p.valid = frozenset({"move west", "move east"})
    step = p._explore_for(["red apple"])
    assert step is not None and step.action == "move west"  # east comes first by name
    assert p.used_hints() == []  # where a carrot lay is not where this red apple lies


# ---- credit by use ---------------------------------------------------------------------------


class Hall:
    """Five boxes; the key is in box 3. Open it, take the key."""

    step_budget = 6

    def reset(self, seed: int, fold: str = "test") -> Observation:
        self.opened: set[int] = set()
        self.steps = 0
        return self._obs("You are in the hall.")

    def _obs(self, text: str, success: bool = False) -> Observation:
        actions = [f"open box {i}" for i in range(5) if i not in self.opened]
        actions += ["take key"] if 3 in self.opened else []
        return Observation(
            task="Find the key.",
            text=text,
            valid_actions=tuple(sorted(actions)),
            done=success,
            success=success,
            score=float(success),
        )

    def step(self, action: str) -> StepResult:
        self.steps += 1
        success = action == "take key"
        if action.startswith("open box "):
            self.opened.add(int(action[-1]))
        done = success or self.steps >= self.step_budget
        return StepResult(self._obs("ok", success), float(success), done, success)

    def close(self) -> None:
        pass


class Asker:
    """Asks two questions, acts on the answer about the key, reports what it used."""

    def begin(self, task: str, hints: Sequence[str] = (), seed: int = 0) -> None:
        self.asked = False
        self.hints: list[str] = []
        self.used: list[str] = []

    def recall_queries(self, observation: str, valid: Sequence[str], inv: str) -> list[str]:
        if self.asked:
            return []
        self.asked = True
        return ["where is the key? open box 3 then take key", "what colour is the lamp"]

    def add_hints(self, hints: Sequence[str]) -> None:
        self.hints.extend(hints)

    def used_hints(self) -> list[str]:
        return list(self.used)

    def act(self, observation: str, valid: Sequence[str], inventory: str) -> Decision:
        for hint in self.hints:
            for action in (a.strip() for a in hint.split(";")):
                if action in valid:
                    self.used.append(hint)
                    return Decision(action, "memory")
        return Decision(sorted(valid)[0], "explore")

    def feedback(self, action: str, observation: str, reward: float) -> None:
        pass


def test_recalled_notes_are_credited_by_use(mem: GraphMemory) -> None:
    key = mem.add_note(NS, "open box 3; take key")
    lamp = mem.add_note(NS, "the lamp is blue")
    policy = Asker()
    assert isinstance(policy, UsingPolicy)
    context = AgentContext(
        namespace=NS,
        memory=mem,
        env=Hall(),
        policy=policy,
        retrieval=RetrievalConfig(kinds=(MemoryKind.PROCEDURE,)),
        recall=RetrievalConfig(k1=5, k2=2, lam=0.0, kinds=(MemoryKind.NOTE,)),
    )
    out = run_task(build_agent_graph().compile(), 0, context)
    assert out["success"]
    assert set(out["recalled"]) == {key.id, lamp.id}, "both were recalled"
    assert out["used"] == [key.id]
    credited = mem.store.edges(NS, out["episode_id"], kinds=[EdgeKind.RETRIEVED])
    # Design §2.3: the Episode records every memory it was offered; only the one acted on is
    # marked used and moved by the reward (q_after on its edge).
    offered = {e.dst: e.props for e in credited}
    assert set(offered) == {key.id, lamp.id}, "both offered notes are on the Episode"
    assert offered[key.id].get("used") is True and "q_after" in offered[key.id]
    assert not offered[lamp.id].get("used") and "q_after" not in offered[lamp.id]
    episode = mem.get(NS, out["episode_id"])
    assert getattr(episode, "credit", None) == "used"
    assert out["q_updates"] == {key.id: pytest.approx(0.55)}
    assert mem.get(NS, lamp.id).uses == 0 and mem.get(NS, lamp.id).q == pytest.approx(0.5)
