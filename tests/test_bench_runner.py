"""The benchmarks as one package (issue 54): one runner (``python -m bench list``, ``python -m
bench run NAME``) and a tiny run of every benchmark in the test suite, so none can rot unseen.

A benchmark is a module of ``bench/`` with a ``main``. Each has its smoke run either here
(:data:`SMOKE`, through the runner, results into a temporary folder) or in the test named in
:data:`ELSEWHERE`; a new benchmark with neither fails :func:`test_every_benchmark_has_a_smoke_run`.
"""

from __future__ import annotations

import ast
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import drop_namespaces

from bench import runner
from graphmem import GraphMemory, HashingEmbedder
from graphmem.stores.base import MemoryStore

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Smoke:
    """A benchmark's tiny run: its arguments (``{out}``: a temporary results folder), the files
    it must write there (or a line it must print) and its markers."""

    argv: str
    writes: tuple[str, ...] = ()
    prints: str = ""
    marks: tuple[pytest.MarkDecorator, ...] = field(default=())


SMOKE: dict[str, Smoke] = {
    "ann_default": Smoke(
        "--sizes 300 --queries 5 --gap-ms 0 --out {out}/ann_default.md", writes=("ann_default.md",)
    ),
    "ann_embedded": Smoke(  # MiniLM embeds the corpus and the queries
        "--size 300 --queries 5 --out {out}/ann_embedded.md",
        writes=("ann_embedded.md",),
        marks=(pytest.mark.slow,),
    ),
    "check_census": Smoke("", prints="MCP search_memory"),
    "durability": Smoke(
        "--memories 50 --calls 5 --warmup 1 --opens 1 --out {out}",
        writes=("durability.md", "durability.json"),
    ),
    "ingest": Smoke(
        "--turns 40 --batch 10 --rounds 1 --out {out}",
        writes=("ingest.md", "ingest.json"),
        marks=(pytest.mark.slow,),  # MiniLM embeds the turns
    ),
    "retention": Smoke(
        "--episodes 4 --embedder hashing --policies utility --capacities 25 --out {out}",
        writes=("retention_dev.md", "retention_dev.json"),
        marks=(pytest.mark.java, pytest.mark.slow),
    ),
    "speed_abstention": Smoke(
        "--size 200 --tasks 20 --queries 5 --warmup 1 --out {out}",
        writes=("speed_abstention.md", "speed_abstention.json"),
    ),
    "speed_async": Smoke(
        "--n 60 --namespaces 2 --queries 4 --rounds 1 --concurrency 1,2 --out {out}",
        prints="loading the items took",
        marks=(pytest.mark.neo4j,),
    ),
    "speed_hybrid": Smoke(
        "--sizes 200 --stores embedded --queries 5 --warmup 1 --quiet --out {out}",
        writes=("speed_hybrid_results.md", "speed_hybrid_results.json"),
    ),
    "updates": Smoke(
        "--embedder hashing --seeds 0 --people 4 --days 6 --no-longmemeval --out {out}",
        writes=("updates.md", "updates.json"),
    ),
}
"""The benchmarks whose smoke run is here."""

ELSEWHERE: dict[str, str] = {
    "consolidation_stream": (
        "test_bench_consolidation.py::test_stream_plays_the_same_games_on_and_off"
    ),
    "gc_pause": "test_bench_smoke.py::test_gc_pause_smoke_reports_each_way_of_holding_memories",
    "learning": "test_bench_learning_smoke.py::test_textworld_smoke_writes_tables_and_plot",
    "learning_lookalike": (
        "test_bench_learning_smoke.py::test_lookalike_smoke_writes_tables_and_plot"
    ),
    "learning_scienceworld": (
        "test_bench_learning_smoke.py::test_scienceworld_smoke_writes_tables_and_plot"
    ),
    "neo4j_index_recall": "test_bench_runner.py::test_neo4j_index_recall_measures_a_namespace",
    "speed_quant": "test_bench_runner.py::test_speed_quant_on_a_server_of_its_own",
    "retrieval_consolidation": (
        "test_bench_consolidation.py::test_longmemeval_on_and_off_score_every_granularity"
    ),
    "retrieval_quality": "test_bench_smoke.py::test_quality_smoke_scores_every_configuration",
    "speed": "test_bench_smoke.py::test_speed_smoke_writes_tables_and_plots",
    "utility_census": "test_utility_census.py::test_a_small_census_runs_on_the_real_games",
    "utility_replay": (
        "test_utility_replay.py::test_the_command_writes_the_tables_and_refuses_a_table_of_the_"
        "wrong_fold"
    ),
}
"""The benchmarks whose smoke run is a test of their own file: where it is."""


