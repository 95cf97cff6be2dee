"""Apply graphmem's Neo4j schema: constraints, indexes and the version record.

The statements live in ``graphmem/resources/neo4j/schema/*.cypher`` (linked as ``schemas/*.cypher``)
and are all ``IF NOT EXISTS`` / ``MERGE``, so applying them again changes nothing. Call
:func:`setup` (or ``graphmem schema apply``) once per database. Only the uniqueness constraints
are ever applied implicitly (:func:`ensure_constraints`, before a store's first write), because
without them concurrent writers create duplicate ids. A graph that already holds duplicates
cannot get them: both functions then name the ids and give the Cypher that removes the extras.

>>> import neo4j
>>> driver = neo4j.GraphDatabase.driver("bolt://127.0.0.1:7687", auth=("neo4j", "..."))
>>> setup(driver, dimension=384)  # doctest: +SKIP
AppliedSchema(version=1, dimension=384, statements=8)
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import neo4j
from neo4j.exceptions import DriverError, Neo4jError

from graphmem.coroutines import drive
from graphmem.errors import DimensionMismatch, InvalidInput, StoreError
from graphmem.stores.neo4j import cypher
from graphmem.stores.neo4j.recall import index_state, supports_search
from graphmem.stores.neo4j.tx import Session, SyncSession, Tx, single, sync_work

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
MAX_DIMENSION = 4096
"""The largest vector dimension a Neo4j 5.26 vector index accepts."""
REQUIRED_UNIQUE = frozenset(
    {
        (("Memory",), frozenset({"namespace", "id"})),
        (("GraphmemMeta",), frozenset({"name"})),
    }
)
"""(labels, properties) of the uniqueness constraints the store relies on (schemas/001_…)."""
SHOWN_DUPLICATES = 5
"""How many duplicate ids an error names."""


@dataclass(frozen=True)
class AppliedSchema:
    version: int
    dimension: int
    statements: int


def schema_files() -> list[Path]:
    """The schema files in the order they apply."""
    from graphmem.launcher.jars import resource_dir

    return sorted((resource_dir() / "schema").glob("*.cypher"))


def statements(text: str) -> list[str]:
    """Split a schema file into statements: ``//`` comment lines dropped, ``;`` separated."""
    body = "\n".join(line for line in text.splitlines() if not line.strip().startswith("//"))
    return [s.strip() for s in body.split(";") if s.strip()]


def checked_dimension(dimension: int) -> int:
    """``dimension`` if it can size the vector index (1 to MAX_DIMENSION), else InvalidInput."""
    if isinstance(dimension, bool) or not isinstance(dimension, int):
        raise InvalidInput(f"the dimension must be an integer, got {dimension!r}")
    if not 1 <= dimension <= MAX_DIMENSION:
        raise InvalidInput(f"the dimension must be in 1..{MAX_DIMENSION}, got {dimension}")
    return dimension


def setup(
    driver: neo4j.Driver,
    dimension: int = 384,
    *,
    database: str | None = None,
    wait: float = 300.0,
) -> AppliedSchema:
    """Create constraints, the vector index (``dimension``, cosine) and the version record,
    then wait up to ``wait`` seconds for the indexes to come online.

    Every memory gets its filter key (:data:`~graphmem.stores.neo4j.cypher.FILTER_KEY`, written
    before it existed or out of step), and on Neo4j 2026.01+ a vector index that does not
    carry it (built before it) is dropped and built again with it, which takes a while on a
    large graph (recall scans exactly meanwhile). Idempotent. Raises DimensionMismatch if the
    database already holds another dimension (in its meta record or its vector index), before
    changing anything. On a large graph an index can take longer to build than ``wait``: then
    StoreError says which one and how far it got; everything is applied and the index comes
    online by itself.
    """
    checked_dimension(dimension)
    if not wait > 0:
        raise InvalidInput(f"the wait must be a positive number of seconds, got {wait!r}")
    params: dict[str, Any] = {"dimension": dimension, "version": SCHEMA_VERSION}
    try:
        with driver.session(database=database, notifications_min_severity="OFF") as session:
            if not session.execute_read(sync_work(_constraints_present)):
                session.execute_read(sync_work(_refuse_duplicates))
            meta = session.execute_read(sync_work(_read_meta))
            if meta is not None and meta != dimension:
                raise DimensionMismatch(meta, dimension, where="database")
            indexed = session.execute_read(sync_work(_index_dimension))
            if indexed is not None and indexed != dimension:
                raise DimensionMismatch(indexed, dimension, where="vector index")
            # Before the index that carries the key: no index entry is rewritten for it.
            _backfill_filter_key(session)
            count = 0
            if session.execute_read(supports_search):
                count += _filtered_index(session, dimension)
            for path in schema_files():
                for statement in statements(path.read_text(encoding="utf-8")):
                    used = {k: v for k, v in params.items() if re.search(rf"\${k}\b", statement)}
                    _apply(session, statement, used)
                    count += 1
            session.execute_write(sync_work(partial(_fix_dimension, dimension=dimension)))
            _await_indexes(session, wait)
            # Re-checked: a concurrent setup may have created the index (with its dimension).
            indexed = session.execute_read(sync_work(_index_dimension))
            if indexed is not None and indexed != dimension:
                raise DimensionMismatch(indexed, dimension, where="vector index")
            while session.execute_write(sync_work(_backfill_q_label)):
                pass
    except (Neo4jError, DriverError) as e:
        raise StoreError(f"applying the Neo4j schema failed: {_reason(e)}") from e
    log.info("schema v%d applied: %d statements, dimension %d", SCHEMA_VERSION, count, dimension)
    return AppliedSchema(SCHEMA_VERSION, dimension, count)


