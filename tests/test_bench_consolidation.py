"""Tiny runs of the consolidation benchmarks (bench.retrieval_consolidation,
bench.consolidation_stream), so they cannot rot: real code paths, small N."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import game_envs
import pytest

lme = importlib.import_module("bench.retrieval_consolidation")
stream = importlib.import_module("bench.consolidation_stream")

requires_java = game_envs.requires_java(
    "textworld_express", reason="needs Java 17 and textworld-express"
)


def test_longmemeval_on_and_off_score_every_granularity(tmp_path: Path) -> None:
    options = ["--embedder", "hashing", "--max-questions", "3", "--out", str(tmp_path)]
    assert lme.main([*options, "--prefix", "smoke"]) == 0
    result = json.loads((tmp_path / "smoke.json").read_text(encoding="utf-8"))
    rows = {(r["consolidation"], r["notes"]): r for r in result["rows"]}
    assert set(rows) == {(v, g) for v in ("off", "on") for g in ("sessions", "turns")}
    for (variant, _), row in rows.items():
        assert 0.0 <= row["recall@1"] <= row["recall@5"] <= row["recall@10"] <= 1.0
        assert 0.0 <= row["ndcg@10"] <= 1.0
        assert row["live"] <= row["stored"]
        if variant == "off":
            assert row["merged"] == row["contradicted"] == 0 and row["live"] == row["stored"]
    assert "NDCG@10" in (tmp_path / "smoke.md").read_text(encoding="utf-8")


@pytest.mark.java
@requires_java
def test_stream_plays_the_same_games_on_and_off(tmp_path: Path) -> None:
    argv = ["--episodes", "4", "--embedder", "hashing", "--out", str(tmp_path), "--tag", "t"]
    assert stream.main(argv) == 0
    saved = json.loads(
        (tmp_path / "consolidation_stream_experiences_k1_t.json").read_text(encoding="utf-8")
    )
    rows = saved["rows"]
    assert set(rows) == {"two-phase / off", "two-phase / on"}
    assert rows["two-phase / off"]["families"] == rows["two-phase / on"]["families"]
    assert rows["two-phase / off"]["merged"] == 0
