"""What the test command runs (issue 46): plain pytest runs the tests and the doctests of
``graphmem/``, ``showcase/`` and ``bench/`` with the ``slow`` tests deselected; ``./run test``
(what CI runs) brings the slow ones back, so CI's coverage is the whole suite, and type-checks
the benchmarks with the library (issue 54)."""

from __future__ import annotations

import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OPTIONS = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"][
    "ini_options"
]


def test_plain_pytest_runs_doctests_and_leaves_slow_tests_out() -> None:
    addopts = shlex.split(OPTIONS["addopts"])
    assert "--doctest-modules" in addopts
    assert addopts[addopts.index("-m") + 1] == "not slow"
    assert {"tests", "graphmem", "showcase", "bench"} <= set(OPTIONS["testpaths"])


def test_run_test_runs_the_whole_suite() -> None:
    run = (ROOT / "run").read_text(encoding="utf-8")
    assert 'test) setup; run_tests whole "$@" ;;' in run
    assert 'local select=(-m "")' in run and '[[ "$mode" == whole ]] || select=()' in run
    assert '"$PY" -m pytest "${select[@]}" "$@"' in run
    assert "test-fast) setup; run_tests fast" in run


def test_run_test_type_checks_the_benchmarks_with_the_library() -> None:
    run = (ROOT / "run").read_text(encoding="utf-8")
    assert '"$PY" -m mypy graphmem showcase bench || rc=1' in run
    assert '"$PY" -m ruff check graphmem showcase flows bench tests' in run


def test_doctests_are_collected() -> None:
    found = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "graphmem/memory.py", "graphmem/agents.py", "showcase/envs/tasks.py", "bench/runner.py"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    ).stdout  # fmt: skip
    for item in (
        "graphmem/memory.py::graphmem.memory",
        "graphmem/agents.py::graphmem.agents.task_of",
        "showcase/envs/tasks.py::showcase.envs.tasks.task_with_first_observation",
        "bench/runner.py::bench.runner.benchmarks",
    ):
        assert item in found, found
