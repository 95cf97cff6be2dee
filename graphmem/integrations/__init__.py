"""graphmem inside other frameworks: LangGraph's BaseStore, LangChain tools and an MCP
server. They sit on the facade (:class:`graphmem.GraphMemory`) and add no memory logic.
"""
