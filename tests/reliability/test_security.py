"""Security basics: the local Neo4j launcher has authentication on unless told otherwise;
passwords and API keys never reach logs, error messages, server files or command lines; every
Cypher statement takes its values as parameters and interpolates only allow-listed labels and
relationship types.
"""

from __future__ import annotations

import ast
import logging
import re
import socket
from pathlib import Path
from typing import Any

import pytest

from graphmem import cli
from graphmem.errors import ConfigError, GraphmemError, InvalidInput, LLMError, StoreError
from graphmem.launcher.server import Neo4jServer, read_conf
from graphmem.settings import Settings
from graphmem.stores.neo4j import cypher

from .conftest import PrivateServer

pytestmark = pytest.mark.reliability

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "graphmem"
WRONG_PASSWORD = "wrong-pw-SENTINEL-7f3a9c"
FAKE_KEY = "sk-test-SENTINEL-5e1d0b9a"


# ---- the launcher -----------------------------------------------------------------------


def test_the_launcher_turns_auth_on_unless_explicitly_disabled(tmp_path: Path) -> None:
    server = Neo4jServer(tmp_path / "a", bolt_port=17999, http_port=17998)
    assert server.auth is True
    assert server.listen_address == "127.0.0.1"
    settings = read_conf(server.write_conf(tmp_path / "lib"))
    assert settings["dbms.security.auth_enabled"] == ["true"]
    assert settings["server.default_listen_address"] == ["127.0.0.1"]
    off = Neo4jServer(tmp_path / "b", bolt_port=17999, http_port=17998, auth=False)
    assert read_conf(off.write_conf(tmp_path / "lib"))["dbms.security.auth_enabled"] == ["false"]
    # With auth on, a missing or short password is refused before anything is launched.
    for password in (None, "", "short"):
        with pytest.raises(ConfigError) as caught:
            server.start(password)
        assert "short" not in str(caught.value)
    assert not server.pid_file.exists()
    args = cli.build_parser().parse_args(["neo4j", "start", "--data-dir", str(tmp_path)])
    assert args.no_auth is False


def _assert_secret_absent(secret: str, *texts: str) -> None:
    for text in texts:
        assert secret not in text, f"a secret leaked into: {text[:200]!r}"