def _filtered_index(session: neo4j.Session, dimension: int) -> int:
    """Create the vector index that carries the filter key (in-index filtering, 2026.01+),
    first dropping one that does not (built before the key, or without filter properties);
    how many statements ran. The plain index in the files is then a no-op."""
    count = 0
    state = session.execute_read(index_state)
    if state is not None and state[2] != "key":
        # Recall scans exactly until the new index is online (schema apply waits for it).
        log.warning("re-creating vector index %r to carry the filter key", cypher.VECTOR_INDEX)
        _apply(session, cypher.DROP_VECTOR_INDEX, {})
        count += 1
    _apply(session, cypher.VECTOR_INDEX_FILTERED, {"dimension": dimension})
    return count + 1


ALREADY_DONE = frozenset(
    {
        "Neo.ClientError.Schema.EquivalentSchemaRuleAlreadyExists",
        "Neo.ClientError.Schema.IndexAlreadyExists",
        "Neo.ClientError.Schema.IndexWithNameAlreadyExists",
        "Neo.ClientError.Schema.ConstraintAlreadyExists",
        "Neo.ClientError.Schema.ConstraintWithNameAlreadyExists",
        "Neo.ClientError.Schema.IndexDropFailed",
    }
)
"""What a schema statement fails with when another setup ran the same statement at the same
moment: ``IF NOT EXISTS`` checks before the rule is committed, so two first-time setups on a
fresh database both try to create it and the second fails (seen on 2026.09.0); a drop finds
the index already dropped."""


def already_done(e: Neo4jError) -> bool:
    """Whether ``e`` says a concurrent setup did what the statement was to do."""
    code = e.code or ""
    text = (e.message or "").lower()
    if code == "Neo.ClientError.Schema.IndexDropFailed":
        return "does not exist" in text or "no such" in text or "not found" in text
    if code in ALREADY_DONE:
        return True
    return code.startswith("Neo.ClientError.Schema.") and "already exist" in text


def _apply(session: neo4j.Session, statement: str, params: dict[str, Any]) -> None:
    """Run one idempotent schema statement; a concurrent setup having run it is success (what
    it left is checked afterwards: dimension, index state)."""
    try:
        session.execute_write(sync_work(partial(_run, statement=statement, params=params)))
    except Neo4jError as e:
        if not already_done(e):
            raise
        log.info("schema statement applied concurrently (%s): %s", e.code, statement[:80])


def _backfill_filter_key(session: neo4j.Session) -> None:
    """Give every memory written before the filter key existed its key (and mend any out of
    step with its namespace, kind and flag): one scan, committed every BACKFILL_BATCH nodes."""
    session.run(cypher.BACKFILL_FILTER_KEY, batch=BACKFILL_BATCH).consume()


def _await_indexes(session: neo4j.Session, wait: float) -> None:
    """Wait for the indexes; past ``wait``, a StoreError naming those still building."""
    try:
        session.run(cypher.AWAIT_INDEXES, seconds=max(1, round(wait))).consume()
        return
    except Neo4jError:
        pending = session.run(cypher.INDEXES_NOT_ONLINE).data()
        if not pending or any(row["state"] == "FAILED" for row in pending):
            raise
    building = ", ".join(f"{r['name']} {r['populationPercent']:.0f}%" for r in pending)
    raise StoreError(
        f"the schema is applied, but after {wait:g}s these indexes are still building: "
        f"{building}. They come online by themselves; until then recall fails. Wait longer "
        "with `graphmem schema apply --wait SECONDS` (it changes nothing else)."
    )


