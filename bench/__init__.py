"""graphmem's benchmarks (not part of the installed package; run from a checkout).

One runner: ``python -m bench list`` names every benchmark with what it measures, and
``python -m bench run NAME [ARGS]`` runs one (the same as ``python -m bench.NAME ARGS``), for
instance ``python -m bench run speed`` (retrieval latency, ingest and memory of both stores
against numpy, LangGraph's InMemoryStore and neo4j-graphrag) or ``python -m bench run learning
--stream mixed`` (memory on a stream of text games, beside plain baselines). The game suites
share one harness, :mod:`bench.learning_harness`.

Results (Markdown, JSON, PNG) go to ``bench/results/``; docs/benchmarks.md says what each found.
Run them from the checkout's root (``./run python -m bench list``); the installed ``graphmem``
command has no ``bench`` verb. The package is type-checked with the library (``mypy graphmem
showcase bench``) and every benchmark has a smoke run in the tests (tests/test_bench_runner.py).
"""
