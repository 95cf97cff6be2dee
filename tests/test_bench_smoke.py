"""Tiny runs of the benchmarks, so they cannot rot: real code paths, small N, no timing asserts.

The full runs are ``python -m bench.speed`` and ``python -m bench.retrieval_quality``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from graphmem import cli

speed = importlib.import_module("bench.speed")
quality = importlib.import_module("bench.retrieval_quality")


def _speed_args(out: Path, *extra: str) -> Any:
    parser = argparse.ArgumentParser()
    speed.add_arguments(parser)
    base = ["--sizes", "60,120", "--queries", "6", "--included-queries", "0", "--warmup", "1"]
    base += ["--e2e-n", "0", "--settle-s", "0", "--out", str(out), "--quiet"]
    return parser.parse_args([*base, *extra])


def test_speed_smoke_writes_tables_and_plots(tmp_path: Path) -> None:
    result = speed.execute(_speed_args(tmp_path, "--no-neo4j"))

    names = {Path(p).name for p in result["files"]}
    assert names == {
        "speed_results.json",
        "speed_results.md",
        "speed_latency.png",
        "speed_ingest.png",
    }
    saved = json.loads((tmp_path / "speed_results.json").read_text(encoding="utf-8"))
    cases = {(row["case"], row["n"]) for row in saved["latency"]}
    for n in (60, 120):
        assert ("numpy brute-force top-k", n) in cases
        assert ("graphmem embedded: two-phase λ=0.5", n) in cases
        assert ("langgraph InMemoryStore", n) in cases
    assert all(
        row["samples"] == 6 and row["p95_ms"] >= row["p50_ms"] > 0 for row in saved["latency"]
    )
    embedded = [r for r in saved["ingest"] if r["system"] == "graphmem embedded"]
    assert [r["added"] for r in embedded] == [60, 60]
    assert {t["n"] for t in saved["targets"]} == {60, 120}
    assert saved["blas_threads"], "the BLAS thread comparison ran"
    markdown = (tmp_path / "speed_results.md").read_text(encoding="utf-8")
    assert "## Targets" in markdown and "load average at start" in markdown


def test_speed_times_minilm_included_on_the_store_the_lookup_embedder_wrote(
    tmp_path: Path,
) -> None:
    # The namespace records the lookup embedder of the latency phase; the MiniLM-included phase
    # retrieves from it through an embedder of the same identity (it failed with
    # EmbedderMismatch when it used MiniLM's own).
    args = ["--sizes", "60", "--queries", "3", "--included-queries", "2", "--warmup", "1"]
    args += ["--e2e-n", "0", "--settle-s", "0", "--out", str(tmp_path), "--quiet"]
    parser = argparse.ArgumentParser()
    speed.add_arguments(parser)
    options = [*args, "--no-neo4j", "--no-langgraph", "--no-plots", "--no-blas-sweep"]
    result = speed.execute(parser.parse_args(options))
    included = {row["case"] for row in result["included"]}
    assert "graphmem embedded: two-phase λ=0.5" in included


def test_speed_measures_what_the_stores_return(tmp_path: Path) -> None:
    # The brute-force baseline and the embedded store agree on the nearest memories.
    data = speed.make_dataset(200, 3, seed=1)
    brute = speed.NumpyBrute()
    brute.add(data, 0, 200)
    embedded = speed.EmbeddedSystem(tmp_path / "store", data)
    try:
        embedded.add(data, 0, 200)
        for i in range(3):
            expected = [f"m{j}" for j in brute.top_k(data.queries[i], 5)]
            got = embedded.store.recall(embedded.namespace, data.queries[i].tolist(), 5)
            assert [r.memory.id for r in got] == expected
    finally:
        embedded.close()


@pytest.mark.neo4j
@pytest.mark.skipif(not os.environ.get("GRAPHMEM_NEO4J_URI"), reason="GRAPHMEM_NEO4J_URI unset")
def test_speed_smoke_on_neo4j(tmp_path: Path) -> None:
    result = speed.execute(_speed_args(tmp_path, "--no-langgraph", "--no-plots"))

    cases = {row["case"] for row in result["latency"]}
    assert "graphmem neo4j: two-phase λ=0.5" in cases
    assert "neo4j-graphrag VectorRetriever" in cases
    assert any(r["system"] == "graphmem neo4j" and r["per_s"] for r in result["ingest"])


def test_quality_smoke_scores_every_configuration(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    quality.add_arguments(parser)
    options = ["--embedder", "hashing", "--max-questions", "3", "--epochs", "1", "--quiet"]
    args = parser.parse_args([*options, "--out", str(tmp_path)])
    result = quality.execute(args)

    assert {Path(p).name for p in result["files"]} == {
        "quality_results.json",
        "quality_results.md",
        "quality_recall.png",
    }
    rows = result["rows"]
    assert len(rows) == 20
    for row in rows:
        assert row["questions"] == 3
        assert 0.0 <= row["recall@1"] <= row["recall@5"] <= row["recall@10"] <= 1.0
        assert row["recall@5"] <= row["hit@5"] <= row["hit@10"] <= 1.0
        assert 0.0 <= row["ndcg@10"] <= 1.0
    assert sum("hybrid" in r["how"] for r in rows) == 4
    assert sum(r["config"].startswith("BM25") for r in rows) == 2
    # With every Q neutral, two-phase ranks exactly like similarity.
    by = {(r["config"], r["how"]): r for r in rows}
    for config in ("graphmem, session Notes", "graphmem, turn Notes → max"):
        neutral = by[(config, "λ=0.5, neutral Q (= λ=0)")]
        plain = by[(config, quality.DEFAULT_HOW)]
        assert {k: neutral[k] for k in ("recall@1", "recall@10", "ndcg@10")} == {
            k: plain[k] for k in ("recall@1", "recall@10", "ndcg@10")
        }
        # By default Q ranks experience, not notes: learned Q leaves the ranking alone.
        learned = next(
            r for (c, how), r in by.items() if c == config and "default utility_kinds" in how
        )
        assert learned["ndcg@10"] == plain["ndcg@10"]
    assert {r["condition"] for r in rows} == {"flat-topk", "similarity", "two-phase"}
    assert {r["condition"] for r in rows if r["config"].startswith("numpy")} == {"flat-topk"}


def test_quality_conditions_select_rows_and_refuse_plain(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    quality.add_arguments(parser)
    options = ["--embedder", "hashing", "--max-questions", "2", "--quiet", "--no-plots"]
    args = parser.parse_args([*options, "--conditions", "flat-topk", "--out", str(tmp_path)])
    rows = quality.execute(args)["rows"]
    assert len(rows) == 4 and {r["condition"] for r in rows} == {"flat-topk"}
    for bad, says in (("plain", "ranks nothing"), ("two_phase", "unknown condition")):
        args = parser.parse_args([*options, "--conditions", bad, "--out", str(tmp_path)])
        with pytest.raises(SystemExit, match=says):
            quality.execute(args)


def test_quality_scores_the_generated_conversations_by_style(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    quality.add_arguments(parser)
    options = ["--embedder", "hashing", "--max-questions", "4", "--quiet", "--no-plots"]
    args = parser.parse_args(
        [*options, "--dataset", "conversations", "--no-learned-q", "--out", str(tmp_path)]
    )
    result = quality.execute(args)
    assert result["data"]["questions"] == 8  # 4 from each dev seed
    assert result["data"]["path"] == "bench.conversations, dev seeds 0, 1"
    for row in result["rows"]:
        assert sum(s["questions"] for s in row["by_style"].values()) == 8
    assert "NDCG@10 by question style" in quality.render_markdown(result)


def test_quality_metrics() -> None:
    relevant = frozenset({"a", "b"})
    assert quality.recall_at(["a", "x", "b"], relevant, 1) == 0.5
    assert quality.recall_at(["a", "x", "b"], relevant, 5) == 1.0
    assert quality.ndcg_at(["a", "b", "x"], relevant) == pytest.approx(1.0)
    assert quality.ndcg_at(["x", "y"], relevant) == 0.0
    assert quality.by_best(["s2", "s1", "s2", "s3"]) == ["s2", "s1", "s3"]


def test_the_benchmarks_run_as_modules_of_the_checkout_not_as_a_graphmem_verb(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The benchmarks live in the checkout (``python -m bench.speed``); the installed ``graphmem``
    command has no ``bench`` verb that would reach into the checkout behind the package's back."""
    with pytest.raises(SystemExit) as done:
        speed.main(["--help"])
    assert done.value.code == 0
    assert "--sizes" in capsys.readouterr().out
    with pytest.raises(SystemExit) as refused:
        cli.main(["bench", "speed"])
    assert refused.value.code == 2
    assert "invalid choice: 'bench'" in capsys.readouterr().err


