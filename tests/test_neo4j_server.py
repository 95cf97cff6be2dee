"""The local Neo4j launcher: packaged files, the rendered conf and java command line, the CLI's
input checks, and (opt-in, GRAPHMEM_NEO4J_URI set) a real server started, probed and stopped."""

from __future__ import annotations

import os
import socket
import urllib.request
from pathlib import Path

import pytest

from graphmem.cli import main
from graphmem.errors import ConfigError
from graphmem.launcher.server import (
    ENTRY_POINT,
    Neo4jServer,
    Neo4jServerError,
    check_password,
    default_home,
    find_java,
    jars_present,
    java_major,
    neo4j_version,
    read_conf,
    resource_dir,
)
from graphmem.stores.neo4j.schema import schema_files, statements

ROOT = Path(__file__).resolve().parent.parent
NEEDS_NEO4J = pytest.mark.skipif(
    not os.environ.get("GRAPHMEM_NEO4J_URI"), reason="GRAPHMEM_NEO4J_URI is not set"
)


# ---- packaged files: one copy, linked from docker/ and schemas/ ---------------------------------


@pytest.mark.parametrize(
    ("visible", "packaged"),
    [
        ("docker/pom.xml", "pom.xml"),
        ("docker/neo4j.conf", "neo4j.conf"),
        *((f"schemas/{p.name}", f"schema/{p.name}") for p in schema_files()),
    ],
)
def test_user_facing_copies_are_the_packaged_files(visible: str, packaged: str) -> None:
    assert (ROOT / visible).read_bytes() == (resource_dir() / packaged).read_bytes()


def test_the_pom_pins_neo4j_and_the_browser() -> None:
    pom = (resource_dir() / "pom.xml").read_text(encoding="utf-8")
    assert neo4j_version() == "5.26.30"
    assert "<artifactId>neo4j-browser</artifactId>" in pom
    assert default_home({"GRAPHMEM_NEO4J_HOME": "/x/y"}) == Path("/x/y")
    assert default_home({}).parts[-2:] == ("neo4j", "5.26.30")


def test_other_releases_get_their_own_pom_cache_java_and_entry_point(tmp_path: Path) -> None:
    from graphmem.launcher.jars import (
        check_version,
        entry_point,
        java_versions,
        pom_text,
    )

    assert check_version(None) == "5.26.30"
    assert check_version("2026.09.0") == "2026.09.0"
    for bad in ("latest", "5.26", "2026.9", "../../x", "5.26.30; rm -rf /"):
        with pytest.raises(ConfigError, match="unsupported Neo4j version"):
            check_version(bad)
    pom = pom_text("2026.09.0")
    assert "<neo4j.version>2026.09.0</neo4j.version>" in pom and "5.26.30" not in pom
    assert "<neo4j-browser.version>" in pom  # the Browser jar stays as packaged
    assert default_home({}, version="2026.09.0").parts[-2:] == ("neo4j", "2026.09.0")
    assert java_versions() == (17, 21) and java_versions("2026.09.0") == (21, 25)
    # Each release's jar names its main class (5.x: CommunityEntryPoint, 2026.x: Neo4jCommunity).
    import zipfile

    lib = tmp_path / "lib"
    lib.mkdir()
    assert entry_point(lib) == ENTRY_POINT  # no jar: the 5.x class
    with zipfile.ZipFile(lib / "neo4j-2026.09.0.jar", "w") as jar:
        jar.writestr(
            "META-INF/services/org.neo4j.server.startup.EntryPoint",
            "org.neo4j.server.Neo4jCommunity\n",
        )
    assert entry_point(lib) == "org.neo4j.server.Neo4jCommunity"
    server = Neo4jServer(tmp_path / "d", home=tmp_path, version="2026.09.0")
    server.write_conf(lib)
    assert (
        server.command(Path("/opt/java25/bin/java"), lib)[-4] == "org.neo4j.server.Neo4jCommunity"
    )
    assert main(["neo4j", "start", "--version", "latest", "--no-auth"]) == 2


def test_schema_files_split_into_idempotent_statements() -> None:
    found = [s for path in schema_files() for s in statements(path.read_text(encoding="utf-8"))]
    assert len(found) == 8
    assert all("IF NOT EXISTS" in s or s.startswith("MERGE") for s in found)
    assert not any("//" in s for s in found)
    vector = next(s for s in found if "VECTOR INDEX" in s)
    assert "$dimension" in vector and "'cosine'" in vector


