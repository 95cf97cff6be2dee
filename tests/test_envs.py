"""Text-game environments and rule-based agents (showcase.envs).

Pure hint/fact helpers run everywhere; tests that start a JVM are marked ``java`` and skip
when no Java 17 runtime (or the envs extra) is present.
"""

from __future__ import annotations

from collections.abc import Iterator

import game_envs
import pytest

from graphmem.models import Trajectory
from showcase.envs.agents import inventory_items, make_explorer
from showcase.envs.hints import (
    distill_actions,
    extract_facts,
    fact_subject,
    hints_from_procedures,
    parse_hints,
)
from showcase.envs.jvm import InvalidEnvInput
from showcase.envs.runner import run_episode
from showcase.envs.scienceworld import ReplayAdapter, adapt_actions, substitutions
from showcase.envs.textworld import TextWorldEnv

requires_java = game_envs.requires_java(
    "scienceworld", "textworld_express", reason="needs Java 17 and the envs extra"
)


# -- pure helpers --------------------------------------------------------------------------


def test_parse_hints_reads_sequences_and_facts() -> None:
    k = parse_hints(
        [
            "take newspaper; move west; put newspaper in side table",
            "vase belongs in end table",
            "vase does not belong in fridge",
            "avoid: put razor in sink",
            "grill means cook in barbeque",
            "carrot is found in fridge",
            "not a fact at all",
        ]
    )
    assert k.sequences == [["take newspaper", "move west", "put newspaper in side table"]]
    assert k.placements == {"newspaper": ["side table"], "vase": ["end table"]}
    assert ("vase", "fridge") in k.wrong and ("razor", "sink") in k.wrong
    assert k.cook_devices == {"grill": "barbeque"}
    assert k.found_in == {"carrot": ["fridge"]}


def test_wrong_placement_overrides_a_remembered_one() -> None:
    k = parse_hints(
        ["put cap in fridge", "cap does not belong in fridge", "cap belongs in hat rack"]
    )
    assert k.targets("cap") == ["hat rack"]


def test_hints_from_procedures_joins_actions_and_drops_empty() -> None:
    assert hints_from_procedures([["take a", " put a in b "], [], ["", "x"]]) == [
        "take a; put a in b",
        "x",
    ]


def test_extract_facts_and_distill_from_steps() -> None:
    steps = [
        ("take cap", "You take the cap.", 0.17),
        ("put cap in fridge", "You put the cap in the fridge.", -0.17),
        ("take cap", "You take the cap.", 0.17),
        ("look around", "You are in the corridor.", 0.0),
        ("put cap in hat rack", "You put the cap in the hat rack.", 0.17),
        ("cook carrot in oven", "You roast the carrot with the oven.", 0.1),
    ]
    facts = extract_facts(steps)
    assert "cap belongs in hat rack" in facts
    assert "cap does not belong in fridge" in facts
    assert "roast means cook in oven" in facts
    assert distill_actions(steps) == ["take cap", "put cap in hat rack", "cook carrot in oven"]


def test_inventory_items_parses_twx_inventory() -> None:
    text = "Inventory: \n  a knife\n  a chopped red apple\n"
    assert inventory_items(text) == ["knife", "chopped red apple"]
    assert inventory_items("Inventory: \n  Your inventory is currently empty.\n") == []


def test_twc_explorer_prefers_remembered_placement() -> None:
    policy = make_explorer("twc")
    policy.begin("Tidy up.", hints=["hat belongs in hat rack"], seed=0)
    valid = ["put hat in bed", "put hat in hat rack", "move west"]
    decision = policy.act("You are in the bedroom.", valid, "Inventory: \n  a hat\n")
    assert decision.action == "put hat in hat rack"
    blind = make_explorer("twc")
    blind.begin("Tidy up.", seed=0)
    assert blind.act("You are in the bedroom.", valid, "Inventory: \n  a hat\n").action == (
        "put hat in bed"
    )