def test_speed_scale_corpus_mixes_namespaces_and_kinds() -> None:
    scale = importlib.import_module("bench.speed_scale")
    sizes = scale.namespace_sizes(20_000)
    assert sum(sizes) == 20_000 and sizes == sorted(sizes, reverse=True)
    assert 0.1 < sizes[0] / 20_000 < 0.3 and sizes[-1] > 0
    corpus = scale.Corpus(20_000, seed=3)
    batches = list(corpus.batches())
    assert sum(count for _, _, count in batches) == 20_000
    memories = corpus.memories(*batches[0])
    kinds = {m.kind for m in memories}
    assert {"Note", "Procedure", "Tip", "Task", "Step"} <= {str(k) for k in kinds}
    assert all((m.embedding is None) == (str(m.kind) == "Step") for m in memories)
    again = corpus.memories(*batches[0])
    assert [m.embedding for m in again] == [m.embedding for m in memories]  # deterministic


def test_speed_scale_ratios_pair_each_question_with_graphrags() -> None:
    scale = importlib.import_module("bench.speed_scale")
    p95 = {"4 kinds": 12.0, "default": 8.0, "wide": 10.0, "Notes": 9.0, "filtered": 10.0}
    rows = [
        {"namespace": "ns", "namespace_size": 3_161, "case": case, "p95_ms": value}
        for case, value in {**p95, "bare": 7.5}.items()
    ]
    partial = [{**row, "namespace": "other"} for row in rows[:5]]
    lines = scale._ratio_lines([*rows, *partial])  # a namespace with cases missing: no line
    assert lines == [
        "- ns (3,161 memories), p95: 4 kinds / graphrag unfiltered **1.50×** (its default beam), "
        "1.20× (graphmem's beam); Notes / graphrag filtered alike **0.90×**; recall statement "
        "alone / graphrag filtered 0.75×"
    ]


