"""The CLI: help, stats, export/import round trip, one-line errors for user mistakes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from graphmem.models import Note
from graphmem.stores.embedded import EmbeddedStore


def cli(
    tmp_path: Path, *args: str, stdin: str | None = None, module: str = "graphmem"
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHMEM_")}
    env["GRAPHMEM_STORE"] = str(tmp_path / "store")
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def seed_store(tmp_path: Path) -> list[Note]:
    notes = [
        Note(namespace="alpha", content="first note", embedding=[1.0, 0.0, 0.0, 0.0]),
        Note(namespace="alpha", content='second "quoted" note', embedding=[0.0, 1.0, 0.0, 0.0]),
        Note(namespace="beta", content="other tenant", embedding=[0.0, 0.0, 1.0, 0.0]),
    ]
    store = EmbeddedStore.open(tmp_path / "store")
    try:
        store.upsert(notes)
    finally:
        store.close()
    return notes


def test_help_lists_commands(tmp_path: Path) -> None:
    result = cli(tmp_path, "--help")
    assert result.returncode == 0
    for command in ("stats", "export", "import"):
        assert command in result.stdout


def test_stats_counts_per_namespace(tmp_path: Path) -> None:
    seed_store(tmp_path)
    result = cli(tmp_path, "stats", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["namespaces"]["alpha"]["Note"] == 2
    assert data["namespaces"]["beta"]["Note"] == 1


def test_export_import_round_trip_into_another_namespace(tmp_path: Path) -> None:
    notes = seed_store(tmp_path)
    out = tmp_path / "alpha.jsonl"
    assert cli(tmp_path, "export", str(out), "-n", "alpha").returncode == 0
    assert out.stat().st_mode & 0o777 == 0o600  # owner-only, as the store's files are
    result = cli(tmp_path, "import", str(out), "-n", "gamma")
    assert result.returncode == 0, result.stderr
    store = EmbeddedStore.open(tmp_path / "store")
    try:
        copied = {m.content for m in store.iter_nodes("gamma") if isinstance(m, Note)}
    finally:
        store.close()
    assert copied == {n.content for n in notes if n.namespace == "alpha"}


@pytest.mark.parametrize(
    ("args", "stdin", "fragment"),
    [
        (("import", "/no/such/file.jsonl"), None, "no such file"),
        (("import", "-"), "{not json\n", "line 1"),
        (("import", "-"), '{"type": "node", "kind": "Note", "namespace": "a"}\n', "line 1"),
        (("stats", "-n", "bad namespace!"), None, "namespace"),
    ],
)
def test_user_mistakes_are_one_line_errors(
    tmp_path: Path, args: tuple[str, ...], stdin: str | None, fragment: str
) -> None:
    seed_store(tmp_path)
    before = cli(tmp_path, "stats", "--json").stdout
    result = cli(tmp_path, *args, stdin=stdin)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("graphmem: error:")
    assert fragment in lines[0]
    assert cli(tmp_path, "stats", "--json").stdout == before


def one_error_line(result: subprocess.CompletedProcess[str], prefix: str = "graphmem") -> str:
    """The single ``<prefix>: error: …`` line of a refused command (exit 2, no traceback)."""
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr and "Warning" not in result.stderr, result.stderr
    assert result.stderr.startswith(f"{prefix}: error: "), result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    return result.stderr


@pytest.mark.parametrize(
    ("uri", "fragment"),
    [
        ("http://x", "the scheme must be one of bolt://"),
        ("bolt://neo4j:s3cret-pw@127.0.0.1:7799", "GRAPHMEM_NEO4J_PASSWORD, not in the URI"),
        ("bolt://127.0.0.1:7799/?password=s3cret-pw", "'bolt://127.0.0.1:7799/?password=***'"),
        ("neo4j://user:s3cret-pw@[::1", "Invalid IPv6 URL"),
        ("bolt://127.0.0.1:99999", "Port out of range"),
        ("bolt://127.0.0.1:9", "graphmem neo4j start"),
    ],
)
def test_a_bad_neo4j_uri_is_one_line_that_says_what_to_fix_and_hides_the_password(
    tmp_path: Path, uri: str, fragment: str
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHMEM_")}
    env.update(GRAPHMEM_NEO4J_URI=uri, GRAPHMEM_NEO4J_PASSWORD="env-s3cret-pw")
    result = subprocess.run(
        [sys.executable, "-m", "graphmem", "stats"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    line = one_error_line(result)
    assert fragment in line and "s3cret" not in line, line
    assert "50N42" not in line


def test_demo_refuses_bad_arguments_before_clearing_its_namespace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``demo --game cookingwrld`` used to clear the ``demo`` namespace, then fail."""
    from showcase import demo

    store = EmbeddedStore.open(tmp_path / "store")
    try:
        store.upsert([Note(namespace="demo", content="kept", embedding=[1.0, 0.0, 0.0, 0.0])])
    finally:
        store.close()
    before = cli(tmp_path, "export", "-").stdout
    line = one_error_line(
        cli(tmp_path, "--game", "cookingwrld", module="showcase.demo"), prefix="demo"
    )  # the real command
    assert "--game" in line and "python -m showcase.demo --help" in line, line
    monkeypatch.setenv("GRAPHMEM_STORE", str(tmp_path / "store"))
    for args in (
        ("--episodes", "2"),
        ("--episodes", "many"),
        ("--budget", "0"),
        ("--namespace", "bad namespace!"),
    ):
        with pytest.raises(SystemExit) as exited:
            demo.main(list(args))
        err = capsys.readouterr().err
        assert exited.value.code == 2 and err.count("\n") == 1, err
        assert err.startswith(f"demo: error: argument {args[0]}"), err
    assert cli(tmp_path, "export", "-").stdout == before


