"""The counterfactual census (``python -m bench.utility_census``): its choice rules and its
reliability measure on made-up outcomes, and a small run on the real games (Java 17)."""

from __future__ import annotations

import importlib
import json
import math
from pathlib import Path
from typing import Any

import game_envs
import pytest

census = importlib.import_module("bench.utility_census")

requires_java = game_envs.requires_java(
    "textworld_express", reason="needs Java 17 and textworld-express"
)


def _probe(none: bool, *candidates: tuple[int, float, bool]) -> dict[str, Any]:
    return {
        "family": "f",
        "seed": 0,
        "none": none,
        "candidates": [{"memory": m, "sim": s, "success": w} for m, s, w in candidates],
    }


def test_leave_one_out_picks_the_memory_that_helped_elsewhere_not_the_nearest() -> None:
    # Memory 1 is always nearest and always fails; memory 2 is second and always wins.
    probes = [_probe(False, (1, 0.9, False), (2, 0.8, True)) for _ in range(4)]
    picked = census.choices(probes)
    assert picked["similarity (top-1)"] == [False] * 4
    assert picked["leave-one-out utility (Q ceiling)"] == [True] * 4
    assert picked["best candidate (oracle)"] == [True] * 4
    assert picked["none"] == [False] * 4


def test_leave_one_out_never_uses_the_game_it_scores() -> None:
    # Memory 2 wins only in game 0: scoring game 0 may not see it, so similarity's order decides.
    probes = [_probe(False, (1, 0.9, False), (2, 0.8, i == 0)) for i in range(3)]
    picked = census.choices(probes)
    assert picked["leave-one-out utility (Q ceiling)"][0] is False


def test_reliability_is_high_when_memories_differ_consistently_and_nil_when_not() -> None:
    steady = [_probe(False, *((m, 1.0 - m / 10, m % 2 == 0) for m in range(6))) for _ in range(8)]
    r = census.reliability(steady, min_games=4)
    assert r["memories"] == 6 and r["split_half_r"] > 0.99
    assert r["memory_effect_variance"] == pytest.approx(0.25)
    # Every memory wins in alternate games: no memory is better than another.
    coin = [_probe(False, *((m, 0.5, g % 2 == 0) for m in range(6))) for g in range(8)]
    flat = census.reliability(coin, min_games=4)
    assert flat["memory_effect_variance"] == 0.0 and math.isnan(flat["split_half_r"])


@requires_java
def test_a_small_census_runs_on_the_real_games(tmp_path: Path) -> None:
    code = census.main(
        [
            "--library", "8", "--probes", "4", "--candidates", "3", "--embedder", "hashing",
            "--out", str(tmp_path), "--no-progress",
        ]
    )  # fmt: skip
    assert code == 0
    data = json.loads((tmp_path / "utility_census_dev.json").read_text())
    assert data["protocol"]["fold"] == "dev"
    assert len(data["library"]) == 8 and len(data["probes"]) == 4
    for probe in data["probes"]:
        assert len(probe["candidates"]) == 3
        sims = [c["sim"] for c in probe["candidates"]]
        assert sims == sorted(sims, reverse=True)  # nearest first, as phase A recalls
    assert (tmp_path / "utility_census_dev.md").read_text().startswith("# Which memories help?")