def test_index_recall_scores_each_width_against_the_exact_top_k() -> None:
    bench = importlib.import_module("bench.neo4j_index_recall")
    common = importlib.import_module("bench.common")
    rng = np.random.default_rng(0)
    matrix = rng.standard_normal((50, 8)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    ids = [f"m{i}" for i in range(50)]
    queries = rng.standard_normal((4, 8)).astype(np.float32)
    exact = [bench._exact_top(matrix, ids, q, 3) for q in queries]
    assert all(len(top) == 3 for top in exact)
    assert bench._exact_top(matrix, ids, matrix[7], 1) == {"m7"}  # a memory is its own nearest

    def narrow(query: np.ndarray) -> set[str]:  # finds one of the true three
        return set(sorted(bench._exact_top(matrix, ids, query, 3))[:1]) | {"m-none"}

    rows = bench._measure(
        {3: lambda q: bench._exact_top(matrix, ids, q, 3), 1: narrow}, queries, exact, 3
    )
    assert [(r["width"], r["recall_at_k"]) for r in rows] == [(3, 1.0), (1, 0.333)]
    result = {
        "machine": common.machine_info(),
        "settings": {"widths": "1,3", "query_seed": 202, "whole_index": False, "n": 100_000}
        | {"k": 3, "queries": 4, "default_width": 50},
        "load_before": [0.1, 0.1, 0.1],
        "load_after": [0.2, 0.2, 0.2],
        "namespaces": [{"namespace": "ns", "memories": 50, "rows": rows}],
    }
    text = bench.render(result)
    assert "--n 100000` on the database `python -m bench.speed --scale 100k --keep`" in text
    assert "| ns | 50 | 1 |" in text and "| 0.333 |" in text


def test_gc_pause_smoke_reports_each_way_of_holding_memories(tmp_path: Path) -> None:
    gc_pause = importlib.import_module("bench.gc_pause")
    rows = gc_pause.run(300, batch=100)
    cases = [r["case"] for r in rows]
    assert cases[:2] == ["nothing held (imported modules)", "embedded store (packed)"]
    by_case = {r["case"]: r for r in rows}
    nothing, packed = by_case[cases[0]], by_case[cases[1]]
    # The packed store adds next to nothing the collector tracks (models: ~3 per memory).
    assert packed["tracked"] - nothing["tracked"] < 0.3 * 300
    if len(rows) == 3:
        assert rows[2]["tracked"] - nothing["tracked"] > 2 * 300
    out = tmp_path / "gc.md"
    gc_pause.main(["--n", "200", "--out", str(out)])
    assert "| embedded store (packed) |" in out.read_text(encoding="utf-8")
    assert all(isinstance(r["during_ms"], list) for r in rows)
    assert "full collections while it was built" in out.read_text(encoding="utf-8")
