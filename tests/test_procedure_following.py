"""Agents act on procedures: a retrieved procedure's steps are adapted to a new game and
followed, and the reward credits exactly the procedures followed (issue 15).

The follower (:mod:`showcase.envs.procedures`) is tested on its own, then through the agent
flow on a small cooking game whose ingredient changes with the seed, so a remembered procedure
only helps once its objects are substituted.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence
from pathlib import Path

import pytest

from graphmem.agents import Decision, Observation, Plan, ProcedurePolicy, StepResult
from graphmem.embedding import HashingEmbedder
from graphmem.flows.agent import build_agent_graph, run_task
from graphmem.flows.state import AgentContext
from graphmem.memory import GraphMemory
from graphmem.models import MemoryKind, Procedure
from graphmem.ops.episodes import retrieved_ids
from graphmem.stores.base import MemoryStore
from showcase.envs.agents import CookingExplorer, Explorer, TwcExplorer
from showcase.envs.procedures import ProcedureFollower, plan_facts
from showcase.textworld_agent import PROCEDURE_RETRIEVAL, TEXTWORLD_RETRIEVAL

# ---- the follower alone ----------------------------------------------------------------------

RECIPE_PLAN = Plan(
    "p-cook",
    "cook a meal",
    (
        (
            "read cookbook",
            "Ingredients:\n red apple\nDirections:\n dice the red apple\n fry the red apple",
        ),
        ("open fridge", "You open the fridge. The fridge contains a red apple."),
        ("open dishwasher", "You open the dishwasher. It's empty inside."),
        ("take red apple", "You take the red apple."),
        ("dice red apple", "You dice the red apple."),
        ("cook red apple in stove", "You fry the red apple with the stove."),
        ("prepare meal", "Adding the meal to your inventory."),
    ),
)


def _walk(follower: ProcedureFollower, valid: Sequence[str], room: str = "") -> list[str]:
    """Take every step the follower proposes while ``valid`` stays the same."""
    taken = []
    while (step := follower.next(valid, room=room)) is not None:
        taken.append(step.action)
        follower.feedback(step.action, f"You {step.action}.")
    return taken


def test_objects_are_substituted_by_their_role_in_the_current_recipe() -> None:
    follower = ProcedureFollower([RECIPE_PLAN])
    assert follower.next(["read cookbook", "take carrot"], room="").action == "read cookbook"
    follower.feedback(
        "read cookbook", "Ingredients:\n carrot\nDirections:\n dice the carrot\n fry the carrot"
    )
    valid = ["dice carrot", "cook carrot in stove", "cook carrot in oven", "open fridge"]
    valid += ["take carrot", "open dishwasher", "prepare meal"]
    # The dishwasher was a detour of the old game (empty, nothing used from it): skipped.
    assert _walk(follower, valid) == [
        "open fridge",
        "take carrot",
        "dice carrot",
        "cook carrot in stove",
        "prepare meal",
    ]
    assert follower.bindings == {"red apple": "carrot"}
    assert follower.followed() == ["p-cook"]


def test_an_object_is_not_substituted_when_its_role_differs() -> None:
    follower = ProcedureFollower([RECIPE_PLAN])
    follower.observe("Directions:\n fry the carrot")  # fried, but not diced: another role
    valid = ["take carrot", "dice carrot", "cook carrot in stove", "read cookbook"]
    assert _walk(follower, valid) == ["read cookbook"]
    assert "red apple" not in follower.bindings


def test_nothing_applies_means_explore_and_no_credit() -> None:
    follower = ProcedureFollower([RECIPE_PLAN])
    assert follower.next(["move north", "take banana"], room="kitchen") is None
    assert follower.followed() == []


def test_a_move_is_followed_only_where_the_layout_agrees() -> None:
    plan = Plan(
        "p-move",
        "tidy up. You are in the kitchen.",
        (
            ("move east", "You are in the bedroom. To the West you see the kitchen."),
            ("put coat in wardrobe", "You put the coat in the wardrobe."),
        ),
    )
    same = ProcedureFollower([plan])
    same.observe("You are in the kitchen. To the East you see the bedroom.")
    assert same.next(["move east", "move west"], room="kitchen").action == "move east"
    other = ProcedureFollower([plan])
    other.observe("You are in the kitchen. To the East you see the garage.")
    assert other.next(["move east", "move west"], room="kitchen") is None


def test_puts_taken_back_are_detours_and_later_plans_fill_gaps() -> None:
    tidy = Plan(
        "p-tidy",
        "tidy up",
        (
            ("take coat", "You take the coat."),
            ("put coat in fridge", "You put the coat in the fridge."),
            ("take coat", "You take the coat."),
            ("put coat in wardrobe", "You put the coat in the wardrobe."),
        ),
    )
    hat = Plan("p-hat", "tidy up", (("put hat in hat rack", "You put the hat in the hat rack."),))
    follower = ProcedureFollower([tidy, hat])
    valid = ["take coat", "put coat in fridge", "put coat in wardrobe", "put hat in hat rack"]
    assert _walk(follower, valid) == ["take coat", "put coat in wardrobe", "put hat in hat rack"]
    assert follower.followed() == ["p-tidy", "p-hat"]
    assert "coat belongs in wardrobe" in follower.facts("p-tidy")
    assert "coat belongs in fridge" not in follower.facts("p-tidy")


def test_the_explorers_follow_procedures_and_say_which() -> None:
    explorer = Explorer()
    assert isinstance(explorer, ProcedurePolicy)
    explorer.begin("cook a meal")
    explorer.offer_procedures([RECIPE_PLAN])
    decision = explorer.act("You are in the kitchen.", ["read cookbook", "look around"], "")
    assert decision.action == "read cookbook" and decision.thought.startswith("procedure #1")
    assert explorer.followed_procedures() == ["p-cook"]
    explorer.begin("another game")
    assert explorer.followed_procedures() == []


def test_a_step_that_carried_out_an_old_instruction_needs_the_same_one_here() -> None:
    # The red apple is in both games, but this recipe slices it and does not fry it: the old
    # game's "cook red apple in stove" (its "fry the red apple") does not apply here.
    follower = ProcedureFollower([RECIPE_PLAN])
    follower.observe("Ingredients:\n red apple\nDirections:\n slice the red apple")
    valid = ["take red apple", "cook red apple in stove", "slice red apple"]
    assert _walk(follower, valid) == ["take red apple"]
    follower.observe("Directions:\n fry the red apple")  # now it is told: the step applies
    assert _walk(follower, valid) == ["cook red apple in stove"]


def test_an_opening_is_taken_only_for_a_later_step_whose_objects_are_here() -> None:
    plan = Plan(
        "p-kitchen",
        "tidy up",
        (
            ("open trash can", "You open the trash can. It's empty inside."),
            ("open fridge", "You open the fridge. It's empty inside."),
            ("take rotten apple", "You take the rotten apple."),
            ("put rotten apple in trash can", "You put the rotten apple in the trash can."),
            ("take carrot", "You take the carrot."),
            ("put carrot in fridge", "You put the carrot in the fridge."),
        ),
    )
    follower = ProcedureFollower([plan])
    follower.observe("You are in the kitchen. You see a carrot, a trash can and a fridge.")
    valid = ["open trash can", "open fridge", "take carrot", "put carrot in fridge"]
    # This house has no rotten apple: its trash can is not opened.
    assert _walk(follower, valid) == ["open fridge", "take carrot", "put carrot in fridge"]


def _tidy_plan(pid: str, item: str, place: str, *, success: bool = True) -> Plan:
    return Plan(
        pid,
        "tidy up",
        (
            (f"take {item}", f"You take the {item}."),
            ("move east", "You are in the bedroom."),
            (f"put {item} in {place}", f"You put the {item} in the {place}."),
            ("take sock", "You take the sock."),
            ("put sock in bin", "You put the sock in the bin."),
        ),
        success=success,
    )


def test_failed_plans_are_not_followed_and_their_last_unchecked_step_is_no_fact() -> None:
    failed = _tidy_plan("p-failed", "coat", "wardrobe", success=False)
    follower = ProcedureFollower([failed])
    assert follower.next(["take coat", "put coat in wardrobe"], room="") is None
    assert plan_facts(failed) == ["coat belongs in wardrobe"]  # the sock's put was the last
    assert plan_facts(_tidy_plan("p-won", "coat", "wardrobe")) == [
        "coat belongs in wardrobe",
        "sock belongs in bin",
    ]


def test_a_put_the_plan_took_back_says_where_the_item_does_not_belong() -> None:
    plan = Plan(
        "p-tv",
        "tidy up",
        (
            ("take remote", "You take the remote."),
            ("put remote in TV stand", "You put the remote in the TV stand."),
            ("take remote", "You take the remote."),
            ("put remote in coffee table", "You put the remote in the coffee table."),
            ("look around", "You are in the living room."),
        ),
        success=False,
    )
    assert plan_facts(plan) == [
        "remote belongs in coffee table",
        "remote does not belong in TV stand",  # the plan's own spelling, not lowered
    ]


def test_the_explorer_takes_the_steps_of_several_plans_and_credits_only_those() -> None:
    # Three retrieved procedures from other houses; this game has the mug and the hat, not the
    # lamp. The steps whose objects are here are taken wherever the explorer finds their
    # places; the lamp's procedure gave nothing and is not credited.
    explorer = TwcExplorer()
    explorer.begin("tidy up")
    plans = [
        _tidy_plan("p-lamp", "lamp", "nightstand", success=False),
        _tidy_plan("p-mug", "mug", "sink", success=False),
        _tidy_plan("p-hat", "hat", "hat rack", success=False),
    ]
    explorer.offer_procedures(plans)
    assert explorer.act("You are in the hall.", ["take mug", "move west"], "").action == "take mug"
    explorer.feedback("take mug", "You take the mug.", 0.1)
    inventory = "Inventory:\n  a mug\n"
    assert explorer.followed_procedures() == []  # taking is what the explorer does anyway
    step = explorer.act(
        "You are in the kitchen.", ["put mug in sink", "put mug in shelf"], inventory
    )
    assert step.action == "put mug in sink"
    explorer.feedback(step.action, "You put the mug in the sink.", 0.1)
    assert explorer.followed_procedures() == ["p-mug"]


def test_a_note_wins_over_a_procedure_that_contradicts_it() -> None:
    explorer = CookingExplorer()
    explorer.begin("cook", hints=["roast means cook in oven"])
    roast = Plan(
        "p-roast",
        "cook",
        (("cook carrot in stove", "You roast the carrot with the stove."),),
    )
    explorer.offer_procedures([roast])
    assert explorer.knowledge.cook_devices["roast"] == "oven"


# ---- through the agent flow ------------------------------------------------------------------

INGREDIENTS = ("red apple", "yellow potato", "carrot")


class CookingGame:
    """Read the cookbook, take the seed's ingredient, fry it on the stove. A wrong cook (the
    oven, or the decoy ingredient) ends the game as a failure."""

    def __init__(self, step_budget: int = 8) -> None:
        self.step_budget = step_budget
        self.item = ""
        self.held: set[str] = set()
        self.steps = 0
        self.done = True

    def _obs(self, text: str, *, done: bool = False, success: bool = False) -> Observation:
        actions = ["look around", "read cookbook"]
        actions += [f"take {i}" for i in (self.item, "blue cheese") if i not in self.held]
        for i in sorted(self.held):
            actions += [f"cook {i} in stove", f"cook {i} in oven"]
        return Observation(
            task="Cook a meal from the cookbook.",
            text=text,
            valid_actions=tuple(sorted(actions)),
            done=done,
            success=success,
            score=1.0 if success else 0.0,
        )

    def reset(self, seed: int, fold: str = "test") -> Observation:
        self.item = INGREDIENTS[seed % len(INGREDIENTS)]
        self.held, self.steps, self.done = set(), 0, False
        return self._obs("You are in the kitchen. There is a cookbook here.")

    def step(self, action: str) -> StepResult:
        assert not self.done
        self.steps += 1
        success = fail = False
        if action == "read cookbook":
            text = f"Ingredients:\n {self.item}\nDirections:\n fry the {self.item}\n"
        elif action.startswith("take "):
            self.held.add(action[5:])
            text = f"You take the {action[5:]}."
        elif action == f"cook {self.item} in stove" and self.item in self.held:
            success, text = True, f"You fry the {self.item} with the stove."
        elif action.startswith("cook "):
            fail, text = True, "You burn it. You lost!"
        else:
            text = "You are in the kitchen."
        self.done = success or fail or self.steps >= self.step_budget
        obs = self._obs(text, done=self.done, success=success)
        return StepResult(obs, 1.0 if success else 0.0, self.done, success)

    def gold_path(self) -> list[str]:
        return ["read cookbook", f"take {self.item}", f"cook {self.item} in stove"]

    def close(self) -> None:
        pass


class Cook:
    """Knows the recipe's moves (the stronger agent whose procedure a weaker one reuses)."""

    def begin(self, task: str, hints: Sequence[str] = (), seed: int = 0) -> None:
        item = INGREDIENTS[seed % len(INGREDIENTS)]
        self.todo = ["read cookbook", f"take {item}", f"cook {item} in stove"]

    def act(self, observation: str, valid_actions: Sequence[str], inventory: str) -> Decision:
        return Decision(self.todo.pop(0), "I know this recipe")

    def feedback(self, action: str, observation: str, reward: float) -> None:
        pass


