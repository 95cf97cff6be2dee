"""The exact replay of retrieval policies over a census table (``python -m bench.utility_replay``):
what each policy hands over, that Q learns from the table's outcomes through graphmem's own
phase B, that every policy plays the same games, and the command on a made-up table."""

from __future__ import annotations

import argparse
import importlib
import json
from pathlib import Path
from typing import Any

import pytest

replay = importlib.import_module("bench.utility_replay")


def _table(probes: list[dict[str, Any]], wins: list[bool], fold: str = "dev") -> dict[str, Any]:
    return {
        "protocol": {"fold": fold, "start": 0, "purpose": "test"},
        "library": [{"family": "f", "seed": i, "success": w} for i, w in enumerate(wins)],
        "probes": probes,
    }


def _probe(*candidates: tuple[int, float, bool], none: bool = False) -> dict[str, Any]:
    return {
        "family": "f",
        "seed": 0,
        "none": none,
        "candidates": [{"memory": m, "sim": s, "success": w} for m, s, w in candidates],
    }


def _policy(name: str, lam: float = 0.5) -> Any:
    return replay.policies(lam)[name]


def test_similarity_hands_over_the_nearest_and_two_phase_learns_the_one_that_wins() -> None:
    # Memory 0 is always nearest and always fails; memory 1 is second and always wins.
    probes = [_probe((0, 0.9, False), (1, 0.8, True), (2, 0.7, False)) for _ in range(12)]
    lib = [{"family": "f", "seed": i, "success": True} for i in range(3)]
    order = list(range(12))
    assert replay.replay(_policy("similarity"), lib, probes, order, seed=0) == [0.0] * 12
    learned = replay.replay(_policy("two-phase"), lib, probes, order, seed=0)
    # Q0 ties at first (similarity decides); once memory 0 has failed, its Q drops below the
    # untried ones and phase B moves on; memory 1's wins keep it on top from then on.
    assert learned[0] == 0.0 and learned[-6:] == [1.0] * 6


def test_a_policy_without_credit_never_changes_its_choice() -> None:
    probes = [_probe((0, 0.9, False), (1, 0.8, True), (2, 0.7, False)) for _ in range(6)]
    lib = [{"family": "f", "seed": i, "success": i == 0} for i in range(3)]
    played = replay.replay(_policy("source-only"), lib, probes, list(range(6)), seed=0)
    # The source prior prefers memory 0 (its own game was won) and nothing is learned.
    assert played == [0.0] * 6
    learned = replay.replay(_policy("two-phase-source"), lib, probes, list(range(6)), seed=0)
    assert learned[-1] == 1.0


def test_every_policy_plays_every_probe_once_in_each_order() -> None:
    probes = [_probe((i % 3, 0.9, i % 2 == 0), (3, 0.5, True)) for i in range(9)]
    data = _table(probes, [True, False, True, False])
    args = argparse.Namespace(policies=list(replay.policies(0.5)), lam=0.5, orders=3)
    result = replay.run(data, args)
    assert result["orders"] == 4
    for runs in result["outcome"].values():
        assert len(runs) == 4 and all(len(r) == 9 for r in runs)
    # With one order of the probes, similarity is the same whatever the order: the nearest.
    nearest = [1.0 if p["candidates"][0]["success"] else 0.0 for p in probes]
    assert all(r == nearest for r in result["outcome"]["similarity"])


def test_the_command_writes_the_tables_and_refuses_a_table_of_the_wrong_fold(
    tmp_path: Path,
) -> None:
    probes = [_probe((0, 0.9, False), (1, 0.8, True), (2, 0.7, False)) for _ in range(10)]
    table = tmp_path / "census.json"
    table.write_text(json.dumps(_table(probes, [True, True, True])))
    out = tmp_path / "out"
    code = replay.main(["--table", str(table), "--orders", "2", "--out", str(out)])
    assert code == 0
    data = json.loads((out / "utility_replay_dev.json").read_text())
    rows = {r["policy"]: r for r in data["summary"]["rows"]}
    assert rows["similarity"]["success"] == 0.0
    assert rows["two-phase"]["success"] > 0.5
    assert rows["two-phase"]["vs_similarity"]["better"] > 0
    assert (out / "utility_replay_dev.md").read_text().startswith("# Does learned utility")
    with pytest.raises(SystemExit):
        replay.main(["--table", str(table), "--heldout", "--out", str(out)])
    with pytest.raises(SystemExit):
        replay.main(["--table", str(table), "--policies", "oracle", "--out", str(out)])
