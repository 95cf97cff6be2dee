"""Neo4j Browser extras: the saved queries and the GraSS style in ``schemas/browser/``.

Without Neo4j: the query file parses into documented, parameterised queries, and the style
parses the way Neo4j Browser's own GraSS parser reads it (a port of ``parseGrassCSS``).
With Neo4j (``GRAPHMEM_NEO4J_URI``, marker ``neo4j``): every saved query runs against the sample
graph and returns rows, and the server serves Neo4j Browser (``GRAPHMEM_NEO4J_HTTP_URL``,
default ``http://<bolt host>:7474``); with Chromium too (marker ``browser``), the Browser app
really starts and shows its connect form.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from graphmem.models import MEMORY_CLASSES, EdgeKind, MemoryKind
from graphmem.stores.base import MemoryStore
from graphmem.stores.neo4j.cypher import Q_LABEL
from graphmem.testing import unique_namespace
from showcase.sample import SampleIds, load_sample

BROWSER_DIR = Path(__file__).resolve().parents[1] / "schemas" / "browser"
QUERIES = BROWSER_DIR / "saved_queries.cypher"
GRASS = BROWSER_DIR / "graphmem.grass"


# ---- the saved-query file ------------------------------------------------------------------


@dataclass
class SavedQuery:
    name: str
    params: list[str]
    view: str
    description: str
    text: str


def parse_saved_queries(source: str) -> list[SavedQuery]:
    """Split the file into queries: each starts at '// name:' and ends with a ';' line end."""
    queries: list[SavedQuery] = []
    for block in re.split(r"^(?=// name:)", source, flags=re.M)[1:]:
        header = re.findall(r"^// ?(.*)$", block.split("\n\n")[0], flags=re.M)
        fields = dict(re.findall(r"^(name|params|view): *(.*)$", "\n".join(header), flags=re.M))
        description = " ".join(
            line for line in header if not re.match(r"(name|params|view):", line)
        )
        code = "\n".join(line for line in block.splitlines() if not line.startswith("//"))
        text = code.strip()
        assert text.endswith(";"), f"query {fields.get('name')!r} must end with ';'"
        params = [] if fields["params"] == "(none)" else re.split(r",\s*", fields["params"])
        queries.append(
            SavedQuery(fields["name"], params, fields["view"], description, text[:-1].strip())
        )
    return queries


SAVED = parse_saved_queries(QUERIES.read_text(encoding="utf-8"))


def test_saved_queries_are_documented_and_parameterised() -> None:
    assert len(SAVED) >= 10
    names = [q.name for q in SAVED]
    assert len(set(names)) == len(names)
    header_params = re.search(r"^// +:params (\{.*\})$", QUERIES.read_text(), flags=re.M)
    assert header_params, "the file shows a :params line to paste into Browser"
    for q in SAVED:
        assert q.view in ("graph", "table"), q.name
        assert len(q.description) > 40, f"{q.name}: say what it shows"
        used = sorted(set(re.findall(r"\$(\w+)", q.text)))
        assert used == sorted(q.params), f"{q.name}: declares {q.params}, uses {used}"
        for param in used:
            assert re.search(rf"\b{param}:", header_params.group(1)), param
        assert ";" not in q.text, f"{q.name}: one statement per query"
        # Values travel as parameters: no literal namespace or id is baked into a query.
        assert "'demo'" not in q.text and "task-soup" not in q.text


def test_saved_queries_cover_the_issue() -> None:
    wanted = {
        "Procedural chain of a task": "graph",
        "What an episode retrieved, and why": "table",
        "Top-utility procedures in a namespace": "table",
        "Evolution history of a memory": "graph",
        "Tips learned from failures": "table",
    }
    views = {q.name: q.view for q in SAVED}
    for name, view in wanted.items():
        assert views.get(name) == view, name


# ---- the GraSS style -----------------------------------------------------------------------


def parse_grass(source: str) -> dict[str, dict[str, str]]:
    """Neo4j Browser's ``parseGrassCSS`` (src/shared/services/grassUtils.ts), ported."""
    inside_string = inside_props = inside_binding = False
    keyword = props = ""
    raw: dict[str, str] = {}
    for c in source:
        skip = True
        if c == "{":
            if inside_string:
                skip = False
            elif inside_props:
                inside_binding = True
            else:
                inside_props = True
        elif c == "}":
            if inside_string:
                skip = False
            elif inside_binding:
                inside_binding = False
            else:
                inside_props = False
                raw[keyword] = props
                keyword = props = ""
        elif c in "'\"":
            inside_string = not inside_string
        else:
            skip = False
        if skip:
            continue
        if inside_props:
            props += c
        elif not c.isspace():
            keyword += c
    rules: dict[str, dict[str, str]] = {}
    for key, body in raw.items():
        declared = [d for d in body.split(";") if d.strip()]
        parsed = dict(
            (k.strip(), v.strip()) for k, v in (d.split(":") for d in declared if d.count(":") == 1)
        )
        assert len(parsed) == len(declared), f"{key}: a declaration Browser would drop: {body!r}"
        rules[key] = parsed
    return rules


