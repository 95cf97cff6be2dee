// graphmem schema 3/3: the version record. $version is graphmem.schema.SCHEMA_VERSION.
MERGE (g:GraphmemMeta {name: 'graphmem'})
ON CREATE SET g.created_at = datetime()
SET g.schema_version = $version, g.schema_applied_at = datetime();
