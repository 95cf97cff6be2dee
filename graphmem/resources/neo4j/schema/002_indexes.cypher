// graphmem schema 2/3: indexes. $dimension is the embedding dimension, given at apply time.

// Vector recall (cosine) over every memory's embedding. Quantization is off so the candidates
// the index returns are ranked on the full float32 vectors.
CREATE VECTOR INDEX memory_embedding IF NOT EXISTS
FOR (m:Memory) ON m.embedding
OPTIONS {indexConfig: {
  `vector.dimensions`: $dimension,
  `vector.similarity_function`: 'cosine',
  `vector.quantization.enabled`: false
}};

// Keyword search over the text fields of every kind (Browser users and hybrid retrieval).
CREATE FULLTEXT INDEX memory_text IF NOT EXISTS
FOR (m:Memory) ON EACH [m.content, m.text, m.key, m.context, m.task_text, m.script, m.action];

// Scans by namespace and kind (iteration, stats, export) and deduplication by content hash.
CREATE RANGE INDEX memory_namespace IF NOT EXISTS FOR (m:Memory) ON (m.namespace);
CREATE RANGE INDEX memory_kind IF NOT EXISTS FOR (m:Memory) ON (m.kind);
CREATE RANGE INDEX memory_namespace_hash IF NOT EXISTS FOR (m:Memory) ON (m.namespace, m.content_hash);