EDGE_PROPS = {
    *("reward", "reason", "strength", "change", "rank", "sim", "q", "score", "q_after"),
    "subject",
}


def test_grass_parses_as_browser_reads_it() -> None:
    rules = parse_grass(GRASS.read_text(encoding="utf-8"))
    expected = {"node", "relationship", "node.Memory"}
    expected |= {f"node.{k.value}" for k in MemoryKind}
    expected |= {f"relationship.{k.value}" for k in EdgeKind}
    assert expected <= set(rules), sorted(expected - set(rules))
    assert set(rules) - expected <= {"node.GraphmemMeta"}
    # Kind rules come after node.Memory: Browser applies matching rules in file order.
    order = list(rules)
    assert all(order.index("node.Memory") < order.index(f"node.{k.value}") for k in MemoryKind)
    colours = {rules[f"node.{k.value}"]["color"] for k in MemoryKind}
    assert len(colours) == len(MemoryKind), "each kind has its own colour"
    for selector, props in rules.items():
        assert all(props.values()), f"{selector}: a declaration without a value"
        caption = props.get("caption", "")
        for field in re.findall(r"\{(\w+)\}", caption):
            if selector.startswith("node.") and selector[5:] in {k.value for k in MemoryKind}:
                model = MEMORY_CLASSES[MemoryKind(selector[5:])]
                known = {*model.model_fields, Q_LABEL}  # q_label: Q rounded, for captions
                assert field in known, f"{selector} caption uses unknown {field}"
            elif selector.startswith("relationship."):
                assert field in EDGE_PROPS, f"{selector} caption uses unknown {field}"
    for kind in (MemoryKind.TASK, MemoryKind.PROCEDURE, MemoryKind.TIP, MemoryKind.NOTE):
        assert "{q_label}" in rules[f"node.{kind.value}"]["caption"], f"{kind}: Q is visible"
    assert "{index}" in rules["node.Step"]["caption"]
    assert "{action}" in rules["node.Step"]["caption"]


# ---- against a real Neo4j ------------------------------------------------------------------


@pytest.fixture(scope="module")
def loaded(neo4j_store: MemoryStore) -> Iterator[tuple[MemoryStore, str, SampleIds]]:
    """The sample graph in a namespace of its own, shared by this module's read-only tests."""
    namespace = unique_namespace("viz")
    ids = load_sample(neo4j_store, namespace)
    try:
        yield neo4j_store, namespace, ids
    finally:
        neo4j_store.delete(namespace, [m.id for m in neo4j_store.iter_nodes(namespace)])