def test_twc_explorer_asks_once_about_unplaced_items_and_uses_the_answer() -> None:
    policy = make_explorer("twc")
    policy.begin("Tidy up.", hints=["hat belongs in hat rack"], seed=0)
    valid = ["take sock", "take hat", "put mug in bed", "move west"]
    inventory = "Inventory: \n  a mug\n"
    questions = policy.recall_queries("You are in the bedroom.", valid, inventory)
    assert questions == [
        "where does sock belong: sock belongs in",
        "where does mug belong: mug belongs in",
    ], "nothing is asked about the hat: memory already said where it goes"
    assert policy.recall_queries("You are in the bedroom.", valid, inventory) == []
    policy.add_hints(["mug belongs in bed", "sock does not belong in bed", "take a; take b"])
    assert policy.knowledge.targets("mug") == ["bed"]
    assert ("sock", "bed") in policy.knowledge.wrong
    assert not policy.knowledge.sequences, "sequences recalled mid-game are not replayed"


def test_cooking_explorer_asks_about_devices_and_ingredients_after_the_recipe() -> None:
    policy = make_explorer("cookingworld")
    policy.begin("Cook a meal.", hints=["fry means cook in stove"], seed=0)
    assert policy.recall_queries("You are in the kitchen.", ["read cookbook"], "") == []
    assert policy.recall_queries("Ingredients: (the page is torn)", [], "") == []
    recipe = (
        "Ingredients:\n  red apple\n  carrot\n\nDirections:\n  slice the red apple\n"
        "  roast the red apple\n  fry the carrot\n  prepare meal\n"
    )
    assert policy.recall_queries(recipe, [], "") == [
        "roast means cook in which device",
        "where is red apple found: red apple is found in",
        "where is carrot found: carrot is found in",
    ]
    policy.add_hints(["roast means cook in oven", "fry means cook in toaster"])
    assert policy.knowledge.cook_devices == {"fry": "stove", "roast": "oven"}, (
        "what the episode already knew wins over a recalled fact"
    )


def test_fact_subject_names_the_item_or_verb() -> None:
    assert fact_subject("gray coat does not belong in bath tub") == "gray coat"
    assert fact_subject("gray coat belongs in coat hanger") == "gray coat"
    assert fact_subject("fry means cook in stove") == "fry"
    assert fact_subject("block of cheese is found in fridge") == "block of cheese"
    assert fact_subject("take key") is None


def test_sw_substitution_adapts_actions() -> None:
    subs = substitutions(
        "determine if aluminum foil is conductive. place it in the red box.",
        "determine if copper wire is conductive. place it in the yellow box.",
    )
    assert subs == {"aluminum foil": "copper wire", "red": "yellow"}
    assert adapt_actions(["pick up aluminum foil", "move aluminum foil to red box"], subs) == [
        "pick up copper wire",
        "move copper wire to yellow box",
    ]


def test_sw_replay_adapter_walks_to_rooms_and_adapts_objects() -> None:
    policy = ReplayAdapter()
    policy.begin(
        "Boil milk in the kitchen.",
        hints=["Boil water in the kitchen. :: go to hallway; go to kitchen; heat water"],
    )
    hall = "This room is called the hallway. In it, you see: A door to the kitchen (that is closed)"
    assert policy.act(hall, [], "").action == "open door to kitchen"
    policy.feedback("open door to kitchen", "The door is now open.", 0.0)
    assert policy.act("The door is now open.", [], "").action == "go to kitchen"
    policy.feedback("go to kitchen", "You move to the kitchen.", 0.0)
    assert policy.act("You move to the kitchen.", [], "").action == "look around"
    kitchen = "This room is called the kitchen. In it, you see: a pot of milk, a stove"
    assert policy.act(kitchen, [], "").action == "heat milk"


def test_sw_replay_adapter_focuses_only_on_what_is_in_sight_as_a_word() -> None:
    policy = ReplayAdapter()
    policy.begin("Find a(n) non-living thing. First, focus on the thing. Then, move it.")
    room = "This room is called the kitchen. In it, you see: something sticky, a soap bar"
    decision = policy.act(room, ["focus on soap bar", "look around"], "")
    assert decision.action != "focus on thing", "'thing' is only part of 'something'"
    policy.begin("Focus on the soap bar.")
    assert policy.act(room, ["focus on soap bar"], "").action == "focus on soap bar"


