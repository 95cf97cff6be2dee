"""ScienceWorld replay-and-adapt policy: the baseline's focus and disambiguation, and replays
adapted to the test variation's objects and answers (issues 15 and 20).

The pure tests drive :class:`ReplayAdapter` with scripted observations; the ``java`` ones play
the real simulator (a few seconds each).
"""

from __future__ import annotations

import game_envs
import pytest

from showcase.envs.runner import run_episode
from showcase.envs.scienceworld import (
    ReplayAdapter,
    answer_evidence,
    choose_option,
    conditions,
    contents,
    evidence_choice,
    focused_names,
    names_a_kind,
    point_choice,
    point_of,
    procedure_hint,
    task_object,
    threshold_choice,
    visible_objects,
)

requires_java = game_envs.requires_java("scienceworld", reason="needs Java 17 and the envs extra")

BOIL = (
    "Your task is to boil tin. For compounds without a boiling point, combusting the substance "
    "is also acceptable. First, focus on the substance. Then, take actions that will cause it to "
    "change its state of matter."
)
KITCHEN = (
    "This room is called the kitchen. In it, you see: \n\tthe agent\n\ta substance called air\n"
    "\ta counter. On the counter is: a bowl, a tin cup, a tin.\n\ta sink, which is turned off.\n"
    "You also see:\n\tA door to the hallway (that is open)\n"
)


def _conductivity(substance: str, bulb: str) -> tuple[str, str]:
    task = (
        f"Your task is to determine if {substance} is electrically conductive. The {substance} "
        f"is located around the workshop. First, focus on the {substance}. If it is electrically "
        "conductive, place it in the red box. If it is electrically nonconductive, place it in "
        "the green box."
    )
    room = (
        "This room is called the workshop. In it, you see: \n\tthe agent\n\tA "
        f"{substance}\n\ta green box (containing nothing)\n\ta red box (containing nothing)\n"
        f"\ta red light bulb, which is {bulb}\n\ta table. On the table is: a battery, a black "
        "wire, a red wire, a yellow wire.\nYou also see:\n\tA door to the hallway (that is open)\n"
    )
    return task, room


# ---- pure helpers -----------------------------------------------------------------------------


def test_task_object_reads_the_first_sentence() -> None:
    assert task_object(BOIL) == "tin"
    assert task_object("Your task is to change the state of matter of lead. First, ...") == "lead"
    assert task_object("Your task is to measure the melting point of tin, which is ...") == "tin"
    # A kind to find, not a thing called so: no object here is named "animal".
    assert task_object("Your task is to find a(n) animal. First, focus on the thing.") is None


FIND = (
    "Your task is to find a(n) non-living thing. First, focus on the thing. Then, move it to the "
    "orange box in the living room."
)
LIVING_ROOM = (
    "This room is called the living room. In it, you see: \n\tthe agent\n\ta substance called "
    "air\n\ta chair. On the chair is: nothing.\n\ta finger painting\n\ta orange box (containing "
    "nothing)\n\ta table. On the table is: nothing.\nYou also see:\n\tA door to the hallway "
    "(that is open)\n"
)


def _play(agent: ReplayAdapter, rooms: list[str], steps: int) -> list[str]:
    actions = []
    for i in range(steps):
        room = rooms[min(i, len(rooms) - 1)]
        decision = agent.act(room, (), "In your inventory: ")
        actions.append(decision.action)
        agent.feedback(decision.action, room, 0.0)
    return actions


def test_a_find_task_replays_the_remembered_focus_instead_of_searching_for_the_kind() -> None:
    """ "Focus on the thing" in a find task means the thing found, not an object called
    "non-living thing": the replay focuses on the remembered object once it is in sight."""
    hint = (
        "Your task is to find a(n) non-living thing. First, focus on the thing. Then, move it to "
        "the orange box in the kitchen. :: open door to kitchen; go to kitchen; look around; "
        "focus on painting; move painting to orange box"
    )
    agent = ReplayAdapter()
    agent.begin(FIND, [hint])
    actions = _play(agent, [LIVING_ROOM], 4)
    assert "focus on painting" in actions, actions
    assert actions.index("focus on painting") < actions.index("move painting to orange box")
    moved = actions.index("move painting to orange box")
    assert not any(a.startswith("go to") for a in actions[:moved]), actions


