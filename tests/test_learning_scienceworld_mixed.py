"""The mixed ScienceWorld stream (``python -m bench.learning_scienceworld --stream mixed``): its
plan, its hand-over budget, its pairing, and a smoke run on the simulator (Java 17).

The reported run is ``... --stream mixed --handover 5 --heldout``; these tests use the
dev-fold tuning variations only (bench/protocol.py).
"""

from __future__ import annotations

import argparse
import importlib
import json
from pathlib import Path

import game_envs
import pytest

sw = importlib.import_module("bench.learning_scienceworld")
mixed = importlib.import_module("bench.learning_scienceworld_mixed")

requires_java = game_envs.requires_java("scienceworld", reason="needs Java 17 and the envs extra")


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    sw.add_arguments(parser)
    return parser.parse_args([*argv, "--no-progress"])


def test_plan_interleaves_every_type_once_per_round_in_a_fixed_order() -> None:
    tasks = ["a", "b", "c", "d"]
    plan = mixed.mixed_plan(tasks, 5)
    assert plan == mixed.mixed_plan(tasks, 5)  # the same stream for every condition
    for i in range(5):
        assert sorted(plan[4 * i : 4 * i + 4]) == [(t, i) for t in tasks]
    assert len({tuple(t for t, _ in plan[4 * i : 4 * i + 4]) for i in range(5)}) > 1


def test_unknown_condition_and_bad_handover_are_refused() -> None:
    with pytest.raises(SystemExit, match="unknown condition"):
        mixed.run(_args("--stream", "mixed", "--conditions", "none,memory"), "t")
    with pytest.raises(SystemExit, match="--handover"):
        mixed.run(_args("--stream", "mixed", "--handover", "0"), "t")


def test_flat_topk_hands_over_the_k_nearest_keys_only() -> None:
    from graphmem.embedding import HashingEmbedder
    from graphmem.models import Trajectory, TrajectoryStep

    flat = mixed.FlatTopK(HashingEmbedder(), 2)
    for task in ("boil water", "boil milk", "find a plant", "find an animal"):
        step = TrajectoryStep(action=f"do {task}", observation="ok")
        flat.learn(Trajectory(task=task, steps=[step], reward=1.0, success=True), "gold")
    flat.learn(Trajectory(task="failed", steps=[], reward=0.0, success=False), "own")
    assert flat.size() == 4  # a failed run is not kept
    got = flat.start("find a plant")
    assert len(got) == 2 and got[0].description == "find a plant"
    assert len(mixed.PlainMemory.start(flat, "x")) == 4  # plain: everything


@pytest.mark.java
@requires_java
def test_mixed_smoke_pairs_episodes_and_keeps_the_handover(tmp_path: Path) -> None:
    args = _args("--stream", "mixed", "--quick", "--handover", "2", "--out", str(tmp_path))
    out = mixed.run(args, "smoke")
    stem = "learning_scienceworld_mixed_k2_dev"
    assert {Path(p).name for p in out["files"]} == {f"{stem}.json", f"{stem}.md"}
    saved = json.loads((tmp_path / f"{stem}.json").read_text(encoding="utf-8"))
    assert saved["setup"]["heldout"] is False and saved["setup"]["fold"] == "dev"
    plan = [(t, v) for t, _, v in saved["plan"]]
    assert len(plan) == 2 and len({t for t, _ in plan}) == 2
    assert set(saved["episodes"]) == set(mixed.CONDITIONS)
    # Paired: every condition played the same episodes in the same order.
    for name, episodes in saved["episodes"].items():
        assert [(e["task"], e["variation"]) for e in episodes] == plan, name
        assert all(1 <= e["steps"] <= 8 for e in episodes)
    # The hand-over budget: no condition but plain ever sees more than K = 2.
    for name, episodes in saved["episodes"].items():
        handed = max(e["handed"] for e in episodes)
        if name == "none":
            assert handed == 0
        elif name == "plain":
            assert handed > 2  # 4 gold procedures, all handed over
        else:
            assert handed == 2, name
    rows = {r["condition"]: r for r in saved["results"] if r["task"] == "all"}
    assert rows["flat-topk"]["memory_items"] >= 4 and rows["none"]["memory_items"] == 0
    markdown = (tmp_path / f"{stem}.md").read_text(encoding="utf-8")
    assert "two-phase vs flat-topk" in markdown and "## Targets" in markdown


@pytest.mark.java
@requires_java
def test_a_memory_over_the_budget_is_caught() -> None:
    from graphmem.embedding import HashingEmbedder
    from showcase.envs.scienceworld import gold_trajectory

    envs = mixed.open_envs(["find-plant"], 3)
    try:
        env = envs["find-plant"]
        env.list_valid_actions = False
        env.step_budget = 500
        gold = [gold_trajectory(env, v, "train") for v in env.variations("train")[:3]]
        env.step_budget = 3
        env.list_valid_actions = True
        plan = [("find-plant", 0, env.variations("dev")[0])]
        kept = mixed.play_stream(
            "flat-topk", plan, gold, envs, fold="dev", handover=1, embedder=HashingEmbedder()
        )
        greedy = mixed.play_stream(
            "flat-topk",
            plan,
            gold,
            envs,
            fold="dev",
            handover=1,
            embedder=HashingEmbedder(),
            memory=mixed.PlainMemory(),  # ignores K: the budget check above must catch it
        )
    finally:
        mixed.close_envs(envs)
    assert max(e["handed"] for e in kept.episodes) == 1
    assert max(e["handed"] for e in greedy.episodes) == 3
