"""The Neo4j store's embedder records and re-embedding writes, for both drivers.

A namespace's record is one ``(:GraphmemMeta {name: "embedder:<namespace>"})`` node: the
uniqueness constraint on ``name`` (schemas/001_constraints.cypher) keeps it single, so two
first writers racing leave one record and the loser reads the winner's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from graphmem.embedding import EmbedderRecord
from graphmem.errors import InvalidInput, MemoryNotFound, StoreError
from graphmem.models import check_id, check_vector
from graphmem.stores.neo4j import cypher
from graphmem.stores.neo4j.ops import Neo4jBase, ensure_constraints, get_dimension
from graphmem.stores.neo4j.rows import FloatList
from graphmem.stores.neo4j.tx import Tx, single


def _name(namespace: str) -> str:
    return cypher.EMBEDDER_PREFIX + namespace


def _record(row: Any) -> EmbedderRecord | None:
    if row is None or row["name"] is None:
        return None
    try:
        return EmbedderRecord.from_json(
            {
                "name": row["name"],
                "dimension": row["dimension"],
                "probe": list(row["probe"] or []),
                "pending": bool(row["pending"]),
                "recorded_at": row["recorded_at"],
            }
        )
    except InvalidInput as e:
        raise StoreError(f"the store's embedder record is damaged: {e}") from e


def _props(record: EmbedderRecord, namespace: str) -> dict[str, Any]:
    data = record.to_json()
    return {
        "namespace": namespace,
        "embedder": data["name"],
        "dimension": data["dimension"],
        "probe": FloatList(data["probe"]),
        "pending": data["pending"],
        "recorded_at": data["recorded_at"],
    }


async def _get(tx: Tx, *, name: str) -> EmbedderRecord | None:
    return _record(single(await tx.run(cypher.EMBEDDER_GET, name=name)))


async def embedder_record(store: Neo4jBase, namespace: str) -> EmbedderRecord | None:
    return await store._read(partial(_get, name=_name(namespace)), "read of the embedder record")


async def record_embedder(
    store: Neo4jBase, namespace: str, record: EmbedderRecord | None, *, replace: bool = False
) -> EmbedderRecord | None:
    name = _name(namespace)
    if record is None:
        if not replace:
            raise InvalidInput("record_embedder(None) removes a record only with replace=True")

        async def remove(tx: Tx) -> None:
            await tx.run(cypher.EMBEDDER_REMOVE, name=name)

        await store._write(remove, "removal of the embedder record")
        return None
    await ensure_constraints(store)
    statement = cypher.EMBEDDER_REPLACE if replace else cypher.EMBEDDER_ADOPT
    props = _props(record, namespace)

    async def write(tx: Tx) -> EmbedderRecord | None:
        return _record(single(await tx.run(statement, name=name, props=props)))

    return await store._write(write, "write of the embedder record")


async def set_embeddings(
    store: Neo4jBase, namespace: str, vectors: Mapping[str, Sequence[float]]
) -> None:
    if not vectors:
        return
    dim = await get_dimension(store)
    rows = []
    for memory_id, values in vectors.items():
        vector = check_vector(values, dim)
        dim = len(vector)
        rows.append({"id": check_id(memory_id), "embedding": FloatList(float(x) for x in vector)})
    ids = [r["id"] for r in rows]

    async def work(tx: Tx) -> None:
        missing = single(await tx.run(cypher.SET_EMBEDDINGS_MISSING, namespace=namespace, ids=ids))
        if missing is not None:
            raise MemoryNotFound(str(missing["id"]), namespace)
        await tx.run(cypher.SET_EMBEDDINGS, namespace=namespace, rows=rows)

    await store._write(work, "embedding write")
