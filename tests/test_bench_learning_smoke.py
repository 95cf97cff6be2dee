"""Tiny runs of the learning benchmarks, so they cannot rot: real code paths, a few episodes.

The full runs are ``python -m bench.learning --grid``, ``python -m bench.learning_lookalike``
and ``python -m bench.learning_scienceworld``. The text-game ones need Java 17 (marker ``java``).
"""

from __future__ import annotations

import argparse
import importlib
import json
from pathlib import Path
from typing import Any

import game_envs
import pytest

learning = importlib.import_module("bench.learning")
lookalike = importlib.import_module("bench.learning_lookalike")
scienceworld = importlib.import_module("bench.learning_scienceworld")

requires_java = game_envs.requires_java(
    "scienceworld", "textworld_express", reason="needs Java 17 and the envs extra"
)


def _args(module: Any, *argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    module.add_arguments(parser)
    return parser.parse_args([*argv, "--no-progress"])


def _saved(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


# ---- pure helpers ----------------------------------------------------------------------------


def test_script_actions_reads_numbered_instructions_only() -> None:
    script = "1. take newspaper\n2. move west (repeat as needed)\nNote: it ended badly."
    assert learning.script_actions(script) == ["take newspaper", "move west"]


def test_final_placements_drop_puts_that_were_undone() -> None:
    actions = ["put mug in fridge", "take mug", "put mug in cupboard", "put pen in desk"]
    assert learning.final_placements(actions) == [
        "mug belongs in cupboard",
        "pen belongs in desk",
    ]


# ---- look-alike stream (no Java) --------------------------------------------------------------


def test_lookalike_smoke_writes_tables_and_plot(tmp_path: Path) -> None:
    args = _args(
        lookalike,
        *("--episodes", "12", "--seeds", "1", "--families", "3", "--bad", "2"),
        *("--embedder", "hashing", "--out", str(tmp_path)),
    )
    out = lookalike.execute(args, "smoke")

    names = {Path(p).name for p in out["files"]}
    assert names == {"learning_lookalike.json", "learning_lookalike.md", "learning_lookalike.png"}
    saved = _saved(tmp_path / "learning_lookalike.json")
    rows = {r["condition"]: r for r in saved["results"]}
    assert set(rows) == set(lookalike.CONDITIONS)
    for row in rows.values():
        assert 0.0 <= row["success"] <= 1.0
        assert len(row["per_seed_success"]) == 1
        assert 0 < row["mean_steps"] <= saved["setup"]["params"]["budget"]
    markdown = (tmp_path / "learning_lookalike.md").read_text(encoding="utf-8")
    assert "Two-phase (λ=0.5, Q0=0.5) minus" in markdown and "load average at start" in markdown
    assert {c["b"] for c in saved["comparisons"]} == {"similarity", "flat-topk", "plain", "none"}


def test_lookalike_conditions_play_the_same_tasks_and_baselines_use_memory() -> None:
    # Paired: every condition meets the same chores in the same order, whatever its outcomes
    # (outcome-dependent step counts draw from their own stream). plain reads every procedure
    # and follows the steps most of a chore's procedures give: once a success is built beside
    # the good one, it follows the good steps.
    params = lookalike.Params(episodes=30, families=3, bad=2)
    tasks = {}
    for name in ("none", "plain", "flat-topk", "two-phase"):
        records = lookalike.run_stream(lookalike.CONDITIONS[name], params, 0, _hashing(), None)
        tasks[name] = [r.task for r in records]
        if name == "plain":
            assert sum(r.success for r in records[-10:]) >= 9
    assert len({tuple(t) for t in tasks.values()}) == 1
    flat = lookalike.FlatProcedures(_hashing())
    flat.add("descale the kettle today", ["a"])
    flat.add("reset the router on floor 2", ["b"])
    flat.add("please reset the router", ["b"])
    flat.add("reset the router now", ["c"])
    assert flat.nearest("could you descale the kettle") == ["a"]
    assert flat.most_given("reset", "router") == ["b"]


def test_lookalike_stream_goes_through_graphmem(tmp_path: Path) -> None:
    # Per chore one good and `bad` stale procedures are built (proceduralized: script + its
    # trajectory); every task retrieves (an Episode) and the hit's Q moves from Q0.
    from graphmem.models import Episode, MemoryKind, Procedure
    from graphmem.stores.embedded import EmbeddedStore

    params = lookalike.Params(episodes=4, families=2, bad=2, frozen=True)
    cond = lookalike.CONDITIONS["two-phase"]
    records = lookalike.run_stream(cond, params, 0, _hashing(), tmp_path / "store")

    assert len(records) == 4
    with EmbeddedStore.open(tmp_path / "store") as store:
        procs = [m for m in store.iter_nodes("lookalike", [MemoryKind.PROCEDURE])]
        episodes = [m for m in store.iter_nodes("lookalike", [MemoryKind.EPISODE])]
    assert len(procs) == 2 * (1 + 2) * 2
    assert len(episodes) == 4 and all(isinstance(e, Episode) for e in episodes)
    moved = [p for p in procs if isinstance(p, Procedure) and p.q != cond.q0]
    assert moved, "finish_episode credited the retrieved procedures"
    assert lookalike.good_steps(0) not in [lookalike.stale_steps(0, v) for v in range(2)]


def _hashing() -> Any:
    from graphmem.embedding import HashingEmbedder

    return HashingEmbedder()


# ---- text games (Java 17) -------------------------------------------------------------------


@pytest.mark.java
@requires_java
def test_textworld_smoke_writes_tables_and_plot(tmp_path: Path) -> None:
    args = _args(learning, "--quick", "--conditions", "none,two-phase", "--out", str(tmp_path))
    out = learning.execute(args, "smoke")

    names = {Path(p).name for p in out["files"]}
    assert names == {"learning_twc_b30.json", "learning_twc_b30.md", "learning_twc_b30.png"}
    saved = _saved(tmp_path / "learning_twc_b30.json")
    rows = {r["condition"]: r for r in saved["results"]}
    assert set(rows) == {"none", "two-phase"}
    for name, episodes in saved["episodes"].items():
        assert len(episodes) == 6 + 2, name
        assert [e["seed"] for e in episodes] == [0, 1, 2, 3, 4, 5, 0, 1]
        assert [e["repeat"] for e in episodes] == [False] * 6 + [True] * 2
        assert all(1 <= e["steps"] <= 30 and e["llm_calls"] == 0 for e in episodes)
    assert len(rows["two-phase"]["success_per_block"]) == 2  # blocks of 3
    assert not any(rows["none"]["memories"].values())
    # Credit by use: an Episode for each game that acted on a memory (not every game did).
    assert 1 <= rows["two-phase"]["memories"].get("Episode", 0) <= 8
    assert rows["two-phase"]["memories"].get("Note", 0) >= 1  # facts were learned
    markdown = (tmp_path / "learning_twc_b30.md").read_text(encoding="utf-8")
    assert "## Success per block of 3" in markdown


@pytest.mark.java
@requires_java
def test_textworld_llm_policy_calls_are_counted(tmp_path: Path) -> None:
    # A fake chat model stands in for GRAPHMEM_LLM_*: one call per step is counted.
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    from graphmem.embedding import HashingEmbedder
    from showcase.envs.textworld import TextWorldEnv
    from showcase.textworld_agent import ChatPolicy

    def policy() -> ChatPolicy:
        replies = iter([AIMessage("look around")] * 100)
        return ChatPolicy(GenericFakeChatModel(messages=replies))

    with TextWorldEnv("twc", step_budget=3) as env:
        run = learning.run_condition(
            learning.CONDITIONS["two-phase"],
            game="twc",
            budget=3,
            seeds=[0, 1],
            repeat=[],
            embedder=HashingEmbedder(),
            env=env,
            llm_policy=policy,
        )
    assert [e.steps for e in run.episodes] == [3, 3]
    assert [e.llm_calls for e in run.episodes] == [3, 3]


@pytest.mark.java
@requires_java
def test_scienceworld_smoke_writes_tables_and_plot(tmp_path: Path) -> None:
    args = _args(scienceworld, "--quick", "--out", str(tmp_path))
    out = scienceworld.execute(args, "smoke")

    names = {Path(p).name for p in out["files"]}
    assert names == {
        "learning_scienceworld.json",
        "learning_scienceworld.md",
        "learning_scienceworld.png",
    }
    saved = _saved(tmp_path / "learning_scienceworld.json")
    assert {(r["task"], r["condition"]) for r in saved["results"]} == {
        (task, cond) for task in ("use-thermometer", "all") for cond in ("none", "memory", "own")
    }
    assert saved["setup"]["memories_at_end"].get("Procedure", 0) >= 1  # gold was built
    episodes = saved["episodes"]
    assert len(episodes) == 3 and all(e["steps"] <= 8 for e in episodes)
    memory_run = next(e for e in episodes if e["condition"] == "memory")
    assert memory_run["hints"] >= 1  # the gold procedure was retrieved and handed over
    own_run = next(e for e in episodes if e["condition"] == "own")
    assert own_run["hints"] == 0  # no gold: the first variation has nothing to draw on
