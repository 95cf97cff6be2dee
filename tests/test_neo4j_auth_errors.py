"""Neo4j's lock-out after repeated wrong passwords is reported as what it is (issue 47), not as
"cannot reach Neo4j": a real server, a user of the test's own, wrong passwords until it locks."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator

import pytest

from graphmem.errors import StoreError
from graphmem.stores.neo4j.ops import connection_error


@pytest.fixture
def locked_out_user() -> Iterator[str]:
    import neo4j
    from neo4j.exceptions import Neo4jError

    uri = os.environ["GRAPHMEM_NEO4J_URI"]
    auth = (os.environ.get("GRAPHMEM_NEO4J_USER", "neo4j"), os.environ["GRAPHMEM_NEO4J_PASSWORD"])
    name = f"graphmem_lock_{secrets.token_hex(4)}"
    with neo4j.GraphDatabase.driver(uri, auth=auth) as driver:
        try:
            driver.execute_query(
                f"CREATE USER {name} SET PASSWORD $pw CHANGE NOT REQUIRED",
                pw=secrets.token_hex(8),
                database_="system",
            )
        except Neo4jError as e:  # a user without the right to create users
            pytest.skip(f"cannot create a user to lock out: {e.message}")
        try:
            yield name
        finally:
            driver.execute_query(f"DROP USER {name} IF EXISTS", database_="system")


@pytest.mark.neo4j
def test_too_many_wrong_passwords_is_named_as_such(locked_out_user: str) -> None:
    from graphmem.stores.neo4j import Neo4jStore

    uri = os.environ["GRAPHMEM_NEO4J_URI"]
    seen: list[str] = []
    for _ in range(6):  # locked after 3 by default (dbms.security.auth_max_failed_attempts)
        with pytest.raises(StoreError) as info:
            Neo4jStore.from_uri(uri, user=locked_out_user, password="wrong-password")
        seen.append(str(info.value))
        if "too many wrong passwords" in seen[-1]:
            break
    assert "rejected the credentials" in seen[0]
    last = seen[-1]
    assert "too many wrong passwords" in last, seen
    assert "GRAPHMEM_NEO4J_PASSWORD" in last and repr(locked_out_user) in last
    assert "wait" in last and "cannot reach" not in last
    assert "wrong-password" not in " ".join(seen)


def test_the_rate_limit_code_is_recognised_without_a_server() -> None:
    from neo4j.exceptions import Neo4jError

    error = Neo4jError._hydrate_neo4j(
        code="Neo.ClientError.Security.AuthenticationRateLimit",
        message="The client has provided incorrect authentication details too many times in a row.",
    )
    message = str(connection_error(error, "bolt://db:7687", "neo4j"))
    assert "too many wrong passwords" in message and "cannot reach" not in message