def test_a_find_task_names_a_kind_and_focus_targets_take_the_simulators_names() -> None:
    assert names_a_kind(FIND)
    assert not names_a_kind(BOIL)  # "the substance" is the task's own tin
    pairs = [
        ("look around", "This outside location is called the outside. ..."),
        ("focus on dove", "You focus on the dove egg."),
        ("pick up dove", "You move the dove egg to the inventory."),
        ("move egg dove egg in inventory to red box", "You move the dove egg to the red box."),
    ]
    assert focused_names(pairs) == [
        "look around",
        "focus on dove egg",
        "pick up dove egg",
        "move egg dove egg in inventory to red box",  # already the dove egg: left alone
    ]
    pot = [
        ("focus on adult pea plant", "You focus on the pea plant."),
        ("pick up flower pot 7", ""),
    ]
    assert focused_names(pot) == ["focus on pea plant", "pick up flower pot 7"]


GREENHOUSE = (
    "This room is called the greenhouse. In it, you see: \n\tthe agent\n\ta substance called air"
    "\n\ta flower pot 1 (containing nothing)\n\ta flower pot 3 (containing a peach tree in the "
    "adult stage, soil)\n\ta flower pot 7 (containing nothing)\n\ta jug (containing nothing)\n"
    "You also see:\n\tA door to the hallway (that is open)\n"
)
FIND_PLANT = (
    "Your task is to find a(n) plant. First, focus on the thing. Then, move it to the orange box "
    "in the living room."
)


def test_contents_lists_what_the_containers_hold() -> None:
    assert contents(GREENHOUSE) == {"peach tree": "flower pot 3", "soil": "flower pot 3"}


def test_a_kind_task_stands_in_another_of_the_kind_and_carries_it_in_its_own_pot() -> None:
    """The remembered run focused on a cherry tree and carried it in flower pot 7; here pot 7
    is empty and a peach tree grows in pot 3: any plant will do, so the replay focuses on the
    peach tree (a tree, as the remembered one was) and picks up pot 3 (a focus on the missing
    cherry tree would be skipped, and pot 7 carries nothing)."""
    hint = (
        "Your task is to find a(n) plant. First, focus on the thing. Then, move it to the orange "
        "box in the kitchen. :: look around; focus on cherry tree; pick up flower pot 7; "
        "go to kitchen; move flower pot 7 containing cherry tree and soil in inventory to "
        "orange box"
    )
    agent = ReplayAdapter()
    agent.begin(FIND_PLANT, [hint])
    actions = _play(agent, [GREENHOUSE], 3)
    assert actions[1:] == ["focus on peach tree", "pick up flower pot 3"], actions
    assert agent.plan[-1] == (
        "move flower pot 3 containing peach tree and soil in inventory to orange box"
    )


def test_a_remembered_thing_found_here_is_carried_in_the_pot_it_grows_in_here() -> None:
    """The peach tree the remembered run focused on is here too, but in pot 3, not pot 7."""
    hint = (
        "Your task is to find a(n) plant. First, focus on the thing. Then, move it to the orange "
        "box in the kitchen. :: look around; focus on peach tree; pick up flower pot 7; "
        "go to kitchen; move flower pot 7 containing peach tree and soil in inventory to "
        "orange box"
    )
    agent = ReplayAdapter()
    agent.begin(FIND_PLANT, [hint])
    actions = _play(agent, [GREENHOUSE], 3)
    assert actions[1:] == ["focus on peach tree", "pick up flower pot 3"], actions


def test_a_kind_stand_in_is_never_a_thing_of_another_kind() -> None:
    """Nothing here ends like what remembered runs focused on (a cup, a counter): the focus is
    skipped rather than given to a chair, which might be wrong and fail the task."""
    hint = (
        "Your task is to find a(n) non-living thing. First, focus on the thing. Then, move it to "
        "the orange box in the kitchen. :: look around; focus on glass cup; "
        "move glass cup to orange box"
    )
    agent = ReplayAdapter()
    agent.begin(FIND, [hint])
    actions = _play(agent, [LIVING_ROOM], 6)
    assert not any(a.startswith("focus on") for a in actions), actions