def run_query(store: MemoryStore, text: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    driver = store.driver  # type: ignore[attr-defined]
    database = os.environ.get("GRAPHMEM_NEO4J_DATABASE") or None
    records, _, _ = driver.execute_query(text, params, database_=database)
    return [r.data() for r in records]


def graph_ids(value: Any) -> set[str]:
    """Ids of every memory node inside a returned value (nodes, paths, lists)."""
    if isinstance(value, dict):
        found = {value["id"]} if isinstance(value.get("id"), str) else set()
        for inner in value.values():
            found |= graph_ids(inner)
        return found
    if isinstance(value, list | tuple):
        return set().union(*(graph_ids(v) for v in value)) if value else set()
    return set()


@pytest.mark.neo4j
@pytest.mark.parametrize("query", SAVED, ids=[q.name for q in SAVED])
def test_every_saved_query_returns_rows(
    loaded: tuple[MemoryStore, str, SampleIds], query: SavedQuery
) -> None:
    store, namespace, ids = loaded
    params = {
        "namespace": namespace,
        "taskId": ids.task,
        "episodeId": ids.episode,
        "memoryId": ids.fixed,
        "limit": 10,
        "words": "soup",
    }
    rows = run_query(store, query.text, {k: params[k] for k in query.params})
    assert rows, f"{query.name} returned nothing"
    if query.view == "graph":
        assert len(set().union(*(graph_ids(r) for r in rows))) >= 2, query.name


@pytest.mark.neo4j
def test_saved_queries_show_the_right_things(loaded: tuple[MemoryStore, str, SampleIds]) -> None:
    store, namespace, ids = loaded
    by_name = {q.name: q for q in SAVED}
    p = {"namespace": namespace, "taskId": ids.task, "episodeId": ids.episode, "limit": 10}

    chain = run_query(store, by_name["Procedural chain of a task"].text, p)
    shown = set().union(*(graph_ids(r) for r in chain))
    steps = {f"{ids.fixed}-s{i}" for i in range(4)} | {f"{ids.failed}-s{i}" for i in range(2)}
    assert {ids.task, ids.fixed, ids.failed, ids.script, ids.tip, ids.note} | steps <= shown
    assert ids.other_task not in shown

    retrieved = run_query(store, by_name["What an episode retrieved, and why"].text, p)
    assert [r["id"] for r in retrieved] == [ids.fixed, ids.script, ids.tip]
    assert retrieved[0]["q_after"] == pytest.approx(0.692) and retrieved[0]["rank"] == 1

    top = run_query(store, by_name["Top-utility procedures in a namespace"].text, p)
    assert [r["id"] for r in top][:2] == [ids.fixed, ids.script]
    assert ids.failed not in [r["id"] for r in top]  # obsolete

    tips = run_query(store, by_name["Tips learned from failures"].text, p)
    assert tips[0]["id"] == ids.tip and tips[0]["replaced_by"] == [ids.fixed]

    history = run_query(
        store, by_name["Version timeline of a memory"].text, {**p, "memoryId": ids.fixed}
    )
    assert {r["id"] for r in history} == {ids.fixed, ids.failed}

    moved = run_query(
        store,
        by_name["How a memory's Q moved, episode by episode"].text,
        {**p, "memoryId": ids.fixed},
    )
    assert [(r["q_before"], r["q_after"]) for r in moved] == [(0.56, 0.692)]


def http_url() -> str:
    configured = os.environ.get("GRAPHMEM_NEO4J_HTTP_URL")
    if configured:
        return configured.rstrip("/")
    host = urlsplit(os.environ.get("GRAPHMEM_NEO4J_URI", "bolt://127.0.0.1:7687")).hostname
    return f"http://{host or '127.0.0.1'}:7474"


@pytest.mark.neo4j
def test_neo4j_browser_is_served(neo4j_store: MemoryStore) -> None:
    with urllib.request.urlopen(f"{http_url()}/browser/", timeout=30) as response:
        assert response.status == 200
        page = response.read().decode("utf-8", "replace")
    assert "<title>Neo4j Browser</title>" in page


@pytest.mark.neo4j
@pytest.mark.browser
@pytest.mark.skipif(shutil.which("chromium") is None, reason="no headless Chromium installed")
def test_neo4j_browser_app_starts_in_chromium(neo4j_store: MemoryStore, tmp_path: Path) -> None:
    done = subprocess.run(
        [
            "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--window-size=1400,900",
            "--virtual-time-budget=15000",
            "--dump-dom",
            f"{http_url()}/browser/",
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    # The React app rendered its connect form (it is not just the static shell).
    assert re.search(r"Connect URL|connectURL|Connect to Neo4j", done.stdout), done.stdout[-1500:]
