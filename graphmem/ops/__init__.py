"""The four operations — build, retrieve, update, evolve — with episodes (credit),
history and obsolescence. Each takes a :class:`~graphmem.ops.context.MemoryContext` (a
store, an embedder, a config, an optional LLM), never the facade that calls it.
"""
