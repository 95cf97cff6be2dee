"""Running a local Neo4j from Maven Central's jars: the server process and the jar cache.

It depends on nothing of graphmem but its errors; the Neo4j store only reads its packaged
schema files.
"""