def test_every_benchmark_has_a_smoke_run() -> None:
    benchmarks = set(runner.benchmarks())
    assert not set(SMOKE) & set(ELSEWHERE)
    assert benchmarks - set(SMOKE) - set(ELSEWHERE) == set(), "benchmarks without a smoke run"
    assert set(SMOKE) | set(ELSEWHERE) <= benchmarks, "smoke runs of benchmarks that are gone"


@pytest.mark.parametrize("name", sorted(ELSEWHERE))
def test_a_smoke_run_elsewhere_exists_and_imports_its_benchmark(name: str) -> None:
    file, _, test = ELSEWHERE[name].partition("::")
    source = (ROOT / "tests" / file).read_text(encoding="utf-8")
    tests = {n.name for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef)}
    assert test in tests
    assert f"bench.{name}" in source or f'runner.run("{name}"' in source


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=SMOKE[n].marks, id=n) for n in sorted(SMOKE)]
)
def test_smoke_run(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    smoke = SMOKE[name]
    argv = smoke.argv.replace("{out}", str(tmp_path)).split()
    monkeypatch.chdir(tmp_path)  # anything written to a relative path stays here
    results = ROOT / "bench" / "results"
    before = {p: p.stat().st_mtime_ns for p in results.iterdir()}
    assert runner.run(name, argv) == 0
    assert {p: p.stat().st_mtime_ns for p in results.iterdir()} == before, "wrote bench/results"
    for written in smoke.writes:
        assert (tmp_path / written).stat().st_size > 0, written
    if smoke.prints:
        captured = capsys.readouterr()
        assert smoke.prints in captured.out + captured.err


@pytest.mark.neo4j
def test_neo4j_index_recall_measures_a_namespace(
    neo4j_store: MemoryStore, namespace: str, tmp_path: Path
) -> None:
    """The widths asked against the exact top k of a namespace's own memories on the server."""
    memory = GraphMemory(neo4j_store, embedder=HashingEmbedder())  # the shared store: not closed
    try:
        for i in range(30):
            memory.add_note(namespace, f"note {i}: the kettle sits in cupboard {i % 7}")
        argv = ["--namespaces", namespace, "--n", "300", "--queries", "3", "--widths", "5,10"]
        assert runner.run("neo4j_index_recall", [*argv, "--out", str(tmp_path), "--quiet"]) == 0
    finally:
        drop_namespaces(neo4j_store, namespace)
    assert list(tmp_path.glob("neo4j_index_recall*.md"))


@pytest.mark.neo4j
@pytest.mark.slow
def test_speed_quant_on_a_server_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """speed_quant re-creates the database's vector index and needs a database without
    memories, so it gets a throwaway server on free ports, never the shared one."""
    from graphmem.launcher.server import Neo4jServer

    password = "bench-smoke-throwaway-server"
    server = Neo4jServer(tmp_path / "neo4j", bolt_port=free_port(), http_port=free_port())
    server.start(password)
    try:
        monkeypatch.setenv("GRAPHMEM_NEO4J_URI", server.bolt_uri)
        monkeypatch.setenv("GRAPHMEM_NEO4J_USER", "neo4j")
        monkeypatch.setenv("GRAPHMEM_NEO4J_PASSWORD", password)
        monkeypatch.delenv("GRAPHMEM_NEO4J_DATABASE", raising=False)
        argv = ["--n", "200", "--queries", "5", "--warmup", "1", "--settle-s", "0"]
        assert runner.run("speed_quant", [*argv, "--out", str(tmp_path)]) == 0
    finally:
        server.stop()
    assert (tmp_path / "speed_quant.md").stat().st_size > 0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_runner_lists_every_benchmark_with_what_it_measures(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert runner.main(["list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    listed = {line.split()[0]: line for line in lines}
    assert set(listed) == set(runner.benchmarks())
    assert "latency" in listed["speed"] or "Speed" in listed["speed"]
    assert "common" not in listed and "learning_harness" not in listed  # helpers, no main


def test_an_unknown_benchmark_or_verb_is_a_one_line_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert runner.main(["run", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown benchmark 'nope'" in err and "speed" in err
    assert runner.main(["walk"]) == 2
    assert "usage: python -m bench" in capsys.readouterr().err


def test_python_dash_m_bench_runs_a_benchmark_with_its_own_options() -> None:
    """As a user types it: the arguments after the name are the benchmark's."""
    done = subprocess.run(
        [sys.executable, "-m", "bench", "run", "durability", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "--memories" in done.stdout
