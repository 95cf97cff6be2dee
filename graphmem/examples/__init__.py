"""The showcase, not the library: the demo, text-game environments and their agents, and
the learning metrics the benchmarks report. Nothing in the library imports from here.
"""
