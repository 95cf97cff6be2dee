"""The graphs ``langgraph.json`` serves (:mod:`flows.server`), kept beside it in the checkout.

Not part of the installed package: the flows themselves are :mod:`graphmem.flows`.
"""
