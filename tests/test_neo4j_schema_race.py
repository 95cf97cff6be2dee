"""First-time schema setups racing on one database all succeed (issue 47).

On Neo4j 2026.09.0 two ``CREATE … IF NOT EXISTS`` of the same rule at the same moment can both
pass the existence check, and the second then fails with ``EquivalentSchemaRuleAlreadyExists``;
setup takes that (and its relatives) as done and checks the result afterwards. The test removes
graphmem's constraints and indexes from the test database (a fresh database, schema-wise) and
starts four processes that apply the schema at the same instant.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from conftest import NEO4J_TEST_DIMENSION
from neo4j.exceptions import Neo4jError

from graphmem.stores.neo4j.schema import already_done

RACERS = 4

SETUP = """
import os, sys, time
from graphmem.stores.neo4j import Neo4jStore
store = Neo4jStore.from_uri(
    os.environ["GRAPHMEM_NEO4J_URI"], user=os.environ.get("GRAPHMEM_NEO4J_USER", "neo4j"),
    password=os.environ.get("GRAPHMEM_NEO4J_PASSWORD") or None,
    database=os.environ.get("GRAPHMEM_NEO4J_DATABASE") or None)
start = float(sys.argv[1])
time.sleep(max(0.0, start - time.time()))
store.setup(int(sys.argv[2]))
print("applied", store.dimension)
store.close()
"""

GRAPHMEM_SCHEMA = ("memory_namespace_id", "graphmem_meta_name", "memory_embedding")


def _driver():  # type: ignore[no-untyped-def]
    import neo4j

    return neo4j.GraphDatabase.driver(
        os.environ["GRAPHMEM_NEO4J_URI"],
        auth=(
            os.environ.get("GRAPHMEM_NEO4J_USER", "neo4j"),
            os.environ.get("GRAPHMEM_NEO4J_PASSWORD", ""),
        ),
    )


def _drop_graphmem_schema(session) -> list[str]:  # type: ignore[no-untyped-def]
    """Make the database fresh for graphmem's schema: drop every constraint and index on its
    labels and delete its meta record (the memories of other tests stay); the names dropped.
    (With the meta record left in place the setups mostly serialise on it and the race hides;
    without it, the code before the fix failed in 3 or 4 of 4 processes on 2026.09.0.)"""
    session.run("MATCH (g:GraphmemMeta) DELETE g").consume()
    dropped = []
    for row in session.run("SHOW CONSTRAINTS YIELD name, labelsOrTypes").data():
        if "Memory" in row["labelsOrTypes"] or "GraphmemMeta" in row["labelsOrTypes"]:
            session.run(f"DROP CONSTRAINT `{row['name']}` IF EXISTS").consume()
            dropped.append(row["name"])
    for row in session.run("SHOW INDEXES YIELD name, labelsOrTypes, owningConstraint").data():
        labels = row["labelsOrTypes"] or []
        if ("Memory" in labels or "GraphmemMeta" in labels) and not row["owningConstraint"]:
            session.run(f"DROP INDEX `{row['name']}` IF EXISTS").consume()
            dropped.append(row["name"])
    return dropped


@pytest.mark.neo4j
@pytest.mark.slow
def test_four_first_time_setups_at_once_all_succeed(neo4j_store: object) -> None:
    database = os.environ.get("GRAPHMEM_NEO4J_DATABASE") or None
    with _driver() as driver, driver.session(database=database) as session:
        dropped = _drop_graphmem_schema(session)
        assert {"memory_namespace_id", "memory_embedding"} <= set(dropped), dropped
    start = time.time() + 8.0  # every process connected and waiting by then
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", SETUP, str(start), str(NEO4J_TEST_DIMENSION)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(RACERS)
    ]
    results = [(*p.communicate(timeout=600), p.returncode) for p in racers]
    for out, err, rc in results:
        assert rc == 0, err[-3000:]
        assert out.strip() == f"applied {NEO4J_TEST_DIMENSION}", out
    with _driver() as driver, driver.session(database=database) as session:
        names = {r["name"] for r in session.run("SHOW INDEXES YIELD name, state").data()}
        online = {
            r["name"]
            for r in session.run("SHOW INDEXES YIELD name, state WHERE state = 'ONLINE'").data()
        }
        constraints = {r["name"] for r in session.run("SHOW CONSTRAINTS YIELD name").data()}
    assert {"memory_namespace_id", "graphmem_meta_name"} <= constraints
    assert "memory_embedding" in names and "memory_embedding" in online


@pytest.mark.parametrize(
    ("code", "message", "done"),
    [
        ("Neo.ClientError.Schema.EquivalentSchemaRuleAlreadyExists", "An equivalent index "
         "already exists, 'Index( id=3, name='memory_embedding' ...)'.", True),
        ("Neo.ClientError.Schema.ConstraintWithNameAlreadyExists", "exists", True),
        ("Neo.ClientError.Schema.IndexDropFailed", "Unable to drop index: Index does not "
         "exist: memory_embedding", True),
        ("Neo.ClientError.Schema.IndexDropFailed", "Unable to drop index: in use", False),
        ("Neo.ClientError.Security.Forbidden", "Schema operations are not allowed", False),
        ("Neo.ClientError.Statement.SyntaxError", "already exists", False),
    ],
)  # fmt: skip
def test_what_counts_as_done_by_a_concurrent_setup(code: str, message: str, done: bool) -> None:
    error = Neo4jError._hydrate_neo4j(code=code, message=message)
    assert already_done(error) is done