def test_disambiguation_chooses_the_matching_option_not_zero() -> None:
    prompt = (
        "Ambiguous request: Please enter the number for the action you intended (or blank to "
        "cancel):\n0:\tfocus on water (in toilet, in bathroom)\n1:\tfocus on air (in kitchen)\n"
        "2:\tfocus on tin (in counter, in kitchen)\n3:\tfocus on tin cup (in counter, in kitchen)"
    )
    assert choose_option(prompt, "focus on tin", "kitchen") == "2"
    assert choose_option(prompt, "focus on air", "kitchen") == "1"


def test_conditions_threshold_and_evidence_decide_answers() -> None:
    task = (
        "Your task is to measure the temperature of unknown substance B. If the unknown substance "
        "B temperature is above 200.0 degrees celsius, place it in the yellow box. If the unknown "
        "substance B temperature is below 200.0 degrees celsius, place it in the purple box."
    )
    conds = conditions(task)
    assert [answer for _, answer in conds] == ["yellow box", "purple box"]
    assert threshold_choice(conds, ["the thermometer measures a temperature of 36 degrees"]) == (
        "purple box"
    )
    assert threshold_choice(conds, ["measures a temperature of 250 degrees celsius"]) == (
        "yellow box"
    )
    assert threshold_choice(conds, ["nothing measured"]) is None

    conduct = conditions(_conductivity("tin", "off")[0])
    seen = [(conduct[0][0], "is on | on a")]  # memory only ever saw the bulb light up
    assert evidence_choice(conduct, seen, {"is on", "on a"}) == "red box"
    assert evidence_choice(conduct, seen, set()) == "green box"  # its sign absent: the other
    assert evidence_choice(conduct, [], {"is on"}) is None


def test_visible_objects_lists_room_contents() -> None:
    _, room = _conductivity("tin", "off")
    objects = visible_objects(room)
    assert {"red light bulb", "black wire", "red wire", "yellow wire", "green box"} <= set(objects)


# ---- the no-memory baseline -----------------------------------------------------------------


def test_baseline_focuses_on_the_task_substance_not_the_word_substance() -> None:
    agent = ReplayAdapter()
    agent.begin(BOIL)
    decision = agent.act(KITCHEN, ("focus on substance", "focus on tin"), "In your inventory: ")
    assert decision.action == "focus on tin"
    prompt = (
        "Ambiguous request: Please enter the number for the action you intended (or blank to "
        "cancel):\n0:\tfocus on tin cup (in counter, in kitchen)\n1:\tfocus on tin (in counter, "
        "in kitchen)"
    )
    assert agent.act(prompt, (), "").action == "1"


# ---- replays adapted to the test variation ----------------------------------------------------


def test_replay_substitutes_objects_and_decides_the_answer_anew() -> None:
    train_task, train_room = _conductivity("aluminum foil", "off")
    lit = train_room.replace("which is off", "which is on")
    actions = [
        "focus on aluminum foil",
        "connect battery anode to blue wire terminal 1",
        "connect aluminum foil terminal 1 to blue wire terminal 2",
        "wait1",
        "look around",
        "move aluminum foil to red box",
    ]
    observations = ["", "", "", "", lit, ""]
    steps = [(a, o) for a, o in zip(actions, [train_room, *observations[1:]], strict=True)]
    steps.insert(0, ("look around", train_room))
    evidence = answer_evidence(train_task, steps)
    assert "is on" in evidence.split(" | ")
    hint = procedure_hint(train_task, actions, evidence)

    test_task, room = _conductivity("sodium chloride", "off")
    agent = ReplayAdapter()
    agent.begin(test_task, [hint])
    taken = []
    observation, inventory = room, "In your inventory: "
    for _ in range(8):
        action = agent.act(observation, (), inventory).action
        taken.append(action)
        if action.startswith("move "):
            break
        observation = room if action == "look around" else "ok"
        agent.feedback(action, observation, 0.0)
    assert taken[0] == "focus on sodium chloride"  # the test variation's substance
    # no blue wire here: a wire of the room that the plan does not use stands in for it
    assert taken[1] == "connect battery anode to black wire terminal 1"
    assert "connect sodium chloride terminal 1 to black wire terminal 2" in taken
    # the bulb stayed off: not the remembered red box
    assert taken[-1] == "move sodium chloride to green box"