# ---- the rendered conf and the java command line -------------------------------------------------


def test_conf_renders_ports_auth_and_lib(tmp_path: Path) -> None:
    server = Neo4jServer(tmp_path / "inst", bolt_port=17687, http_port=17474, auth=False)
    conf = read_conf(server.write_conf(tmp_path / "lib"))
    assert conf["server.bolt.listen_address"] == [":17687"]
    assert conf["server.bolt.advertised_address"] == [":17687"]
    assert conf["server.http.listen_address"] == [":17474"]
    assert conf["server.default_listen_address"] == ["127.0.0.1"]
    assert conf["dbms.security.auth_enabled"] == ["false"]
    assert conf["server.directories.lib"] == [str(tmp_path / "lib")]
    assert not any("$" in v for values in conf.values() for v in values)


def test_command_takes_heap_and_jvm_options_from_the_conf(tmp_path: Path) -> None:
    server = Neo4jServer(tmp_path / "inst")
    lib = tmp_path / "lib"
    server.write_conf(lib)
    cmd = server.command(Path("/opt/java17/bin/java"), lib)
    assert cmd[0] == "/opt/java17/bin/java"
    assert "-Xms1g" in cmd and "-Xmx2g" in cmd
    for opened in ("java.base/java.nio", "java.base/java.io", "java.base/sun.nio.ch"):
        assert f"--add-opens={opened}=ALL-UNNAMED" in cmd
    assert cmd[cmd.index("-cp") + 1] == f"{lib}/*"
    assert cmd[-4:] == [
        ENTRY_POINT,
        f"--home-dir={server.data_dir}",
        f"--config-dir={server.data_dir / 'conf'}",
        "--console-mode",
    ]


def test_bad_ports_and_passwords_are_rejected_before_anything_runs(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        Neo4jServer(tmp_path, bolt_port=7687, http_port=7687)
    with pytest.raises(ConfigError):
        Neo4jServer(tmp_path, bolt_port=70000)
    for bad in (None, "", "short", "two\nlines-password"):
        with pytest.raises(ConfigError) as info:
            check_password(bad)
        assert not bad or bad not in str(info.value)
    assert check_password("long-enough") == "long-enough"


def _fake_java(root: Path, version: str) -> Path:
    java = root / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text(f"#!/bin/sh\necho 'openjdk version \"{version}\" 2025-01-01' >&2\n")
    java.chmod(0o755)
    return java


def test_java_17_is_chosen_and_newer_jdks_are_passed_over(tmp_path: Path) -> None:
    newer = _fake_java(tmp_path / "jdk25", "25.0.1")
    seventeen = _fake_java(tmp_path / "jdk17", "17.0.15")
    assert java_major(newer) == 25 and java_major(seventeen) == 17
    assert java_major(_fake_java(tmp_path / "jdk8", "1.8.0_392")) == 8
    env = {"GRAPHMEM_JAVA_HOME": str(tmp_path / "jdk17"), "JAVA_HOME": str(tmp_path / "jdk25")}
    assert find_java(env) == seventeen
    try:
        found = find_java({"JAVA_HOME": str(tmp_path / "jdk25")})  # falls through to the system
    except Neo4jServerError as e:
        assert "Java 17" in str(e)  # this machine has no Java 17/21 at all
    else:
        assert found != newer and java_major(found) in (17, 21)


def test_missing_jar_marker_means_not_present(tmp_path: Path) -> None:
    assert not jars_present(tmp_path)
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / ".graphmem-complete").write_text("stale-digest\n", encoding="utf-8")
    assert not jars_present(tmp_path)


def test_cli_status_of_a_stopped_instance(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["neo4j", "status", "--data-dir", str(tmp_path)]) == 3
    assert "not running" in capsys.readouterr().out
    assert main(["neo4j", "stop", "--data-dir", str(tmp_path)]) == 0
    assert "was not running" in capsys.readouterr().out


def test_cli_start_rejects_a_short_password_without_echoing_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["neo4j", "start", "--data-dir", str(tmp_path), "--password", "tiny7"])
    assert code == 2
    err = capsys.readouterr().err
    assert "at least 8 characters" in err and "tiny7" not in err
    assert not (tmp_path / "data").exists()