@pytest.fixture
def mem(store: MemoryStore) -> GraphMemory:
    return GraphMemory(store, embedder=HashingEmbedder(384))


def _context(mem: GraphMemory, namespace: str, policy: object) -> AgentContext:
    return AgentContext(
        namespace=namespace,
        memory=mem,
        retrieval=TEXTWORLD_RETRIEVAL,
        env=CookingGame(),
        policy=policy,  # type: ignore[arg-type]
        procedures=PROCEDURE_RETRIEVAL,
    )


def test_the_agent_follows_an_adapted_procedure_and_credits_only_it(
    mem: GraphMemory, namespace: str
) -> None:
    graph = build_agent_graph().compile()
    first = run_task(graph, 0, _context(mem, namespace, Cook()))
    assert first["success"]
    procedures = [
        m
        for m in mem.store.iter_nodes(namespace, kinds=[MemoryKind.PROCEDURE])
        if isinstance(m, Procedure)
    ]
    assert len(procedures) == 2, "proceduralized: the trajectory and the script distilled from it"

    second = run_task(graph, 1, _context(mem, namespace, Explorer()))
    steps = [(s["action"], s["thought"]) for s in second["steps"]]
    assert [a for a, _ in steps] == [
        "read cookbook",
        "take yellow potato",
        "cook yellow potato in stove",
    ]
    assert all(t.startswith("procedure #1") for _, t in steps)
    assert second["success"]
    # Both procedures were retrieved; they share their steps, so one plan was offered and
    # followed, and only that one joined the Episode and was credited (beside it the Episode
    # holds the note the first game's rewarded steps were distilled into, handed as a hint).
    assert len(second["plans"]) == 1
    (followed,) = second["followed"]
    assert followed == second["plans"][0]["memory_id"]
    joined = retrieved_ids(mem.store, namespace, second["episode_id"])
    assert [i for i in joined if mem.get(namespace, i).kind == "Procedure"] == [followed]
    assert all(mem.get(namespace, i).kind == "Note" for i in joined if i != followed)
    assert second["q_updates"] == {followed: pytest.approx(0.55)}
    other = next(p for p in procedures if p.id != followed)
    assert mem.get(namespace, other.id).q == pytest.approx(0.5)
    assert mem.get(namespace, followed).q == pytest.approx(0.55)