def test_replay_never_focuses_on_the_remembered_variations_substance() -> None:
    water = BOIL.replace("boil tin", "boil water")
    hint = procedure_hint(
        water,
        [
            "pick up metal pot",
            "move metal pot to sink",
            "activate sink",
            "focus on substance in metal pot",
            "move metal pot to stove",
            "activate stove",
        ],
    )
    kitchen = KITCHEN.replace("a bowl,", "a bowl, a metal pot,").replace(
        "turned off.\n", "turned off.\n\ta stove, which is turned off.\n"
    )
    agent = ReplayAdapter()
    agent.begin(BOIL, [hint])
    taken = []
    for _ in range(8):
        action = agent.act(kitchen, (), "In your inventory: ").action
        taken.append(action)
        agent.feedback(action, "ok", 0.0)
    assert taken[0] == "focus on tin"  # this variation's substance, found before the replay
    assert [a for a in taken if a.startswith("focus on ")] == ["focus on tin"]
    assert "move metal pot to stove" in taken  # the rest of the remembered procedure is replayed


def test_a_focus_the_simulator_did_not_take_stops_the_later_ordered_focuses() -> None:
    task = (
        "Your task is to focus on the life stages of the orange plant, starting from earliest "
        "to latest. The plants are located outside."
    )
    outside = (
        "This outside location is called the outside. Here you see: \n\tthe agent\n"
        "\ta orange seed\n\ta orange tree\n"
    )
    hint = procedure_hint(task, ["focus on orange seed", "focus on orange tree"])
    agent = ReplayAdapter()
    agent.begin(task, [hint])
    first = agent.act(outside, (), "In your inventory: ").action
    assert first == "focus on orange seed"
    agent.feedback(first, "No known action matches that input.", 0.0)  # not taken
    later = [agent.act(outside, (), "In your inventory: ").action for _ in range(3)]
    assert "focus on orange tree" not in later  # it would be the first answer, out of order


def test_a_remembered_answer_that_this_task_does_not_offer_is_never_focused_on() -> None:
    task, room = _conductivity("tin", "off")
    room = room.replace("\ta green box", "\tan orange box (containing nothing)\n\ta green box")
    # Remembered from a run of the same description whose answer boxes were other ones.
    hint = procedure_hint(task, ["focus on tin", "focus on orange box"])
    agent = ReplayAdapter()
    agent.begin(task, [hint])
    taken = []
    for _ in range(4):
        action = agent.act(room, (), "In your inventory: ").action
        taken.append(action)
        agent.feedback(action, "ok", 0.0)
    assert taken[0] == "focus on tin"
    assert not [a for a in taken if "orange box" in a]


def test_after_a_skipped_focus_the_later_ordered_focuses_are_not_replayed() -> None:
    task = (
        "Your task is to focus on the 4 life stages of the frog, starting from earliest to latest."
    )
    outside = (
        "This outside location is called the outside. Here you see: \n\tthe agent\n"
        "\ta tadpole frog\n\ta adult frog\n"
    )
    hint = procedure_hint(
        task, ["focus on egg frog", "focus on tadpole frog", "focus on adult frog"]
    )
    agent = ReplayAdapter()
    agent.begin(task, [hint])
    taken = []
    for _ in range(6):
        action = agent.act(outside, (), "In your inventory: ").action
        taken.append(action)
        agent.feedback(action, outside if action == "look around" else "ok", 0.0)
    # No egg anywhere: focusing on the tadpole first would answer out of order and fail the task.
    assert not [a for a in taken if a.startswith("focus on ")]


# ---- the real simulator -------------------------------------------------------------------------


@pytest.mark.java
@pytest.mark.slow
@requires_java
def test_boil_baseline_reaches_the_substance_in_the_simulator() -> None:
    from showcase.envs.scienceworld import ScienceWorldEnv

    with ScienceWorldEnv("boil", step_budget=12) as env:
        result = run_episode(env, ReplayAdapter(), env.variations("test")[0], [])
    actions = result.actions
    assert "focus on substance" not in actions and "0" not in actions
    assert result.score >= 0 and result.steps == 12  # no longer failed in 2 steps