def test_cli_schema_apply_needs_a_uri(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("GRAPHMEM_NEO4J_URI", raising=False)
    assert main(["schema", "apply"]) == 2
    assert "GRAPHMEM_NEO4J_URI" in capsys.readouterr().err


# ---- a real server (opt-in) ----------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@NEEDS_NEO4J
@pytest.mark.neo4j
def test_the_test_server_is_reused_when_running() -> None:
    """``./run test`` starts its server in GRAPHMEM_TEST_NEO4J_DIR; starting again reuses it."""
    data_dir = os.environ.get("GRAPHMEM_TEST_NEO4J_DIR")
    password = os.environ.get("GRAPHMEM_NEO4J_PASSWORD")
    if not data_dir or not password:
        pytest.skip("no GRAPHMEM_TEST_NEO4J_DIR/GRAPHMEM_NEO4J_PASSWORD from ./run test")
    server = Neo4jServer(Path(data_dir))
    status = server.status()
    if not status.running:
        pytest.skip(f"no server running in {data_dir}")
    again = server.start(password, timeout=60)
    assert again.reused and again.pid == status.pid


@NEEDS_NEO4J
@pytest.mark.neo4j
@pytest.mark.slow
def test_start_probe_and_stop_a_server_on_free_ports(tmp_path: Path) -> None:
    import neo4j
    from neo4j.exceptions import AuthError

    password = "test-password-for-a-throwaway-server"
    server = Neo4jServer(tmp_path / "neo4j", bolt_port=_free_port(), http_port=_free_port())
    assert not server.status().running
    started = server.start(password)
    try:
        assert not started.reused and started.seconds > 0
        status = server.status()
        assert status.running and status.pid == started.pid
        assert server.start(password).reused  # a second start finds it running

        with urllib.request.urlopen(f"{server.http_url}/browser/", timeout=30) as page:
            assert page.status == 200
            assert "<title>Neo4j Browser</title>" in page.read().decode("utf-8")

        wrong = ("neo4j", "wrong-password")
        with neo4j.GraphDatabase.driver(server.bolt_uri, auth=wrong) as d, pytest.raises(AuthError):
            d.verify_connectivity()
        routing = server.bolt_uri.replace("bolt://", "neo4j://")
        with neo4j.GraphDatabase.driver(routing, auth=("neo4j", password)) as d:
            records, _, _ = d.execute_query("RETURN 41 + 1 AS answer")
            assert records[0]["answer"] == 42

        for path in (server.log_file, server.conf_file, *server.data_dir.rglob("*.log")):
            assert password not in path.read_text(encoding="utf-8", errors="replace")
        assert not list(server.conf_file.parent.glob("*.args"))
    finally:
        assert server.stop()
    assert not server.status().running
    assert not server.pid_file.exists()
    with socket.socket() as sock:
        assert sock.connect_ex(("127.0.0.1", server.bolt_port)) != 0


def test_heap_and_page_cache_sizes_reach_the_conf_and_bad_sizes_are_refused(
    tmp_path: Path,
) -> None:
    server = Neo4jServer(tmp_path / "big", heap="6G", pagecache="8g")
    lib = tmp_path / "lib"
    conf = read_conf(server.write_conf(lib))
    assert conf["server.memory.heap.max_size"] == ["6g"]
    assert conf["server.memory.heap.initial_size"] == ["1g"]
    assert conf["server.memory.pagecache.size"] == ["8g"]
    assert "-Xmx6g" in server.command(Path("/opt/java17/bin/java"), lib)
    small = Neo4jServer(tmp_path / "small", heap="512m")
    assert read_conf(small.write_conf(lib))["server.memory.heap.initial_size"] == ["512m"]
    for bad in ("", "4", "4gb", "-1g", "g", "10k"):
        with pytest.raises(ConfigError):
            Neo4jServer(tmp_path / "bad", heap=bad)
    assert not (tmp_path / "bad").exists()


@pytest.mark.parametrize("wait", [0, -5.0, float("nan")])
def test_schema_setup_refuses_a_wait_that_is_not_positive_before_touching_the_server(
    wait: float,
) -> None:
    from typing import Any

    from graphmem.errors import InvalidInput
    from graphmem.stores.neo4j.schema import setup

    no_server: Any = None  # any use of the driver would fail with AttributeError
    with pytest.raises(InvalidInput, match="wait"):
        setup(no_server, 384, wait=wait)
