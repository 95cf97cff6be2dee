// graphmem schema 1/3: uniqueness. Applied by `graphmem schema apply` (graphmem.schema.setup),
// statements separated by semicolons, idempotent (IF NOT EXISTS).
//
// A memory id is unique within its namespace. Node key constraints are Enterprise-only;
// a composite property uniqueness constraint works on Community and also backs MERGE on
// (namespace, id) with a range index.
CREATE CONSTRAINT memory_namespace_id IF NOT EXISTS
FOR (m:Memory) REQUIRE (m.namespace, m.id) IS UNIQUE;

// GraphmemMeta records: one named 'graphmem' holds the schema version and the store's embedding
// dimension; one per namespace, named 'embedder:<namespace>', the embedder of its vectors.
CREATE CONSTRAINT graphmem_meta_name IF NOT EXISTS
FOR (g:GraphmemMeta) REQUIRE g.name IS UNIQUE;