@pytest.mark.java
@pytest.mark.slow
@requires_java
def test_conductivity_replay_answers_for_the_test_substance() -> None:
    from showcase.envs.scienceworld import ScienceWorldEnv, gold_trajectory

    with ScienceWorldEnv("test-conductivity", step_budget=500, list_valid_actions=False) as env:
        hints = []
        for v in env.variations("train")[:3]:
            traj = gold_trajectory(env, v, "train")
            pairs = [(s.action, s.observation) for s in traj.steps]
            actions = [s.action for s in traj.steps]
            hints.append(procedure_hint(traj.task, actions, answer_evidence(traj.task, pairs)))
        env.step_budget, env.list_valid_actions = 30, True
        result = run_episode(env, ReplayAdapter(), env.variations("test")[0], hints)
    # The training variations were conductive (red box); this one is not.
    assert result.success, result.actions
    assert result.actions[-1].endswith("to green box")


MELT = (
    "Your task is to measure the melting point of tin, which is located around the kitchen. "
    "First, focus on the thermometer. Next, focus on the tin. If the melting point of tin is "
    "above 150.0 degrees celsius, focus on the orange box. If the melting point of tin is below "
    "150.0 degrees celsius, focus on the yellow box. The boxes are located around the kitchen."
)


def test_a_melting_point_is_decided_by_the_substance_state_not_the_last_reading() -> None:
    conds = conditions(MELT)
    assert point_of(MELT) == ("melting", "tin")
    solid, liquid = "substance in metal pot", "liquid tin"
    # At room temperature, solid: nothing decided (the old rule answered "below" from 27 °C).
    assert point_choice(conds, [(solid, 27.0)], "liquid") is None
    assert threshold_choice(conds, ["a temperature of 27 degrees celsius"]) == "yellow box"
    # Still solid above the threshold: the point is above it.
    assert point_choice(conds, [(solid, 27.0), (solid, 180.0)], "liquid") == "orange box"
    # Melted at a reading below the threshold: below it.
    assert point_choice(conds, [(solid, 27.0), (liquid, 90.0)], "liquid") == "yellow box"
    # Melted between 100 (solid) and 260 (liquid): the midpoint, 180, is above 150.
    assert point_choice(conds, [(solid, 100.0), (liquid, 260.0)], "liquid") == "orange box"
    assert point_of("Your task is to boil lead.") is None


def test_replay_measures_on_until_the_melting_point_decides_the_answer() -> None:
    remembered = MELT.replace("tin", "chocolate")
    hint = procedure_hint(
        remembered,
        [
            "pick up thermometer",
            "use thermometer in inventory on substance in metal pot",
            "focus on yellow box",
        ],
    )
    agent = ReplayAdapter()
    agent.begin(MELT, [hint])
    room = (
        "This room is called the foundry. In it, you see: a thermometer, a metal pot, "
        "an orange box, a yellow box."
    )
    inventory = "In your inventory: a thermometer"
    readings = iter([27, 60, 120, 170])
    taken: list[str] = []
    observation = room
    for _ in range(20):
        action = agent.act(observation, (), inventory).action
        taken.append(action)
        if action.endswith(" box"):
            break
        if action.startswith("use thermometer"):
            observation = f"the thermometer measures a temperature of {next(readings)} degrees"
        elif action == "look around":
            observation = room
        else:
            observation = "ok"
        agent.feedback(action, observation, 0.0)
    measured = [a for a in taken if a.startswith("use thermometer")]
    # The remembered single reading (27 °C, solid) decides nothing: heat and measure on,
    # waiting between readings, until the solid tin reads above 150 °C.
    assert len(measured) == 4 and "wait1" in taken
    assert all(a == "use thermometer in inventory on substance in metal pot" for a in measured)
    assert taken[-1] == "focus on orange box"