def test_demo_api_validates_before_it_opens_the_store(tmp_path: Path) -> None:
    from graphmem.errors import ConfigError, InvalidNamespace
    from graphmem.settings import Settings
    from showcase.demo import run_demo

    settings = Settings(store_path=tmp_path / "store", embedder="hashing")
    bad: list[dict[str, Any]] = [
        {"game": "cookingwrld"},
        {"episodes": 4},
        {"budget": 0},
        {"namespace": "a b"},
    ]
    for kwargs in bad:
        with pytest.raises((ConfigError, InvalidNamespace)):
            run_demo(settings, out=tmp_path / "out", **kwargs)
    assert not (tmp_path / "store").exists() and not (tmp_path / "out").exists()


def test_export_into_a_closed_pipe_stops_quietly(tmp_path: Path) -> None:
    """``graphmem export - | head -1`` printed a BrokenPipeError traceback."""
    store = EmbeddedStore.open(tmp_path / "store")
    try:  # far more than a pipe buffer (64 KiB)
        store.upsert([Note(namespace="a", content=f"{i} " + "x" * 1000) for i in range(400)])
    finally:
        store.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHMEM_")}
    env["GRAPHMEM_STORE"] = str(tmp_path / "store")
    result = subprocess.run(
        f"'{sys.executable}' -m graphmem export - | head -1",
        shell=True,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.stderr == "", result.stderr
    assert json.loads(result.stdout)["type"] == "header"


@pytest.mark.slow
def test_textworld_agent_refuses_bad_arguments_in_one_line_without_starting_java(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from showcase.textworld_agent import main

    for name in [k for k in os.environ if k.startswith(("GRAPHMEM_", "OPENAI_"))]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("GRAPHMEM_EMBEDDER", "hashing")
    monkeypatch.setenv("GRAPHMEM_JAVA", str(tmp_path / "no-java"))  # would fail if started
    for args, fragment in (
        (("--seeds", "9-3"), "--seeds"),
        (("--game", "foo"), "--game"),
        (("--budget", "-1"), "--budget"),
        (("--namespace", "a b"), "--namespace"),
    ):
        with pytest.raises(SystemExit) as exited:
            main(list(args))
        err = capsys.readouterr().err
        assert exited.value.code == 2 and err.count("\n") == 1, err
        assert err.startswith(f"textworld_agent: error: argument {fragment}"), err
    assert main(["--llm", "--seeds", "0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("textworld_agent: error: ") and "GRAPHMEM_LLM_BASE_URL" in err, err
    assert err.count("\n") == 1
    # The real command line, end to end.
    result = subprocess.run(
        [sys.executable, "-m", "showcase.textworld_agent", "--seeds", "abc"],
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert "--seeds" in one_error_line(result, "textworld_agent")


@pytest.mark.parametrize(
    "command", [("stats",), ("export", "-"), ("history", "ns"), ("episode", "ns")]
)
def test_read_only_commands_on_a_missing_store_create_nothing(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    """A mistyped GRAPHMEM_STORE is a one-line error, and no empty store is left behind."""
    result = cli(tmp_path, *command)
    assert result.returncode == 2, result.stdout
    assert result.stderr.strip().count("\n") == 0 and "no store at" in result.stderr
    assert not (tmp_path / "store").exists()
