"""Apply graphmem's Neo4j schema: constraints, indexes and the version record.

The statements live in ``graphmem/resources/neo4j/schema/*.cypher`` (linked as ``schemas/*.cypher``)
and are all ``IF NOT EXISTS`` / ``MERGE``, so applying them again changes nothing. Nothing applies
them implicitly: call :func:`setup` (or ``graphmem schema apply``) once per database.

>>> import neo4j
>>> driver = neo4j.GraphDatabase.driver("bolt://127.0.0.1:7687", auth=("neo4j", "..."))
>>> setup(driver, dimension=384)  # doctest: +SKIP
AppliedSchema(version=1, dimension=384, statements=8)
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import neo4j
from neo4j.exceptions import DriverError, Neo4jError

from graphmem.errors import DimensionMismatch, InvalidInput, StoreError
from graphmem.stores import cypher

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
MAX_DIMENSION = 4096
"""The largest vector dimension a Neo4j 5.26 vector index accepts."""


@dataclass(frozen=True)
class AppliedSchema:
    version: int
    dimension: int
    statements: int


def schema_files() -> list[Path]:
    """The schema files in the order they apply."""
    from graphmem.neo4j_jars import resource_dir

    return sorted((resource_dir() / "schema").glob("*.cypher"))


def statements(text: str) -> list[str]:
    """Split a schema file into statements: ``//`` comment lines dropped, ``;`` separated."""
    body = "\n".join(line for line in text.splitlines() if not line.strip().startswith("//"))
    return [s.strip() for s in body.split(";") if s.strip()]


def check_dimension(dimension: int) -> int:
    if isinstance(dimension, bool) or not isinstance(dimension, int):
        raise InvalidInput(f"the dimension must be an integer, got {dimension!r}")
    if not 1 <= dimension <= MAX_DIMENSION:
        raise InvalidInput(f"the dimension must be in 1..{MAX_DIMENSION}, got {dimension}")
    return dimension


def setup(
    driver: neo4j.Driver, dimension: int = 384, *, database: str | None = None
) -> AppliedSchema:
    """Create constraints, the vector index (``dimension``, cosine) and the version record.

    Idempotent. Raises DimensionMismatch if the database already holds another dimension
    (in its meta record or its vector index), before changing anything.
    """
    check_dimension(dimension)
    params: dict[str, Any] = {"dimension": dimension, "version": SCHEMA_VERSION}
    try:
        with driver.session(database=database, notifications_min_severity="OFF") as session:
            meta = session.execute_read(_read_meta)
            if meta is not None and meta != dimension:
                raise DimensionMismatch(meta, dimension, where="database")
            indexed = session.execute_read(_index_dimension)
            if indexed is not None and indexed != dimension:
                raise DimensionMismatch(indexed, dimension, where="vector index")
            count = 0
            for path in schema_files():
                for statement in statements(path.read_text(encoding="utf-8")):
                    used = {k: v for k, v in params.items() if re.search(rf"\${k}\b", statement)}
                    session.execute_write(_run, statement, used)
                    count += 1
            session.execute_write(_fix_dimension, dimension)
            session.run(cypher.AWAIT_INDEXES, seconds=300).consume()
    except (Neo4jError, DriverError) as e:
        raise StoreError(f"applying the Neo4j schema failed: {_reason(e)}") from e
    log.info("schema v%d applied: %d statements, dimension %d", SCHEMA_VERSION, count, dimension)
    return AppliedSchema(SCHEMA_VERSION, dimension, count)


def _run(tx: neo4j.ManagedTransaction, statement: str, params: dict[str, Any]) -> None:
    tx.run(statement, params).consume()


def _read_meta(tx: neo4j.ManagedTransaction) -> int | None:
    record = tx.run(cypher.META_GET, name=cypher.META_NAME).single()
    return None if record is None or record["dimension"] is None else int(record["dimension"])


def _index_dimension(tx: neo4j.ManagedTransaction) -> int | None:
    record = tx.run(cypher.VECTOR_INDEX_INFO, name=cypher.VECTOR_INDEX).single()
    if record is None:
        return None
    config = (record["options"] or {}).get("indexConfig", {})
    value = config.get("vector.dimensions")
    return None if value is None else int(value)


def _fix_dimension(tx: neo4j.ManagedTransaction, dimension: int) -> None:
    tx.run(cypher.META_FIX_DIMENSION, name=cypher.META_NAME, dimension=dimension).consume()


def _reason(e: Exception) -> str:
    message = getattr(e, "message", None) or str(e) or type(e).__name__
    return str(message).splitlines()[0][:300]