def test_a_wrong_password_is_refused_and_never_echoed(
    private_neo4j: PrivateServer,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from graphmem.stores.neo4j import Neo4jStore

    caplog.set_level(logging.DEBUG)  # every logger, the driver's included
    for password in (WRONG_PASSWORD, None):
        with pytest.raises(StoreError) as caught:
            Neo4jStore.from_uri(private_neo4j.uri, "neo4j", password, connection_timeout=5.0)
        _assert_secret_absent(WRONG_PASSWORD, str(caught.value), repr(caught.value))
    assert "rejected the credentials" in str(caught.value) or "unauthor" in str(caught.value)

    monkeypatch.setenv("GRAPHMEM_NEO4J_URI", private_neo4j.uri)
    monkeypatch.setenv("GRAPHMEM_NEO4J_PASSWORD", WRONG_PASSWORD)
    assert cli.main(["-v", "stats"]) == 2
    out, err = capsys.readouterr()
    assert err.startswith("graphmem: error:") and len(err.strip().splitlines()) == 1
    _assert_secret_absent(WRONG_PASSWORD, out, err, caplog.text)
    _assert_secret_absent(private_neo4j.password, out, err, caplog.text)


def test_the_real_password_is_in_no_server_file_or_command_line(
    private_neo4j: PrivateServer,
) -> None:
    server: Any = private_neo4j.server
    files = [p for p in Path(server.data_dir).rglob("*") if p.is_file()]
    texts = [p for p in files if "logs" in p.parts or p.parent.name in ("conf", "run")]
    assert texts, "no log or conf files to check"
    for path in texts:
        _assert_secret_absent(private_neo4j.password, path.read_text(errors="replace"))
    pid = server.running_pid()
    assert pid is not None
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    _assert_secret_absent(private_neo4j.password, cmdline)


def _dead_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed on exit: nothing listens there


def test_a_failing_llm_call_never_shows_its_api_key(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    from graphmem import GraphMemory, HashingEmbedder
    from graphmem.llm import MemoryLLM
    from graphmem.stores.embedded import EmbeddedStore

    caplog.set_level(logging.DEBUG)
    base_url = f"http://127.0.0.1:{_dead_port()}/v1"
    strict = MemoryLLM.from_openai(
        base_url=base_url, model="m", api_key=FAKE_KEY, max_retries=0, timeout=3.0,
        retries=1, fallback=False,
    )  # fmt: skip
    with pytest.raises(LLMError) as caught:
        strict.extract_keywords("find the key")
    _assert_secret_absent(FAKE_KEY, str(caught.value), repr(caught.value), repr(strict))

    lenient = MemoryLLM.from_openai(
        base_url=base_url, model="m", api_key=FAKE_KEY, max_retries=0, timeout=3.0, retries=0
    )
    mem = GraphMemory(EmbeddedStore.in_memory(), embedder=HashingEmbedder(), llm=lenient)
    note = mem.add_note("ns", "the key is in the drawer")  # falls back, logs the failure
    assert note.created_by == "fallback"
    assert "request failed" in caplog.text  # the failure was logged ...
    _assert_secret_absent(FAKE_KEY, caplog.text)  # ... without the key

    settings = Settings.from_env(
        {"GRAPHMEM_NEO4J_PASSWORD": WRONG_PASSWORD, "GRAPHMEM_LLM_API_KEY": FAKE_KEY}
    )
    _assert_secret_absent(WRONG_PASSWORD, repr(settings), str(settings))
    _assert_secret_absent(FAKE_KEY, repr(settings), str(settings))


# ---- Cypher: parameters only, allow-listed labels -----------------------------------------

INTERPOLATION_OK = {"label", "rel_type", "_rel_types"}
"""The only functions whose results cypher.py may interpolate (allow-list validators)."""
CYPHER_SHAPE = re.compile(
    r"\b(?:OPTIONAL MATCH|MATCH|MERGE|CREATE) \(|\bUNWIND \$|\bDETACH DELETE\b|\bCALL db\.|"
    r"\bSET \w+[.:+]|\bRETURN \w+[.(]"
)


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py")) + sorted((ROOT / "flows").rglob("*.py"))


def _literal_parts(node: ast.AST) -> str:
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value for v in node.values if isinstance(v, ast.Constant))
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return ""


def _interpolations(tree: ast.AST) -> list[tuple[int, ast.AST, str]]:
    """(line, node, template text) of every f-string, str.format and % formatting."""
    out: list[tuple[int, ast.AST, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            out.append((node.lineno, node, _literal_parts(node)))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "format"
        ):
            out.append((node.lineno, node, _literal_parts(node.func.value)))
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod | ast.Add):
            out.append((node.lineno, node, _literal_parts(node.left) + _literal_parts(node.right)))
    return out


def test_cypher_module_interpolates_only_allow_listed_labels() -> None:
    source = (PACKAGE / "stores" / "neo4j" / "cypher.py").read_text(encoding="utf-8")
    tree = ast.parse(source)
    # Error messages may quote what they reject; everything else formatted is Cypher.
    in_raise = {id(n) for r in ast.walk(tree) if isinstance(r, ast.Raise) for n in ast.walk(r)}
    found = 0
    for line, node, _ in _interpolations(tree):
        if id(node) in in_raise:
            continue
        if isinstance(node, ast.JoinedStr):
            for part in node.values:
                if isinstance(part, ast.FormattedValue):
                    call = part.value
                    ok = (
                        isinstance(call, ast.Call)
                        and isinstance(call.func, ast.Name)
                        and call.func.id in INTERPOLATION_OK
                    )
                    assert ok, f"cypher.py:{line} interpolates {ast.unparse(part.value)!r}"
                    found += 1
        elif not isinstance(node, ast.BinOp) or _literal_parts(node):
            pytest.fail(f"cypher.py:{line}: {ast.unparse(node)[:80]} formats text")
    assert found, "the scan found no label interpolation at all (did cypher.py move?)"
    for bad in ("Note) DETACH DELETE (x", "Memory", "note", "LINKS_TO`]->() //", ""):
        with pytest.raises(InvalidInput):
            cypher.label(bad)
        with pytest.raises(InvalidInput):
            cypher.rel_type(bad)


SENDS_CYPHER = re.compile(
    r"\.run\(|execute_query|execute_read|execute_write|\.session\(|^(?:import|from) neo4j\b",
    re.MULTILINE,
)


def test_no_module_that_talks_to_neo4j_builds_cypher_from_values() -> None:
    """Modules that send Cypher (or touch the driver) never format Cypher-shaped text.

    (Text only printed for a person to paste into Neo4j Browser, e.g. the demo's hint, is not
    sent, so modules that never reach the driver are out of scope.)"""
    offenders = []
    scanned = 0
    for path in _modules():
        source = path.read_text(encoding="utf-8")
        if path.name == "cypher.py" or not SENDS_CYPHER.search(source):
            continue
        scanned += 1
        tree = ast.parse(source)
        for line, _, template in _interpolations(tree):
            if CYPHER_SHAPE.search(template):
                offenders.append(f"{path.relative_to(ROOT)}:{line}")
    assert scanned >= 3, "no module that sends Cypher was found: the scan is broken"
    assert not offenders, f"Cypher built by string formatting: {offenders}"


def _query_argument(call: ast.Call) -> ast.AST | None:
    if call.args:
        return call.args[0]
    return next((k.value for k in call.keywords if k.arg in ("query", "cypher")), None)


def test_every_statement_sent_comes_from_the_cypher_module_or_the_schema_files() -> None:
    checked = 0
    for path in _modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        assigned: dict[str, list[ast.AST]] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        assigned.setdefault(target.id, []).append(node.value)
        for node in ast.walk(tree):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("run", "execute_query")
                and not (
                    isinstance(node.func.value, ast.Name) and node.func.value.id == "subprocess"
                )
            ):
                continue
            query = _query_argument(node)
            if query is None:
                continue
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            values = assigned.get(query.id, []) if isinstance(query, ast.Name) else [query]
            for value in values:
                assert _from_cypher_module(value), f"{where}: query {ast.unparse(value)[:60]}"
            checked += 1
    assert checked >= 10, f"only {checked} Cypher calls found: the scan is broken"