@pytest.mark.java
@pytest.mark.slow
@requires_java
def test_find_animal_replay_stands_in_an_animal_of_the_test_variation() -> None:
    """Train runs focused on a dove egg outside; the test variation has no dove, only a frog
    egg, a turtle egg and a baby wolf, and its box is in another room. The replay walks to
    where the remembered runs found their animal, focuses on one of the same kind, carries it
    (it hatches on the way) and solves the task."""
    from showcase.envs.scienceworld import ScienceWorldEnv, gold_trajectory

    with ScienceWorldEnv("find-animal", step_budget=60, list_valid_actions=False) as env:
        hints = []
        for v in env.variations("train")[:5]:
            traj = gold_trajectory(env, v, "train")
            pairs = [(s.action, s.observation) for s in traj.steps]
            hints.append(procedure_hint(traj.task, focused_names(pairs)))
        result = run_episode(env, ReplayAdapter(), env.variations("test")[0], hints)
        baseline = run_episode(env, ReplayAdapter(), env.variations("test")[0], [])
    assert result.success, result.actions
    assert baseline.score < result.score


OUTSIDE = (
    "This outside location is called the outside. Here you see: \n\tthe agent\n\ta substance "
    "called air\n\t{animal}\n\ta self watering flower pot 1 (containing a lemon tree in the "
    "seedling stage, soil)\n\ta self watering flower pot 4 (containing a lemon seed, soil)\n"
    "\ta self watering flower pot 5 (containing a lemon tree in the {stage} stage, soil)\n"
    "You also see:\n\tA door to the kitchen (that is open)\n"
)
STAGES = (
    "Your task is to focus on the life stages of the lemon plant, starting from earliest to "
    "latest. The plants are located outside."
)


def test_stage_focuses_go_to_the_pots_that_hold_those_stages_here() -> None:
    """The remembered run's seed grew in pot 6 and its seedling in pot 8; here the seed is in
    pot 4 (and a seed is named by its own name) and the seedling in pot 1."""
    hint = (
        "Your task is to focus on the life stages of the apple plant, starting from earliest to "
        "latest. The plants are located outside. :: look around; focus on plant in the seed "
        "stage in self watering flower pot 6; look around; focus on apple tree in the seedling "
        "stage in self watering flower pot 8"
    )
    agent = ReplayAdapter()
    agent.begin(STAGES, [hint])
    room = OUTSIDE.format(animal="a dove egg", stage="adult")
    actions = _play(agent, [room], 4)
    assert actions == [
        "look around",
        "focus on lemon seed in the seed stage in self watering flower pot 4",
        "look around",
        "focus on lemon tree in the seedling stage in self watering flower pot 1",
    ]


def test_a_stage_not_reached_yet_is_waited_for_not_searched_elsewhere() -> None:
    hint = (
        "Your task is to focus on the life stages of the apple plant, starting from earliest to "
        "latest. The plants are located outside. :: look around; focus on apple tree in the "
        "reproducing stage in self watering flower pot 5"
    )
    agent = ReplayAdapter()
    agent.begin(STAGES, [hint])
    young = OUTSIDE.format(animal="a dove egg", stage="adult")
    grown = OUTSIDE.format(animal="a dove egg", stage="reproducing")
    actions = _play(agent, [young, young, young, grown, grown], 5)
    focus = "focus on lemon tree in the reproducing stage in self watering flower pot 5"
    assert focus in actions, actions
    waited = actions[1 : actions.index(focus)]
    assert "wait1" in waited and set(waited) <= {"wait1", "look around"}, actions


def test_a_thing_named_in_the_simulators_word_order_is_in_sight_and_waited_for() -> None:
    """ "egg dove in outside" is the dove egg listed here; after the plan's waits the hatchling
    is not there yet, so the replay waits and looks again instead of walking away."""
    task = (
        "Your task is to focus on the 4 life stages of the dove, starting from earliest to latest."
    )
    hint = (
        "Your task is to focus on the 4 life stages of the turtle, starting from earliest to "
        "latest. :: look around; focus on egg turtle in outside; wait1; wait1; "
        "focus on hatchling turtle in outside"
    )
    agent = ReplayAdapter()
    agent.begin(task, [hint])
    egg = OUTSIDE.format(animal="a dove egg", stage="adult")
    hatched = OUTSIDE.format(animal="a hatchling dove", stage="adult")
    actions = _play(agent, [egg, egg, egg, egg, egg, egg, hatched, hatched], 8)
    assert actions[:4] == ["look around", "focus on egg dove in outside", "wait1", "wait1"]
    focus = "focus on hatchling dove in outside"
    assert focus in actions[6:], actions
    waited = actions[4 : actions.index(focus)]
    assert "wait1" in waited and set(waited) <= {"wait1", "look around"}, actions
