"""The graphs ``langgraph dev`` / LangGraph Server serve (``langgraph.json`` points here).

A thin module over the library: the memory graphs come from :mod:`graphmem.flows.server`, the
text-game agent from :mod:`graphmem.examples.served_agent`.
"""

from graphmem.examples.served_agent import agent
from graphmem.flows.server import build, evolve, retrieve, server_memory, update

__all__ = ["agent", "build", "evolve", "retrieve", "server_memory", "update"]
