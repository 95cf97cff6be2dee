"""The showcase, not the library: the demo, text-game environments and their agents, the served
agent, the sample graph and the learning metrics the benchmarks report.

It lives in the checkout beside ``graphmem/`` and is not in the wheel; nothing in ``graphmem``
imports it (tests/test_architecture.py checks). Run it from the checkout's root:
``./run demo`` or ``python -m showcase.demo``.
"""