def _from_cypher_module(node: ast.AST) -> bool:
    """``cypher.CONSTANT`` or ``cypher.builder(...)``; a bare name that is a parameter (the
    schema runner's statements, read from the packaged schema files) is accepted too; a
    conditional ``cypher.A if c else cypher.B`` when both of its branches are."""
    if isinstance(node, ast.IfExp):
        return _from_cypher_module(node.body) and _from_cypher_module(node.orelse)
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return isinstance(node.value, ast.Name) and node.value.id == "cypher"
    return isinstance(node, ast.Name)


def test_hostile_values_reach_neo4j_only_as_parameters(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A store built on a recording driver: every ``run`` gets constant Cypher text."""
    import neo4j

    from graphmem.models import Edge, EdgeKind, Note
    from graphmem.stores.neo4j import Neo4jStore

    statements: list[str] = []
    hostile = "'); MATCH (n) DETACH DELETE n // `x` $ns {0}"

    class Tx:
        def run(self, query: str, parameters: Any = None, **kwargs: Any) -> Any:
            statements.append(query)
            raise neo4j.exceptions.ServiceUnavailable("recorded")

    class Session:
        def __enter__(self) -> Session:
            return self

        def __exit__(self, *exc: object) -> None:
            return None

        def execute_write(self, work: Any, *args: Any) -> Any:
            return work(Tx(), *args)

        execute_read = execute_write

        def run(self, query: str, parameters: Any = None, **kwargs: Any) -> Any:
            # Reads run as auto-commit statements; a non-retryable error ends them at once.
            statements.append(query)
            raise neo4j.exceptions.ClientError("recorded")

    class Driver:
        execute_query_bookmark_manager = None

        def session(self, **kwargs: Any) -> Session:
            return Session()

    store = Neo4jStore(Driver())  # type: ignore[arg-type]
    store._dimension = 2  # skip the meta read
    store._index_ready = "search"  # and the index lookup
    calls = [
        lambda: store.upsert(
            [Note(id="n", namespace="ns", content=hostile, context=hostile, embedding=[1.0, 0.0])],
            [Edge(namespace="ns", kind=EdgeKind.LINKS_TO, src="n", dst="n", props={"r": hostile})],
        ),
        lambda: store.patch("ns", "n", {"content": hostile}),
        lambda: store.find_by_hash("ns", "Note", hostile),  # type: ignore[arg-type]
        lambda: store.get("ns", "n"),
        lambda: store.recall("ns", [1.0, 0.0], 3),
        lambda: store.namespaces("'); MATCH (n) DETACH DELETE n //"),
    ]
    for call in calls:
        with pytest.raises(GraphmemError):
            call()
    assert statements
    constants = {v for k, v in vars(cypher).items() if k.isupper() and isinstance(v, str)}
    for statement in statements:
        assert hostile not in statement
        assert statement in constants or any(
            statement == builder(kind)
            for builder, kinds in (
                (cypher.upsert_nodes, list(cypher.MemoryKind)),
                (cypher.upsert_edges, list(cypher.EdgeKind)),
            )
            for kind in kinds
        ), statement[:80]
