"""The graphs ``langgraph dev`` / LangGraph Server serve (``langgraph.json`` points here).

A thin module over the library: the memory graphs come from :mod:`graphmem.flows.server`, the
text-game agent from the checkout's showcase (:mod:`showcase.served_agent`, not in the wheel).
Each is named here as a graph factory (:func:`~graphmem.flows.server.refusing_unknown_context`)
that the server calls with the run's context as the client sent it, so an unknown context key
fails the run by name instead of being dropped; the graphs themselves are compiled once, at
import.
"""

from graphmem.flows import server as graphs
from graphmem.flows.server import refusing_unknown_context, server_memory
from showcase import served_agent

retrieve = refusing_unknown_context(graphs.retrieve)
build = refusing_unknown_context(graphs.build)
update = refusing_unknown_context(graphs.update)
evolve = refusing_unknown_context(graphs.evolve)
agent = refusing_unknown_context(served_agent.agent)

__all__ = ["agent", "build", "evolve", "retrieve", "server_memory", "update"]
