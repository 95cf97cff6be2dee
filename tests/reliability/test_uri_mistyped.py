"""A mistyped URI never shows its secret (issue 55): what does not parse as ``scheme://…``
without blanks or quotes cannot be told apart from the password it carries, so none of it is
echoed, for Neo4j (``GRAPHMEM_NEO4J_URI``) and the LLM endpoint (``GRAPHMEM_LLM_BASE_URL``, or
``MemoryLLM.from_openai(base_url=...)`` in a program)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from graphmem.errors import ConfigError
from graphmem.llm.failures import describe
from graphmem.settings import Settings

pytestmark = pytest.mark.reliability

SECRET = "Hunter2-s3cr3t"

NEO4J_FORMS = {
    "blank in the password": f"bolt://neo4j:{SECRET} x@127.0.0.1:9",
    "blank before the secret": f"bolt://neo4j:pa {SECRET}@127.0.0.1:9",
    "single quote": f"bolt://neo4j:pa'{SECRET}@127.0.0.1:9",
    "double quote": f'bolt://neo4j:pa"{SECRET}@127.0.0.1:9',
    "tab": f"bolt://neo4j:pa\t{SECRET}@127.0.0.1:9",
    "no scheme, a query": f"127.0.0.1:9?password={SECRET}",
    "no scheme, userinfo": f"neo4j:{SECRET}@127.0.0.1",
    "one slash": f"bolt:/neo4j:{SECRET}@127.0.0.1:9",
    "no colon": f"bolt//neo4j:{SECRET}@127.0.0.1:9",
    "leading blank": f" bolt://neo4j:{SECRET}@127.0.0.1:9",
    "blank in a query value": f"bolt://127.0.0.1:9/?password=pa {SECRET}",
}

LLM_FORMS = {
    "blank in the password": f"http://user:pa {SECRET}@127.0.0.1:9/v1",
    "quote in the password": f"http://user:pa'{SECRET}@127.0.0.1:9/v1",
    "no scheme, a query": f"127.0.0.1:9/v1?api_key={SECRET}",
    "no scheme, userinfo": f"user:{SECRET}@127.0.0.1:9/v1",
}


def graphmem(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "graphmem", *argv],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=120,
    )


@pytest.mark.parametrize("uri", NEO4J_FORMS.values(), ids=NEO4J_FORMS.keys())
def test_a_mistyped_neo4j_uri_is_refused_without_any_of_it(uri: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        Settings.from_env({"GRAPHMEM_NEO4J_URI": uri})
    message = str(info.value)
    assert SECRET not in message and "Hunter2" not in message, message
    assert "GRAPHMEM_NEO4J_PASSWORD" in message
    env = {"GRAPHMEM_NEO4J_URI": uri, "GRAPHMEM_STORE": str(tmp_path)}
    for argv in (["stats"], ["stats", "--json"]):
        out = graphmem(argv, env)
        assert out.returncode == 2, out.stdout
        assert SECRET not in out.stdout + out.stderr and "Hunter2" not in out.stderr
        assert out.stderr.count("\n") == 1, out.stderr


@pytest.mark.parametrize("url", LLM_FORMS.values(), ids=LLM_FORMS.keys())
def test_a_mistyped_llm_endpoint_is_refused_without_any_of_it(url: str) -> None:
    with pytest.raises(ConfigError) as info:
        Settings.from_env({"GRAPHMEM_LLM_BASE_URL": url})
    assert SECRET not in str(info.value) and "GRAPHMEM_LLM_BASE_URL" in str(info.value)
    out = graphmem(
        ["llm", "check"],
        {
            "GRAPHMEM_LLM_BASE_URL": url,
            "GRAPHMEM_LLM_MODEL": "m",
            "GRAPHMEM_LLM_TIMEOUT": "2",
            "GRAPHMEM_LLM_RETRIES": "0",
        },
    )
    assert out.returncode == 2
    assert SECRET not in out.stdout + out.stderr and "Hunter2" not in out.stderr, out.stderr


@pytest.mark.parametrize("url", LLM_FORMS.values(), ids=LLM_FORMS.keys())
def test_a_failure_of_a_program_given_a_mistyped_endpoint_never_shows_it(url: str) -> None:
    # A program passing base_url itself skips the settings: the failure's line masks it too.
    failure = describe(ConnectionError("Connection error."), base_url=url)
    assert failure.kind == "connection"
    assert SECRET not in failure.message and "not shown" in failure.message, failure.message


def test_a_bare_host_and_port_is_shown_to_say_what_to_add() -> None:
    with pytest.raises(ConfigError, match=re.escape("'127.0.0.1:7687': the scheme must be one of")):
        Settings.from_env({"GRAPHMEM_NEO4J_URI": "127.0.0.1:7687"})
    with pytest.raises(
        ConfigError, match=re.escape("'127.0.0.1:8080': it must start with http://")
    ):
        Settings.from_env({"GRAPHMEM_LLM_BASE_URL": "127.0.0.1:8080"})