def test_sw_replay_adapter_uses_a_stand_in_for_an_absent_thing() -> None:
    task = "Your task is to find a(n) non-living thing. Then, move it to the red box."
    hints = [
        "Your task is to find a(n) non-living thing. Then, move it to the blue box. :: "
        "focus on soap; move soap to blue box",
        "Your task is to find a(n) non-living thing. Then, move it to the green box. :: "
        "focus on chair; move chair to green box",
        "Your task is to find a(n) living thing. Then, move it to the red box. :: "
        "focus on bee; move bee to red box",
    ]
    policy = ReplayAdapter()
    policy.begin(task, hints=hints)
    assert policy.stand_ins == ["soap", "chair"], "only from procedures of this very task"
    room = "This room is called the bedroom. In it, you see: a chair, a bee, a red box"
    assert policy.act(room, [], "").action == "focus on chair"
    policy.feedback("focus on chair", "You focus on the chair.", 0.0)
    assert policy.act("You focus on the chair.", [], "").action == "move chair to red box"


# -- with the JVM --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def twc_env() -> Iterator[TextWorldEnv]:
    env = TextWorldEnv("twc", step_budget=80)
    yield env
    env.close()


@pytest.mark.java
@requires_java
def test_twc_adapter_basics_and_gold_path(twc_env: TextWorldEnv) -> None:
    obs = twc_env.reset(seed=0, fold="test")
    assert "place them in their usual locations" in obs.task
    assert obs.valid_actions and "look around" in obs.valid_actions
    assert obs.score == 0.0 and not obs.done
    gold = twc_env.gold_path()
    result = None
    for action in gold:
        result = twc_env.step(action)
        if result.done:
            break
    assert result is not None and result.success and result.observation.score == 1.0
    with pytest.raises(InvalidEnvInput):
        twc_env.reset(seed=0, fold="nope")


@pytest.mark.java
@requires_java
def test_step_budget_ends_the_episode() -> None:
    from showcase.envs.jvm import EnvError

    env = TextWorldEnv("twc", step_budget=2)
    try:
        env.reset(seed=1)
        assert not env.step("look around").done
        assert env.step("look around").done
        with pytest.raises(EnvError):
            env.step("look around")
    finally:
        env.close()


@pytest.mark.java
@requires_java
def test_explorer_solves_seeds_and_memory_makes_it_faster(twc_env: TextWorldEnv) -> None:
    policy = make_explorer("twc")
    runs = [run_episode(twc_env, policy, seed) for seed in range(6)]
    solved = [r for r in runs if r.success]
    assert solved, "the explorer solved none of seeds 0-5 within 80 steps"
    first = solved[0]
    traj = first.trajectory
    assert isinstance(traj, Trajectory) and traj.success and len(traj.steps) == first.steps
    hints = ["; ".join(first.distilled_actions()), *first.facts()]
    again = run_episode(twc_env, policy, first.seed, hints)
    assert again.success and again.steps < first.steps


@pytest.mark.java
@pytest.mark.slow
@requires_java
def test_cross_seed_facts_help_cookingworld() -> None:
    # Without its common-sense devices, so that what the facts say is what decides.
    with TextWorldEnv("cookingworld", step_budget=30) as env:
        policy = make_explorer("cookingworld", common_sense=False)
        facts: list[str] = []
        for seed in range(1000, 1030):  # memory from other tasks than the ones evaluated
            facts += run_episode(env, policy, seed).facts()
        assert any("means cook in" in f for f in facts)
        seeds = range(8)
        blind = sum(run_episode(env, policy, s).success for s in seeds)
        informed = sum(run_episode(env, policy, s, facts).success for s in seeds)
    assert informed > blind


@pytest.mark.java
@pytest.mark.slow
@requires_java
def test_scienceworld_gold_trajectory_and_replay() -> None:
    from showcase.envs.scienceworld import ScienceWorldEnv, gold_trajectory, procedure_hint

    with ScienceWorldEnv("use-thermometer", step_budget=30, list_valid_actions=False) as env:
        train = env.variations("train")
        test = env.variations("test")
        assert train and test and not set(train) & set(test)
        traj = gold_trajectory(env, train[0], "train")
        assert traj.success and traj.steps
        hint = procedure_hint(traj.task, [s.action for s in traj.steps])
        result = run_episode(env, ReplayAdapter(), test[1], [hint])
        assert result.steps <= 30 and result.trajectory.steps
        assert result.score > 0  # the adapted replay makes progress on an unseen variation
        with pytest.raises(InvalidEnvInput):
            env.reset(train[0], fold="test")