def test_without_procedures_in_the_context_none_are_offered(
    mem: GraphMemory, namespace: str
) -> None:
    graph = build_agent_graph().compile()
    run_task(graph, 0, _context(mem, namespace, Cook()))
    context = _context(mem, namespace, Explorer())
    context.procedures = None
    out = run_task(graph, 1, context)
    assert out["plans"] == [] and not out.get("followed")
    assert all(not s["thought"].startswith("procedure") for s in out["steps"])
    assert out["q_updates"] == {}


# ---- the benchmark's memory ablation ---------------------------------------------------------


@pytest.mark.java
def test_bench_memory_ablation_plays_none_beside_each_kind(tmp_path: Path) -> None:
    pytest.importorskip("textworld_express")
    from showcase.envs.jvm import has_java17

    if not has_java17():
        pytest.skip("needs a Java 17 runtime")
    learning = importlib.import_module("bench.learning")
    parser = argparse.ArgumentParser()
    learning.add_arguments(parser)
    args = parser.parse_args(
        ["--game", "cookingworld", "--memory", "procedures", "--quick", "--out", str(tmp_path)]
    )
    (result,) = learning.execute(args, "smoke")["results"]
    rows = {r["condition"]: r for r in result["rows"]}
    assert list(rows) == ["none", "procedures"]
    assert rows["none"]["followed_share"] == 0.0
    assert rows["procedures"]["mean_steps_last_100"] > 0
    assert rows["procedures"]["memories"].get("Note", 0) == 0, "procedures only: no fact notes"
    assert rows["procedures"]["memories"]["Procedure"] > 0
    assert result["setup"]["conditions"]["procedures"]["follow"] is True
