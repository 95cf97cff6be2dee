"""Every form a credential can take in a Neo4j or OpenAI-compatible URI is masked wherever
graphmem shows the URI, and a Neo4j URI that carries one is refused (issue 47)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from graphmem.errors import ConfigError
from graphmem.settings import Settings
from graphmem.stores.neo4j.uri import check_neo4j_uri, redact_uri

SECRET = "Hunter2-s3cr3t"

QUERY_KEYS = [
    "password", "Password", "PASSWORD", "passwd", "pass", "pwd", "pw", "secret",
    "client_secret", "token", "access_token", "auth", "auth_token", "authorization",
    "key", "api_key", "apikey", "api-key", "X-Api-Key", "credentials", "sig", "session",
    "pass%77ord",
]  # fmt: skip

FORMS = [
    *(f"bolt://db.example:7687/?{key}={SECRET}" for key in QUERY_KEYS),
    f"bolt://db.example:7687?region=eu&password={SECRET}&x=1",
    f"bolt://db.example:7687?password={SECRET};x=1",
    f"neo4j://db.example:7687?token={SECRET}&{SECRET}",  # an "&" inside the value
    f"bolt://db.example#password={SECRET}",
    f"bolt://db.example:7687#{SECRET}",
    f"bolt://db.example:7687/#pw={SECRET}",
    f"bolt://neo4j:{SECRET}@db.example:7687",
    f"bolt://{SECRET}@db.example:7687",
    f"neo4j+s://neo4j:{SECRET}@db.example",
    f"bolt://neo4j:a@b#{SECRET}@db.example:7687",  # "@" and "#" in the password
    f"https://api.example/v1?api-key={SECRET}",
    f"https://user:{SECRET}@api.example/v1",
    f"http://127.0.0.1:9/v1#key={SECRET}",
]


@pytest.mark.parametrize("uri", FORMS)
def test_every_credential_form_is_masked(uri: str) -> None:
    for text in (uri, f"cannot reach {uri}: refused", f"unusable URI '{uri}'", f'"{uri}"'):
        shown = redact_uri(text)
        assert SECRET not in shown and "Hunter2" not in shown, shown
        assert "***" in shown
    assert "db.example" in redact_uri(uri) or "api.example" in redact_uri(uri) or "127." in uri


def test_harmless_parameters_are_kept() -> None:
    uri = "neo4j://db.example:7687?policy=eu&region=west"
    assert redact_uri(uri) == uri
    assert check_neo4j_uri(uri) == uri


@pytest.mark.parametrize("uri", [u for u in FORMS if u.startswith(("bolt", "neo4j"))])
def test_a_neo4j_uri_carrying_a_secret_is_refused_masked(uri: str) -> None:
    with pytest.raises(ConfigError) as info:
        Settings.from_env({"GRAPHMEM_NEO4J_URI": uri})
    message = str(info.value)
    assert SECRET not in message and "***" in message
    assert "GRAPHMEM_NEO4J_PASSWORD" in message


@pytest.mark.parametrize(
    "uri",
    [
        f"bolt://127.0.0.1:9#password={SECRET}",
        f"bolt://127.0.0.1:9?pw={SECRET}",
        f"bolt://neo4j:{SECRET}@127.0.0.1:9",
    ],
)
def test_stats_refuses_and_never_echoes_a_secret(uri: str, tmp_path: Path) -> None:
    env = {**os.environ, "GRAPHMEM_NEO4J_URI": uri, "GRAPHMEM_STORE": str(tmp_path)}
    for argv in (["stats"], ["stats", "--json"]):
        out = subprocess.run(
            [sys.executable, "-m", "graphmem", *argv],
            capture_output=True, text=True, env=env, timeout=120,
        )  # fmt: skip
        assert out.returncode == 2, out.stdout
        assert SECRET not in out.stdout + out.stderr
        assert out.stderr.count("\n") == 1 and "***" in out.stderr


def test_llm_check_masks_a_secret_in_the_base_url() -> None:
    env = {
        **os.environ,
        "GRAPHMEM_LLM_BASE_URL": f"http://127.0.0.1:9/v1?api_key={SECRET}",
        "GRAPHMEM_LLM_MODEL": "m",
        "GRAPHMEM_LLM_TIMEOUT": "2",
        "GRAPHMEM_LLM_RETRIES": "0",
    }
    out = subprocess.run(
        [sys.executable, "-m", "graphmem", "llm", "check"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert out.returncode == 2
    assert SECRET not in out.stdout + out.stderr, out.stderr