def ensure_constraints(driver: neo4j.Driver, *, database: str | None = None) -> bool:
    """Make sure graphmem's uniqueness constraints exist; True if this call created them.

    Without them, concurrent ``MERGE``s of one id from several processes create duplicate nodes
    (Neo4j only serialises a MERGE through a uniqueness constraint). The constraints need no
    dimension and are idempotent, so the store applies them before its first write if
    ``graphmem schema apply`` never ran; the indexes stay with :func:`setup`. Raises StoreError
    (one line) when they cannot be created: duplicates already present (named, with the fix)
    or a user without schema rights.
    """
    with driver.session(database=database, notifications_min_severity="OFF") as session:
        return drive(ensure_constraints_in(SyncSession(session)))


async def ensure_constraints_in(session: Session) -> bool:
    """:func:`ensure_constraints` on a session of either driver (the stores' own)."""
    try:
        if await session.read(_constraints_present):
            return False
        await session.read(_refuse_duplicates)
        try:
            for statement in statements(_constraints_file().read_text(encoding="utf-8")):
                await session.write(partial(_run, statement=statement, params={}))
        except Neo4jError:
            # Another process may have created them at the same moment: that is success.
            if await session.read(_constraints_present):
                return False
            await session.read(_refuse_duplicates)
            raise
    except (Neo4jError, DriverError) as e:
        raise StoreError(
            f"this Neo4j database has no graphmem uniqueness constraints and creating them "
            f"failed: {_reason(e)}; run `graphmem schema apply` as a user with schema rights"
        ) from e
    log.warning(
        "created graphmem's uniqueness constraints; run `graphmem schema apply` for the "
        "vector and full-text indexes"
    )
    return True


def _constraints_file() -> Path:
    return next(p for p in schema_files() if p.name.startswith("001_"))


async def _constraints_present(tx: Tx) -> bool:
    """True when (Memory: namespace, id) and (GraphmemMeta: name) are both kept unique."""
    found = {
        (tuple(r["labels"] or ()), frozenset(r["properties"] or ()))
        for r in await tx.run(cypher.UNIQUE_CONSTRAINTS)
    }
    return found >= REQUIRED_UNIQUE


async def _refuse_duplicates(tx: Tx) -> None:
    """Raise StoreError naming the ids that exist more than once, and how to remove them."""
    record = single(await tx.run(cypher.DUPLICATE_IDS, limit=SHOWN_DUPLICATES))
    total = 0 if record is None else int(record["total"])
    if total:
        assert record is not None
        shown = ", ".join(
            f"{d['id']!r} in namespace {d['namespace']!r} ({d['copies']} nodes)"
            for d in record["shown"]
        )
        more = f" and {total - len(record['shown'])} more" if total > len(record["shown"]) else ""
        raise StoreError(
            f"cannot create graphmem's uniqueness constraint: {total} memory id(s) exist more "
            f"than once: {shown}{more}. Keep one node per (namespace, id), e.g. the most "
            f"recently updated, with this Cypher: {cypher.DEDUPE_HINT}; then run "
            "`graphmem schema apply` again"
        )
    metas = [(r["name"], r["copies"]) for r in await tx.run(cypher.DUPLICATE_META)]
    if metas:
        name, copies = metas[0]
        raise StoreError(
            f"cannot create graphmem's uniqueness constraint: {copies} GraphmemMeta nodes are "
            f"named {name!r}; keep one with this Cypher: {cypher.META_DEDUPE_HINT}; then run "
            "`graphmem schema apply` again"
        )


async def _run(tx: Tx, *, statement: str, params: dict[str, Any]) -> None:
    await tx.run(statement, **params)


async def _read_meta(tx: Tx) -> int | None:
    record = single(await tx.run(cypher.META_GET, name=cypher.META_NAME))
    return None if record is None or record["dimension"] is None else int(record["dimension"])


async def _index_dimension(tx: Tx) -> int | None:
    record = single(await tx.run(cypher.VECTOR_INDEX_INFO, name=cypher.VECTOR_INDEX))
    if record is None:
        return None
    config = (record["options"] or {}).get("indexConfig", {})
    value = config.get("vector.dimensions")
    return None if value is None else int(value)


BACKFILL_BATCH = 10_000


async def _backfill_q_label(tx: Tx) -> int:
    """Give up to BACKFILL_BATCH nodes without a ``q_label`` (written before it existed) theirs;
    how many it set."""
    record = single(await tx.run(cypher.BACKFILL_Q_LABEL, batch=BACKFILL_BATCH))
    return 0 if record is None else int(record["set"])


async def _fix_dimension(tx: Tx, *, dimension: int) -> None:
    await tx.run(cypher.META_FIX_DIMENSION, name=cypher.META_NAME, dimension=dimension)


def _reason(e: Exception) -> str:
    message = getattr(e, "message", None) or str(e) or type(e).__name__
    return str(message).splitlines()[0][:300]
